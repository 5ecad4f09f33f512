"""A parallel ingest: a set of input files written by worker processes, committed as one commit.

The coordinator (this module) starts the workers (:mod:`colonnade.ingest.pool`), then reads every
input once for its digest while it plans the tasks (:mod:`colonnade.ingest.tasks`): the source
identity of the whole input set is a digest over its files' identities, so re-running the same
ingest adds nothing (unless forced), whatever order the files are named in. It prepares one write
operation (``Dataset.prepare_write``), hands the tasks out one at a time to whichever worker is
free, gathers the progress of every worker into the pipeline's progress events (one bar), and,
when every task is written, commits all parts at once (``Dataset.commit_write``).

Anything that goes wrong aborts the whole operation (``Dataset.abort_write`` with the parts done;
the workers are stopped, and remove what their current task wrote) and commits nothing: the
first bad row in strict mode, named by FILE:LINE as a one-process ingest names it; more than
``max_errors`` bad rows in one file in quarantine mode; a worker process that dies (the error
says which task it was on; what it wrote is left for ``vacuum``); Ctrl-C or SIGTERM
(:class:`~colonnade.ingest.interrupts.IngestInterrupted`). A coordinator that dies leaves only
uncommitted segments, for ``vacuum``.

A range of a CSV file is only known to start on a record boundary when every range before it in
the file read its records where counting quotes put them (``by_parity``): so an error is final
only once the ranges before its own have been read that way, and a range that was not (a quote
inside an unquoted field) has the rest of its file, from its own start, read again as one task,
the later ranges' parts and rejects set aside. Quarantined rows are gathered from the workers'
files into the rejects file(s), ordered by input file and line, as a one-process ingest writes
them.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import tempfile
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa

from colonnade.config import WriteSettings
from colonnade.errors import BadRowError, IngestError, TooManyErrorsError
from colonnade.ingest.base import ON_ERROR
from colonnade.ingest.delimited import DelimitedSource
from colonnade.ingest.interrupts import HeldCommits, IngestInterrupted, interrupts_held
from colonnade.ingest.pipeline import (
    ALREADY_INGESTED,
    FileResult,
    IngestResult,
    _default_rejects,
    load_schema,
    report_inference,
)
from colonnade.ingest.pool import Pool, WorkerHandle
from colonnade.ingest.progress import NullProgress, Progress
from colonnade.ingest.sources import ParquetSource, detect_format, open_source
from colonnade.ingest.tasks import (
    MIN_TASK_BYTES,
    CsvLayout,
    Task,
    group_row_groups,
    scan_csv,
    set_identity,
    task_bytes,
)
from colonnade.ingest.worker import WorkerSetup
from colonnade.table.conform import conform
from colonnade.table.dataset import Dataset, file_identity, off_curve_rows
from colonnade.table.operation import WriteOperation, WrittenPart

if TYPE_CHECKING:
    from colonnade.storage.base import ChunkStore


def ingest_files_parallel(target: Dataset, paths: Iterable[Path | str], workers: int, *,
                          fmt: str | None = None, delimiter: str | None = None,
                          header: bool = True, columns: list[str] | tuple[str, ...] | None = None,
                          schema: pa.Schema | str | Path | None = None,
                          quote_char: str | None = '"', on_error: str = "strict",
                          max_errors: int | None = None, rejects: Path | str | None = None,
                          source_id: str | None = None, force: bool = False,
                          schema_mode: str = "strict", progress: Progress | None = None,
                          settings: WriteSettings | None = None, block_size: int | None = None,
                          prefetch: int = 1, names: Mapping[str, str] | None = None,
                          sources: Mapping[str, str] | None = None, new_dataset: bool = False,
                          min_task_bytes: int = MIN_TASK_BYTES) -> IngestResult:
    """Ingest files into an existing dataset with ``workers`` processes, in one commit; see the
    module docstring. The options are those of :func:`~colonnade.ingest.pipeline.ingest_files`
    (``source_id`` names the whole input set); ``min_task_bytes`` is the shortest byte range a
    CSV file is cut into."""
    files = [Path(p) for p in paths]
    if workers < 2:
        raise IngestError(f"a parallel ingest needs at least 2 workers, not {workers}")
    if on_error not in ON_ERROR:
        raise IngestError(f"on_error must be strict or quarantine, not {on_error!r}")
    if max_errors is not None and max_errors < 0:
        raise IngestError("max_errors must be ≥ 0")
    if schema_mode != "strict":
        raise IngestError("a parallel ingest keeps the dataset's schema (schema mode strict); "
                          "add new columns with a one-process ingest")
    shown = {str(p): (names or {}).get(str(p), str(p)) for p in files}
    for p in files:
        if not p.is_file():
            raise FileNotFoundError(2, "no such file", shown[str(p)])
    run = _Run(target, files, workers, shown, _Options(
        fmt, delimiter, header, tuple(columns) if columns else None, load_schema(schema),
        quote_char, block_size, on_error, max_errors, force, settings, prefetch,
        min_task_bytes), progress or NullProgress())
    with _terminate_as_interrupt(run):
        return run.ingest(rejects, source_id, sources or {}, new_dataset)


@dataclasses.dataclass(frozen=True)
class _Options:
    fmt: str | None
    delimiter: str | None
    header: bool
    columns: tuple[str, ...] | None
    schema: pa.Schema | None
    quote_char: str | None
    block_size: int | None
    on_error: str
    max_errors: int | None
    force: bool
    settings: WriteSettings | None
    prefetch: int
    min_task_bytes: int


class _Run:
    """One parallel ingest: plan, dispatch, commit or abort."""

    def __init__(self, target: Dataset, files: list[Path], workers: int, shown: dict[str, str],
                 options: _Options, progress: Progress) -> None:
        self.target, self.files, self.workers, self.options = target, files, workers, options
        self.names = [shown[str(p)] for p in files]
        self.sizes = [p.stat().st_size for p in files]
        self.total = sum(self.sizes)
        self.progress = progress
        self.label = self.names[0] if len(files) == 1 else f"{len(files)} files"
        self.run_id = uuid.uuid4().hex  # finds the commit in the log after Ctrl-C
        self.committing = False  # SIGTERM waits for the commit record
        self.terminated = False
        self.op: WriteOperation | None = None
        self.writer: Dataset | None = None
        self.tasks: list[Task] = []
        self.file_tasks: list[list[int]] = []  # the tasks whose parts make up each file, in order
        self.committed = False  # the commit record landed: nothing to abort
        self.scratch = Path(tempfile.mkdtemp(prefix="colonnade-ingest-"))  # workers' rejects
        self.started = time.perf_counter()

    # -- the whole run
    def ingest(self, rejects: Path | str | None, source_id: str | None,
               sources: Mapping[str, str], new_dataset: bool) -> IngestResult:
        opts = self.options
        if source_id is not None and len(self.files) != 1:
            raise IngestError(f"a source id names one input; got {len(self.files)} files")
        result = IngestResult(self.target.name, created=new_dataset)
        setup = WorkerSetup(self.target.store.uri, opts.settings, opts.fmt, opts.header,
                            opts.on_error == "quarantine", opts.max_errors, opts.block_size,
                            opts.prefetch, str(self.scratch),
                            tuple((k, v) for k, v in os.environ.items() if k.startswith("COLONNADE_")),
                            os.getcwd(), threads=self.workers < (os.cpu_count() or 1))
        dispatcher: _Dispatcher | None = None
        try:
            pool = Pool(self.workers, setup)
            try:
                self.progress.start(1, self.total)
                self.progress.start_file(self.label, self.total)
                try:
                    identity = self._plan(result if new_dataset else None, source_id, sources)
                    if not opts.force and self.target.find_source(identity) is not None:
                        self.progress.skip_file(self.label, self.total)
                        pool.shutdown(stop=True)
                        return self._skipped(result, ALREADY_INGESTED)
                    # the commit record is written with Ctrl-C held, so that the log is final
                    self.writer = writer = Dataset(cast("ChunkStore", HeldCommits(self.target.store)),
                                                   self.target.spec, recorded=self.target.recorded)
                    self.op = op = writer.prepare_write(source=identity)
                    pool.ready()
                    pool.begin(op.to_json(), self.target.spec.to_json())
                    dispatcher = _Dispatcher(self, pool)
                    dispatcher.run()
                    late = pool.shutdown(stop=True)
                    dispatcher.take(late)
                    return self._commit(result, dispatcher)
                finally:
                    self.progress.end_file()
            except BaseException:
                late = pool.shutdown(stop=True)
                if dispatcher is not None:
                    dispatcher.take(late)
                raise
        except BaseException as exc:
            if dispatcher is not None and not self.committed:
                self._abort(dispatcher)
            if isinstance(exc, KeyboardInterrupt) and not isinstance(exc, IngestInterrupted):
                raise IngestInterrupted(result, list(self.names)) from None
            raise
        finally:
            if dispatcher is not None:
                self._gather_rejects(result, dispatcher, rejects)
            shutil.rmtree(self.scratch, ignore_errors=True)
            result.seconds = time.perf_counter() - self.started

    def _skipped(self, result: IngestResult, reason: str) -> IngestResult:
        result.files = [FileResult(n, bytes_in=s, skipped=reason,
                                   seconds=time.perf_counter() - self.started)
                        for n, s in zip(self.names, self.sizes, strict=True)]
        return result

    # -- planning
    def _plan(self, inference: IngestResult | None, source_id: str | None,
              sources: Mapping[str, str]) -> str:
        """Cut the files into tasks; the input set's source identity."""
        opts = self.options
        target = task_bytes(self.total, self.workers, opts.min_task_bytes)
        identities: list[str] = []
        done = 0
        for i, path in enumerate(self.files):
            given = source_id or sources.get(str(path))

            def on_read(n: int, before: int = done) -> None:
                self.progress.identify(before + n)

            tasks, identity = self._plan_file(i, path, target, given is None, on_read, inference)
            if inference is not None and inference.inferred_from is not None:
                inference = None  # told by the first file whose text typed the columns
            identities.append(given or identity or "")
            self.file_tasks.append([t.index for t in tasks])
            self.tasks.extend(tasks)
            done += self.sizes[i]
        return source_id or set_identity(identities)

    def _plan_file(self, i: int, path: Path, target: int, digest: bool, on_read: Any,
                   inference: IngestResult | None) -> tuple[list[Task], str | None]:
        opts, name, size = self.options, self.names[i], self.sizes[i]
        first = len(self.tasks)
        form = detect_format(path, opts.fmt)
        with open_source(path, opts.fmt, delimiter=opts.delimiter, header=opts.header,
                         columns=opts.columns, schema=opts.schema, quote_char=opts.quote_char,
                         target=self.target.schema, block_size=opts.block_size,
                         name=name) as source:
            if source.size and source.schema_known:  # a file that can't fit fails before any work
                conform(self.target.name, pa.RecordBatch.from_pylist([], schema=source.schema),
                        self.target.schema)
            if inference is not None:
                report_inference(inference, source, self.target.schema, opts.schema)
            if isinstance(source, DelimitedSource):
                layout = CsvLayout(source.schema, source.options.delimiter, opts.quote_char,
                                   source.dialect.newline)
                if form.compression is None:
                    start, line = source.data_start
                    scanned = scan_csv(path, start, line, target, source.dialect.quote,
                                       source.dialect.newline, digest, on_read)
                    last = len(scanned.ranges) - 1
                    tasks = [Task(first + k, i, str(path), name, "range",
                                  b - a + (start if k == 0 else 0), part=k, start=a, stop=b,
                                  first_line=line_no, to_end=k == last, layout=layout)
                             for k, (a, b, line_no) in enumerate(scanned.ranges)]
                    identity = None if scanned.digest is None else \
                        f"file:{path.resolve()}:{size}:sha256:{scanned.digest}"
                    return tasks, identity
                tasks = [Task(first, i, str(path), name, "file", size, layout=layout)]
            elif isinstance(source, ParquetSource):
                sizes = source.row_group_bytes
                whole = max(sum(sizes), 1)
                tasks, done = [], 0
                for k, groups in enumerate(group_row_groups(sizes, target)):
                    nbytes = sum(sizes[g] for g in groups)
                    share = size * (done + nbytes) // whole - size * done // whole
                    tasks.append(Task(first + k, i, str(path), name, "row_groups", share, part=k,
                                      row_groups=groups))
                    done += nbytes
            else:
                tasks = [Task(first, i, str(path), name, "file", size)]
        return tasks, file_identity(path, on_read=on_read) if digest else None

    # -- the end
    def _commit(self, result: IngestResult, dispatcher: _Dispatcher) -> IngestResult:
        op, writer = self.op, self.writer
        assert op is not None and writer is not None
        dispatcher.abort_set_aside()
        parts = [dispatcher.parts[t] for tids in self.file_tasks for t in tids]
        self.progress.update(self.total, dispatcher.rows())
        self.committing = True
        try:
            appended = writer.commit_write(op, parts, force=self.options.force, info={
                "input": self.label, "run": self.run_id, "workers": self.workers})
        except KeyboardInterrupt:
            landed = self._landed()
            if landed is not None:
                self.committed = True
                self._results(result, dispatcher, landed)
                raise IngestInterrupted(result, []) from None
            raise
        finally:
            self.committing = False
            self.target.recorded = writer.recorded
            self.target.recorded_here = self.target.recorded_here or writer.recorded_here
        self.committed = appended.version is not None
        if appended.version is None:
            if parts:
                writer.abort_write(op, parts)  # committed meanwhile by another writer
            reason = f"{appended.reason}, 0 rows added" if self.total else "empty file, 0 rows added"
            self._results(result, dispatcher, None, reason)
            return result
        self._results(result, dispatcher, appended.version)
        if self.terminated:
            raise IngestInterrupted(result, [])
        return result

    def _landed(self) -> int | None:
        """After Ctrl-C in the commit (its record written with SIGINT held): its version if it
        landed."""
        assert self.writer is not None and self.op is not None
        try:
            with interrupts_held():
                for commit in self.writer.history(after=self.op.read_version):
                    if commit.id == self.op.id:
                        return commit.version
        except Exception:  # noqa: BLE001 - unknown: said as not committed, its segments for vacuum
            return None
        return None

    def _results(self, result: IngestResult, dispatcher: _Dispatcher, version: int | None,
                 skipped: str | None = None) -> None:
        seconds = time.perf_counter() - self.started
        result.files = []
        for i, tids in enumerate(self.file_tasks):
            parts = [dispatcher.parts[t] for t in tids]
            rows = sum(p.rows for p in parts)
            result.files.append(FileResult(
                self.names[i], rows=rows if version is not None else 0,
                rejected=sum(dispatcher.rejected.get(t, 0) for t in tids),
                bytes_in=self.sizes[i], seconds=seconds, version=version, skipped=skipped,
                segments=sum(len(p.entries) for p in parts) if version is not None else 0,
                bytes_written=sum(p.bytes for p in parts) if version is not None else 0,
                off_curve=off_curve_rows(self.target.spec, [e for p in parts for e in p.entries])
                if version is not None else 0))

    def _abort(self, dispatcher: _Dispatcher) -> None:
        """Remove the parts handed back (Ctrl-C held: the abort is short); what a dead or
        stopped worker left is for vacuum."""
        if self.op is None or self.writer is None or not dispatcher.parts:
            return
        try:
            with interrupts_held():
                self.writer.abort_write(self.op, dispatcher.parts.values())
        except KeyboardInterrupt:
            pass
        except Exception:  # noqa: BLE001 - the failure being raised matters more; vacuum cleans
            pass

    def _gather_rejects(self, result: IngestResult, dispatcher: _Dispatcher,
                        rejects: Path | str | None) -> None:
        """The workers' rejects, in input order, into the rejects file(s)."""
        if self.options.on_error != "quarantine":
            return
        shared = _Lines(Path(rejects)) if rejects is not None else None
        by_file = {f.path: f for f in result.files}
        scratch = self.scratch
        try:
            for i, tids in enumerate(self.file_tasks):
                out = shared or _Lines(_default_rejects(self.files[i], self.names[i]))
                before = out.count
                for t in tids:
                    part = scratch / f"{t:06d}.jsonl"
                    if part.exists():
                        out.copy(part)
                if out is not shared:
                    out.close()
                if out.count > before and self.names[i] in by_file:
                    by_file[self.names[i]].rejects = str(out.path)
        finally:
            if shared is not None:
                shared.close()


class _Lines:
    """An output rejects file, created at its first line."""

    def __init__(self, path: Path) -> None:
        self.path, self.count = path, 0
        self._file: Any = None

    def copy(self, part: Path) -> None:
        with open(part, encoding="utf-8") as f:
            for line in f:
                if self._file is None:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    self._file = open(self.path, "w", encoding="utf-8")  # noqa: SIM115
                self._file.write(line)
                self.count += 1

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


class _Dispatcher:
    """Hands tasks to free workers, gathers what they answer, and decides when an error is final
    (see the module docstring on ranges read by parity)."""

    def __init__(self, run: _Run, pool: Pool) -> None:
        self.run_, self.pool = run, pool
        self.tasks, self.file_tasks = run.tasks, run.file_tasks
        self.queue: deque[int] = deque(t.index for t in self.tasks)
        self.state: dict[int, str] = {t.index: "pending" for t in self.tasks}
        self.parts: dict[int, WrittenPart] = {}
        self.by_parity: dict[int, bool] = {}
        self.errors: dict[int, tuple[Any, ...]] = {}
        self.bytes: dict[int, int] = {}
        self.rows_of: dict[int, int] = {}
        self.rejected: dict[int, int] = {}
        self.set_aside: set[int] = set()
        self.shown = 0  # bytes reported so far (never decreasing)

    def run(self) -> None:
        """Until every task needed is written; raises the first final error, or an IngestError
        naming the task of a worker that died."""
        while not self._finished():
            self.take(self.pool.receive())
            dead, last = self.pool.dead()
            if dead is not None:
                self.take(last)  # a part it handed back before it died is aborted with the rest
                raise self._died(dead)
            self._decide()
            self._report()

    def take(self, messages: list[tuple[WorkerHandle, tuple[Any, ...]]]) -> None:
        for worker, msg in messages:
            kind, tid = msg[0], msg[1] if len(msg) > 1 else None
            if kind == "failed":
                if worker.exited:  # heard while shutting down: no news
                    continue
                raise IngestError(f"worker process {worker.number} could not start: {msg[2]}")
            if kind == "ready":
                worker.ready = True
            elif kind == "progress":
                assert isinstance(tid, int)
                self.bytes[tid], self.rows_of[tid], self.rejected[tid] = msg[2], msg[3], msg[4]
                continue
            elif kind == "done":
                assert isinstance(tid, int)
                self.parts[tid] = WrittenPart.from_json(msg[2])
                self.rows_of[tid], self.rejected[tid], self.by_parity[tid] = msg[3], msg[4], msg[5]
                self.bytes[tid] = self.tasks[tid].nbytes
                self.state[tid] = "done"
            elif kind == "error":
                assert isinstance(tid, int)
                self.errors[tid] = (msg[2], msg[3])
                self.state[tid] = "error"
            elif kind == "stopped":
                assert isinstance(tid, int)
                self.state[tid] = "stopped"
            if worker.task == tid or kind == "ready":
                worker.task = None
            self._feed(worker)

    def _feed(self, worker: WorkerHandle) -> None:
        if worker.exited or not worker.ready or worker.task is not None:
            return
        while self.queue and self.queue[0] in self.set_aside:
            self.queue.popleft()
        if self.queue:
            worker.task = tid = self.queue.popleft()
            self.state[tid] = "running"
            self.pool.send(worker, self.tasks[tid])

    def _finished(self) -> bool:
        return all(self.state[t] == "done" for tids in self.file_tasks for t in tids)

    def _decide(self) -> None:
        """Raise a final error; read the rest of a file again where a range was not read by
        parity."""
        limit = self.run_.options.max_errors
        for tid, (error, _) in self.errors.items():
            if tid not in self.set_aside and self.tasks[tid].kind != "range":
                raise self._error(error, self.rejected.get(tid, 0))
        for f, tids in enumerate(self.file_tasks):
            rejected = 0
            for pos, tid in enumerate(tids):
                task, state = self.tasks[tid], self.state[tid]
                if state == "done":
                    rejected += self.rejected.get(tid, 0)
                    if limit is not None and rejected > limit:
                        raise TooManyErrorsError(task.name, rejected, limit)
                    if not task.to_end and not self.by_parity.get(tid, True):
                        self._read_rest_again(f, pos)
                        break
                    continue
                if state == "error":
                    error, by_parity = self.errors[tid]
                    if task.kind == "range" and not task.to_end and not by_parity:
                        self._read_rest_again(f, pos)
                        break
                    raise self._error(error, rejected)
                break  # not written yet: what comes after it is not known to be right

    def _read_rest_again(self, f: int, pos: int) -> None:
        """Range ``pos`` of file ``f`` was not read where counting quotes put its records: its
        end, and the later ranges' starts, may be wrong. Read the file from its start as one
        task; set the later ranges aside (their parts are removed before the commit)."""
        tids = self.file_tasks[f]
        first = self.tasks[tids[pos]]
        for tid in tids[pos:]:
            self.set_aside.add(tid)
        rest = dataclasses.replace(first, index=len(self.tasks), stop=self.run_.sizes[f],
                                   to_end=True,
                                   nbytes=sum(self.tasks[t].nbytes for t in tids[pos:]))
        self.tasks.append(rest)
        self.state[rest.index] = "pending"
        self.queue.appendleft(rest.index)
        self.file_tasks[f] = [*tids[:pos], rest.index]
        for worker in self.pool.workers:
            self._feed(worker)

    def abort_set_aside(self) -> None:
        """Remove the parts of ranges set aside (before the commit: an abort after it is refused)."""
        run = self.run_
        parts = [self.parts.pop(t) for t in sorted(self.set_aside) if t in self.parts]
        if parts and run.writer is not None and run.op is not None:
            run.writer.abort_write(run.op, parts)

    def rows(self) -> int:
        return sum(n for t, n in self.rows_of.items() if t not in self.set_aside)

    def _report(self) -> None:
        done = sum(self.bytes.values())
        self.shown = max(self.shown, min(done, max(self.run_.total - 1, 0)))
        if self.rows_of:
            self.run_.progress.update(self.shown, self.rows())

    def _error(self, error: tuple[Any, ...], rejected: int) -> Exception:
        kind = error[0]
        if kind == "bad_row":
            return BadRowError(error[1], error[2], error[3], error[4])
        if kind == "too_many":
            return TooManyErrorsError(error[1], rejected + error[2], error[3])
        return IngestError(error[2])

    def _died(self, worker: WorkerHandle) -> IngestError:
        what = f"while ingesting {self.tasks[worker.task].describe()}" if worker.task is not None \
            else "before it was given a task"
        return IngestError(f"worker process {worker.number} (pid {worker.process.pid}) "
                           f"{worker.describe_exit()} {what}; nothing was committed (what it had "
                           "written is left for vacuum)")


@contextmanager
def _terminate_as_interrupt(run: _Run) -> Iterator[None]:
    """SIGTERM ends the ingest as Ctrl-C does (workers stopped, nothing committed, said so);
    during the commit it waits for the commit record. Main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum: int, frame: FrameType | None) -> None:
        if run.committing:
            run.terminated = True
            return
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
