"""A running ``colonnade stream`` (the real console script) while what it depends on goes away and
comes back, a producer producing all along:

* the Kafka broker is stopped and started again: the stream keeps running, its status lines
  (stderr) name the problem meanwhile, it consumes again once the broker is back;
* the store is unavailable: a Cassandra node stopped and started again (the stream retries its
  commit with growing waits, its status lines say so), and on SQLite another process holding an
  exclusive transaction for a few seconds (the commit waits for the lock: the busy timeout,
  60 s, outlasts it).

Each ends with every produced event stored exactly once. The broker and the Cassandra node are
private ones the module starts (never the shared ones): a broker on free ports in a temporary
directory (about 10 s to start), and a one-node cluster on its own loopback slot,
``$COLONNADE_TEST_STREAM_FAULT_SLOT`` (default 27: 127.0.0.28), about 15 s to start.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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

import colonnade
from colonnade.store import Store

pytestmark = pytest.mark.kafka

OUTAGE = 2.0  # seconds the broker stays away, beyond the time it takes to stop and start
LOCKED = 4.0  # seconds another process holds the SQLite store locked


def _needs_java() -> None:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java 17 JDK to run a private broker or node")


@pytest.fixture(scope="module")
def private_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A broker of this module's own, which the tests may stop."""
    _needs_java()
    from colonnade.cluster.kafka import LocalKafka, free_port_pair

    broker = LocalKafka(tmp_path_factory.mktemp("kafka"), port=free_port_pair())
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def private_cassandra(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A one-node Cassandra cluster of this module's own, which the tests may stop."""
    _needs_java()
    from colonnade.cluster.cassandra import LocalCluster

    cluster = LocalCluster(directory=tmp_path_factory.mktemp("cassandra"), nodes=1,
                           address_offset=int(os.environ.get("COLONNADE_TEST_STREAM_FAULT_SLOT", "27")))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _caught_up(store: Store, name: str, topic: Topic) -> bool:
    return positions(store, name, topic) == topic.ends


def _stop_cleanly(proc: Colonnade) -> dict[str, Any]:
    """SIGTERM: the stream commits what it buffered and ends with its summary."""
    proc.signal(signal.SIGTERM)
    run = proc.wait(timeout=60)
    assert run.status == 0, run
    report = run.report()
    assert report["stopped"] == "stopped", report
    return report  # type: ignore[no-any-return]


def test_the_broker_restarted_mid_stream(private_kafka: Any, module_store: Store, store_uri: str,
                                         workdir: Path) -> None:
    store, name = module_store, f"b_{uuid.uuid4().hex[:8]}"
    topic = new_topic(private_kafka.bootstrap_servers, "broker")
    feeder = Feeder(topic, first_id=1, rate=2_000)
    feeder.start()
    stream = Colonnade(stream_argv(store_uri, name, topic), workdir)
    try:
        wait_for("every partition committed", lambda: len(positions(store, name, topic)) == PARTITIONS)
        private_kafka.stop()
        down_at = time.monotonic()
        # the client notices at its next request to the broker: on a loaded machine, maybe after
        # a few seconds
        wait_for("a status line names the problem",
                 lambda: any(s.problem for s in status_lines(stream.stderr())), timeout=30)
        time.sleep(max(0.0, down_at + OUTAGE - time.monotonic()))
        assert stream.running()
        problems = [s.problem for s in status_lines(stream.stderr()) if s.problem]
        assert problems and all(p.startswith("Kafka: ") for p in problems), stream.stderr()[-3000:]
        private_kafka.start()
        back_at = time.monotonic()
        # consuming again: the problem is gone from the status lines and commits move on
        before = positions(store, name, topic)
        wait_for("commits after the broker came back",
                 lambda: any(positions(store, name, topic)[p] > before[p] for p in before), timeout=60)
    finally:
        feeder.stop()
    wait_for("the stream caught up", lambda: _caught_up(store, name, topic), timeout=60)
    # caught up within a status interval of the broker's return, maybe: a later line is clean
    # (once the broker answers again, or the group has assigned the partitions again)
    wait_for("a status line without the problem", lambda: status_lines(stream.stderr())[-1].problem is None,
             timeout=30)
    assert stream.running()
    report = _stop_cleanly(stream)
    assert_exactly_once(store, name, topic)
    print(f"{store.uri.split(':')[0]}: broker away {back_at - down_at:.1f} s; {report['events']:,} events, "
          f"{len(problems)} status lines named the problem, e.g. {problems[0]!r}")


@pytest.mark.cassandra
@pytest.mark.slow
def test_a_cassandra_node_down_mid_stream(private_cassandra: Any, kafka_bootstrap: str, workdir: Path) -> None:
    """The node's JVM is SIGKILLed while the stream is stopped right after a commit (fault point
    ``after_stream_commit``, ``stop``): what it does next with the store — look for segments to
    compact, commit its next micro-batch — finds the node down."""
    node = private_cassandra
    uri = f"cassandra://{node.address(1)}/stream_{uuid.uuid4().hex[:8]}?connect_timeout=3&request_timeout=5"
    name = "events"
    topic = new_topic(kafka_bootstrap, "node")
    feeder = Feeder(topic, first_id=1, rate=2_000)
    feeder.start()
    stream = Colonnade(stream_argv(uri, name, topic), workdir, {"COLONNADE_FAULTS": "after_stream_commit:5:stop"})
    try:
        wait_for("the stream stops itself after a commit", lambda: process_state(stream.pid) == "T", timeout=60)
        os.kill(node._pid(1), signal.SIGKILL)
        wait_for("the node is down", lambda: node._pid(1) is None and node._busy_port(1) is None)
        down_at = time.monotonic()
        stream.signal(signal.SIGCONT)
        wait_for("the stream says the store is unavailable",
                 lambda: stream.running() and [s for s in status_lines(stream.stderr()) if s.problem], timeout=60)
        node.start_node(1)  # the outage: as long as the node takes to start (>= 12 s)
        back_at = time.monotonic()
    finally:
        feeder.stop()
    with colonnade.connect(uri) as store:
        wait_for("the stream caught up", lambda: _caught_up(store, name, topic), timeout=120)
        caught_up_at = time.monotonic()
        assert stream.running()
        report = _stop_cleanly(stream)
        assert_exactly_once(store, name, topic)
    problems = [s.problem for s in status_lines(stream.stderr()) if s.problem]
    retries = [p for p in problems if p.startswith("store unavailable, retrying in ")]
    lost = [p for p in problems if p.startswith("the store lost versions")]
    assert retries and all(p in retries or p in lost or p.startswith("compaction failed (will be tried again): ")
                           for p in problems), problems
    waits = [float(p.split("retrying in ")[1].split(" s")[0]) for p in retries]
    assert waits[:3] == [0.5, 1.0, 2.0], waits  # backoff: each wait twice the last
    assert waits == sorted(waits) and report["retries"] == len(waits), (waits, report)
    print(f"cassandra node down {back_at - down_at:.1f} s, caught up {caught_up_at - back_at:.1f} s after; "
          f"{report['events']:,} events; {report['retries']} retries, waits {waits}; e.g. {problems[0]!r}; "
          f"{lost or 'the node kept every commit'}")


LOCKER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=60)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("COMMIT")
"""


def test_a_sqlite_store_locked_by_another_process_mid_stream(kafka_bootstrap: str, tmp_path: Path,
                                                             workdir: Path) -> None:
    path = tmp_path / "locked.db"
    uri, name = f"sqlite:///{path}", "events"
    topic = new_topic(kafka_bootstrap, "lock")
    feeder = Feeder(topic, first_id=1, rate=2_000)
    feeder.start()
    stream = Colonnade(stream_argv(uri, name, topic), workdir)
    try:
        with colonnade.connect(uri) as store:
            wait_for("every partition committed", lambda: len(positions(store, name, topic)) == PARTITIONS)
            locker = subprocess.Popen([sys.executable, "-c", LOCKER, str(path), str(LOCKED)],
                                      stdout=subprocess.PIPE, text=True)
            assert locker.stdout is not None and locker.stdout.readline() == "locked\n"
            locked_at = time.time()
            assert locker.wait(timeout=60) == 0
            released_at = time.time()
            assert stream.running()
    finally:
        feeder.stop()
    with colonnade.connect(uri) as store:
        wait_for("the stream caught up", lambda: _caught_up(store, name, topic), timeout=60)
        report = _stop_cleanly(stream)
        assert_exactly_once(store, name, topic)
        # no commit while the lock was held; the first one after it took what had waited
        times = [c.at for c in store.dataset(name).history() if c.kind == "stream"]
        assert not [t for t in times if locked_at + 0.2 < t < released_at - 0.2], times
        gap = max(b - a for a, b in zip(times, times[1:], strict=False))
        assert gap >= LOCKED - 0.5, times
    assert "error" not in stream.stderr()
    print(f"sqlite locked {released_at - locked_at:.1f} s: longest gap between commits {gap:.1f} s; "
          f"{report['events']:,} events in {report['commits']} commits")


def test_a_store_that_lost_acknowledged_commits_is_consumed_again(kafka_bootstrap: str, tmp_path: Path,
                                                                  workdir: Path) -> None:
    """What a Cassandra node that crashed before syncing its commit log does (its log goes back
    to an earlier version after the stream's commit was acknowledged), made to happen at a known
    moment: the SQLite file is copied while the stream waits before its 5th commit and put back
    after it. The stream notices that the log is behind the version it committed and consumes
    the lost micro-batch again from the positions the log kept."""
    import sqlite3

    path, copy = tmp_path / "lossy.db", tmp_path / "copy.db"
    uri, name = f"sqlite:///{path}", "events"
    topic = new_topic(kafka_bootstrap, "lost")
    feeder = Feeder(topic, first_id=1, rate=2_000)
    feeder.start()
    faults = "before_commit:5:stop,after_stream_commit:5:stop"
    stream = Colonnade(stream_argv(uri, name, topic), workdir, {"COLONNADE_FAULTS": faults})
    try:
        for backup_from, backup_to in ((path, copy), (copy, path)):
            wait_for("the stream stops itself", lambda: process_state(stream.pid) == "T", timeout=60)
            with sqlite3.connect(backup_from) as source, sqlite3.connect(backup_to) as target:
                source.backup(target)
            stream.signal(signal.SIGCONT)
        with colonnade.connect(uri) as store:
            assert store.dataset(name).version == 4  # the 5th commit is gone
            wait_for("commits after the loss", lambda: store.dataset(name).version >= 6)
    finally:
        feeder.stop()
    with colonnade.connect(uri) as store:
        wait_for("the stream caught up", lambda: _caught_up(store, name, topic), timeout=60)
        _stop_cleanly(stream)
        assert_exactly_once(store, name, topic)
    problems = [s.problem for s in status_lines(stream.stderr()) if s.problem and "store" in s.problem]
    assert problems == [f"the store lost versions 5-5 of {name} it had acknowledged: consuming again "
                        f"from the positions of version 4"], problems
