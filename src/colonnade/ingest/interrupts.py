"""Ctrl-C during an ingest: say exactly what was committed.

An ingest commits each file once, last. When Ctrl-C (SIGINT) arrives, the pipeline reads the
commit log back to learn whether the file in progress was committed — the interrupt may have
come just after its commit record was written, before the pipeline was told — and raises
:class:`IngestInterrupted` (a ``KeyboardInterrupt``) carrying the result so far: the files
committed, with their versions, and those that were not.

The commit record itself is written with SIGINT held (:func:`interrupts_held`, through
:class:`HeldCommits`, the dataset's store with its ``commit`` wrapped): a store call cut in the
middle could leave its outcome unknown for a while — a Cassandra lightweight transaction still
in flight, a SQLite transaction begun and not ended — and the log read back could then say
"not committed" about a commit that lands a moment later. Held, the interrupt is raised as soon
as the store has answered, and the log is final when it is read.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from colonnade.ingest.pipeline import IngestResult
    from colonnade.storage.base import ChunkStore


class IngestInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped an ingest. ``result`` holds the files done before (and the one in
    progress, if its commit landed); ``pending`` names the inputs not committed; ``unknown`` is
    set, to the reason, when the log could not be read back to tell about the first of them."""

    def __init__(self, result: IngestResult, pending: list[str], unknown: str | None = None) -> None:
        super().__init__(interrupted_message(result, pending, unknown))
        self.result = result
        self.pending = pending
        self.unknown = unknown


def interrupted_message(result: IngestResult, pending: list[str], unknown: str | None = None) -> str:
    """``interrupted: nothing committed to trips`` or ``interrupted after committing trips v3
    (1,000 rows); the rest was not ingested (b.csv and 2 more files)``."""
    committed = [f for f in result.files if f.version is not None]
    if committed:
        versions = sorted({f.version for f in committed if f.version is not None})
        at = f"v{versions[0]}" if len(versions) == 1 else f"v{versions[0]}-v{versions[-1]}"
        rows = sum(f.rows for f in committed)
        what = f"{rows:,} row{'s' if rows != 1 else ''}"
        if len(committed) > 1:
            what += f" from {len(committed)} files"
        head = f"interrupted after committing {result.dataset} {at} ({what})"
    else:
        head = "interrupted" if unknown else f"interrupted: nothing committed to {result.dataset}"
    if unknown is not None and pending:
        return (f"{head}; whether {pending[0]} was committed to {result.dataset} is unknown "
                f"(the commit log could not be read: {unknown})")
    if not committed:
        return head
    if not pending:
        return head + "; that was all of the input"
    rest = pending[0] if len(pending) == 1 else \
        f"{pending[0]} and {len(pending) - 1} more file{'s' if len(pending) > 2 else ''}"
    return head + f"; the rest was not ingested ({rest})"


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold SIGINT while the block runs and raise ``KeyboardInterrupt`` when it ends, if one
    came. Only in the main thread and while Python's own SIGINT handler is installed (a program
    with its own handler keeps it); elsewhere the block just runs."""
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    came: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        came.append(signum)

    signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if came:
            raise KeyboardInterrupt


class HeldCommits:
    """A chunk store whose ``commit`` runs with SIGINT held; everything else is the store's."""

    def __init__(self, store: ChunkStore) -> None:
        self._store = store

    def commit(self, dataset: str, version: int, payload: bytes) -> None:
        with interrupts_held():
            self._store.commit(dataset, version, payload)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)
