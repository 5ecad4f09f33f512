"""Decoding Kafka messages into Arrow, a whole poll at a time.

A poll's payloads are joined (one message per line) and parsed by pyarrow in one call: JSON
objects by ``pyarrow.json`` against the dataset's schema, CSV records by ``pyarrow.csv``.
The fast path costs one parse per poll. Only when it fails — or yields a different number of
rows than there were messages — are the messages split in halves and parsed again, down to
the single bad ones, which are rejected with their reason (a bad message among n costs about
log2(n) extra parses). Avro messages (plain binary Avro of a record schema derived from the
dataset's columns) are decoded one by one with fastavro.

A message is rejected when it is empty, is not valid UTF-8 (checked over the joined buffer at
once; the bad byte's position names the message), does not parse, holds a value of the wrong
type, lacks a required column (or holds null in one), or holds more than one record.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from colonnade.errors import ColonnadeError

FORMATS = ("json", "csv", "avro")


class DecodeError(ColonnadeError):
    """A decoder can't be made for this schema (e.g. a type Avro can't carry)."""


@dataclass(frozen=True)
class BadMessage:
    """A message that could not be decoded: its index in the poll, and why."""

    index: int
    reason: str


@dataclass
class Decoded:
    """The rows of a poll's good messages (in message order), and the bad ones."""

    batch: pa.RecordBatch | None
    good: np.ndarray  # indexes of the messages that became rows, in row order
    bad: list[BadMessage]


class Decoder:
    """Turns a list of message payloads into one record batch of ``schema``. Columns whose
    field is not nullable are required."""

    def __init__(self, fmt: str, schema: pa.Schema) -> None:
        if fmt not in FORMATS:
            raise DecodeError(f"unknown message format {fmt!r} (expected one of {', '.join(FORMATS)})")
        self.format = fmt
        self.schema = schema
        self.required = [f.name for f in schema if not f.nullable]
        self._parse: Callable[[bytes], pa.Table]
        if fmt == "json":
            self._parse = self._json_parser()
        elif fmt == "csv":
            self._parse = self._csv_parser()
        else:
            self._avro = AvroDecoder(schema)

    # -- parsers of a joined buffer (one message per line)
    def _json_parser(self) -> Callable[[bytes], pa.Table]:
        import pyarrow.json as pajson

        # the schema as parsed: required columns stay required, so an absent one is an error
        parse = pajson.ParseOptions(explicit_schema=self.schema, unexpected_field_behavior="ignore")

        def parse_json(data: bytes) -> pa.Table:
            read = pajson.ReadOptions(use_threads=False, block_size=max(1 << 20, len(data) + 1))
            return pajson.read_json(pa.BufferReader(data), read_options=read, parse_options=parse)

        return parse_json

    def _csv_parser(self) -> Callable[[bytes], pa.Table]:
        import pyarrow.csv as pacsv

        read = pacsv.ReadOptions(column_names=self.schema.names, use_threads=False, block_size=1 << 26)
        parse = pacsv.ParseOptions(newlines_in_values=True)
        convert = pacsv.ConvertOptions(column_types=self.schema, check_utf8=True)

        def parse_csv(data: bytes) -> pa.Table:
            return pacsv.read_csv(pa.BufferReader(data), read_options=read, parse_options=parse,
                                  convert_options=convert)

        return parse_csv

    # -- decoding
    def decode(self, payloads: Sequence[bytes | None]) -> Decoded:
        n = len(payloads)
        bad: list[BadMessage] = []
        if self.format == "avro":
            return self._avro.decode(payloads)
        keep = [i for i, p in enumerate(payloads) if p] if not all(payloads) else list(range(n))
        if len(keep) < n:
            bad.extend(BadMessage(i, "empty message") for i, p in enumerate(payloads) if not p)
        indexes = np.asarray(keep, dtype=np.int64)
        parts: list[bytes] = [payloads[i] or b"" for i in keep]
        indexes, parts = self._valid_utf8(indexes, parts, bad)
        tables: list[pa.Table] = []
        good: list[np.ndarray] = []
        self._parse_range(parts, indexes, 0, len(parts), tables, good, bad)
        table = pa.concat_tables(tables) if len(tables) > 1 else (tables[0] if tables else None)
        rows = np.concatenate(good) if good else np.empty(0, np.int64)
        if table is not None and self.required:
            table, rows = self._check_required(table, rows, bad)
        bad.sort(key=lambda b: b.index)
        batch = None
        if table is not None and table.num_rows:
            batch = table.combine_chunks().to_batches()[0] if table.num_rows else None
        return Decoded(batch, rows, bad)

    def _valid_utf8(self, indexes: np.ndarray, parts: list[bytes], bad: list[BadMessage]
                    ) -> tuple[np.ndarray, list[bytes]]:
        """Drop the messages that are not UTF-8, found from the joined buffer's decode errors."""
        while parts:
            data = b"\n".join(parts)
            try:
                data.decode("utf-8")
                return indexes, parts
            except UnicodeDecodeError as exc:
                ends = np.cumsum([len(p) + 1 for p in parts])
                k = int(np.searchsorted(ends, exc.start, side="right"))
                bad.append(BadMessage(int(indexes[k]), f"not valid UTF-8 (byte {exc.start - (ends[k] - len(parts[k]) - 1)})"))
                parts = parts[:k] + parts[k + 1:]
                indexes = np.delete(indexes, k)
        return indexes, parts

    def _parse_range(self, parts: list[bytes], indexes: np.ndarray, lo: int, hi: int,
                     tables: list[pa.Table], good: list[np.ndarray], bad: list[BadMessage]) -> None:
        """Parse messages ``lo:hi``; on failure split them in halves, down to single messages."""
        if lo >= hi:
            return
        try:
            table = self._parse(b"\n".join(parts[lo:hi]) + b"\n")
            if table.num_rows == hi - lo:
                tables.append(table)
                good.append(indexes[lo:hi])
                return
            problem = f"holds {table.num_rows} records, not one" if hi - lo == 1 else ""
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, ValueError) as exc:
            problem = _reason(str(exc), self.schema)
        if hi - lo == 1:
            bad.append(BadMessage(int(indexes[lo]), problem or "no record"))
            return
        mid = (lo + hi) // 2
        self._parse_range(parts, indexes, lo, mid, tables, good, bad)
        self._parse_range(parts, indexes, mid, hi, tables, good, bad)

    def _check_required(self, table: pa.Table, rows: np.ndarray, bad: list[BadMessage]
                        ) -> tuple[pa.Table, np.ndarray]:
        """Reject the rows that hold null in a required column (CSV: an empty field)."""
        import pyarrow.compute as pc

        missing: np.ndarray | None = None
        for name in self.required:
            col = table.column(name)
            if col.null_count:
                nulls = col.is_null().to_numpy(zero_copy_only=False)
                for i in np.flatnonzero(nulls & (True if missing is None else ~missing)):
                    bad.append(BadMessage(int(rows[i]), f"required column {name} is missing or null"))
                missing = nulls if missing is None else missing | nulls
        if missing is None:
            return table, rows
        return table.filter(pc.invert(pa.array(missing))), rows[~missing]


_COLUMN = re.compile(r"Column\(/([^)]*)\)")
_CSV_COLUMN = re.compile(r"In CSV column #(\d+): ")
_IN_ROW = re.compile(r" in row \d+$")


def _reason(text: str, schema: pa.Schema) -> str:
    """pyarrow's parse error as a reason line naming the column."""
    original = text
    text = text.strip().splitlines()[0] if text.strip() else "unparseable"
    m = _CSV_COLUMN.match(text)
    if m:
        index = int(m.group(1))
        name = schema.names[index] if index < len(schema) else f"#{index}"
        text = f"column {name}: " + text[m.end():]
    text = _COLUMN.sub(lambda m: f"column {m.group(1) or '(top level)'}", text)
    for prefix in ("JSON parse error: ", "CSV parse error: "):
        text = text.replace(prefix, "")
    text = _IN_ROW.sub("", text)  # rows of the joined buffer mean nothing to the reader
    if not any(word in text for word in ("column", "required", "convert", "Expected", "records")):
        text = f"not valid {'JSON' if 'JSON' in original else 'CSV'}: {text}"
    return text[:300]


# -- Avro ---------------------------------------------------------------------------------------
_AVRO_TYPES = {
    pa.bool_(): "boolean", pa.int8(): "int", pa.int16(): "int", pa.int32(): "int",
    pa.int64(): "long", pa.float32(): "float", pa.float64(): "double", pa.string(): "string",
    pa.large_string(): "string", pa.binary(): "bytes", pa.date32(): {"type": "int", "logicalType": "date"},
}


def avro_schema(schema: pa.Schema, name: str = "record") -> dict[str, object]:
    """The Avro record schema whose binary encoding the Avro decoder reads: one field per column,
    in order; nullable columns as ``["null", type]`` unions."""
    fields = []
    for f in schema:
        t = f.type
        if pa.types.is_timestamp(t):
            avro: object = {"type": "long", "logicalType": "timestamp-millis" if t.unit in ("s", "ms")
                            else "timestamp-micros"}
        elif t in _AVRO_TYPES:
            avro = _AVRO_TYPES[t]
        else:
            raise DecodeError(f"column {f.name}: Avro messages can't carry type {t}")
        fields.append({"name": f.name, "type": ["null", avro] if f.nullable else avro})
    return {"type": "record", "name": name, "fields": fields}


class AvroDecoder:
    """Schemaless binary Avro, one message at a time (fastavro's reader in a loop)."""

    def __init__(self, schema: pa.Schema) -> None:
        import fastavro

        self.schema = schema
        self.parsed = fastavro.parse_schema(avro_schema(schema))
        self._read = fastavro.schemaless_reader

    def decode(self, payloads: Sequence[bytes | None]) -> Decoded:
        rows: list[dict[str, object]] = []
        good: list[int] = []
        bad: list[BadMessage] = []
        for i, p in enumerate(payloads):
            if not p:
                bad.append(BadMessage(i, "empty message"))
                continue
            buf = io.BytesIO(p)
            try:
                record = self._read(buf, self.parsed, None)
            except Exception as exc:  # noqa: BLE001 - any decoding failure rejects the message
                bad.append(BadMessage(i, f"not Avro of this schema ({type(exc).__name__}: {exc})"[:300]))
                continue
            if buf.tell() != len(p):
                bad.append(BadMessage(i, f"{len(p) - buf.tell()} bytes left after the record"))
                continue
            rows.append(record)  # type: ignore[arg-type]
            good.append(i)
        batch = None
        if rows:
            batch = pa.RecordBatch.from_pylist(rows, schema=self.schema)
        return Decoded(batch, np.asarray(good, dtype=np.int64), bad)
