"""The ingest pipeline: files → sources → record batches → ``Dataset.append``, one commit per file.

For each file the pipeline works out the source identity (``file_identity``: path, size and
SHA-256 of the content, or the caller's ``source_id``) and skips a file whose identity is already
committed unless forced — so re-running an ingest adds nothing. The file's batches are read one
block ahead in a thread (pyarrow releases the GIL while it parses, so parsing overlaps encoding)
and streamed into ``Dataset.append``, which writes segments and commits last: when anything goes
wrong — the first bad row in strict mode, ``max_errors`` exceeded in quarantine mode, a corrupt
file — the exception escapes before the commit and nothing of that file becomes visible. In
quarantine mode bad rows go to a rejects file (:mod:`colonnade.ingest.rejects`) and the good
rows of the file are committed. :func:`ingest` also creates the dataset from the first file's
schema when it does not exist yet.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Generator, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa

from colonnade.config import WriteSettings
from colonnade.errors import (
    DatasetExistsError,
    IngestError,
    SchemaError,
    SpecError,
    TooManyErrorsError,
)
from colonnade.ingest.base import ON_ERROR, OnReject, Reject, Source
from colonnade.ingest.progress import NullProgress, Progress
from colonnade.ingest.rejects import RejectsFile, default_rejects_path
from colonnade.ingest.sources import open_source
from colonnade.schema.types import logical_schema, parse_schema_text, parse_type, type_name
from colonnade.table.dataset import Dataset, file_identity

if TYPE_CHECKING:
    from colonnade.store import Store

T = TypeVar("T")

ALREADY_INGESTED = "already ingested, 0 rows added; use --force to append again"


@dataclass
class FileResult:
    """What happened to one input file."""

    path: str
    rows: int = 0  # rows committed
    rejected: int = 0  # rows written to the rejects file
    bytes_in: int = 0  # bytes of the input file
    seconds: float = 0.0
    version: int | None = None  # the commit's version; None when nothing was committed
    skipped: str | None = None  # why nothing was committed, when it was not
    segments: int = 0
    bytes_written: int = 0
    rejects: str | None = None  # the rejects file, when rows were rejected

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class IngestResult:
    """What an ingest of one or more files did."""

    dataset: str
    files: list[FileResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.files)

    @property
    def rejected(self) -> int:
        return sum(f.rejected for f in self.files)

    @property
    def bytes_in(self) -> int:
        return sum(f.bytes_in for f in self.files if f.skipped != ALREADY_INGESTED)

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0

    @property
    def version(self) -> int | None:
        """The last version committed (None when no file was)."""
        versions = [f.version for f in self.files if f.version is not None]
        return max(versions) if versions else None

    @property
    def segments(self) -> int:
        return sum(f.segments for f in self.files)

    @property
    def bytes(self) -> int:
        return sum(f.bytes_written for f in self.files)

    @property
    def skipped(self) -> bool:
        """True when no file was committed."""
        return self.version is None

    @property
    def reason(self) -> str:
        return "; ".join(f"{f.path}: {f.skipped}" for f in self.files if f.skipped)

    def to_dict(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "rows": self.rows, "rejected": self.rejected,
                "bytes_in": self.bytes_in, "seconds": self.seconds,
                "rows_per_second": self.rows_per_second, "version": self.version,
                "files": [f.to_dict() for f in self.files]}


def load_schema(schema: pa.Schema | str | Path | None) -> pa.Schema | None:
    """A schema as given, or read from a ``name:type`` file."""
    if schema is None or isinstance(schema, pa.Schema):
        return schema
    path = Path(schema)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SchemaError(f"cannot read schema file {path}: {exc.strerror or exc}") from None
    return parse_schema_text(text, source=str(path))


def ingest_files(target: Dataset, paths: Iterable[Path | str], *, fmt: str | None = None,
                 delimiter: str | None = None, header: bool = True,
                 columns: list[str] | tuple[str, ...] | None = None,
                 schema: pa.Schema | str | Path | None = None, quote_char: str | None = '"',
                 on_error: str = "strict", max_errors: int | None = None,
                 rejects: Path | str | None = None, source_id: str | None = None,
                 force: bool = False, schema_mode: str = "strict",
                 progress: Progress | None = None, settings: WriteSettings | None = None,
                 block_size: int | None = None, prefetch: int = 1) -> IngestResult:
    """Ingest files into an existing dataset, one commit per file; see the module docstring.

    ``on_error``: ``strict`` raises BadRowError at the first bad row; ``quarantine`` commits the
    good rows and writes bad ones to ``rejects`` (default ``<input>.rejects.jsonl``), raising
    TooManyErrorsError (nothing of that file committed) past ``max_errors`` bad rows in a file.
    """
    files = [Path(p) for p in paths]
    if on_error not in ON_ERROR:
        raise IngestError(f"on_error must be strict or quarantine, not {on_error!r}")
    if max_errors is not None and max_errors < 0:
        raise IngestError("max_errors must be ≥ 0")
    if source_id is not None and len(files) != 1:
        raise IngestError(f"a source id names one input; got {len(files)} files")
    options = _SourceOptions(fmt, delimiter, header, tuple(columns) if columns else None,
                             load_schema(schema), quote_char, block_size)
    progress = progress or NullProgress()
    shared = RejectsFile(Path(rejects)) if rejects is not None and on_error == "quarantine" else None
    result = IngestResult(target.name)
    started = time.perf_counter()
    try:
        for path in files:
            rejects_file = shared
            if rejects_file is None and on_error == "quarantine":
                rejects_file = RejectsFile(default_rejects_path(path))
            try:
                result.files.append(_ingest_file(
                    target, path, options, rejects_file, max_errors, source_id, force,
                    schema_mode, progress, settings, prefetch))
            finally:
                if rejects_file is not None and rejects_file is not shared:
                    rejects_file.close()
    finally:
        if shared is not None:
            shared.close()
        result.seconds = time.perf_counter() - started
    return result


@dataclass(frozen=True)
class _SourceOptions:
    fmt: str | None
    delimiter: str | None
    header: bool
    columns: tuple[str, ...] | None
    schema: pa.Schema | None
    quote_char: str | None
    block_size: int | None


def _ingest_file(target: Dataset, path: Path, options: _SourceOptions,
                 rejects_file: RejectsFile | None, max_errors: int | None,
                 source_id: str | None, force: bool, schema_mode: str, progress: Progress,
                 settings: WriteSettings | None, prefetch: int) -> FileResult:
    started = time.perf_counter()
    if not path.is_file():
        raise FileNotFoundError(2, "no such file", str(path))
    size = path.stat().st_size
    identity = source_id or file_identity(path)
    if not force and target.find_source(identity) is not None:
        return FileResult(str(path), bytes_in=size, skipped=ALREADY_INGESTED,
                          seconds=time.perf_counter() - started)
    rejected = 0
    rejects_before = rejects_file.count if rejects_file is not None else 0

    def on_reject(reject: Reject) -> None:
        nonlocal rejected
        rejected += 1
        assert rejects_file is not None
        rejects_file.write(reject)
        if max_errors is not None and rejected > max_errors:
            rejects_file.flush()
            raise TooManyErrorsError(str(path), rejected, max_errors)

    rows = 0
    progress.start_file(str(path), size)
    try:
        with _open(path, options, target.schema, on_reject if rejects_file is not None else None) as source:
            reader = read_ahead(source.read(), prefetch)

            def batches() -> Iterator[pa.RecordBatch]:
                nonlocal rows
                for batch, position in reader:
                    rows += batch.num_rows
                    progress.update(position, rows)
                    yield batch

            try:
                appended = target.append(batches(), source=identity, force=force,
                                         schema_mode=schema_mode, settings=settings,
                                         info={"input": str(path)})
            finally:
                # stop the reading thread before the file and the rejects file are closed
                reader.close()
    finally:
        progress.end_file()
        if rejects_file is not None:
            rejects_file.flush()
    skipped = None
    if appended.version is None:
        skipped = f"{'empty file' if size == 0 else appended.reason}, 0 rows added"
    return FileResult(
        str(path), rows=appended.rows, rejected=rejected, bytes_in=size,
        seconds=time.perf_counter() - started, version=appended.version, skipped=skipped,
        segments=appended.segments, bytes_written=appended.bytes,
        rejects=str(rejects_file.path) if rejects_file is not None
        and rejects_file.count > rejects_before else None)


def _open(path: Path, options: _SourceOptions, target: pa.Schema | None,
          on_reject: OnReject | None) -> Source:
    return open_source(path, options.fmt, delimiter=options.delimiter, header=options.header,
                       columns=options.columns, schema=options.schema,
                       quote_char=options.quote_char, target=target, on_reject=on_reject,
                       block_size=options.block_size)


def read_ahead(items: Iterator[T], depth: int = 1) -> Generator[T, None, None]:
    """Iterate ``items`` in a thread, ``depth`` items ahead of the consumer (0: no thread).

    An exception of the producer is raised to the consumer in order; a consumer that stops
    early stops the producer."""
    if depth <= 0:
        yield from items
        return
    buffer: queue.Queue[tuple[int, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(kind: int, value: Any) -> bool:
        while not stop.is_set():
            try:
                buffer.put((kind, value), timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put(0, item):
                    return
            put(1, None)
        except BaseException as exc:  # handed to the consumer, which raises it
            put(2, exc)

    thread = threading.Thread(target=produce, name="colonnade-ingest-read", daemon=True)
    thread.start()
    try:
        while True:
            kind, value = buffer.get()
            if kind == 1:
                return
            if kind == 2:
                raise value
            yield value
    finally:
        stop.set()
        thread.join()
        close = getattr(items, "close", None)
        if close is not None:
            close()


def ingest(store: Store, dataset_name: str, paths: Path | str | Iterable[Path | str], *,
           partition_by: str | list[str] | None = None, sort_by: str | list[str] | None = None,
           segment_rows: int | None = None, compression: str | None = None,
           **options: Any) -> IngestResult:
    """Ingest files into ``dataset_name``, creating it from the first file's schema if absent.

    ``options`` are those of :func:`ingest_files`. A new dataset takes its schema from the first
    file whose column types are known (a CSV file with rows, an explicit schema, Parquet, Arrow)
    and is recorded by the first commit, so an ingest that commits nothing creates nothing. For an
    existing dataset, ``partition_by``, ``sort_by``, ``segment_rows`` and ``compression`` must be
    None or what the dataset has (SpecError otherwise), and its name must be spelled as stored (a
    name that differs only in case raises DatasetExistsError: SQL could not tell them apart).
    """
    files = [Path(paths)] if isinstance(paths, str | Path) else [Path(p) for p in paths]
    if dataset_name in store:
        target = store.dataset(dataset_name)
        if target.name != dataset_name:  # `WEIRD` next to `weird`: not a new dataset, not `weird`
            raise DatasetExistsError(dataset_name, target.name)
        asked = store.new_dataset(target.name, target.schema, partition_by, sort_by,
                                  segment_rows=segment_rows, compression=compression)
        given = [name for name, value in (("partition_by", partition_by), ("sort_by", sort_by),
                                          ("segment_rows", segment_rows),
                                          ("compression", compression)) if value is not None]
        differences = target.spec.differences(asked.spec, tuple(given))
        if differences:
            raise SpecError(f"dataset {target.name!r} exists with {'; '.join(differences)}; "
                            "options of an existing dataset cannot be changed by an ingest")
    else:
        schema = _first_schema(files, options)
        if schema is None:
            return IngestResult(dataset_name, [
                FileResult(str(p), bytes_in=p.stat().st_size,
                           skipped=f"{'empty file' if p.stat().st_size == 0 else 'no rows'}, "
                                   "0 rows added; the dataset was not created")
                for p in files])
        check_storable(schema)
        target = store.new_dataset(dataset_name, schema, partition_by, sort_by,
                                   segment_rows=segment_rows, compression=compression)
    return ingest_files(target, files, **options)


def _first_schema(files: list[Path], options: dict[str, Any]) -> pa.Schema | None:
    source_options = _SourceOptions(
        options.get("fmt"), options.get("delimiter"), options.get("header", True),
        tuple(options["columns"]) if options.get("columns") else None,
        load_schema(options.get("schema")), options.get("quote_char", '"'),
        options.get("block_size"))
    for path in files:
        with _open(path, source_options, None, lambda reject: None) as source:
            if source.schema_known:
                return source.schema
    return None


def check_storable(schema: pa.Schema) -> None:
    """Raise SchemaError naming the columns whose types the store cannot keep."""
    bad = []
    for f in logical_schema(schema):
        try:
            ok = parse_type(type_name(f.type)) == f.type
        except SchemaError:
            ok = False
        if not ok:
            bad.append(f"{f.name} ({f.type})")
    if bad:
        raise SchemaError(f"column type(s) the store cannot keep: {', '.join(bad)}")
