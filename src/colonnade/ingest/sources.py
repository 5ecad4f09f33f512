"""Input formats and their sources: CSV/TSV text, Parquet and Arrow IPC files as record batches.

The format comes from ``fmt`` (``csv``, ``tsv``, ``parquet``, ``arrow``; aliases ``pq``, ``ipc``,
``feather``) or else from the file's extension (``.csv .tsv .tab .txt .parquet .pq .arrow .feather
.ipc .arrows``, each optionally followed by ``.gz`` for text). ``.txt`` files get the delimiter that
occurs most in their first line among comma, tab, semicolon and bar. Parquet is read row group by
row group (``ParquetFile.iter_batches``), Arrow IPC batch by batch in either the file or the
stream format (told apart by the file's magic bytes); both are validated as they are read, and
a truncated or corrupt file is an :class:`~colonnade.errors.IngestError` naming the file and the
reason, raised before the pipeline commits anything.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from colonnade.errors import IngestError
from colonnade.ingest.base import OnReject, Source
from colonnade.ingest.blocks import DEFAULT_BLOCK_SIZE
from colonnade.ingest.delimited import CsvOptions, DelimitedSource

#: Rows per batch read from Parquet files.
PARQUET_BATCH_ROWS = 64 * 1024

_FORMATS: dict[str, tuple[str, str | None]] = {
    "csv": ("csv", ","), "tsv": ("csv", "\t"), "tab": ("csv", "\t"), "txt": ("csv", None),
    "parquet": ("parquet", None), "pq": ("parquet", None),
    "arrow": ("arrow", None), "ipc": ("arrow", None), "feather": ("arrow", None),
    "arrows": ("arrow", None),
}
_SNIFFED_DELIMITERS = (",", "\t", ";", "|")
_IPC_FILE_MAGIC = b"ARROW1"


@dataclass(frozen=True)
class InputFormat:
    """What a file holds: ``csv``, ``parquet`` or ``arrow``; text details for ``csv``."""

    name: str
    delimiter: str | None = None  # the format's delimiter; None: sniffed from the first line
    compression: str | None = None  # "gzip" or None


def detect_format(path: Path, fmt: str | None = None) -> InputFormat:
    """The format named by ``fmt``, else by the file's extension."""
    suffixes = [s.lower().lstrip(".") for s in path.suffixes]
    compression = "gzip" if suffixes and suffixes[-1] == "gz" else None
    if compression:
        suffixes = suffixes[:-1]
    key = fmt.lower().lstrip(".") if fmt else (suffixes[-1] if suffixes else "")
    if key not in _FORMATS:
        if fmt:
            raise IngestError(f"unknown format {fmt!r}: use csv, tsv, parquet or arrow")
        raise IngestError(f"{path}: cannot tell the format from the file name; pass a format "
                          "(csv, tsv, parquet or arrow)")
    name, delimiter = _FORMATS[key]
    if compression and name != "csv":
        raise IngestError(f"{path}: gzip compression is supported for CSV/TSV only")
    return InputFormat(name, delimiter, compression)


def open_source(path: Path, fmt: str | None = None, *, delimiter: str | None = None,
                header: bool = True, columns: list[str] | tuple[str, ...] | None = None,
                schema: pa.Schema | None = None, quote_char: str | None = '"',
                target: pa.Schema | None = None, on_reject: OnReject | None = None,
                block_size: int | None = None, name: str | None = None,
                byte_range: tuple[int, int] | None = None, first_line: int = 1,
                newline: int | None = None, row_groups: tuple[int, ...] | None = None,
                threads: bool = True) -> Source:
    """Open ``path`` as a source of record batches.

    ``target`` is the dataset's schema when the dataset exists: CSV columns take its types.
    ``on_reject`` receives bad CSV rows (quarantine); without it the first one raises.
    ``name`` is how messages name the input (default: the path). A part of a file (what a
    worker of a parallel ingest reads): ``byte_range``, ``first_line`` and ``newline`` of an
    uncompressed CSV file (see :class:`~colonnade.ingest.delimited.CsvOptions`), ``row_groups``
    of a Parquet file; ``threads=False`` parses CSV in the calling thread.
    """
    if not path.exists():
        raise FileNotFoundError(2, "no such file", str(path))
    form = detect_format(path, fmt)
    if form.name == "parquet":
        return ParquetSource(path, name, row_groups)
    if form.name == "arrow":
        return IpcSource(path, name)
    sep = delimiter or form.delimiter or _sniff_delimiter(path, form.compression)
    if len(sep) != 1:
        raise IngestError(f"the delimiter must be one character, got {sep!r}")
    options = CsvOptions(delimiter=sep, header=header, columns=tuple(columns) if columns else None,
                         schema=schema, quote_char=quote_char, compression=form.compression,
                         block_size=block_size or DEFAULT_BLOCK_SIZE, byte_range=byte_range,
                         first_line=first_line, newline=newline, threads=threads)
    return DelimitedSource(path, options, target=target, on_reject=on_reject, name=name)


def _sniff_delimiter(path: Path, compression: str | None) -> str:
    import gzip

    opener = gzip.open if compression == "gzip" else open
    try:
        with opener(path, "rb") as f:
            head = f.read(64 * 1024)
    except (OSError, EOFError) as exc:
        raise IngestError(f"{path}: cannot read: {exc}") from None
    first = head.split(b"\n", 1)[0]
    counts = {d: first.count(d.encode()) for d in _SNIFFED_DELIMITERS}
    best = max(_SNIFFED_DELIMITERS, key=lambda d: counts[d])
    return best if counts[best] else ","


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class ParquetSource(Source):
    """A Parquet file, read row group by row group (all of them, or ``row_groups``: positions
    are then the file's size in proportion to the rows of those groups read)."""

    format = "parquet"

    def __init__(self, path: Path, name: str | None = None,
                 row_groups: tuple[int, ...] | None = None) -> None:
        super().__init__(path, name)
        try:
            self._file = pq.ParquetFile(path)
        except (pa.ArrowException, OSError) as exc:
            raise IngestError(f"{self.name}: not a readable Parquet file: {_reason(exc)}") from None
        self._groups = list(row_groups) if row_groups is not None else None

    @property
    def schema(self) -> pa.Schema:
        return self._file.schema_arrow

    @property
    def row_group_bytes(self) -> list[int]:
        """Bytes each row group takes in the file (its columns' compressed sizes)."""
        meta = self._file.metadata
        return [sum(meta.row_group(i).column(c).total_compressed_size
                    for c in range(meta.row_group(i).num_columns))
                for i in range(meta.num_row_groups)]

    def read(self) -> Iterator[tuple[pa.RecordBatch, int]]:
        meta = self._file.metadata
        total = meta.num_rows if self._groups is None else \
            sum(meta.row_group(i).num_rows for i in self._groups)
        done = 0
        batches = self._file.iter_batches(batch_size=PARQUET_BATCH_ROWS, row_groups=self._groups)
        while True:
            try:
                batch = next(batches, None)
                if batch is None:
                    return
                batch.validate(full=True)
            except (pa.ArrowException, OSError) as exc:
                raise IngestError(f"{self.name}: corrupt Parquet data after {done:,} rows: "
                                  f"{_reason(exc)}") from None
            done += batch.num_rows
            yield batch, self.size * done // total if total else self.size

    def close(self) -> None:
        self._file.close()


class IpcSource(Source):
    """An Arrow IPC file (random-access format, also Feather v2) or stream."""

    format = "arrow"

    def __init__(self, path: Path, name: str | None = None) -> None:
        super().__init__(path, name)
        with open(path, "rb") as f:
            magic = f.read(len(_IPC_FILE_MAGIC))
        if magic.startswith(b"FEA1"):
            raise IngestError(f"{self.name}: a Feather version 1 file; rewrite it as Feather 2 / Arrow IPC")
        self._file_format = magic == _IPC_FILE_MAGIC
        try:
            if self._file_format:
                self._input: pa.NativeFile = pa.memory_map(str(path))
                self._reader: ipc.RecordBatchFileReader | ipc.RecordBatchStreamReader = \
                    ipc.open_file(self._input)
            else:
                self._input = pa.OSFile(str(path), "rb")
                self._reader = ipc.open_stream(self._input)
        except (pa.ArrowException, OSError) as exc:
            kind = "Arrow IPC file" if self._file_format else "Arrow IPC stream"
            raise IngestError(f"{self.name}: not a readable {kind}: {_reason(exc)}") from None

    @property
    def schema(self) -> pa.Schema:
        return self._reader.schema

    def _batches(self) -> Iterator[tuple[pa.RecordBatch, int]]:
        reader = self._reader
        if isinstance(reader, ipc.RecordBatchFileReader):
            n = reader.num_record_batches
            for i in range(n):
                yield reader.get_batch(i), self.size * (i + 1) // n
        else:
            for batch in reader:
                yield batch, self._input.tell()

    def read(self) -> Iterator[tuple[pa.RecordBatch, int]]:
        batches = self._batches()
        rows = 0
        while True:
            try:
                item = next(batches, None)
                if item is None:
                    return
                item[0].validate(full=True)
            except (pa.ArrowException, OSError) as exc:
                raise IngestError(f"{self.name}: corrupt Arrow IPC data after {rows:,} rows: "
                                  f"{_reason(exc)}") from None
            rows += item[0].num_rows
            yield item

    def close(self) -> None:
        self._input.close()
