"""Committing a stream's micro-batches, in order, in a thread of their own.

While micro-batch N is written and committed (its columns encoded, its segments stored, its
commit record written), the loop consumes and decodes micro-batch N+1; a compaction, when due,
runs in a third thread, one at a time (it removes only segments no append touches: it never
conflicts with the stream's commits, and never delays them). At most one micro-batch is in flight: handing over the next one waits for the
previous one's outcome, so commits keep the order of the offsets they record and memory holds at
most two micro-batches.

A micro-batch whose commit conflicts (another consumer had committed one of its partitions'
positions) is dropped, and so must be the one the loop is filling, which continues from
offsets that were never committed: :meth:`Committer.wait` says so, and the loop seeks to the
log's positions again. A commit the store refuses is retried with backoff until it lands or the
stream is stopped.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import pyarrow as pa

from colonnade.config import WriteSettings
from colonnade.errors import CommitConflictError, StoreError
from colonnade.faults import fault_point
from colonnade.stream.options import (
    CommitEvent,
    StreamError,
    StreamOptions,
    StreamReject,
    StreamReport,
)
from colonnade.table.commits import position_id

if TYPE_CHECKING:
    from colonnade.table.dataset import AppendResult, Dataset


MICRO_BATCH_ZSTD_LEVEL = 1


@dataclass
class MicroBatch:
    """What was consumed since the last hand-over."""

    batches: list[pa.RecordBatch] = field(default_factory=list)
    rows: int = 0
    nbytes: int = 0
    rejects: list[StreamReject] = field(default_factory=list)
    offsets: dict[int, int] = field(default_factory=dict)  # partition -> next offset
    oldest_ms: int | None = None
    newest_ms: int | None = None

    @property
    def events(self) -> int:
        return self.rows + len(self.rejects)

    def __bool__(self) -> bool:
        return bool(self.offsets)


class Committer:
    """Commits micro-batches of one stream, one at a time (see the module docstring)."""

    def __init__(self, ds: Dataset, options: StreamOptions, report: StreamReport, stop: threading.Event,
                 on_commit: Callable[[CommitEvent], None] | None,
                 on_problem: Callable[[str], None]) -> None:
        self.ds, self.options, self.report, self.stop = ds, options, report, stop
        self.topic = options.topic
        self.on_commit, self.on_problem = on_commit, on_problem
        #: the version the positions of the next micro-batch were read at (see Dataset.append)
        self.read_version = ds.snapshot().version
        self.committed: dict[int, int] = {}  # partition -> next offset, as committed or read
        self.last_commit_at: float | None = None
        self.rejects_path = Path(options.rejects or f"{ds.name}.rejects.jsonl")
        self._rejects: TextIO | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="colonnade-stream-commit")
        self._pending: Future[bool] | None = None
        self._in_flight: MicroBatch | None = None
        # compaction runs beside the commits (it conflicts with no append), one at a time
        self._compactor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="colonnade-stream-compact")
        self._compacting: Future[None] | None = None

    @property
    def in_flight_events(self) -> int:
        return self._in_flight.events if self._in_flight is not None else 0

    def submit(self, batch: MicroBatch) -> None:
        """Commit ``batch`` in the background (call :meth:`wait` first)."""
        assert self._pending is None
        self._in_flight = batch
        self._pending = self._pool.submit(self.commit, batch)

    def wait(self) -> bool:
        """Wait for the micro-batch in flight; False if it was dropped (a conflict). Raises what
        its commit raised."""
        pending, self._pending = self._pending, None
        if pending is None:
            return True
        try:
            return pending.result()
        finally:
            self._in_flight = None

    def close(self) -> None:
        try:
            self.wait()
        finally:
            self._pool.shutdown(wait=True)
            self._compactor.shutdown(wait=True)
            if self._rejects is not None:
                self._rejects.close()
                self._rejects = None

    # -- one micro-batch (in the commit thread, or inline during a rebalance)
    def commit(self, b: MicroBatch) -> bool:
        """Write ``b``'s rejects, then its rows and positions in one commit; False if another
        consumer had committed one of its positions since they were read (nothing committed)."""
        if not b:
            return True
        self._write_rejects(b.rejects)
        positions = {position_id(self.topic, p): o for p, o in b.offsets.items()}
        info = {"topic": self.topic, "events": b.events, "rejected": len(b.rejects),
                "offsets": {str(p): o for p, o in sorted(b.offsets.items())}}
        result = self._append(b, positions, info)
        if result is None:
            self.report.conflicts += 1
            return False
        fault_point("after_stream_commit")
        assert result.version is not None
        self.read_version = result.version
        self.committed.update(b.offsets)
        self.last_commit_at = time.time()
        r = self.report
        r.events += b.events
        r.rows += b.rows
        r.rejected += len(b.rejects)
        r.commits += 1
        r.last_version = result.version
        r.offsets.update(b.offsets)
        if self.on_commit is not None:
            self.on_commit(CommitEvent(result.version, b.rows, len(b.rejects), self.last_commit_at,
                                       dict(b.offsets), b.oldest_ms, b.newest_ms))
        if self._compacting is None or self._compacting.done():
            self._compacting = self._compactor.submit(self._maybe_compact)
        return True

    def _append(self, b: MicroBatch, positions: dict[str, int], info: dict[str, object]) -> AppendResult | None:
        wait = 0.5
        while True:
            try:
                if self._log_lost_commits():
                    return None
                return self.ds.append(b.batches, positions=positions, read_version=self.read_version,
                                      kind="stream", info=info, settings=self._write_settings())
            except CommitConflictError:
                return None
            except StoreError as exc:
                if self.stop.is_set():
                    raise StreamError(
                        f"stopped while the store was unavailable ({exc}): the last {b.events} events "
                        f"were not committed; the next start consumes them again") from None
                self.report.retries += 1
                self.on_problem(f"store unavailable, retrying in {wait:.1f} s: {exc}")
                self.stop.wait(wait)
                wait = min(wait * 2, self.options.retry_max)

    def _write_settings(self) -> WriteSettings:
        """The dataset's, but a micro-batch compressed with zstd is written at level 1: it is a
        small segment that compaction rewrites at the dataset's level soon after (a third less
        encoding time for ~5 % more bytes, for a while)."""
        spec = self.ds.spec
        return WriteSettings.from_env(segment_rows=spec.segment_rows, compression=spec.compression,
                                      compression_level=MICRO_BATCH_ZSTD_LEVEL if spec.compression == "zstd" else None)

    def _log_lost_commits(self) -> bool:
        """Whether the store's log lost versions it had acknowledged, up to the one this stream
        read or committed last (a Cassandra node that crashed before syncing its commit log).
        If so the micro-batch is dropped like a conflicting one, and every partition consumes
        again from the positions the log kept: the events of the lost commits are stored again."""
        from colonnade.table.dataset import Dataset

        latest = self.ds.version
        if latest >= self.read_version:
            return False
        self.on_problem(f"the store lost versions {latest + 1}-{self.read_version} of {self.ds.name} it "
                        f"had acknowledged: consuming again from the positions of version {latest}")
        self.ds = Dataset(self.ds.store, self.ds.spec)  # the cached state holds the lost versions
        return True

    def _maybe_compact(self) -> None:
        from colonnade.table.compaction import small_segments
        from colonnade.table.dataset import Dataset

        ds = Dataset(self.ds.store, self.ds.spec)  # its own object: the commit thread uses self.ds
        try:  # the store may have gone away since the commit: a later one tries again
            groups = small_segments(ds.snapshot(), ds.spec.segment_rows)
            due = [p for p, segs in groups.items() if len(segs) >= self.options.compact_segments]
            if not due:
                return
            result = ds.compact(partitions=due)
        except CommitConflictError:
            return  # another process compacted them meanwhile
        except StoreError as exc:
            self.on_problem(f"compaction failed (will be tried again): {exc}")
            return
        if result.version is not None:
            self.report.compactions += 1

    def _write_rejects(self, rejects: list[StreamReject]) -> None:
        """Append the rejects durably before the commit that moves past them."""
        if not rejects:
            return
        if self._rejects is None:
            self.rejects_path.parent.mkdir(parents=True, exist_ok=True)
            self._rejects = open(self.rejects_path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
            self.report.rejects_path = str(self.rejects_path)
        self._rejects.write("".join(json.dumps(r.to_dict(), ensure_ascii=False) + "\n" for r in rejects))
        self._rejects.flush()
        os.fsync(self._rejects.fileno())
        fault_point("after_rejects")
