"""End-to-end check of LocalCluster: one real Cassandra node in a temporary directory."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from colonnade.cluster import ClusterError, LocalCluster, cql_ready
from colonnade.cluster.cassandra import NODE_TIMER_SLACK_NS
from colonnade.cluster.jvm import launch_detached

# Slot 25 (127.0.0.26, JMX 9699) stays clear of a development cluster on 127.0.0.1 and of the
# suite's shared test node (slot 20 by default).
_SLOT = 25


@pytest.mark.cassandra
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_single_node_start_query_stop(tmp_path: Path) -> None:
    if shutil.which("java") is None or shutil.which("mvn") is None:
        pytest.skip("needs java and mvn on PATH")
    from cassandra.cluster import Cluster

    # The jar cache stays in the default location so the download happens at most once.
    cluster = LocalCluster(tmp_path / "cluster", nodes=1, heap="512M", address_offset=_SLOT)
    try:
        cluster.start()
        [node] = cluster.status()
        assert node.state == "up"
        assert node.pid is not None
        assert node.address == "127.0.0.26"
        assert cql_ready(node.address)

        driver = Cluster([node.address])
        try:
            session = driver.connect()
            version = session.execute("SELECT release_version FROM system.local").one()
            assert version is not None and version.release_version.startswith("5.0.")
            # data files mapped and 16 MB heap regions: 1 MiB chunk cells are read without
            # buffer copies and are not humongous objects
            mode = session.execute("SELECT value FROM system_views.settings WHERE name = 'disk_access_mode'").one()
            assert mode is not None and mode.value == "mmap"
            flags = Path(f"/proc/{node.pid}/cmdline").read_bytes().split(b"\0")
            assert b"-XX:G1HeapRegionSize=16m" in flags and b"-XX:+AlwaysPreTouch" in flags
            # the request threads' idle sleeps may end late: the node's threads, started after
            # it was launched, have its timer slack
            threads = list(Path(f"/proc/{node.pid}/task").iterdir())
            assert len(threads) > 20
            assert {int(Path(f"/proc/{t.name}/timerslack_ns").read_text()) for t in threads} == {NODE_TIMER_SLACK_NS}
            session.execute(
                "CREATE KEYSPACE k WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
            )
            session.execute("CREATE TABLE k.t (id int PRIMARY KEY, v text)")
            session.execute("INSERT INTO k.t (id, v) VALUES (1, 'one')")
            assert session.execute("SELECT v FROM k.t WHERE id = 1").one().v == "one"
        finally:
            driver.shutdown()

        cluster.nodetool(1, "flush", "k")
        assert list((tmp_path / "cluster" / "nodes" / "node1" / "data" / "k").glob("t-*/*-Data.db"))

        cluster.start()  # already up: a no-op
        assert cluster.status()[0].pid == node.pid
    finally:
        cluster.stop()
    [node] = cluster.status()
    assert node.state == "down"
    assert node.pid is None
    assert not cql_ready(node.address)


def _pid_sequence(cluster: LocalCluster, pids: list[int | None], monkeypatch: pytest.MonkeyPatch) -> None:
    """The node's recorded pid as seen by successive checks (the last one repeats); CQL never
    answers."""
    seen = iter(pids)
    last: list[int | None] = [None]

    def pid(node: int) -> int | None:
        last[0] = next(seen, last[0])
        return last[0]

    monkeypatch.setattr(cluster, "_pid", pid)
    monkeypatch.setattr("colonnade.cluster.cassandra.cql_ready", lambda *a, **k: False)


def test_a_node_missing_once_while_starting_is_not_called_exited(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = LocalCluster(tmp_path / "cluster", nodes=1, address_offset=_SLOT)
    _pid_sequence(cluster, [None, 4242], monkeypatch)  # the launcher's exec: gone for one look
    with pytest.raises(ClusterError, match="did not answer CQL.*still starting \\(pid 4242\\)"):
        cluster._wait_up(1, timeout=2.5)


def test_a_node_gone_on_two_looks_exited_during_startup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = LocalCluster(tmp_path / "cluster", nodes=1, address_offset=_SLOT)
    _pid_sequence(cluster, [None, None], monkeypatch)
    with pytest.raises(ClusterError, match="node1 exited during startup"):
        cluster._wait_up(1, timeout=30)


@pytest.mark.skipif(not Path("/proc/self/timerslack_ns").exists(), reason="Linux's timer slack")
def test_a_detached_process_has_the_timer_slack_asked_for(tmp_path: Path) -> None:
    """The slack is set in the launcher, kept through its fork and exec: the detached program
    (and, by default, a program launched without one) has it."""
    import time

    out = tmp_path / "out.txt"
    script = "cat /proc/self/timerslack_ns"
    launch_detached(["/bin/sh", "-c", script], tmp_path, out, timer_slack_ns=123_000)
    plain = tmp_path / "plain.txt"
    launch_detached(["/bin/sh", "-c", script], tmp_path, plain)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not (out.exists() and out.read_text() and plain.exists() and plain.read_text()):
        time.sleep(0.05)
    assert out.read_text().strip() == "123000"
    assert plain.read_text().strip() == Path("/proc/self/timerslack_ns").read_text().strip()
