"""A worker process of a parallel ingest: reads the tasks it is handed and writes each as a part.

The coordinator (:mod:`colonnade.ingest.parallel`) starts the worker with one end of a pipe and
a stop event. The worker opens the store, then receives the write operation and the dataset's
spec, then tasks (:class:`~colonnade.ingest.tasks.Task`) one at a time until it receives None.
For each task it opens the piece of input, streams its batches into ``Dataset.write_part`` and
answers with messages (plain tuples, so that nothing needs unpickling but built-ins):

* ``("progress", task, bytes, rows, rejected)`` as the writer takes each batch;
* ``("done", task, part_json, rows, rejected, by_parity)`` when the part is written;
* ``("error", task, error, by_parity)`` when the task failed (nothing of it stays stored);
  ``error`` is ``("bad_row", path, line, column, reason)``, ``("too_many", path, count,
  limit)`` or ``("other", kind, message)``; the worker then waits for the next task;
* ``("stopped", task)`` when the coordinator's stop event ended the task early.

``by_parity`` says whether the task's CSV records all ended where counting quotes said (see
:mod:`colonnade.ingest.tasks`). Rejected rows (quarantine) go to a JSON Lines file per task in
the coordinator's scratch directory, in the rejects file format, for the coordinator to gather
in input order. SIGINT is ignored (a terminal sends Ctrl-C to the whole process group: the
coordinator decides what it means and stops the workers); a coordinator that dies closes the
pipe, and the worker exits at its next message, removing what its current task wrote.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from multiprocessing.synchronize import Event

    import pyarrow as pa

    from colonnade.config import WriteSettings
    from colonnade.ingest.base import Reject
    from colonnade.ingest.tasks import Task
    from colonnade.table.dataset import Dataset
    from colonnade.table.operation import WriteOperation


class _Stopped(Exception):
    """The coordinator asked the workers to stop."""


@dataclass(frozen=True)
class WorkerSetup:
    """What every worker of one ingest is started with."""

    uri: str  # the store
    settings: WriteSettings | None
    fmt: str | None
    header: bool  # whole CSV files (not ranges) start with a header record
    quarantine: bool
    max_errors: int | None
    block_size: int | None
    prefetch: int
    scratch: str  # the directory of the per-task rejects files
    #: the coordinator's ``COLONNADE_*`` environment (a worker forked from a long-lived fork
    #: server would otherwise see the server's: settings, fault points)
    env: tuple[tuple[str, str], ...] = ()
    cwd: str = ""  # the coordinator's working directory (relative paths are relative to it)
    threads: bool = True  # parse CSV with pyarrow's threads (not when workers fill the cores)


def worker_main(conn: Connection, stop: Event, setup: WorkerSetup) -> None:
    """The worker process (the target of ``multiprocessing.Process``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for key in [k for k in os.environ if k.startswith("COLONNADE_")]:
        del os.environ[key]
    os.environ.update(dict(setup.env))
    if setup.cwd:
        os.chdir(setup.cwd)
    from colonnade.faults import fault_point
    from colonnade.schema.spec import DatasetSpec
    from colonnade.storage import open_store
    from colonnade.table.dataset import Dataset
    from colonnade.table.operation import WriteOperation

    try:
        try:
            store = open_store(setup.uri)
        except Exception as exc:  # noqa: BLE001 - said to the coordinator, which raises it
            conn.send(("failed", None, str(exc) or type(exc).__name__))
            return
        try:
            conn.send(("ready",))
            first = conn.recv()
            if first is None:
                return
            op = WriteOperation.from_json(first[0])
            target = Dataset(store, DatasetSpec.from_json(first[1]), recorded=False)
            job = _Worker(conn, stop, target, op, setup)
            while (task := conn.recv()) is not None:
                fault_point("worker_task")
                job.run(task)
        finally:
            store.close()
    except (EOFError, BrokenPipeError, ConnectionResetError):
        return  # the coordinator is gone: nothing to report to


class _Worker:
    def __init__(self, conn: Connection, stop: Event, target: Dataset, op: WriteOperation,
                 setup: WorkerSetup) -> None:
        self.conn, self.stop, self.target, self.op, self.setup = conn, stop, target, op, setup
        self.rows = self.rejected = 0

    def run(self, task: Task) -> None:
        from colonnade.errors import BadRowError, TooManyErrorsError
        from colonnade.ingest.rejects import RejectsFile

        setup = self.setup
        rejects = RejectsFile(Path(setup.scratch) / f"{task.index:06d}.jsonl") \
            if setup.quarantine else None
        self.rows = self.rejected = 0
        by_parity: list[bool] = [True]

        def on_reject(reject: Reject) -> None:
            assert rejects is not None
            self.rejected += 1
            rejects.write(reject)
            if setup.max_errors is not None and self.rejected > setup.max_errors:
                raise TooManyErrorsError(task.name, self.rejected, setup.max_errors)

        try:
            with self._open(task, on_reject if rejects is not None else None) as source:
                try:
                    part = self.target.write_part(self.op, self._batches(task, source, by_parity),
                                                  setup.settings)
                finally:
                    by_parity[0] = bool(getattr(source, "by_parity", True))
        except _Stopped:
            self.conn.send(("stopped", task.index))
            return
        except BadRowError as exc:
            error: tuple[Any, ...] = ("bad_row", exc.path, exc.line, exc.column, exc.reason)
        except TooManyErrorsError as exc:
            error = ("too_many", exc.path, exc.count, exc.limit)
        except (EOFError, BrokenPipeError, ConnectionResetError):
            raise
        except Exception as exc:  # noqa: BLE001 - every failure is reported, one line
            from colonnade.errors import ColonnadeError

            kind = "colonnade" if isinstance(exc, ColonnadeError) else type(exc).__name__
            message = str(exc) if isinstance(exc, ColonnadeError | OSError) else \
                f"{type(exc).__name__}: {exc}"
            error = ("other", kind, message)
        else:
            self.conn.send(("done", task.index, part.to_json(), part.rows, self.rejected,
                            by_parity[0]))
            return
        finally:
            if rejects is not None:
                rejects.close()
        self.conn.send(("error", task.index, error, by_parity[0]))

    def _open(self, task: Task, on_reject: Any) -> Any:
        from colonnade.ingest.sources import open_source

        setup, layout = self.setup, task.layout
        if layout is None:  # Parquet, Arrow IPC: the file's own schema, conformed when written
            return open_source(Path(task.path), setup.fmt, on_reject=on_reject, name=task.name,
                               row_groups=task.row_groups or None)
        # CSV: the names and types the coordinator found, the header (if any) skipped
        ranged = task.kind == "range"
        return open_source(Path(task.path), setup.fmt, delimiter=layout.delimiter,
                           header=setup.header and not ranged, columns=layout.schema.names,
                           schema=layout.schema, quote_char=layout.quote_char,
                           on_reject=on_reject, block_size=setup.block_size, name=task.name,
                           byte_range=(task.start, task.stop) if ranged else None,
                           first_line=task.first_line if ranged else 1,
                           newline=layout.newline if ranged else None, threads=setup.threads)

    def _batches(self, task: Task, source: Any, by_parity: list[bool]) -> Iterator[pa.RecordBatch]:
        """The source's batches (read one ahead in a thread), with progress sent as the writer
        takes each: the task's bytes parsed so far (in proportion), rows, rows rejected."""
        from colonnade.ingest.pipeline import read_ahead

        span = max(task.stop - task.start if task.kind == "range" else source.size, 1)
        reader = read_ahead(source.read(), self.setup.prefetch)
        try:
            for batch, position in reader:
                if self.stop.is_set():
                    raise _Stopped
                self.rows += batch.num_rows
                done = min(position * task.nbytes // span, task.nbytes)
                self.conn.send(("progress", task.index, done, self.rows, self.rejected))
                yield batch
            by_parity[0] = bool(getattr(source, "by_parity", True))
        finally:
            reader.close()
