"""The local Kafka broker through the real ``colonnade kafka`` command: it starts in a directory
on free ports, serves a four-partition topic to confluent-kafka clients, reports its state, stops
only the process it started, and keeps topics and messages across a restart; a taken port, a
stale pid file and a missing JDK or Maven are handled in one line."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from colonnade.cluster.kafka import LocalKafka, free_port_pair, metadata_brokers

COLONNADE = str(Path(sys.executable).with_name("colonnade"))
PARTITIONS = 4


def _kafka(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([COLONNADE, "kafka", *args], capture_output=True, text=True,
                          timeout=600, env=env)


def _create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS,
                                                replication_factor=1)]).values():
        future.result(60)


def _partition_count(bootstrap: str, topic: str) -> int:
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    return len(metadata.topics[topic].partitions)


def _produce(bootstrap: str, topic: str, start: int, n: int) -> dict[int, list[bytes]]:
    """Send messages ``m<start>`` .. keyed by number; what each partition acknowledged, in order."""
    from confluent_kafka import Producer

    acked: dict[int, list[bytes]] = {}
    failed: list[object] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            failed.append(err)
        else:
            acked.setdefault(msg.partition(), []).append(msg.value())  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for i in range(start, start + n):
        producer.produce(topic, key=str(i).encode(), value=f"m{i}".encode(), on_delivery=on_delivery)
    assert producer.flush(60) == 0
    assert failed == []
    return acked


def _consume_all(bootstrap: str, topic: str) -> dict[int, list[bytes]]:
    """Every message of every partition, read from the beginning up to its high watermark."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in range(PARTITIONS)}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        positions = dict.fromkeys(range(PARTITIONS), 0)
        for _ in range(600):
            if all(positions[p] >= ends[p] for p in ends):
                break
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got[msg.partition()].append(msg.value())
            positions[msg.partition()] = msg.offset() + 1
        assert positions == ends
        return got
    finally:
        consumer.close()


def _round_trip(bootstrap: str, topic: str) -> dict[int, list[bytes]]:
    _create_topic(bootstrap, topic)
    acked = _produce(bootstrap, topic, 0, 400)
    assert sorted(acked) == list(range(PARTITIONS))  # keys spread over every partition
    consumed = _consume_all(bootstrap, topic)
    assert consumed == acked  # every message, in each partition's order
    return consumed


def _pid_of(directory: Path) -> int:
    return int((directory / "pid").read_text())


def _is_running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.kafka
@pytest.mark.timeout(900)
def test_kafka_bootstrap_fixture_serves_a_four_partition_topic(kafka_bootstrap: str) -> None:
    host, _, port = kafka_bootstrap.rpartition(":")
    assert metadata_brokers(host, int(port))
    _round_trip(kafka_bootstrap, f"fixture-{uuid.uuid4().hex[:8]}")


@pytest.mark.kafka
@pytest.mark.timeout(900)
def test_start_serve_stop_and_restart_keep_topics_and_messages(tmp_path: Path) -> None:
    directory = tmp_path / "broker"
    port = free_port_pair()
    bootstrap = f"127.0.0.1:{port}"
    try:
        started = _kafka("start", "--dir", str(directory), "--port", str(port))
        assert started.returncode == 0, started.stderr
        assert started.stdout == f"kafka up: {bootstrap}\n"
        pid = _pid_of(directory)
        assert _is_running(pid)
        assert "Kafka Server started" in _kafka("logs", "--dir", str(directory), "--lines", "200").stdout

        again = _kafka("start", "--dir", str(directory))  # the port it last ran on
        assert again.returncode == 0, again.stderr
        assert again.stdout == f"kafka already up: {bootstrap} (pid {pid})\n"
        assert _pid_of(directory) == pid

        status = _kafka("status", "--dir", str(directory))
        assert status.returncode == 0
        assert status.stdout.splitlines()[-1].split() == ["kafka", bootstrap, str(pid), "up"]
        # Another port for a running broker: status shows the real one, start refuses.
        other = str(free_port_pair())
        status = _kafka("status", "--dir", str(directory), "--port", other)
        assert status.stdout.splitlines()[-1].split() == ["kafka", bootstrap, str(pid), "up"]
        moved = _kafka("start", "--dir", str(directory), "--port", other)
        assert moved.returncode == 1
        assert moved.stderr.splitlines()[-1] == (
            f"error: the broker in {directory} already runs on {bootstrap}: stop it before "
            f"starting it on port {other}")
        assert _pid_of(directory) == pid

        before = _round_trip(bootstrap, "events")

        stopped = _kafka("stop", "--dir", str(directory))
        assert stopped.returncode == 0, stopped.stderr
        assert stopped.stdout == "stopped kafka\n"
        assert not _is_running(pid)
        assert not (directory / "pid").exists()
        assert metadata_brokers("127.0.0.1", port) == []
        status = _kafka("status", "--dir", str(directory))
        assert status.stdout.splitlines()[-1].split() == ["kafka", bootstrap, "-", "down"]
        assert _kafka("stop", "--dir", str(directory)).stdout == "kafka was not running\n"

        restarted = _kafka("start", "--dir", str(directory))
        assert restarted.returncode == 0, restarted.stderr
        assert restarted.stdout == f"kafka up: {bootstrap}\n"
        assert _pid_of(directory) != pid
        assert _partition_count(bootstrap, "events") == PARTITIONS
        assert _consume_all(bootstrap, "events") == before
        more = _produce(bootstrap, "events", 400, 40)
        after = _consume_all(bootstrap, "events")
        assert after == {p: before[p] + more.get(p, []) for p in range(PARTITIONS)}
    finally:
        LocalKafka(directory).stop()


@pytest.mark.kafka
@pytest.mark.timeout(900)
def test_a_stale_pid_file_is_ignored_and_its_process_left_alone(tmp_path: Path) -> None:
    directory = tmp_path / "broker"
    directory.mkdir()
    exited = subprocess.Popen(["true"])
    exited.wait()
    other = subprocess.Popen(["sleep", "300"])  # a live process that is no broker
    try:
        for stale in (exited.pid, other.pid):
            (directory / "pid").write_text(f"{stale}\n")
            status = _kafka("status", "--dir", str(directory))
            assert status.stdout.splitlines()[-1].split()[2:] == ["-", "down"]
            assert _kafka("stop", "--dir", str(directory)).stdout == "kafka was not running\n"
            assert not (directory / "pid").exists()
            assert other.poll() is None

        (directory / "pid").write_text(f"{other.pid}\n")
        started = _kafka("start", "--dir", str(directory), "--port", str(free_port_pair()))
        assert started.returncode == 0, started.stderr
        assert started.stdout.startswith("kafka up: ")
        broker_pid = _pid_of(directory)
        assert broker_pid != other.pid and _is_running(broker_pid)
        assert _kafka("stop", "--dir", str(directory)).stdout == "stopped kafka\n"
        assert not _is_running(broker_pid)
        assert other.poll() is None  # never signalled
    finally:
        LocalKafka(directory).stop()
        other.kill()
        other.wait()


@pytest.mark.kafka
@pytest.mark.parametrize("taken", ["client", "controller"])
def test_a_port_taken_by_another_program_is_a_one_line_error(tmp_path: Path, taken: str) -> None:
    port = free_port_pair()
    busy = port if taken == "client" else port + 1
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", busy))
        listener.listen()
        result = _kafka("start", "--dir", str(tmp_path / "broker"), "--port", str(port))
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if not line.startswith("starting ")]
    assert errors == [f"error: 127.0.0.1:{busy} is in use by a process this broker did not "
                      f"start (another broker? choose another port)"]
    assert not (tmp_path / "broker" / "pid").exists()


def test_missing_java_or_maven_is_a_one_line_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty-path"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env.update(PATH=str(empty), COLONNADE_KAFKA_DIR=str(tmp_path / "cache"))
    args = ("start", "--dir", str(tmp_path / "broker"), "--port", str(free_port_pair()))

    no_java = _kafka(*args, env=env)
    assert no_java.returncode == 1
    assert no_java.stderr.splitlines()[-1:] == [
        "error: java not found: install a Java 17 JDK (e.g. apt-get install openjdk-17-jdk-headless)"]

    # A JDK but no Maven, and no jars cached yet: the download cannot even begin.
    java_home = tmp_path / "jdk"
    (java_home / "bin").mkdir(parents=True)
    (java_home / "bin" / "java").write_text("#!/bin/sh\nexit 0\n")
    (java_home / "bin" / "java").chmod(0o755)
    no_mvn = _kafka(*args, env={**env, "JAVA_HOME": str(java_home)})
    assert no_mvn.returncode == 1
    assert no_mvn.stderr.splitlines()[-1:] == [
        "error: mvn not found: install Maven (e.g. apt-get install maven)"]
    assert not list((tmp_path / "cache").glob("dist-*"))
    assert "Traceback" not in no_java.stderr + no_mvn.stderr


def test_metadata_brokers_is_empty_unless_a_kafka_broker_answers() -> None:
    port = free_port_pair()
    assert metadata_brokers("127.0.0.1", port, timeout=1.0) == []  # nothing listening

    with socket.socket() as server:  # something listening that is not Kafka
        server.bind(("127.0.0.1", port))
        server.listen()

        def answer_nonsense() -> None:
            conn, _ = server.accept()
            with conn:
                conn.recv(1024)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

        thread = threading.Thread(target=answer_nonsense)
        thread.start()
        assert metadata_brokers("127.0.0.1", port, timeout=2.0) == []
        thread.join()
