"""The stream through its Python API and its command, on a real broker and both stores: rows and
positions committed together, restarts that continue from the log, compaction as it goes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import stream_helpers
from stream_helpers import table_stats

from colonnade.errors import CommitConflictError
from colonnade.store import Store
from colonnade.stream import CommitEvent, StreamOptions, run_stream
from colonnade.table.commits import position_id

pytestmark = pytest.mark.kafka

COLONNADE = str(Path(sys.executable).with_name("colonnade"))
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("geo", pa.string()), ("bid", pa.float64())])
COLUMNS = "id:int64 not null,geo:string,bid:double"


def new_topic(bootstrap: str, partitions: int = 4) -> str:
    return stream_helpers.new_topic(bootstrap, "t", partitions).name


def _producer(bootstrap: str) -> Any:
    """Idempotent, so a retried first batch of a just-created topic cannot land after later ones:
    the tests name the offset each message gets."""
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})


def produce(bootstrap: str, topic: str, ids: range, bad: dict[int, bytes] | None = None,
            partitions: int = 4) -> None:
    """One JSON message per id, round-robin over the partitions; ``bad`` replaces some."""
    p = _producer(bootstrap)
    for i in ids:
        value = (bad or {}).get(i) or json.dumps({"id": i, "geo": f"G{i % 5}", "bid": i / 4}).encode()
        p.produce(topic, value, partition=i % partitions)
        if i % 5000 == 0:
            p.poll(0)
    assert p.flush(30) == 0


def test_a_stream_commits_rows_with_their_positions_and_a_restart_adds_only_new_events(
        store: Store, kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = new_topic(kafka_bootstrap)
    produce(kafka_bootstrap, topic, range(20_000))
    commits: list[CommitEvent] = []
    options = StreamOptions(topic=topic, bootstrap=kafka_bootstrap, schema=SCHEMA, commit_interval=0.3,
                            stop_when_idle=1.5, rejects=tmp_path / "rejects.jsonl")
    report = run_stream(store, "ev", options, on_commit=commits.append)
    assert (report.events, report.rows, report.rejected, report.stopped) == (20_000, 20_000, 0, "idle")
    assert table_stats(store, "ev") == (20_000, 20_000, sum(range(20_000)))
    ds = store.dataset("ev")
    assert ds.positions() == {position_id(topic, p): 5_000 for p in range(4)}
    assert sum(c.rows for c in commits) == 20_000 and commits[-1].version == ds.snapshot().version
    assert all(c.oldest_produced_ms and c.oldest_produced_ms <= c.newest_produced_ms  # type: ignore[operator]
               for c in commits)
    history = ds.history()
    assert {c.kind for c in history} == {"stream"}
    assert all(c.commit_info.info["topic"] == topic for c in history)

    again = run_stream(store, "ev", options)  # nothing new: nothing consumed, nothing committed
    assert (again.events, again.commits) == (0, 0)
    produce(kafka_bootstrap, topic, range(20_000, 26_000))
    more = run_stream(store, "ev", options)
    assert more.events == 6_000
    assert table_stats(store, "ev") == (26_000, 26_000, sum(range(26_000)))
    assert not (tmp_path / "rejects.jsonl").exists()


def test_the_log_decides_where_a_partition_starts_not_the_group(
        store: Store, kafka_bootstrap: str, tmp_path: Path) -> None:
    """A group whose Kafka offsets point past what the dataset holds (e.g. the dataset was
    dropped and made again) still starts from the dataset's own positions."""
    topic = new_topic(kafka_bootstrap)
    produce(kafka_bootstrap, topic, range(4_000))
    options = StreamOptions(topic=topic, bootstrap=kafka_bootstrap, schema=SCHEMA, group="g1",
                            commit_interval=0.3, stop_when_idle=1.5, rejects=tmp_path / "r.jsonl")
    run_stream(store, "first", options)
    run_stream(store, "second", options)  # same group: its offsets say "done"; the log says nothing
    assert table_stats(store, "second") == (4_000, 4_000, sum(range(4_000)))


def test_a_commit_that_advances_a_position_someone_else_advanced_since_it_read_conflicts(store: Store) -> None:
    ds = store.create_dataset("ev", SCHEMA.remove(0).insert(0, pa.field("id", pa.int64())))
    rows = pa.table({"id": [1], "geo": ["a"], "bid": [1.0]})
    base = ds.snapshot().version
    ds.append(rows, positions={"position:kafka:t:0": 10, "position:kafka:t:1": 7}, read_version=base)
    with pytest.raises(CommitConflictError, match="position:kafka:t:1"):  # a zombie that read at `base`
        ds.append(rows, positions={"position:kafka:t:1": 9}, read_version=base)
    ds.append(rows, positions={"position:kafka:t:2": 3}, read_version=base)  # another partition: fine
    assert ds.positions() == {"position:kafka:t:0": 10, "position:kafka:t:1": 7, "position:kafka:t:2": 3}
    assert ds.snapshot().rows == 2
    # positions are no source identity: an ingest of a source is still skipped once, not more
    assert ds.append(rows, source="file:x").version is not None
    assert ds.append(rows, source="file:x").skipped


def test_a_poll_of_bad_messages_only_still_advances_the_positions(
        store: Store, kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = new_topic(kafka_bootstrap, partitions=1)
    produce(kafka_bootstrap, topic, range(3), bad={0: b"x", 1: b"y", 2: b"z"}, partitions=1)
    rejects = tmp_path / "r.jsonl"
    options = StreamOptions(topic=topic, bootstrap=kafka_bootstrap, schema=SCHEMA, commit_interval=0.2,
                            stop_when_idle=1.5, rejects=rejects)
    report = run_stream(store, "ev", options)
    assert (report.rows, report.rejected) == (0, 3)
    assert store.dataset("ev").positions() == {position_id(topic, 0): 3}
    assert [json.loads(line)["offset"] for line in rejects.read_text().splitlines()] == [0, 1, 2]
    assert run_stream(store, "ev", options).rejected == 0  # not consumed (nor rejected) again


def test_compaction_keeps_the_segments_of_a_long_stream_bounded(
        store: Store, kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = new_topic(kafka_bootstrap)
    options = StreamOptions(topic=topic, bootstrap=kafka_bootstrap, schema=SCHEMA, commit_interval=0.1,
                            stop_when_idle=2.0, compact_segments=4, partition_by="geo",
                            rejects=tmp_path / "r.jsonl")
    stop = threading.Event()
    producer = threading.Thread(target=lambda: [produce(kafka_bootstrap, topic, range(k * 500, k * 500 + 500))
                                                for k in range(30) if not time.sleep(0.05)])
    producer.start()
    report = run_stream(store, "ev", options, stop=stop)
    producer.join()
    assert report.compactions >= 2 and report.commits >= 8
    snapshot = store.dataset("ev").snapshot()
    per_partition: dict[str, int] = {}
    for s in snapshot.segments:
        per_partition[s.partition] = per_partition.get(s.partition, 0) + 1
    assert len(per_partition) == 5 and max(per_partition.values()) < 4 + 4  # never far past the trigger
    assert table_stats(store, "ev") == (15_000, 15_000, sum(range(15_000)))


def _run(store_uri: str, *args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([COLONNADE, "--store", store_uri, *args], capture_output=True, text=True,
                          timeout=120, **kw)  # type: ignore[call-overload]


def test_the_command_prints_status_lines_and_a_summary(kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = new_topic(kafka_bootstrap)
    produce(kafka_bootstrap, topic, range(5_000), bad={7: b"{oops"})
    uri = str(tmp_path / "s.db")
    done = _run(uri, "stream", "ev", "--topic", topic, "--bootstrap", kafka_bootstrap, "--columns", COLUMNS,
                "--commit-interval", "0.3", "--stop-when-idle", "2", "--rejects", str(tmp_path / "bad.jsonl"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"streamed 5,000 events from {topic} into ev in ")
    assert "1 rejected message in" in done.stdout and "; idle; next offsets 0:1250, 1:1250" in done.stdout
    status = [line for line in done.stderr.splitlines() if line.startswith("ev: ")]
    assert status and "5,000 events (1 rejected)" in status[-1] and "lag 0:0 1:0 2:0 3:0" in status[-1]
    reject = json.loads((tmp_path / "bad.jsonl").read_text())
    assert (reject["partition"], reject["offset"], reject["raw"]) == (3, 1, "{oops")
    as_json = _run(uri, "stream", "ev", "--topic", topic, "--bootstrap", kafka_bootstrap,
                   "--stop-when-idle", "1", "--json")
    assert json.loads(as_json.stdout)["events"] == 0


def test_the_command_needs_columns_for_a_new_dataset_and_says_so_in_one_line(
        kafka_bootstrap: str, tmp_path: Path) -> None:
    done = _run(str(tmp_path / "s.db"), "stream", "ev", "--topic", "nothing", "--bootstrap", kafka_bootstrap)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == ["error: dataset ev does not exist: give its columns to create it"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_commits_what_is_buffered_and_ends_cleanly(
        kafka_bootstrap: str, tmp_path: Path, sig: signal.Signals) -> None:
    topic = new_topic(kafka_bootstrap)
    produce(kafka_bootstrap, topic, range(3_000))
    uri = str(tmp_path / "s.db")
    proc = subprocess.Popen([COLONNADE, "--store", uri, "stream", "ev", "--topic", topic, "--bootstrap",
                             kafka_bootstrap, "--columns", COLUMNS, "--commit-interval", "3600"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + 60
    assert proc.stderr is not None
    for line in proc.stderr:  # status lines: wait until every event is buffered (none committed)
        if line.startswith("ev: 3,000 events") or time.monotonic() > deadline:
            break
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "stopped" in out and "in 1 commit" in out
    check = _run(uri, "sql", "SELECT count(*) AS n, count(DISTINCT id) AS d FROM ev", "--format", "json")
    assert json.loads(check.stdout) == [{"n": 3_000, "d": 3_000}]


@pytest.mark.parametrize("fmt", ["csv", "avro"])
def test_csv_and_avro_messages_through_the_command(kafka_bootstrap: str, tmp_path: Path, fmt: str) -> None:
    import io

    import fastavro

    from colonnade.stream.decode import avro_schema
    from colonnade.stream.options import parse_columns

    topic = new_topic(kafka_bootstrap)
    parsed = fastavro.parse_schema(avro_schema(parse_columns(COLUMNS)))

    def encode(i: int) -> bytes:
        if fmt == "csv":
            return b"%d,G%d,%s" % (i, i % 5, str(i / 4).encode())
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, {"id": i, "geo": f"G{i % 5}", "bid": i / 4})
        return buf.getvalue()

    p = _producer(kafka_bootstrap)
    for i in range(2_000):
        p.produce(topic, encode(i) if i != 99 else b"\xff", partition=i % 4)
    assert p.flush(30) == 0
    uri = str(tmp_path / "s.db")
    done = _run(uri, "stream", "ev", "--topic", topic, "--bootstrap", kafka_bootstrap, "--format", fmt,
                "--columns", COLUMNS, "--stop-when-idle", "1.5", "--rejects", str(tmp_path / "r.jsonl"))
    assert done.returncode == 0, done.stderr
    check = _run(uri, "sql", "SELECT count(*) AS n, sum(id) AS s, sum(bid) AS b FROM ev", "--format", "json")
    assert json.loads(check.stdout) == [{"n": 1_999, "s": str(sum(range(2_000)) - 99),  # a hugeint: text
                                         "b": sum(i / 4 for i in range(2_000)) - 99 / 4}]
    reject = json.loads((tmp_path / "r.jsonl").read_text())
    assert (reject["partition"], reject["offset"]) == (3, 24)


def test_on_a_terminal_the_status_is_one_live_line(kafka_bootstrap: str, tmp_path: Path) -> None:
    import pty

    topic = new_topic(kafka_bootstrap)
    produce(kafka_bootstrap, topic, range(2_000))
    leader, follower = pty.openpty()
    proc = subprocess.Popen([COLONNADE, "--store", str(tmp_path / "s.db"), "stream", "ev", "--topic", topic,
                             "--bootstrap", kafka_bootstrap, "--columns", COLUMNS, "--stop-when-idle", "3"],
                            stdout=subprocess.PIPE, stderr=follower, text=True,
                            env={**os.environ, "COLUMNS": "200", "TERM": "xterm"})
    os.close(follower)
    out, _ = proc.communicate(timeout=120)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    assert proc.returncode == 0 and out.startswith("streamed 2,000 events")
    text = seen.decode("utf-8", "replace")
    assert "ev: 2,000 events (0 rejected)" in text and "lag 0:0" in text
    assert "\x1b[" in text  # redrawn in place (cursor movements), not printed line after line


def test_a_sample_stays_current_while_a_stream_commits(
        store: Store, kafka_bootstrap: str, tmp_path: Path) -> None:
    """Every micro-batch maintains the dataset's sample: after the stream, the sample records
    the last version, its populations are the table's rows per stratum, and a WITH ERROR count
    per stratum column is exact."""
    from colonnade.table.sample import state_of

    topic = new_topic(kafka_bootstrap)
    produce(kafka_bootstrap, topic, range(10_000))
    options = StreamOptions(topic=topic, bootstrap=kafka_bootstrap, schema=SCHEMA, commit_interval=0.2,
                            stop_when_idle=1.5, rejects=tmp_path / "rejects.jsonl")
    run_stream(store, "ev", options)
    store.create_sample("ev", "geo", 0.1, min_per_stratum=20)
    commits: list[CommitEvent] = []
    for start in (10_000, 20_000):  # two runs: at least two micro-batches
        produce(kafka_bootstrap, topic, range(start, start + 10_000))
        run_stream(store, "ev", options, on_commit=commits.append)
    assert len(commits) >= 2
    ds, sample = store.dataset("ev"), store.dataset("ev_by_geo")
    state = state_of(sample, sample.snapshot())
    assert state.base_version == ds.snapshot().version == commits[-1].version
    assert {v: int(n) for v, n in zip(state.strata.values, state.strata.population, strict=True)} == \
        {(f"G{g}",): 6_000 for g in range(5)}
    exact = store.sql("SELECT geo, count(*) AS n FROM ev GROUP BY geo ORDER BY geo")
    approx = store.sql("SELECT geo, count(*) AS n FROM ev GROUP BY geo ORDER BY geo WITH ERROR 0.1")
    assert approx.to_pylist() == exact.to_pylist()
    assert "sample ev_by_geo" in store.explain(
        "SELECT geo, avg(bid) FROM ev GROUP BY geo WITH ERROR 0.5 BEHAVIOR 'do_nothing'").plan
