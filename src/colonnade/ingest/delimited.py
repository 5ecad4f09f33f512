"""CSV and TSV files as record batches: pyarrow's parallel parser, with exact bad-row reporting.

The file is read in blocks of whole records (:mod:`colonnade.ingest.blocks`); each block is parsed
by ``pyarrow.csv.read_csv`` with every column's type fixed up front — the dataset's type when it
has the column, the ``schema`` option's, or else the type pyarrow infers from the first MiB of
rows, fixed for the rest of the file — so every value of every column is validated on ingest.
That is the fast path, and a clean file never leaves it. A block that fails (a wrong number of
fields, a value that does not parse, invalid UTF-8) is split into its records and bisected with
the same parser until each bad record stands alone: good records are kept, each bad one is
raised (strict) or reported (quarantine) with its physical line, column and reason. Empty
fields are null in every column, strings included (``strings_can_be_null``): that is what an
empty field means in the exports this store ingests, and it keeps a column's nulls uniform;
no other text (``NA``, ``null``) means null.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from colonnade.errors import BadRowError, IngestError, SchemaError
from colonnade.ingest.base import OnReject, Reject, Source
from colonnade.ingest.blocks import DEFAULT_BLOCK_SIZE, DEFAULT_MAX_RECORD_BYTES, Block, BlockReader
from colonnade.ingest.inference import SchemaWarning, storable_type, typed_as_text
from colonnade.ingest.records import (
    Buffer,
    Dialect,
    QuotedSpans,
    is_blank,
    quoted_spans,
    record_ends,
)
from colonnade.schema.types import type_name

T = TypeVar("T")

#: Bytes of rows whose values decide the inferred column types.
INFER_BYTES = 1 << 20

#: pyarrow's own block size inside one of our blocks: the unit of its parallelism.
PARSE_BLOCK_SIZE = 1 << 20

_CSV_ERROR = re.compile(r"^In CSV column #(\d+): (?:Row #\d+: )?(.*)$", re.S)
_CONVERSION = re.compile(r"^CSV conversion error to [^:]+: invalid value '(.*)'$", re.S)
_FIELD_COUNT = re.compile(r"Expected (\d+) columns, got (\d+)")


@dataclass(frozen=True)
class CsvOptions:
    """How to read a delimited text file."""

    delimiter: str = ","
    header: bool = True  # the first record names the columns
    columns: tuple[str, ...] | None = None  # column names (the header, if any, is skipped)
    schema: pa.Schema | None = None  # column types by name (and names when there is no header)
    quote_char: str | None = '"'  # None: quotes are ordinary characters
    compression: str | None = None  # None or "gzip"
    block_size: int = DEFAULT_BLOCK_SIZE
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
    #: Read only these bytes of the (uncompressed) file, ``(start, stop)``: whole records that
    #: start on line ``first_line``, with ``newline`` the file's line terminator byte (the
    #: header, if any, is elsewhere: pass ``header=False`` and the columns' names and types).
    byte_range: tuple[int, int] | None = None
    first_line: int = 1
    newline: int | None = None
    #: Parse a block with pyarrow's threads (False: in the calling thread — a worker process of
    #: a parallel ingest, whose parallelism is the processes).
    threads: bool = True


@dataclass(frozen=True)
class _Problem:
    column: int | None
    reason: str


class DelimitedSource(Source):
    """A CSV/TSV file (optionally gzip-compressed) as record batches with fixed column types."""

    format = "csv"

    def __init__(self, path: Path, options: CsvOptions, target: pa.Schema | None = None,
                 on_reject: OnReject | None = None, name: str | None = None) -> None:
        super().__init__(path, name)
        self.options = options
        self._on_reject = on_reject
        self._raw: BinaryIO = open(path, "rb")  # noqa: SIM115 - closed by close()
        try:
            stream: BinaryIO = self._raw
            position = None  # the stream is the file: block positions are exact
            start = 0
            if options.compression == "gzip":
                stream = gzip.GzipFile(fileobj=self._raw, mode="rb")  # type: ignore[assignment]
                position = self._raw.tell
            elif options.byte_range is not None:
                start, stop = options.byte_range
                stream = _ByteRange(self._raw, start, stop)  # type: ignore[assignment]
            dialect = Dialect.of(options.delimiter, options.quote_char)
            with _read_errors(self.name):
                self._reader = BlockReader(stream, dialect, self.name, position,
                                           options.block_size, options.max_record_bytes,
                                           first_line=options.first_line,
                                           newline=options.newline, at_start=start == 0)
                self.dialect = self._reader.dialect
                names = self._column_names(target)
                self._schema, self._known = self._column_types(names, target)
        except BaseException:
            self._raw.close()
            raise
        self._build_options()

    # -- names and types
    def _column_names(self, target: pa.Schema | None) -> list[str]:
        opts = self.options
        header = None
        if opts.header:
            record = self._reader.next_record()
            if record is not None:
                header = self._parse_header(record)
        if opts.columns:
            names = list(opts.columns)
        elif header is not None:
            names = header
        elif opts.header:
            names = list(opts.schema.names if opts.schema is not None else target.names if target else [])
        elif opts.schema is not None:
            names = list(opts.schema.names)
        elif target is not None:
            names = list(target.names)
        else:
            raise IngestError(f"{self.name}: a file without a header needs column names "
                              "(columns or a schema)")
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise SchemaError(f"{self.name}: column(s) named twice: {', '.join(dupes)}")
        if opts.schema is not None:
            # the schema may type some columns only (the others are inferred), but each column
            # it names must be one of the file's: a misspelt name is not silently ignored
            missing = [n for n in opts.schema.names if n not in names]
            if missing:
                raise SchemaError(f"{self.name}: column(s) {', '.join(missing)} of the schema are "
                                  f"not in the file (its columns: {', '.join(names)})")
        return names

    def _parse_header(self, record: Block) -> list[str]:
        try:
            table = pacsv.read_csv(
                pa.BufferReader(record.data),
                read_options=pacsv.ReadOptions(use_threads=False, block_size=len(record.data) + 1),
                parse_options=pacsv.ParseOptions(
                    delimiter=self.options.delimiter,
                    quote_char=self.options.quote_char or False,
                    newlines_in_values=self.options.quote_char is not None))
        except pa.ArrowException as exc:
            raise BadRowError(self.name, record.first_line, None,
                              f"unreadable header: {exc}") from None
        return list(table.column_names)

    def _column_types(self, names: list[str], target: pa.Schema | None) -> tuple[pa.Schema, bool]:
        given = self.options.schema
        types: dict[str, pa.DataType] = {}
        for n in names:
            if given is not None and n in given.names:
                types[n] = given.field(n).type
            elif target is not None and n in target.names:
                types[n] = target.field(n).type
        known = bool(names)
        if len(types) < len(names):
            inferred, rows = self._infer(names)
            known = rows > 0
            for n in names:
                types.setdefault(n, inferred.get(n, pa.string()))
        return pa.schema([pa.field(n, types[n]) for n in names]), known

    def _infer(self, names: list[str]) -> tuple[dict[str, pa.DataType], int]:
        """Column types as pyarrow infers them from the first MiB of rows (bad rows left out:
        they are reported when the data is parsed), and how many rows told them."""
        table, _ = self._read_sample(names, as_text=False, lines=False)
        if table is None:
            return {}, 0
        return {f.name: storable_type(f.type) for f in table.schema}, table.num_rows

    def typed_as_text(self, columns: list[str]) -> tuple[int, list[SchemaWarning]]:
        """The rows types are inferred from (the first MiB), and a warning for each of the
        ``columns`` whose values there nearly all have a type (see :mod:`.inference`)."""
        table, lines = self._read_sample(self._schema.names, as_text=True, lines=True)
        if table is None:
            return 0, []
        return table.num_rows, typed_as_text(self.name, table, columns, lines)

    def _read_sample(self, names: list[str], as_text: bool,
                     lines: bool) -> tuple[pa.Table | None, list[int]]:
        """The inference sample without its bad records, parsed with inferred types (or every
        column as text), and the line each row starts on (when ``lines``)."""
        runs: list[bytes] = []
        row_lines: list[int] = []
        whole: pa.Table | None = None
        parts = [(line, data) for line, data in self._reader.sample_parts(INFER_BYTES) if data.strip()]
        for line, data in parts:
            table, problem = self._infer_read(names, data, as_text)
            good = [(0, len(data))]
            if problem is None:
                whole = table
            else:
                starts, stops, _ = _record_bounds(data, self.dialect)

                def parse(start: int, stop: int, data: bytes = data) -> tuple[
                        tuple[int, int] | None, _Problem | None]:
                    found = self._infer_read(names, data[start:stop], as_text)[1]
                    return ((start, stop), None) if found is None else (None, found)

                good = [r for _, r, _ in _bisect(starts, stops, parse, problem) if r is not None]
            runs.extend(data[a:b] for a, b in good)
            if lines:
                row_lines.extend(_row_lines(data, good, line, self.dialect))
        if len(parts) == 1 and len(runs) == 1 and whole is not None:
            return whole, row_lines
        sample = b"".join(runs)
        if not sample.strip():
            return None, []
        return self._infer_read(names, sample, as_text)[0], row_lines

    def _infer_read(self, names: list[str], data: bytes,
                    as_text: bool = False) -> tuple[pa.Table | None, _Problem | None]:
        types = {n: pa.string() for n in names} if as_text else None
        try:
            return pacsv.read_csv(
                pa.BufferReader(data),
                read_options=pacsv.ReadOptions(column_names=names, use_threads=False,
                                               block_size=len(data) + 1),
                parse_options=self._parse_options(quoted=self.dialect.quote is not None),
                convert_options=pacsv.ConvertOptions(column_types=types, null_values=[""],
                                                     strings_can_be_null=True,
                                                     check_utf8=True)), None
        except pa.ArrowException as exc:
            return None, self._problem(exc)

    def _parse_options(self, quoted: bool) -> pacsv.ParseOptions:
        # no invalid_row_handler: pyarrow decodes a row's text for it and fails (noisily) on
        # bytes that are not UTF-8; a row with the wrong field count fails the parse instead
        return pacsv.ParseOptions(
            delimiter=self.options.delimiter,
            quote_char=self.options.quote_char if quoted else False,
            double_quote=True, escape_char=False, newlines_in_values=quoted,
            ignore_empty_lines=True)

    def _build_options(self) -> None:
        names = self._schema.names
        self._read_parallel = pacsv.ReadOptions(column_names=names, use_threads=True,
                                                block_size=PARSE_BLOCK_SIZE)
        self._read_serial = pacsv.ReadOptions(column_names=names, use_threads=False,
                                              block_size=PARSE_BLOCK_SIZE)
        self._quoted = self._parse_options(self.dialect.quote is not None)
        self._plain = self._parse_options(False)
        self._convert = pacsv.ConvertOptions(
            column_types=self._schema, null_values=[""], strings_can_be_null=True, check_utf8=True)
        self._quote_byte = bytes((self.dialect.quote,)) if self.dialect.quote is not None else None

    @property
    def schema(self) -> pa.Schema:
        return self._schema

    @property
    def schema_known(self) -> bool:
        return self._known

    @property
    def data_start(self) -> tuple[int, int]:
        """``(offset, line)``: where the rows start in the file (after a byte order mark, blank
        lines and the header), before any is read."""
        return self._reader.offset + (self.options.byte_range or (0, 0))[0], self._reader.line

    @property
    def by_parity(self) -> bool:
        """Every record read so far ended where counting quotes says records end (see
        :mod:`colonnade.ingest.blocks`)."""
        return self._reader.by_parity

    # -- reading
    def read(self) -> Iterator[tuple[pa.RecordBatch, int]]:
        """Batches with the bytes of the input parsed up to their last row: a block's batches
        share its bytes in proportion to their rows, so progress moves within a block too."""
        blocks = iter(self._reader)
        while True:
            with _read_errors(self.name):
                block = next(blocks, None)
            if block is None:
                return
            if block.bad is not None:
                self._report(block.first_line, None, block.bad, block.data)
                continue
            data = block.data
            table, problem = self._parse(data, 0, len(data), threads=self.options.threads)
            if problem is not None:
                table = self._salvage(block, problem)
            if table is None or not table.num_rows:
                continue
            done, span = 0, block.stop - block.start
            for batch in table.to_batches():
                if batch.num_rows:
                    done += batch.num_rows
                    yield batch, block.start + span * done // table.num_rows

    def _report(self, line: int, column: str | None, reason: str, raw: bytes | bytearray) -> None:
        """A bad row: raised (strict) or handed to ``on_reject`` (quarantine)."""
        if self._on_reject is None:
            raise BadRowError(self.name, line, column, reason)
        text = bytes(raw).rstrip(b"\r\n").decode("utf-8", errors="backslashreplace")
        self._on_reject(Reject(self.name, line, column, reason, text))

    def _parse(self, data: bytes | bytearray, start: int, stop: int,
               threads: bool) -> tuple[pa.Table | None, _Problem | None]:
        """Parse ``data[start:stop]`` (whole records); a problem when any of it is bad."""
        quoted = self._quote_byte is not None and data.find(self._quote_byte, start, stop) >= 0
        buffer = pa.py_buffer(data).slice(start, stop - start)
        read_options = self._read_parallel if threads else self._read_serial
        try:
            table = self._read(buffer, read_options, quoted)
        except pa.ArrowInvalid as exc:
            if "straddl" not in str(exc):
                return None, self._problem(exc)
            # a record longer than pyarrow's block: parse the range as one block
            whole = pacsv.ReadOptions(column_names=self._schema.names, use_threads=False,
                                      block_size=stop - start + 1)
            try:
                table = self._read(buffer, whole, quoted)
            except pa.ArrowException as again:
                return None, self._problem(again)
        except pa.ArrowException as exc:
            return None, self._problem(exc)
        return table, None

    def _read(self, buffer: pa.Buffer, read_options: pacsv.ReadOptions, quoted: bool) -> pa.Table:
        return pacsv.read_csv(pa.BufferReader(buffer), read_options=read_options,
                              parse_options=self._quoted if quoted else self._plain,
                              convert_options=self._convert)

    def _problem(self, exc: Exception) -> _Problem:
        """What pyarrow's error says, as a column and a one-line printable reason."""
        text = str(exc).strip()
        m = _CSV_ERROR.match(text)
        if m is None:
            fields = _FIELD_COUNT.search(text)
            if fields is not None:
                return _Problem(None, f"expected {fields.group(1)} fields, found {fields.group(2)}")
            return _Problem(None, _printable(text)[:200] or type(exc).__name__)
        column, detail = int(m.group(1)), m.group(2)
        if "invalid UTF8" in detail:
            return _Problem(column, "invalid UTF-8")
        conversion = _CONVERSION.match(detail)
        if conversion is not None and column < len(self._schema):
            value = _printable(conversion.group(1))
            if len(value) > 80:
                value = value[:77] + "..."
            return _Problem(column, f"cannot parse '{value}' as {type_name(self._schema.field(column).type)}")
        return _Problem(column, _printable(detail))

    def _salvage(self, block: Block, problem: _Problem) -> pa.Table | None:
        """Bisect a failed block by records: keep the good ones, raise or report the bad ones."""
        data = block.data
        starts, stops, _ = _record_bounds(data, self.dialect)
        newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == self.dialect.newline)

        def parse(start: int, stop: int) -> tuple[pa.Table | None, _Problem | None]:
            return self._parse(data, start, stop, threads=self.options.threads
                               and stop - start > 4 * PARSE_BLOCK_SIZE)

        pieces: list[pa.Table] = []
        for i, table, found in _bisect(starts, stops, parse, problem):
            if found is None:
                if table is not None and table.num_rows:
                    pieces.append(table)
                continue
            start, stop = int(starts[i]), int(stops[i])
            line = block.first_line + int(np.searchsorted(newlines, start))
            column = self._schema.names[found.column] if found.column is not None else None
            self._report(line, column, found.reason, data[start:stop])
        return pa.concat_tables(pieces).combine_chunks() if pieces else None

    def close(self) -> None:
        self._raw.close()


def _record_bounds(data: Buffer, dialect: Dialect) -> tuple[np.ndarray, np.ndarray, QuotedSpans]:
    """Start and stop offsets of the records of ``data``, and its quoted sections."""
    spans = quoted_spans(data, dialect)
    ends = record_ends(data, dialect, spans) + 1
    starts = np.concatenate(([0], ends)).astype(np.int64)
    stops = np.concatenate((ends, [len(data)])).astype(np.int64)
    keep = starts < stops
    return starts[keep], stops[keep], spans


def _bisect(starts: np.ndarray, stops: np.ndarray,
            parse: Callable[[int, int], tuple[T | None, _Problem | None]],
            problem: _Problem) -> Iterator[tuple[int, T | None, _Problem | None]]:
    """Halve the records (all together known to fail with ``problem``) until each bad one stands
    alone. Yields, in input order, ``(first record, parsed, None)`` for each run of records that
    parses and ``(record, None, its problem)`` for each bad record."""

    def split(lo: int, hi: int, found: _Problem) -> Iterator[tuple[int, T | None, _Problem | None]]:
        if hi - lo == 1:
            yield lo, None, found
            return
        mid = (lo + hi) // 2
        for a, b in ((lo, mid), (mid, hi)):
            parsed, again = parse(int(starts[a]), int(stops[b - 1]))
            if again is None:
                yield a, parsed, None
            else:
                yield from split(a, b, again)

    if len(starts):
        yield from split(0, len(starts), problem)


class _ByteRange:
    """The bytes ``[start, stop)`` of an open file, as a stream read with ``readinto``."""

    def __init__(self, raw: BinaryIO, start: int, stop: int) -> None:
        raw.seek(start)
        self._raw = raw
        self._left = max(stop - start, 0)

    def readinto(self, buffer: bytearray | memoryview) -> int:
        if self._left <= 0:
            return 0
        view = memoryview(buffer)[:self._left]
        n = self._raw.readinto(view) or 0  # type: ignore[attr-defined]
        self._left -= n
        return n


@contextmanager
def _read_errors(path: str) -> Iterator[None]:
    """Turn an I/O or decompression failure into an IngestError naming the file."""
    try:
        yield
    except FileNotFoundError:
        raise
    except (OSError, EOFError, zlib.error) as exc:
        raise IngestError(f"{path}: cannot read: {exc}") from None


def _printable(text: str) -> str:
    """``text`` on one line: control characters and the like as escapes (``\\n``, ``\\x00``)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _row_lines(data: bytes, runs: list[tuple[int, int]], first_line: int,
               dialect: Dialect) -> list[int]:
    """The line each row of ``data``'s record ``runs`` starts on (blank records hold no row)."""
    starts, stops, _ = _record_bounds(data, dialect)
    newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == dialect.newline)
    lines = []
    for a, b in runs:
        for start, stop in zip(starts.tolist(), stops.tolist(), strict=True):
            if a <= start < b and not is_blank(data[start:stop]):
                lines.append(first_line + int(np.searchsorted(newlines, start)))
    return lines
