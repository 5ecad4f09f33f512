"""The micro-batch loop: consume, decode, and commit rows with their Kafka positions, exactly once.

Every commit interval the rows decoded since the last commit are appended in one commit that
also records, as transaction markers, the next offset of every Kafka partition they came from
(``kafka:<topic>:<partition>``, see :func:`~colonnade.table.commits.position_id`). The log is
the only record of where the stream is: on start and on every partition assignment the stream
seeks each partition to the position its dataset's log recorded (the earliest kept offset if
none), whatever the consumer group's offsets say. A crash loses only what was not committed,
and that is consumed again from the recorded positions: each event is stored once.

Two consumers of one partition (one that lost it in a rebalance and did not know yet) can't both
commit it: each commit declares the positions it advances and the version it read them at, and a
commit made since that recorded one of the same positions makes it fail (see
:mod:`colonnade.table.conflicts`). The loser drops its micro-batch and seeks to the log's
positions again.

Bad messages go to the rejects file (``quarantine``) before the commit that moves past them —
after a crash a rejected message may be written twice, never lost — or stop the stream
(``strict``) with nothing of the micro-batch committed. A commit the store refuses (a node down)
is retried with backoff, consuming nothing meanwhile; the decoded rows wait in memory, which the
memory limit bounds. After each commit, a partition with ``compact_segments`` or more small
segments is compacted (:mod:`colonnade.table.compaction`), so that the segment count stays
bounded however long the stream runs.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import pyarrow as pa

from colonnade.errors import CommitConflictError, DatasetNotFoundError, StoreError
from colonnade.faults import fault_point
from colonnade.schema.types import logical_schema
from colonnade.stream.decode import Decoder
from colonnade.stream.kafka_source import KafkaSource, Polled
from colonnade.stream.options import (
    CommitEvent,
    StreamError,
    StreamOptions,
    StreamReject,
    StreamReport,
    StreamStatus,
)
from colonnade.table.commits import position_id

if TYPE_CHECKING:
    from colonnade.store import Store
    from colonnade.table.dataset import AppendResult, Dataset

OnStatus = Callable[[StreamStatus], None]
OnCommit = Callable[[CommitEvent], None]


@dataclass
class MicroBatch:
    """What was consumed since the last commit."""

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


def run_stream(store: Store, dataset: str, options: StreamOptions, on_status: OnStatus | None = None,
               on_commit: OnCommit | None = None, stop: threading.Event | None = None) -> StreamReport:
    """Consume ``options.topic`` into ``dataset`` until ``stop`` is set, ``max_events`` were
    consumed or the topic was idle for ``stop_when_idle`` seconds; what is buffered then is
    committed. Raises StreamError for a bad message in strict mode (see the module docstring)."""
    options.check()
    return Stream(store, dataset, options, on_status, on_commit, stop).run()


class Stream:
    def __init__(self, store: Store, dataset: str, options: StreamOptions, on_status: OnStatus | None,
                 on_commit: OnCommit | None, stop: threading.Event | None) -> None:
        self.store, self.options = store, options
        self.on_status, self.on_commit = on_status, on_commit
        self.stop = stop or threading.Event()
        self.ds, schema = self._open(dataset)
        self.name = self.ds.name
        self.decoder = Decoder(options.format, schema)
        self.topic = options.topic
        self.batch = MicroBatch()
        self.report = StreamReport(self.name, self.topic)
        self.read_version = self.ds.snapshot().version
        self.committed: dict[int, int] = {}  # partition -> next offset, as last committed or read
        self.rejects_path = Path(options.rejects or f"{self.name}.rejects.jsonl")
        self._rejects: TextIO | None = None
        self._committing = False
        self._revoking = False
        self.last_commit_at: float | None = None
        self.source: KafkaSource | None = None

    def _open(self, name: str) -> tuple[Dataset, pa.Schema]:
        """The dataset (created from the options' schema if missing) and the schema messages
        are decoded with."""
        given = self.options.schema
        try:
            ds = self.store.dataset(name)
        except DatasetNotFoundError:
            if given is None:
                raise StreamError(f"dataset {name} does not exist: give its columns to create it") from None
            nullable = pa.schema([f.with_nullable(True) for f in given])
            ds = self.store.create_dataset(name, nullable, partition_by=self.options.partition_by,
                                           sort_by=list(self.options.sort_by) or None, exist_ok=True)
            return ds, given
        have = logical_schema(ds.schema)
        if given is None:
            return ds, have
        diff = [f"{f.name}: {f.type} (dataset: {have.field(f.name).type})" if f.name in have.names
                else f"{f.name} (not a column of {ds.name})" for f in given
                if f.name not in have.names or have.field(f.name).type != f.type]
        if diff:
            raise StreamError(f"the message columns don't match dataset {ds.name}: " + "; ".join(diff))
        return ds, given

    # -- the loop
    def run(self) -> StreamReport:
        opts = self.options
        started = time.monotonic()
        self.source = KafkaSource(self.topic, opts.bootstrap, opts.group or f"colonnade-{self.name}",
                                  opts.memory_limit // 4, self._starts, self._revoked, self._lost,
                                  opts.consumer)
        interval = opts.commit_interval
        status_every = opts.status_interval or interval
        deadline = time.monotonic() + interval
        next_status = time.monotonic() + status_every
        last_data = time.monotonic()
        status_events = 0
        try:
            while not self.stop.is_set():
                remaining = None if opts.max_events is None else opts.max_events - self.report.events - self.batch.events
                if remaining is not None and remaining <= 0:
                    self.report.stopped = "max-events"
                    break
                now = time.monotonic()
                polled = self.source.consume(min(opts.poll_messages, remaining or opts.poll_messages),
                                             max(0.01, min(0.25, deadline - now)))
                now = time.monotonic()
                if len(polled):
                    self._add(polled)
                    fault_point("after_poll")
                    last_data = now
                if now >= deadline or self.batch.nbytes >= opts.memory_limit:
                    self._commit()
                    deadline = time.monotonic() + interval
                if opts.stop_when_idle is not None and now - last_data >= opts.stop_when_idle:
                    self.report.stopped = "idle"
                    break
                if now >= next_status:
                    done = self.report.events + self.batch.events
                    self._status(done - status_events, now - next_status + status_every)
                    status_events, next_status = done, now + status_every
            else:
                self.report.stopped = "stopped"
            self._commit()
        finally:
            self.source.close()
            self._close_rejects()
            self.report.seconds = time.monotonic() - started
        return self.report

    # -- the group's callbacks
    def _starts(self, partitions: list[int]) -> dict[int, int | None]:
        """Where newly assigned partitions start: the positions the log recorded."""
        self.batch = MicroBatch()  # anything buffered is consumed again from the log's positions
        snapshot = self.ds.snapshot()
        self.read_version = snapshot.version
        recorded = self.ds.positions(snapshot)
        out = {p: recorded.get(position_id(self.topic, p)) for p in partitions}
        self.committed.update({p: o for p, o in out.items() if o is not None})
        return out

    def _revoked(self, partitions: list[int]) -> None:
        if self._committing:
            return
        self._revoking = True
        try:
            self._commit()  # what was consumed from them is committed before they move on
        except StoreError:
            self.batch = MicroBatch()  # not committed: the next owner consumes it again
        finally:
            self._revoking = False

    def _lost(self, partitions: list[int]) -> None:
        self.batch = MicroBatch()  # someone else owns them now: it consumes these again

    # -- a poll
    def _add(self, polled: Polled) -> None:
        decoded = self.decoder.decode(polled.payloads)
        b = self.batch
        if decoded.bad:
            rejects = [StreamReject(self.topic, int(polled.partitions[x.index]), int(polled.offsets[x.index]),
                                    x.reason, polled.payloads[x.index]) for x in decoded.bad]
            if self.options.on_error == "strict":
                first = rejects[0]
                self.batch = MicroBatch()
                raise StreamError(
                    f"bad message in {first.topic} partition {first.partition} at offset {first.offset}: "
                    f"{first.reason}; nothing after version {self.read_version} of {self.name} was "
                    f"committed (the stream resumes from the last committed offsets)")
            b.rejects.extend(rejects)
        if decoded.batch is not None:
            b.batches.append(decoded.batch)
            b.rows += decoded.batch.num_rows
            b.nbytes += decoded.batch.nbytes
        b.offsets.update(polled.next_offsets())
        stamps = polled.timestamps[polled.timestamps > 0]
        if len(stamps):
            lo, hi = int(stamps.min()), int(stamps.max())
            b.oldest_ms = lo if b.oldest_ms is None else min(b.oldest_ms, lo)
            b.newest_ms = hi if b.newest_ms is None else max(b.newest_ms, hi)

    # -- a commit
    def _commit(self) -> None:
        b = self.batch
        if not b:
            return
        self._committing = True
        try:
            self._write_rejects(b.rejects)
            positions = {position_id(self.topic, p): o for p, o in b.offsets.items()}
            info = {"topic": self.topic, "events": b.events, "rejected": len(b.rejects),
                    "offsets": {str(p): o for p, o in sorted(b.offsets.items())}}
            result = self._append(b, positions, info)
            if result is None:
                return
            fault_point("after_stream_commit")
        finally:
            self._committing = False
        self.batch = MicroBatch()
        assert result.version is not None
        self.read_version = result.version
        self.committed.update(b.offsets)
        r = self.report
        r.events += b.events
        r.rows += b.rows
        r.rejected += len(b.rejects)
        r.commits += 1
        r.last_version = result.version
        self.last_commit_at = time.time()
        r.offsets.update(b.offsets)
        assert self.source is not None
        self.source.commit_group_offsets(b.offsets)
        if self.on_commit is not None:
            self.on_commit(CommitEvent(result.version, b.rows, len(b.rejects), time.time(), dict(b.offsets),
                                       b.oldest_ms, b.newest_ms))
        self._maybe_compact(b)

    def _append(self, b: MicroBatch, positions: dict[str, int], info: dict[str, object]) -> AppendResult | None:
        """Append the micro-batch, retrying while the store is unavailable; None if another
        consumer had committed these positions (the batch is dropped and every partition seeks
        to the log's positions again)."""
        wait = 0.5
        while True:
            try:
                return self.ds.append(b.batches, positions=positions, read_version=self.read_version,
                                      kind="stream", info=info)
            except CommitConflictError:
                self.report.conflicts += 1
                self.batch = MicroBatch()
                self._reseek()
                return None
            except StoreError as exc:
                if self.stop.is_set():
                    raise StreamError(
                        f"stopped while the store was unavailable ({exc}): the last {b.events} events "
                        f"were not committed; the next start consumes them again") from None
                self.report.retries += 1
                self._status(0, 0.0, problem=f"store unavailable, retrying in {wait:.1f} s: {exc}")
                self.stop.wait(wait)
                wait = min(wait * 2, self.options.retry_max)

    def _reseek(self) -> None:
        assert self.source is not None
        if self._revoking:
            return  # the partitions are being taken away: the next assignment seeks
        snapshot = self.ds.snapshot()
        self.read_version = snapshot.version
        recorded = self.ds.positions(snapshot)
        starts = {p: recorded.get(position_id(self.topic, p)) for p in self.source.assigned}
        self.committed.update({p: o for p, o in starts.items() if o is not None})
        self.source.seek(starts)

    def _maybe_compact(self, b: MicroBatch) -> None:
        from colonnade.table.compaction import small_segments

        snapshot = self.ds.snapshot()
        groups = small_segments(snapshot, self.ds.spec.segment_rows)
        due = [p for p, segs in groups.items() if len(segs) >= self.options.compact_segments]
        if not due:
            return
        try:
            result = self.ds.compact(partitions=due)
        except CommitConflictError:
            return  # another process compacted them meanwhile
        except StoreError as exc:
            self._status(0, 0.0, problem=f"compaction failed (will be tried again): {exc}")
            return
        if result.version is not None:
            self.report.compactions += 1

    # -- rejects and status
    def _write_rejects(self, rejects: list[StreamReject]) -> None:
        if not rejects:
            return
        if self._rejects is None:
            self.rejects_path.parent.mkdir(parents=True, exist_ok=True)
            self._rejects = open(self.rejects_path, "a", encoding="utf-8")  # noqa: SIM115 - closed in run()
            self.report.rejects_path = str(self.rejects_path)
        self._rejects.write("".join(json.dumps(r.to_dict(), ensure_ascii=False) + "\n" for r in rejects))
        self._rejects.flush()
        os.fsync(self._rejects.fileno())
        fault_point("after_rejects")

    def _close_rejects(self) -> None:
        if self._rejects is not None:
            self._rejects.close()
            self._rejects = None

    def _status(self, events: int, seconds: float, problem: str | None = None) -> None:
        if self.on_status is None:
            return
        assert self.source is not None
        positions = dict(self.committed)
        positions.update(self.batch.offsets)
        lag = self.source.lag(positions, timeout=0.2) if self.source.problem is None and problem is None else {}
        r = self.report
        self.on_status(StreamStatus(time.time(), r.events + self.batch.events, r.rejected + len(self.batch.rejects),
                                    r.commits, events / seconds if seconds > 0 else 0.0, lag, r.last_version,
                                    self.last_commit_at, self.batch.events, problem or self.source.problem))
