"""Fault injection for crash tests: named points in the write path that can kill the process.

A fault point is a no-op unless ``$COLONNADE_FAULTS`` is set. Its value is a comma-separated
list of ``NAME:N[:ACTION]``: the N-th time this process reaches point ``NAME``, ACTION happens —
``kill`` (the default: SIGKILL this process, as a power cut or ``kill -9`` would) or ``stop``
(SIGSTOP this process, so a test can act while it is frozen mid-write and then SIGCONT it;
once continued, the stopped thread waits ``STOP_SETTLE`` seconds before it goes on, so that a
signal sent while the process was frozen is taken at the point, whichever thread the kernel
hands it to)::

    COLONNADE_FAULTS="after_chunks:3" colonnade ingest t big.csv     # dies after the 3rd segment

Points (in the order an append reaches them):

``after_segment_row``  a segment-index row is written, its chunks are not (writer thread)
``after_chunks``       a segment's chunks are written (writer thread)
``before_commit``      every segment is stored, the commit record is not (each attempt)
``after_commit``       the commit record is written, the caller has not been told

Point of a worker process of a parallel ingest (``colonnade ingest --workers N``; each worker
counts its own passes, and the coordinator never reaches it, so ``before_commit`` kills only
the coordinator and ``worker_task`` only workers):

``worker_task``        a worker was handed a task (the N-th this worker takes) and has not
                       started it: the parts of its earlier tasks are written and handed back

Points of a stream (``colonnade stream``), in the order a micro-batch reaches them:

``after_poll``         a poll's messages are decoded and buffered, nothing written
``after_rejects``      the micro-batch's bad messages are in the rejects file, nothing committed
``after_stream_commit`` the micro-batch is committed, the consumer group's offsets are not
"""

from __future__ import annotations

import os
import signal
import threading
import time
from functools import lru_cache

ENV = "COLONNADE_FAULTS"
POINTS = ("after_segment_row", "after_chunks", "before_commit", "after_commit",
          "worker_task", "after_poll", "after_rejects", "after_stream_commit")
ACTIONS = {"kill": signal.SIGKILL, "stop": signal.SIGSTOP}
STOP_SETTLE = 0.25

_counts: dict[str, int] = {}
_lock = threading.Lock()


@lru_cache(maxsize=8)
def parse(spec: str) -> tuple[tuple[str, int, str], ...]:
    """``"a:3,b:1:stop"`` → ``(("a", 3, "kill"), ("b", 1, "stop"))``; ValueError if malformed."""
    faults = []
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        name, _, rest = item.partition(":")
        count, _, action = rest.partition(":")
        action = action or "kill"
        if name not in POINTS or not count.isdigit() or int(count) < 1 or action not in ACTIONS:
            raise ValueError(f"{ENV}: bad fault {item!r} (use POINT:N[:kill|stop], POINT one of "
                             f"{', '.join(POINTS)})")
        faults.append((name, int(count), action))
    return tuple(faults)


def fault_point(name: str) -> None:
    """Count one pass through point ``name`` and act if ``$COLONNADE_FAULTS`` says so."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    with _lock:
        n = _counts[name] = _counts.get(name, 0) + 1
    for point, count, action in parse(spec):
        if point == name and count == n:
            if action == "stop":
                # directed at this thread, so that it stops before it returns from here (a stop
                # sent to the process may be taken by another thread while this one runs on)
                signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)
                # continued. A SIGINT sent while frozen is pending for the whole process: any
                # thread may take it, and Python runs its handler in the main thread at the
                # next check. Without a pause the main thread could run on into a commit (whose
                # SIGINT is held) before that, and the interrupt would land after the point.
                time.sleep(STOP_SETTLE)
            else:
                os.kill(os.getpid(), ACTIONS[action])  # SIGKILL takes every thread at once


def reset() -> None:
    """Forget how often each point was reached (for a process that runs several appends)."""
    with _lock:
        _counts.clear()
