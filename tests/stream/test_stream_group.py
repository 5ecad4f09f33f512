"""Two ``colonnade stream`` processes in one consumer group share a four-partition topic while a
producer keeps producing; one of them is SIGKILLed. Once its session times out (10 s) the group
gives its partitions to the other, which continues each of them from the position the dataset's
log recorded, so at the end every produced event is stored exactly once, and the dead process's
partitions were last committed by the survivor.

The member is killed right after a micro-batch's commit, before it committed the same offsets to
the consumer group (fault point ``after_stream_commit``, where it stops itself so that the test
can look): the group's offsets are then behind the log for its partitions, and a survivor that
started from them would store that micro-batch twice.
"""

from __future__ import annotations

import re
import signal
import time
import uuid
from pathlib import Path

import pytest
from stream_helpers import (
    PARTITIONS,
    Colonnade,
    Feeder,
    Topic,
    assert_exactly_once,
    new_topic,
    positions,
    process_state,
    status_lines,
    stream_argv,
    wait_for,
)

from colonnade.store import Store
from colonnade.table.commits import position_id

pytestmark = pytest.mark.kafka

KILL_AFTER_COMMITS = 8


def _partitions(proc: Colonnade) -> set[int]:
    lines = status_lines(proc.stderr())
    return lines[-1].partitions if lines else set()


def _pid(writer: str) -> int:
    m = re.search(r"\(pid (\d+)\)", writer)
    assert m, writer
    return int(m.group(1))


def _group_offsets(topic: Topic, group: str) -> dict[int, int]:
    """The offsets the consumer group committed (read without joining it)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": topic.bootstrap, "group.id": group})
    try:
        got = consumer.committed([TopicPartition(topic.name, p) for p in range(PARTITIONS)], timeout=30)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in got}


def test_the_survivor_takes_over_a_killed_member_from_the_logs_offsets(
        module_store: Store, store_uri: str, kafka_bootstrap: str, workdir: Path) -> None:
    store, name = module_store, f"g_{uuid.uuid4().hex[:8]}"
    topic = new_topic(kafka_bootstrap, "group")
    feeder = Feeder(topic, first_id=1, rate=3_000)
    feeder.start()
    try:
        argv = stream_argv(store_uri, name, topic, "--stop-when-idle", "2")
        b = Colonnade(argv, workdir)
        wait_for("the first member owns every partition", lambda: _partitions(b) == set(range(PARTITIONS)))
        a = Colonnade(argv, workdir, {"COLONNADE_FAULTS": f"after_stream_commit:{KILL_AFTER_COMMITS}:stop"})
        wait_for("the second member stops itself after a commit", lambda: process_state(a.pid) == "T")
        owned_by_a = _partitions(a)
        assert len(owned_by_a) == 2 and _partitions(b) == set(range(PARTITIONS)) - owned_by_a
        at_kill = positions(store, name, topic)
        group = _group_offsets(topic, f"colonnade-{name}")
        assert all(group[p] <= at_kill[p] for p in owned_by_a), (group, at_kill)
        assert any(group[p] < at_kill[p] for p in owned_by_a), (group, at_kill)  # the group is behind
        a.signal(signal.SIGKILL)
        killed_at = time.monotonic()
        assert a.wait().killed

        # the survivor gets every partition once the dead member's session times out
        wait_for("the survivor owns every partition",
                 lambda: _partitions(b) == set(range(PARTITIONS)) and b.running(), timeout=60)
        takeover = time.monotonic() - killed_at
        time.sleep(1.0)
    finally:
        feeder.stop()
    run = b.wait(timeout=120)
    assert run.status == 0, run
    assert run.report()["stopped"] == "idle"
    assert_exactly_once(store, name, topic)

    # the dead member's partitions moved on from where its last commit left them, by the survivor
    history = store.dataset(name).history()
    for p in owned_by_a:
        app = position_id(topic.name, p)
        writers = [_pid(c.commit_info.writer) for c in history if any(t.app_id == app for t in c.txns)]
        assert a.pid in writers and writers[-1] == b.pid, (p, writers)
        assert positions(store, name, topic)[p] > at_kill[p]
    print(f"{store.uri.split(':')[0]}: {topic.messages:,} events; the survivor owned every partition "
          f"{takeover:.1f} s after the kill")
