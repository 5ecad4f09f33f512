"""The worker processes of a parallel ingest: started, fed, watched and stopped by the coordinator.

Workers are started with the ``spawn`` method (a fresh interpreter: pyarrow's and the store
driver's threads make ``fork`` unsafe), each with its own duplex pipe — a worker killed in the
middle of a message closes its pipe, which the coordinator reads as the end of that worker,
never as a half message it waits on forever — and one shared stop event. Workers start first
thing, so that their interpreters import and connect while the coordinator digests and plans
the input. :meth:`Pool.receive` returns the workers' messages and notices a worker that died
(its process sentinel) without saying goodbye; :meth:`Pool.shutdown` ends them: asked to stop
(they remove what their current task wrote), then terminated if they do not exit in time.
"""

from __future__ import annotations

import multiprocessing
import signal
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import TYPE_CHECKING, Any

from colonnade.ingest.worker import WorkerSetup, worker_main

if TYPE_CHECKING:
    from multiprocessing.process import BaseProcess

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
    messages: list[tuple[Any, ...]] = field(default_factory=list)

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


class WorkerDied(Exception):
    """A worker process ended without being asked to."""

    def __init__(self, worker: WorkerHandle) -> None:
        super().__init__(f"worker {worker.number} {worker.describe_exit()}")
        self.worker = worker


class Pool:
    """``n`` worker processes started with ``setup``."""

    def __init__(self, n: int, setup: WorkerSetup) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.stop_event = ctx.Event()
        self.workers: list[WorkerHandle] = []
        try:
            for i in range(n):
                mine, theirs = ctx.Pipe(duplex=True)
                process = ctx.Process(target=worker_main, args=(theirs, self.stop_event, setup),
                                      name=f"colonnade-ingest-worker-{i + 1}", daemon=True)
                process.start()
                theirs.close()
                self.workers.append(WorkerHandle(i + 1, process, mine))
        except BaseException:
            self.shutdown(stop=True, seconds=0)
            raise

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
        """Messages that arrived within ``timeout`` (in order per worker); WorkerDied for a worker
        whose process ended while it was still needed (after its last messages were returned)."""
        live = {w.conn: w for w in self.workers if not w.closed}
        out: list[tuple[WorkerHandle, tuple[Any, ...]]] = []
        if live:
            for conn in wait(list(live), timeout):
                worker = live[conn]  # type: ignore[index]
                while True:
                    try:
                        if not worker.conn.poll():
                            break
                        out.append((worker, worker.conn.recv()))
                    except (EOFError, OSError):
                        worker.closed = True
                        break
        else:
            time.sleep(timeout)
        if out:
            return out
        for w in self.workers:
            if not w.exited and (w.closed or not w.process.is_alive()):
                w.process.join(1.0)
                raise WorkerDied(w)
        return out

    def shutdown(self, stop: bool, seconds: float = STOP_SECONDS) -> list[tuple[WorkerHandle, tuple[Any, ...]]]:
        """Let every worker go (``stop``: also end the tasks they are on) and wait for them to
        exit, then terminate those that did not; returns the messages received meanwhile."""
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
