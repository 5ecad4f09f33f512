"""The worker processes of a parallel ingest: started, fed, watched and stopped by the coordinator.

Workers are started with the ``forkserver`` method: a fresh interpreter (pyarrow's and the
store driver's threads make ``fork`` of the coordinator unsafe) that imports the worker's
modules once and then forks each worker, which so starts in milliseconds rather than importing
pyarrow again. Each worker has its own duplex pipe — a worker killed in the
middle of a message closes its pipe, which the coordinator reads as the end of that worker,
never as a half message it waits on forever — and one shared stop event. Workers start first
thing, so that their interpreters import and connect while the coordinator digests and plans
the input. :meth:`Pool.receive` returns the workers' messages, :meth:`Pool.dead` a worker that died
without being let go; :meth:`Pool.shutdown` ends them: asked to stop
(they remove what their current task wrote), then terminated if they do not exit in time.
"""

from __future__ import annotations

import multiprocessing
import signal
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import TYPE_CHECKING, Any

from colonnade.ingest.worker import WorkerSetup, worker_main

if TYPE_CHECKING:
    from multiprocessing.process import BaseProcess

#: What the fork server imports once, for every worker it forks (no thread is started by these
#: imports: a fork copies only the thread that forks). ``__main__``: the program's main module,
#: which each worker would otherwise import again (as ``spawn`` does).
PRELOAD = ("__main__", "colonnade.ingest.worker", "colonnade.ingest.pipeline",
           "colonnade.ingest.sources", "colonnade.table.operation", "colonnade.storage.sqlite")


def prestart() -> None:
    """Have the fork server start importing now, without waiting for it (a program about to run
    a parallel ingest calls this before its own imports, so that both import at once)."""
    from multiprocessing import forkserver

    multiprocessing.get_context("forkserver").set_forkserver_preload(list(PRELOAD))
    forkserver.ensure_running()

#: Seconds workers get to stop on their own (removing what their current task wrote).
STOP_SECONDS = 15.0

#: How often (seconds) the coordinator looks at its workers when none has anything to say.
POLL_SECONDS = 0.25


@dataclass
class WorkerHandle:
    """One worker process as the coordinator sees it."""

    number: int  # 1-based
    process: BaseProcess
    conn: Connection
    task: int | None = None  # the task it was handed and has not answered
    ready: bool = False  # connected to the store, waiting for tasks
    closed: bool = False  # its pipe is closed (it exited or died)
    exited: bool = False  # it was let go: its end is no news

    def describe_exit(self) -> str:
        code = self.process.exitcode
        if code is None:
            return "stopped answering"
        if code < 0:
            try:
                return f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"was killed by signal {-code}"
        return f"exited with status {code}"


class Pool:
    """``n`` worker processes started with ``setup``, in a thread: starting the first one waits
    for the fork server's imports, which so overlap what the coordinator does meanwhile
    (:meth:`ready` waits for the start)."""

    def __init__(self, n: int, setup: WorkerSetup) -> None:
        self._ctx = ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(list(PRELOAD))
        self.stop_event = ctx.Event()
        self.workers: list[WorkerHandle] = []
        self._n, self._setup = n, setup
        self._failed: BaseException | None = None
        self._starting = threading.Thread(target=self._start, name="colonnade-ingest-start",
                                          daemon=True)
        self._starting.start()

    def _start(self) -> None:
        try:
            for i in range(self._n):
                mine, theirs = self._ctx.Pipe(duplex=True)
                process = self._ctx.Process(
                    target=worker_main, args=(theirs, self.stop_event, self._setup),
                    name=f"colonnade-ingest-worker-{i + 1}", daemon=True)
                process.start()
                theirs.close()
                self.workers.append(WorkerHandle(i + 1, process, mine))
        except BaseException as exc:  # noqa: BLE001 - raised by ready(), in the coordinator
            self._failed = exc

    def ready(self) -> None:
        """Wait until every worker process is started; raise what failed to start one."""
        self._starting.join()
        if self._failed is not None:
            raise self._failed

    def send(self, worker: WorkerHandle, message: Any) -> None:
        try:
            worker.conn.send(message)
        except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
            worker.closed = True  # its death is seen by receive()

    def begin(self, op_json: str, spec_json: str) -> None:
        """Hand every worker the write operation and the dataset's spec."""
        for w in self.workers:
            self.send(w, (op_json, spec_json))

    def receive(self, timeout: float = POLL_SECONDS) -> list[tuple[WorkerHandle, tuple[Any, ...]]]:
        """Messages that arrived within ``timeout``, in order per worker."""
        live = {w.conn: w for w in self.workers if not w.closed}
        out: list[tuple[WorkerHandle, tuple[Any, ...]]] = []
        if not live:  # every pipe is closed: wait for the processes to end
            wait([w.process.sentinel for w in self.workers if w.process.is_alive()], timeout)
            return out
        for conn in wait(list(live), timeout):
            out.extend(self._drain(live[conn]))  # type: ignore[index]
        return out

    def _drain(self, worker: WorkerHandle) -> list[tuple[WorkerHandle, tuple[Any, ...]]]:
        out: list[tuple[WorkerHandle, tuple[Any, ...]]] = []
        while not worker.closed:
            try:
                if not worker.conn.poll():
                    break
                out.append((worker, worker.conn.recv()))
            except (EOFError, OSError):
                worker.closed = True  # it exited or died: everything it sent has been read
        return out

    def dead(self) -> tuple[WorkerHandle | None, list[tuple[WorkerHandle, tuple[Any, ...]]]]:
        """A worker whose process ended while it was still needed, with its last messages."""
        for w in self.workers:
            if not w.exited and (w.closed or not w.process.is_alive()):
                last = self._drain(w)
                w.process.join(1.0)
                return w, last
        return None, []

    def shutdown(self, stop: bool, seconds: float = STOP_SECONDS) -> list[tuple[WorkerHandle, tuple[Any, ...]]]:
        """Let every worker go (``stop``: also end the tasks they are on) and wait for them to
        exit, then terminate those that did not; returns the messages received meanwhile."""
        self._starting.join()
        if stop:
            self.stop_event.set()
        for w in self.workers:
            w.exited = True
            if not w.closed:
                self.send(w, None)
        out: list[tuple[WorkerHandle, tuple[Any, ...]]] = []
        deadline = time.monotonic() + seconds
        while any(w.process.is_alive() for w in self.workers) and time.monotonic() < deadline:
            out.extend(self.receive(min(POLL_SECONDS, max(deadline - time.monotonic(), 0.0))))
        for w in self.workers:
            if w.process.is_alive():
                w.process.terminate()
        for w in self.workers:
            w.process.join(2.0)
            if w.process.is_alive():
                w.process.kill()
                w.process.join(2.0)
            if not w.closed:
                try:
                    while w.conn.poll():
                        out.append((w, w.conn.recv()))
                except (EOFError, OSError):
                    pass
            w.conn.close()
            w.closed = True
        return out
