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

The pipeline reports progress as events (:mod:`colonnade.ingest.progress`) and, after Ctrl-C,
reads the log back to say which commits landed (:mod:`colonnade.ingest.interrupts`).
"""

from __future__ import annotations

import queue
import re
import threading
import time
import uuid
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import pyarrow as pa

from colonnade.config import WriteSettings
from colonnade.errors import (
    ColonnadeError,
    DatasetExistsError,
    IngestError,
    SchemaError,
    SpecError,
    TooManyErrorsError,
)
from colonnade.ingest.base import ON_ERROR, OnReject, Reject, Source
from colonnade.ingest.delimited import DelimitedSource
from colonnade.ingest.inference import SchemaWarning
from colonnade.ingest.interrupts import HeldCommits, IngestInterrupted, interrupts_held
from colonnade.ingest.progress import NullProgress, Progress
from colonnade.ingest.rejects import RejectsFile, default_rejects_path
from colonnade.ingest.sources import open_source
from colonnade.schema.types import (
    check_storable,
    parse_schema_text,
)
from colonnade.table.dataset import Dataset, file_identity

if TYPE_CHECKING:
    from colonnade.storage.base import ChunkStore
    from colonnade.store import Store

T = TypeVar("T")

ALREADY_INGESTED = "already ingested, 0 rows added"


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
    off_curve: int = 0  # rows stored in a curve partition's NULL partition (no valid coordinates)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class IngestResult:
    """What an ingest of one or more files did.

    When the ingest created the dataset (``created``), ``inferred`` lists the columns whose
    types were inferred from CSV text, over the first ``inferred_rows`` rows of the file
    ``inferred_from``, and ``schema_warnings`` the text columns among them whose values there
    were nearly all numbers, dates or times (see :mod:`colonnade.ingest.inference`)."""

    dataset: str
    files: list[FileResult] = field(default_factory=list)
    seconds: float = 0.0
    created: bool = False
    inferred: list[str] = field(default_factory=list)
    inferred_rows: int = 0
    inferred_from: str | None = None
    schema_warnings: list[SchemaWarning] = field(default_factory=list)

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
    def off_curve(self) -> int:
        return sum(f.off_curve for f in self.files)

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
                "rows_per_second": self.rows_per_second, "version": self.version, "off_curve": self.off_curve,
                "created": self.created, "inferred": self.inferred,
                "inferred_rows": self.inferred_rows, "inferred_from": self.inferred_from,
                "schema_warnings": [w.to_dict() for w in self.schema_warnings],
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
                 block_size: int | None = None, prefetch: int = 1,
                 names: Mapping[str, str] | None = None,
                 sources: Mapping[str, str] | None = None,
                 new_dataset: bool = False) -> IngestResult:
    """Ingest files into an existing dataset, one commit per file; see the module docstring.

    ``on_error``: ``strict`` raises BadRowError at the first bad row; ``quarantine`` commits the
    good rows and writes bad ones to ``rejects`` (default ``<input>.rejects.jsonl``), raising
    TooManyErrorsError (nothing of that file committed) past ``max_errors`` bad rows in a file.
    ``names`` maps an input path to the name messages and results give it (``<stdin>`` for a
    spooled standard input; its default rejects file is then ``stdin.rejects.jsonl`` in the
    current directory), ``sources`` to its source identity (default: the file's path, size and
    digest; ``source_id`` names the one input's). ``new_dataset``: ``target`` was just created
    for this ingest from the first file's inferred types; the result then says so and carries
    the schema warnings. Ctrl-C raises :class:`~colonnade.ingest.interrupts.IngestInterrupted`
    with what was committed.
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
    result = IngestResult(target.name, created=new_dataset)
    pending = [(names or {}).get(str(p), str(p)) for p in files]  # inputs not done yet
    identities = [source_id or (sources or {}).get(str(p)) for p in files]
    infer = new_dataset  # still to say which types were inferred, from the first file that tells
    job: _FileJob | None = None
    started = time.perf_counter()
    try:
        progress.start(len(files), sum(p.stat().st_size for p in files if p.is_file()))
        for path, identity in zip(files, identities, strict=True):
            rejects_file = shared
            if rejects_file is None and on_error == "quarantine":
                rejects_file = RejectsFile(_default_rejects(path, pending[0]))
            job = _FileJob(target, path, pending[0], options, rejects_file, max_errors,
                           identity, force, schema_mode, progress, settings, prefetch,
                           result if infer else None)
            try:
                job.run()
            finally:
                if rejects_file is not None and rejects_file is not shared:
                    rejects_file.close()
            infer = infer and not job.schema_told
            _done(result, pending, job)
            job = None
    except KeyboardInterrupt:
        unknown = None
        if job is not None:
            unknown = _read_back(job)
            _done(result, pending, job)
        raise IngestInterrupted(result, pending, unknown) from None
    finally:
        if shared is not None:
            shared.close()
        result.seconds = time.perf_counter() - started
    return result


def _default_rejects(path: Path, name: str) -> Path:
    """Beside the input; in the current directory for an input known by another name
    (``<stdin>``: ``stdin.rejects.jsonl``)."""
    if name == str(path):
        return default_rejects_path(path)
    return default_rejects_path(Path(re.sub(r"[^\w.-]", "", name) or "input"))


def _done(result: IngestResult, pending: list[str], job: _FileJob) -> None:
    """Count a job's file as done when it has a result (once)."""
    if job.result is not None and all(f is not job.result for f in result.files):
        result.files.append(job.result)
        pending.pop(0)


def _read_back(job: _FileJob) -> str | None:
    """After Ctrl-C: whether the job's commit landed, from the log (a second Ctrl-C waits for
    the read); the reason when the log could not be read."""
    try:
        with interrupts_held():
            job.read_back()
    except KeyboardInterrupt:
        pass
    except ColonnadeError as exc:
        return str(exc)
    return None


@dataclass(frozen=True)
class _SourceOptions:
    fmt: str | None
    delimiter: str | None
    header: bool
    columns: tuple[str, ...] | None
    schema: pa.Schema | None
    quote_char: str | None
    block_size: int | None


class _FileJob:
    """The ingest of one file: its source, its commit, and what the log says after Ctrl-C."""

    def __init__(self, target: Dataset, path: Path, name: str, options: _SourceOptions,
                 rejects_file: RejectsFile | None, max_errors: int | None,
                 source_id: str | None, force: bool, schema_mode: str, progress: Progress,
                 settings: WriteSettings | None, prefetch: int,
                 inference: IngestResult | None) -> None:
        self.target, self.path, self.name, self.options = target, path, name, options
        self.rejects_file, self.max_errors = rejects_file, max_errors
        self.source_id, self.force, self.schema_mode = source_id, force, schema_mode
        self.progress, self.settings, self.prefetch = progress, settings, prefetch
        self.inference = inference  # where to say which types were inferred, if asked
        self.schema_told = False  # this file's columns had known types (it could create a dataset)
        self.run_id = uuid.uuid4().hex  # finds this file's commit in the log after Ctrl-C
        self.appending = False
        self.size = 0
        self.rejected = 0
        self.started = time.perf_counter()
        self.result: FileResult | None = None

    def run(self) -> None:
        self.result = self._run()

    def _run(self) -> FileResult:
        path, name = self.path, self.name
        if not path.is_file():
            raise FileNotFoundError(2, "no such file", name)
        self.size = size = path.stat().st_size
        self.progress.start_file(name, size)
        try:
            identity = self.source_id or _identity(path, self.progress)
            if not self.force and self.target.find_source(identity) is not None:
                self.progress.skip_file(name, size)
                return FileResult(name, bytes_in=size, skipped=ALREADY_INGESTED,
                                  seconds=time.perf_counter() - self.started)
            return self._append(identity)
        finally:
            self.progress.end_file()

    def _append(self, identity: str) -> FileResult:
        path, name, size = self.path, self.name, self.size
        rejects_file = self.rejects_file
        rejects_before = rejects_file.count if rejects_file is not None else 0
        # the commit record is written with Ctrl-C held, so that the log is final when read back
        writer = Dataset(cast("ChunkStore", HeldCommits(self.target.store)), self.target.spec,
                         recorded=self.target.recorded)  # a new dataset is recorded by its commit
        try:
            on_reject = self._on_reject if rejects_file is not None else None
            with _open(path, self.options, self.target.schema, on_reject, name) as source:
                self.schema_told = source.schema_known
                self._report_inference(source)
                reader = read_ahead(source.read(), self.prefetch)
                try:
                    self.appending = True
                    appended = writer.append(self._batches(reader), source=identity,
                                             force=self.force, schema_mode=self.schema_mode,
                                             settings=self.settings,
                                             info={"input": name, "run": self.run_id})
                finally:
                    # stop the reading thread before the file and the rejects file are closed
                    reader.close()
        finally:
            self.target.spec = writer.spec  # a merge may have added columns
            self.target.recorded = writer.recorded
            self.target.recorded_here = self.target.recorded_here or writer.recorded_here
            if rejects_file is not None:
                rejects_file.flush()
        skipped = None
        if appended.version is None:
            skipped = f"{'empty file' if size == 0 else appended.reason}, 0 rows added"
        return FileResult(
            name, rows=appended.rows, rejected=self.rejected, bytes_in=size,
            seconds=time.perf_counter() - self.started, version=appended.version,
            skipped=skipped, segments=appended.segments, bytes_written=appended.bytes,
            off_curve=appended.off_curve, rejects=str(rejects_file.path) if rejects_file is not None
            and rejects_file.count > rejects_before else None)

    def _on_reject(self, reject: Reject) -> None:
        self.rejected += 1
        assert self.rejects_file is not None
        self.rejects_file.write(reject)
        if self.max_errors is not None and self.rejected > self.max_errors:
            self.rejects_file.flush()
            raise TooManyErrorsError(self.name, self.rejected, self.max_errors)

    def _batches(self, reader: Iterator[tuple[pa.RecordBatch, int]]) -> Iterator[pa.RecordBatch]:
        """The source's batches, reporting progress as the writer takes each one: bytes of the
        input parsed (never decreasing, below the file's size until every row has been read,
        then the size, once) and rows."""
        rows = done = 0
        below = max(self.size - 1, 0)
        for batch, position in reader:
            rows += batch.num_rows
            done = max(done, min(position, below))
            self.progress.update(done, rows)
            yield batch
        self.progress.update(self.size, rows)

    def _report_inference(self, source: Source) -> None:
        if self.inference is not None:
            report_inference(self.inference, source, self.target.schema, self.options.schema)

    def read_back(self) -> None:
        """After Ctrl-C: set the result from this file's commit, if the log has it. (The commit
        record was written with SIGINT held, so the log is final.)"""
        if not self.appending or self.result is not None:
            return
        for commit in reversed(self.target.history()):
            if commit.info.get("run") == self.run_id:
                self.result = FileResult(
                    self.name, rows=commit.rows_added, rejected=self.rejected, bytes_in=self.size,
                    version=commit.version, seconds=time.perf_counter() - self.started,
                    segments=len(commit.added))
                return


def report_inference(result: IngestResult, source: Source, dataset: pa.Schema,
                     given: pa.Schema | None) -> None:
    """For a dataset created from ``source``'s file: which columns were inferred from its text
    (those ``given`` does not type), from how many rows, and which of them look typed but were
    made text."""
    if not isinstance(source, DelimitedSource) or not source.schema_known:
        return  # the dataset's types did not come from this file's text
    named = given.names if given is not None else []
    result.inferred = [n for n in dataset.names if n not in named]
    result.inferred_from = source.name
    text = [n for n in result.inferred if pa.types.is_string(dataset.field(n).type)]
    result.inferred_rows, result.schema_warnings = source.typed_as_text(text)


def _identity(path: Path, progress: Progress, chunk: int = 8 * 1024 * 1024) -> str:
    """The file's source identity, as :func:`colonnade.table.dataset.file_identity` has it
    (resolved path, size, SHA-256 of the content), with the bytes read so far reported to
    ``progress``: reading a large file for its digest takes a while before it is parsed."""
    return file_identity(path, chunk, progress.identify)


def _open(path: Path, options: _SourceOptions, target: pa.Schema | None,
          on_reject: OnReject | None, name: str | None = None) -> Source:
    return open_source(path, options.fmt, delimiter=options.delimiter, header=options.header,
                       columns=options.columns, schema=options.schema,
                       quote_char=options.quote_char, target=target, on_reject=on_reject,
                       block_size=options.block_size, name=name)


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
           segment_rows: int | None = None, compression: str | None = None, workers: int = 1,
           **options: Any) -> IngestResult:
    """Ingest files into ``dataset_name``, creating it from the first file's schema if absent.

    ``options`` are those of :func:`ingest_files`. ``workers`` ≥ 2: the files are read and
    written by that many processes and the whole input set is one commit, with one source
    identity (see :mod:`colonnade.ingest.parallel`; schema mode strict only). A new dataset takes its schema from the first
    file whose column types are known (a CSV file with rows, an explicit schema, Parquet, Arrow)
    and is recorded by the first commit, so an ingest that commits nothing creates nothing. For an
    existing dataset, ``partition_by``, ``sort_by``, ``segment_rows`` and ``compression`` must be
    None or what the dataset has (SpecError otherwise), and its name must be spelled as stored (a
    name that differs only in case raises DatasetExistsError: SQL could not tell them apart).
    """
    files = [Path(paths)] if isinstance(paths, str | Path) else [Path(p) for p in paths]
    target = dataset_for(store, dataset_name, lambda: _first_schema(files, options), partition_by,
                         sort_by, segment_rows, compression)
    if target is None:
        return IngestResult(dataset_name, [
            FileResult(str(p), bytes_in=p.stat().st_size,
                       skipped=f"{'empty file' if p.stat().st_size == 0 else 'no rows'}, "
                               "0 rows added; the dataset was not created")
            for p in files])
    if workers < 1:
        raise IngestError(f"workers must be ≥ 1, not {workers}")
    if workers > 1:
        from colonnade.ingest.parallel import ingest_files_parallel

        result = ingest_files_parallel(target, files, workers, new_dataset=not target.recorded,
                                       **options)
    else:
        result = ingest_files(target, files, new_dataset=not target.recorded, **options)
    result.created = target.recorded_here  # not if nothing was committed, or another writer won
    return result


def dataset_for(store: Store, dataset_name: str, first_schema: Callable[[], pa.Schema | None],
                partition_by: str | list[str] | None = None,
                sort_by: str | list[str] | None = None, segment_rows: int | None = None,
                compression: str | None = None) -> Dataset | None:
    """The dataset an ingest writes to: the existing one (SpecError if an option given differs
    from what it has; DatasetExistsError for a name that differs only in case), or a new one
    (recorded by its first commit) with the schema ``first_schema`` returns — None when that is
    None (no input told the column types)."""
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
        return target
    schema = first_schema()
    if schema is None:
        return None
    check_storable(schema, dataset_name)
    return store.new_dataset(dataset_name, schema, partition_by, sort_by,
                             segment_rows=segment_rows, compression=compression)


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
