"""The micro-batch loop: consume, decode, and commit rows with their Kafka positions, exactly once.

Every commit interval the rows decoded since the last commit are appended in one commit that
also records, as transaction markers, the next offset of every Kafka partition they came from
(``position:kafka:<topic>:<partition>``, see :func:`~colonnade.table.commits.position_id`). The log is
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

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import pyarrow as pa

from colonnade.errors import DatasetNotFoundError, StoreError
from colonnade.faults import fault_point
from colonnade.schema.types import logical_schema
from colonnade.stream.committer import Committer, MicroBatch
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
    from colonnade.table.dataset import Dataset

OnStatus = Callable[[StreamStatus], None]
OnCommit = Callable[[CommitEvent], None]


def run_stream(store: Store, dataset: str, options: StreamOptions, on_status: OnStatus | None = None,
               on_commit: OnCommit | None = None, stop: threading.Event | None = None) -> StreamReport:
    """Consume ``options.topic`` into ``dataset`` until ``stop`` is set, ``max_events`` were
    consumed or no message arrived for ``stop_when_idle`` seconds while partitions were assigned
    (a restart waits for its group to assign them); what is buffered then is committed. Raises
    StreamError for a bad message in strict mode (see the module docstring)."""
    options.check()
    return Stream(store, dataset, options, on_status, on_commit, stop).run()


class Stream:
    def __init__(self, store: Store, dataset: str, options: StreamOptions, on_status: OnStatus | None,
                 on_commit: OnCommit | None, stop: threading.Event | None) -> None:
        self.store, self.options = store, options
        self.on_status = on_status
        self.stop = stop or threading.Event()
        self.ds, schema = self._open(dataset)
        self.name = self.ds.name
        self.decoder = Decoder(options.format, schema)
        self.topic = options.topic
        self.batch = MicroBatch()
        self.report = StreamReport(self.name, self.topic)
        self.committer = Committer(self.ds, options, self.report, self.stop, on_commit, self._problem)
        self.consumed = 0  # events handed to the committer or buffered, and not dropped since
        self._in_rebalance = False
        self.source: KafkaSource | None = None
        self.row_bytes = 1024.0  # decoded bytes per message, as the last poll had them

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
            self.store.create_dataset(name, nullable, partition_by=self.options.partition_by,
                                      sort_by=list(self.options.sort_by) or None, exist_ok=True)
            # opened again: the object create_dataset returns takes the dataset for one its first
            # commit records, and a commit of offsets alone (a micro-batch of bad messages) then
            # commits nothing
            return self.store.dataset(name), given
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
        status_every = opts.status_interval or min(max(interval, 1.0), 10.0)
        deadline = time.monotonic() + interval
        next_status = time.monotonic() + status_every
        last_data = time.monotonic()
        status_events = 0
        try:
            while not self.stop.is_set():
                remaining = None if opts.max_events is None else opts.max_events - self.consumed
                if remaining is not None and remaining <= 0:
                    self.report.stopped = "max-events"
                    break
                now = time.monotonic()
                # a poll decodes to about a quarter of the memory limit at most: large messages
                # would otherwise carry a micro-batch far past it before a commit is due
                per_poll = max(1, int(opts.memory_limit / 4 / self.row_bytes))
                polled = self.source.consume(min(opts.poll_messages, per_poll, remaining or opts.poll_messages),
                                             max(0.01, min(0.25, deadline - now)))
                now = time.monotonic()
                if len(polled):
                    self._add(polled)
                    fault_point("after_poll")
                    last_data = now
                elif not self.source.assigned:
                    last_data = now  # waiting for the group to assign partitions is not idleness
                if now >= deadline or self.batch.nbytes >= opts.memory_limit:
                    self._hand_over()
                    deadline = time.monotonic() + interval
                if opts.stop_when_idle is not None and now - last_data >= opts.stop_when_idle:
                    self.report.stopped = "idle"
                    break
                if now >= next_status:
                    done = self.consumed
                    self._status(done - status_events, now - next_status + status_every)
                    status_events, next_status = done, now + status_every
            else:
                self.report.stopped = "stopped"
            self._hand_over()
            self._settle()
        finally:
            try:
                self.committer.close()
            finally:
                self.source.close()
                self.report.seconds = time.monotonic() - started
        return self.report

    def _hand_over(self) -> None:
        """Give the micro-batch to the committer once the previous one is committed."""
        if not self._settle():
            return
        if self.batch:
            batch, self.batch = self.batch, MicroBatch()
            self.committer.submit(batch)

    def _settle(self) -> bool:
        """Wait for the micro-batch in flight; if it was dropped (a conflict), drop the one
        being filled too (it continues from offsets never committed) and seek every partition
        to the log's positions. Whether it was committed."""
        in_flight = self.committer.in_flight_events
        if self.committer.wait():
            return True
        self.consumed -= in_flight + self.batch.events
        self.batch = MicroBatch()
        self._reseek()
        return False

    # -- the group's callbacks (inside consume())
    def _starts(self, partitions: list[int]) -> dict[int, int | None]:
        """Where newly assigned partitions start: the positions the log recorded."""
        try:
            self.committer.wait()  # its outcome is in the log, read next
        except StoreError:
            pass
        self._drop()  # anything buffered is consumed again from the log's positions
        ds = self.committer.ds
        snapshot = ds.snapshot()
        self.committer.read_version = snapshot.version
        recorded = ds.positions(snapshot)
        out = {p: recorded.get(position_id(self.topic, p)) for p in partitions}
        self.committer.committed.update({p: o for p, o in out.items() if o is not None})
        return out

    def _revoked(self, partitions: list[int]) -> None:
        """Commit what was consumed from the partitions before they move on."""
        self._in_rebalance = True
        try:
            if self._settle() and self.batch:
                batch, self.batch = self.batch, MicroBatch()
                if not self.committer.commit(batch):
                    self.consumed -= batch.events
        except StoreError:
            self._drop()  # not committed: the next owner consumes it again
        finally:
            self._in_rebalance = False

    def _lost(self, partitions: list[int]) -> None:
        self._drop()  # someone else owns them now: it consumes these again

    def _drop(self) -> None:
        self.consumed -= self.batch.events
        self.batch = MicroBatch()

    def _reseek(self) -> None:
        assert self.source is not None
        if self._in_rebalance:
            return  # the partitions are being taken away: the next assignment seeks
        ds = self.committer.ds
        snapshot = ds.snapshot()
        self.committer.read_version = snapshot.version
        recorded = ds.positions(snapshot)
        starts = {p: recorded.get(position_id(self.topic, p)) for p in self.source.assigned}
        self.committer.committed.update({p: o for p, o in starts.items() if o is not None})
        self.source.seek(starts)

    # -- a poll
    def _add(self, polled: Polled) -> None:
        decoded = self.decoder.decode(polled.payloads)
        b = self.batch
        if decoded.bad:
            rejects = [StreamReject(self.topic, int(polled.partitions[x.index]), polled.offset(x.index),
                                    x.reason, polled.payloads[x.index]) for x in decoded.bad]
            if self.options.on_error == "strict":
                self._drop()
                self._settle()  # the micro-batch in flight is good: it is committed
                first = rejects[0]
                raise StreamError(
                    f"bad message in {first.topic} partition {first.partition} at offset {first.offset}: "
                    f"{first.reason}; nothing after version {self.committer.read_version} of {self.name} "
                    f"was committed (the stream resumes from the last committed offsets)")
            b.rejects.extend(rejects)
        if decoded.batch is not None:
            b.batches.append(decoded.batch)
            b.rows += decoded.batch.num_rows
            b.nbytes += decoded.batch.nbytes
            self.row_bytes = max(1.0, decoded.batch.nbytes / decoded.batch.num_rows)
        self.consumed += len(polled)
        b.offsets.update(polled.next_offsets())
        stamps = polled.timestamp_range()
        if stamps is not None:
            lo, hi = stamps
            b.oldest_ms = lo if b.oldest_ms is None else min(b.oldest_ms, lo)
            b.newest_ms = hi if b.newest_ms is None else max(b.newest_ms, hi)

    # -- status
    def _problem(self, problem: str) -> None:
        self._status(0, 0.0, problem=problem)

    def _status(self, events: int, seconds: float, problem: str | None = None) -> None:
        if self.on_status is None or self.source is None:
            return
        if problem is None:
            self.source.recheck(timeout=0.2)
        positions = dict(self.committer.committed)
        positions.update(self.batch.offsets)
        lag = self.source.lag(positions, timeout=0.2) if self.source.problem is None and problem is None else {}
        r = self.report
        self.on_status(StreamStatus(time.time(), self.consumed, r.rejected + len(self.batch.rejects),
                                    r.commits, events / seconds if seconds > 0 else 0.0, lag, r.last_version,
                                    self.committer.last_commit_at, self.batch.events,
                                    problem or self.source.problem))
