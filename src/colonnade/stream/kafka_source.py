"""The Kafka side of a stream: a confluent-kafka consumer in a group, polled in batches.

Offsets are never committed automatically and never read from the group: when the group assigns
partitions to this consumer, the stream says where each one starts (the positions its dataset's
log recorded) and the consumer is assigned there. After each micro-batch is committed to the
log, the same offsets are committed to the group too, asynchronously — only so that Kafka's own
tools show the group's lag; nothing reads them back.

The consumer's prefetch queue is bounded (``queued.max.messages.kbytes``), so memory stays
bounded however far behind the stream is. librdkafka reconnects to a broker that went away by
itself; its errors meanwhile are kept as the source's ``problem`` (shown in the status line),
cleared by the next message that arrives.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from colonnade.stream.options import StreamError

#: Kafka's "start at the earliest offset still kept" (librdkafka's OFFSET_BEGINNING).
OFFSET_BEGINNING = -2


def quiet_logger() -> Any:
    """A logger that drops librdkafka's log lines (its errors reach ``error_cb`` and are shown
    as the stream's problem instead)."""
    import logging

    logger = logging.getLogger("colonnade.stream.kafka")
    logger.propagate = False
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    return logger


class Polled:
    """A poll's messages (without error events): their payloads as a list, and their
    partitions as an array. Offsets and timestamps are read from the messages only where they
    are needed — at the end of each run of one partition's messages (offsets grow within a
    partition) and for the messages rejected — which keeps the per-message Python work to
    two calls."""

    def __init__(self, messages: list[Any]) -> None:
        self.messages = messages
        self.payloads: list[bytes | None] = [m.value() for m in messages]
        self.partitions = np.array([m.partition() for m in messages], dtype=np.int32)
        if len(messages):
            change = np.flatnonzero(self.partitions[1:] != self.partitions[:-1]) + 1
            self._starts = np.concatenate(([0], change))
            self._ends = np.concatenate((change, [len(messages)])) - 1
        else:
            self._starts = self._ends = np.empty(0, np.int64)

    def __len__(self) -> int:
        return len(self.payloads)

    def offset(self, index: int) -> int:
        return int(self.messages[index].offset())

    def next_offsets(self) -> dict[int, int]:
        """Partition → the offset after its last message in this poll."""
        out: dict[int, int] = {}
        for end in self._ends:
            p, o = int(self.partitions[end]), self.offset(int(end)) + 1
            out[p] = max(out.get(p, o), o)
        return out

    def timestamp_range(self) -> tuple[int, int] | None:
        """The least and greatest Kafka timestamps (ms) of the poll's messages, from the first
        and last message of each run of one partition (None: no message carries one)."""
        stamps = [t for i in np.concatenate((self._starts, self._ends))
                  if (t := self.messages[int(i)].timestamp()[1]) > 0]
        return (min(stamps), max(stamps)) if stamps else None


class KafkaSource:
    """A consumer of ``topic`` in group ``group``. ``starts(partitions)`` is asked, on every
    assignment, for each newly assigned partition's first offset (None: the earliest kept);
    ``revoked(partitions)`` is told before partitions are taken away (while the stream may
    still commit what it consumed from them); ``lost(partitions)`` when they were taken away
    already (the group moved on without this consumer)."""

    def __init__(self, topic: str, bootstrap: str, group: str, prefetch_bytes: int,
                 starts: Callable[[list[int]], dict[int, int | None]],
                 revoked: Callable[[list[int]], None], lost: Callable[[list[int]], None],
                 settings: dict[str, Any] | None = None) -> None:
        from confluent_kafka import Consumer

        self.topic = topic
        self.problem: str | None = None
        self._starts, self._revoked, self._lost = starts, revoked, lost
        self.assigned: set[int] = set()
        conf: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": f"colonnade-stream-{os.getpid()}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": False,
            "queued.max.messages.kbytes": max(1024, prefetch_bytes // 1024),
            "fetch.wait.max.ms": 100,
            "fetch.queue.backoff.ms": 20,  # fetch again soon after the bounded queue was full
            # 8 MiB per partition and fetch (the 1 MiB default capped a consumer at ~190k
            # 60-byte messages/s here); the prefetch queue still bounds the memory
            "max.partition.fetch.bytes": 8 * 2**20,
            "session.timeout.ms": 10_000,  # a dead member's partitions move within ~10 s
            "heartbeat.interval.ms": 1_000,
            "max.poll.interval.ms": 600_000,  # commits wait out an unavailable store
            "reconnect.backoff.ms": 200,
            "reconnect.backoff.max.ms": 5_000,
            "error_cb": self._error,
            "logger": quiet_logger(),  # librdkafka's own lines would garble the status line
        }
        conf.update(settings or {})
        try:
            self.consumer = Consumer(conf)
        except Exception as exc:  # noqa: BLE001 - librdkafka's configuration errors
            raise StreamError(f"Kafka consumer for {bootstrap}: {exc}") from None
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                on_lost=self._on_lost)

    # -- group callbacks (run inside consume())
    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        ids = [tp.partition for tp in partitions]
        starts = self._starts(ids)
        for tp in partitions:
            start = starts.get(tp.partition)
            tp.offset = OFFSET_BEGINNING if start is None else start
        consumer.assign(partitions)
        self.assigned = set(ids)

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        ids = [tp.partition for tp in partitions]
        try:
            self._revoked(ids)
        finally:
            consumer.unassign()
            self.assigned -= set(ids)

    def _on_lost(self, consumer: Any, partitions: list[Any]) -> None:
        ids = [tp.partition for tp in partitions]
        self.assigned -= set(ids)
        self._lost(ids)

    def _error(self, err: Any) -> None:
        self.problem = f"fatal Kafka error: {err.str()}" if err.fatal() else f"Kafka: {err.str()}"

    # -- consuming
    def consume(self, max_messages: int, timeout: float) -> Polled:
        msgs = self.consumer.consume(num_messages=max(1, max_messages), timeout=timeout)
        errors = [m for m in msgs if m.error() is not None]
        if errors:
            for m in errors:
                err = m.error()
                assert err is not None
                if err.fatal():
                    raise StreamError(f"Kafka consumer failed: {err.str()}")
                self._error(err)
            msgs = [m for m in msgs if m.error() is None]
        if msgs and self.problem is not None and not self.problem.startswith("fatal"):
            self.problem = None
        return Polled(msgs)

    def seek(self, starts: dict[int, int | None]) -> None:
        """Consume every assigned partition from ``starts[partition]`` next (None or absent: the
        earliest kept); what was prefetched from elsewhere is dropped."""
        from confluent_kafka import TopicPartition

        if self.assigned:
            offsets = {p: starts.get(p) for p in self.assigned}
            self.consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING if o is None else o)
                                  for p, o in sorted(offsets.items())])

    def commit_group_offsets(self, offsets: dict[int, int]) -> None:
        from confluent_kafka import TopicPartition

        if not offsets:
            return
        try:
            self.consumer.commit(offsets=[TopicPartition(self.topic, p, o) for p, o in offsets.items()],
                                 asynchronous=True)
        except Exception:  # noqa: BLE001 - informative only: the log holds the positions
            pass

    def lag(self, positions: dict[int, int], timeout: float = 0.5) -> dict[int, int]:
        """Messages between each assigned partition's position and its end."""
        from confluent_kafka import KafkaException, TopicPartition

        out: dict[int, int] = {}
        for p in sorted(self.assigned):
            try:
                low, high = self.consumer.get_watermark_offsets(TopicPartition(self.topic, p),
                                                                timeout=timeout, cached=False)
            except KafkaException:
                continue
            if high < 0:  # nothing fetched from it yet
                continue
            out[p] = max(0, high - max(low, positions.get(p, 0)))
        return out

    def recheck(self, timeout: float = 0.5) -> None:
        """Clear a (non-fatal) problem once the broker answers again: a watermark query of one
        assigned partition. (An error librdkafka reports late, after consuming resumed and the
        topic went quiet, would otherwise stay in the status until the next message.)"""
        from confluent_kafka import KafkaException, TopicPartition

        if self.problem is None or self.problem.startswith("fatal") or not self.assigned:
            return
        try:
            self.consumer.get_watermark_offsets(TopicPartition(self.topic, min(self.assigned)),
                                                timeout=timeout, cached=False)
        except KafkaException:
            return
        self.problem = None

    def close(self) -> None:
        try:
            self.consumer.close()  # leaves the group: the others take its partitions at once
        except Exception:  # noqa: BLE001 - closing a consumer whose broker is gone
            pass
