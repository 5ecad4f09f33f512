"""Cassandra faults on a real node this module starts itself (with authentication on, on its own
loopback slot, so the shared test node is never touched): wrong credentials and unreachable hosts
are one-line errors that never print the password; a node frozen or stopped in the middle of a
query or an ingest makes it fail within a bounded time with one line, commits nothing, and
everything works again once the node is back.

The node: ``LocalCluster(nodes=1, auth=True, address_offset=$COLONNADE_TEST_FAULT_SLOT or 24)``,
i.e. 127.0.0.25, data in a temporary directory, stopped at the end of the module.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from reliability_helpers import EVENTS_SCHEMA, Run, Zygote, events_table, write_events

import colonnade
from colonnade.errors import StoreError
from colonnade.ingest import ingest

pytestmark = [pytest.mark.cassandra, pytest.mark.slow]

PASSWORD_ENV = "COLONNADE_CASSANDRA_PASSWORD"
CANARY = f"canary-{uuid.uuid4().hex}"  # a wrong password that must never be printed
OPTIONS = "connect_timeout=3&request_timeout=5"
BOUND = 60.0  # seconds any failure may take to surface


@pytest.fixture(scope="module")
def fault_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java 17 JDK to run a Cassandra node")
    from colonnade.cluster.cassandra import LocalCluster

    cluster = LocalCluster(directory=tmp_path_factory.mktemp("fault-cluster"), nodes=1, auth=True,
                           address_offset=int(os.environ.get("COLONNADE_TEST_FAULT_SLOT", "24")))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def uri(node: Any, keyspace: str, user: str = "cassandra", host: str | None = None) -> str:
    return f"cassandra://{user}@{host or node.address(1)}/{keyspace}?{OPTIONS}"


def good(env: dict[str, str | None] | None = None) -> dict[str, str | None]:
    return {PASSWORD_ENV: "cassandra", **(env or {})}


def assert_one_line_error(run: Run, *fragments: str) -> None:
    assert run.status == 1, run
    assert run.stdout == "", run
    assert run.stderr.startswith("error: ") and run.stderr.count("\n") == 1, run
    for fragment in fragments:
        assert fragment in run.stderr, run


def _process_state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_wrong_password_and_unreachable_hosts_fail_in_one_line_without_the_password(
        fault_node: Any, zygote: Zygote, tmp_path: Path) -> None:
    csv = write_events(tmp_path / "a.csv", range(10))
    wrong = {PASSWORD_ENV: CANARY}
    runs = []
    for args in (["datasets"], ["ingest", "t", str(csv)], ["sql", "SELECT 1"]):
        run = zygote.run(["--store", uri(fault_node, "creds"), *args], env=wrong)
        assert_one_line_error(run, "authentication failed for user 'cassandra' at Cassandra at "
                                   f"{fault_node.address(1)}:9042")
        runs.append(run)
    debug = zygote.run(["--debug", "--store", uri(fault_node, "creds"), "datasets"], env=wrong)
    assert debug.status == 1
    runs.append(debug)
    # a user that doesn't exist, and hosts where nothing listens (refused) or nothing routes
    nobody = zygote.run(["--store", uri(fault_node, "creds", user="nobody"), "datasets"], env=wrong)
    assert_one_line_error(nobody, "authentication failed for user 'nobody'")
    started = time.monotonic()
    refused = zygote.run(["--store", uri(fault_node, "creds", host="127.0.0.29"), "datasets"], env=wrong)
    assert_one_line_error(refused, "cannot reach Cassandra at 127.0.0.29:9042")
    unroutable = zygote.run(["--store", uri(fault_node, "creds", host="192.0.2.1"), "ingest", "t", str(csv)],
                            env=wrong)
    assert_one_line_error(unroutable, "cannot reach Cassandra at 192.0.2.1:9042")
    assert time.monotonic() - started < BOUND
    runs += [nobody, refused, unroutable]

    for run in runs:  # the password is never printed, whatever the failure
        assert CANARY not in run.stdout + run.stderr, run
    assert CANARY not in debug.stderr and "Traceback" in debug.stderr
    for log in Path(fault_node.node_dir(1), "logs").iterdir():
        assert CANARY not in log.read_text(errors="replace"), log
    # and the right password works
    ok = zygote.run(["--store", uri(fault_node, "creds"), "ingest", "t", str(csv)], env=good())
    assert ok.status == 0 and ok.stdout.startswith("ingested 10 rows"), ok


def test_a_frozen_node_fails_a_query_within_the_timeout(fault_node: Any, zygote: Zygote,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGSTOP on the node's JVM: it accepts connections and never answers (the worst case)."""
    monkeypatch.setenv(PASSWORD_ENV, "cassandra")
    store = colonnade.connect(uri(fault_node, "frozen"))
    jvm = fault_node._pid(1)
    try:
        ds = store.create_dataset("t", EVENTS_SCHEMA, segment_rows=100)
        ds.append(events_table(range(25_600)))  # 256 segments: 4 fetch windows of 64
        batches = ds.scan().to_batches()
        first = next(batches)
        assert first.num_rows == 100
        os.kill(jvm, signal.SIGSTOP)
        try:
            outcome: dict[str, Any] = {}

            def rest() -> None:
                try:
                    outcome["rows"] = sum(b.num_rows for b in batches)
                except BaseException as exc:  # noqa: BLE001 - inspected below
                    outcome["error"] = exc

            started = time.monotonic()
            reader = threading.Thread(target=rest, daemon=True)
            reader.start()
            reader.join(BOUND)
            assert not reader.is_alive(), f"the scan hung for {BOUND:g} s on a frozen node"
            error = outcome.get("error")
            assert isinstance(error, StoreError), outcome
            assert "\n" not in str(error) and f"Cassandra at {fault_node.address(1)}:9042" in str(error)
            scan_seconds = time.monotonic() - started

            started = time.monotonic()
            run = zygote.run(["--store", uri(fault_node, "frozen"), "sql", "SELECT count(*) FROM t"],
                             env=good(), timeout=BOUND * 2)
            cli_seconds = time.monotonic() - started
            assert not run.timed_out and cli_seconds < BOUND, run
            assert_one_line_error(run, f"Cassandra at {fault_node.address(1)}:9042")
            print(f"frozen node: scan failed after {scan_seconds:.1f}s ({error}); "
                  f"CLI after {cli_seconds:.1f}s ({run.stderr.strip()})")
        finally:
            os.kill(jvm, signal.SIGCONT)
    finally:
        store.close()


def test_a_node_stopped_mid_ingest_and_mid_query(fault_node: Any, zygote: Zygote, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PASSWORD_ENV, "cassandra")
    target = uri(fault_node, "stopped")
    first = write_events(tmp_path / "first.csv", range(0, 25_600), seed=1)
    second = write_events(tmp_path / "second.csv", range(100_000, 130_000), seed=2)
    store = colonnade.connect(target)
    ds = store.create_dataset("t", EVENTS_SCHEMA, segment_rows=100)
    assert ingest(store, "t", first).version == 1  # 256 segments

    # an ingest frozen after 3 of its 300 segments, and a query that has read its first batch
    child = zygote.spawn(["--store", target, "ingest", "t", str(second)],
                         env=good({"COLONNADE_FAULTS": "after_chunks:3:stop"}))
    deadline = time.monotonic() + BOUND
    while _process_state(child.pid) != "T":
        assert time.monotonic() < deadline, "the ingest never reached its pause point"
        time.sleep(0.05)
    batches = ds.scan(columns=["id", "note"]).to_batches()
    assert next(batches).num_rows == 100

    fault_node.stop_node(1)
    try:
        started = time.monotonic()
        with pytest.raises(StoreError) as info:
            for _ in batches:
                assert time.monotonic() - started < BOUND
        assert f"Cassandra at {fault_node.address(1)}:9042" in str(info.value)
        assert time.monotonic() - started < BOUND
        store.close()

        started = time.monotonic()
        child.signal(signal.SIGCONT)
        run = child.wait(timeout=BOUND * 2)
        assert not run.timed_out and time.monotonic() - started < BOUND, run
        # "cannot reach ..." or "write segments ... failed on ...: no answer within 5 s", by timing
        assert_one_line_error(run, f"Cassandra at {fault_node.address(1)}:9042")

        down = zygote.run(["--store", target, "sql", "SELECT count(*) FROM t"], env=good())
        assert_one_line_error(down, f"cannot reach Cassandra at {fault_node.address(1)}:9042")
    finally:
        fault_node.start_node(1)

    with colonnade.connect(target) as store:
        ds = store.dataset("t")
        assert ds.version == 1  # the failed ingest committed nothing
        assert store.sql("SELECT count(*) AS n FROM t").column("n")[0].as_py() == 25_600
        orphans = ds.vacuum(grace_seconds=0, dry_run=True).segments
        assert orphans >= 3
        again = zygote.run(["--store", target, "ingest", "t", str(second)], env=good())
        assert again.status == 0 and again.stdout.startswith("ingested 30,000 rows from 1 file into t (v2)"), again
        assert ds.vacuum(grace_seconds=0).segments == orphans
        ids = store.sql("SELECT id FROM t ORDER BY id").column("id").to_pylist()
        assert ids == list(range(0, 25_600)) + list(range(100_000, 130_000))
        assert ds.verify()[1] == []
