"""``colonnade bench adimpressions``: the event generator, the producer process and the
references alone, and small runs of the whole benchmark through the real console script whose
report must show every produced event stored once and answers equal to the ground truth."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from colonnade.bench import adimpressions_data as data
from colonnade.bench import adimpressions_refs as refs

COLONNADE = str(Path(sys.executable).with_name("colonnade"))


# -- the generator -----------------------------------------------------------------------------------
@pytest.mark.unit
def test_events_are_a_pure_function_of_seed_and_id() -> None:
    whole = pa.concat_tables(data.events(7, 0, 150_000)).combine_chunks()
    assert whole.column("id").to_pylist() == list(range(150_000))
    # any range, however it cuts the blocks, holds the same events as the whole
    part = pa.concat_tables(data.events(7, 65_000, 70_000)).combine_chunks()
    assert part.drop_columns(["timestamp"]).equals(whole.slice(65_000, 70_000).drop_columns(["timestamp"]))
    other = data.block(8, 0)
    assert not other.column("geo").equals(data.block(7, 0).column("geo"))


@pytest.mark.unit
def test_geos_and_publishers_are_skewed() -> None:
    t = data.ground_truth(1, 200_000)
    geo = pc.value_counts(t.column("geo").combine_chunks().cast(pa.string()))
    counts = dict(zip(geo.field(0).to_pylist(), geo.field(1).to_pylist(), strict=True))
    uniform = 200_000 / len(data.GEOS)
    assert len(counts) == len(data.GEOS)
    # weights 1/k: the first geo twice the second and four times the fourth, the last ~1/51 of it
    assert counts["CA"] > 8 * uniform
    assert counts["CA"] / counts["TX"] == pytest.approx(2, rel=0.1)
    assert counts["CA"] / counts["NY"] == pytest.approx(4, rel=0.1)
    assert counts["WY"] < uniform / 2
    pub = pc.value_counts(t.column("publisher").combine_chunks().cast(pa.string()))
    pubs = dict(zip(pub.field(0).to_pylist(), pub.field(1).to_pylist(), strict=True))
    assert pubs["pub0"] / pubs["pub1"] == pytest.approx(2 ** 1.1, rel=0.1)
    assert pubs["pub0"] / pubs["pub9"] == pytest.approx(10 ** 1.1, rel=0.15)


@pytest.mark.unit
def test_payloads_are_csv_lines_of_about_63_bytes_that_decode_to_the_events() -> None:
    events = pa.concat_tables(data.events(3, 20_000_000, 100_000, timestamp_ms=1_718_000_000_000)).combine_chunks()
    lines = data.encode(events)
    assert len(lines) == 100_000
    mean = sum(map(len, lines)) / len(lines)
    assert 58 <= mean <= 68, mean
    assert all(b"\n" not in line and b'"' not in line for line in lines[:1000])
    back = data.decode(lines)
    assert back.schema == data.SCHEMA
    expected = pa.table({f.name: events.column(f.name).cast(f.type) for f in data.SCHEMA})
    assert back.equals(expected)


@pytest.mark.unit
def test_answer_checks_accept_ties_broken_either_way_and_catch_wrong_values() -> None:
    table = pa.table({"id": pa.array([0, 1, 2, 3], pa.int64()), "publisher": ["a", "b", "b", "c"],
                      "geo": ["X", "Y", "Z", "Z"], "bid": [0.5, 0.25, 0.25, 1.0]})
    truth = refs.truth_of(table)
    assert truth.events == 4 and truth.id_sum == 6
    assert truth.answers["Q1"][0] == (2, "Z")
    assert refs.answer_problems("Q1", [(2, "Z"), (1, "Y"), (1, "X")], truth) == []
    assert refs.answer_problems("Q1", [(2, "Z"), (1, "X"), (1, "Y")], truth) == []  # a tie
    assert refs.answer_problems("Q1", [(2, "Z"), (1, "X")], truth)  # a row missing
    assert refs.answer_problems("Q2", [(1.25, "Z"), (0.5, "X"), (0.26, "Y")], truth)  # a wrong sum
    assert refs.answer_problems("Q3", [(1.0, "c"), (0.5, "b"), (0.5, "a")], truth) == []


# -- the producer and the references on a real broker ------------------------------------------------
@pytest.fixture
def topic(kafka_bootstrap: str) -> Any:
    name = f"adimp-test-{uuid.uuid4().hex[:8]}"
    data.create_topic(kafka_bootstrap, name, 4)
    yield name
    data.delete_topic(kafka_bootstrap, name)


@pytest.mark.kafka
def test_producer_process_sends_every_event_once_and_the_ceiling_reads_them(kafka_bootstrap: str,
                                                                           topic: str) -> None:
    run = subprocess.run([sys.executable, "-m", "colonnade.bench.adimpressions_data", "--bootstrap",
                          kafka_bootstrap, "--topic", topic, "--events", "30000", "--seed", "5"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["events"] == 30_000
    assert 55 <= result["mean_payload_bytes"] <= 68
    ends = data.topic_end_offsets(kafka_bootstrap, topic)
    assert len(ends) == 4 and sum(ends.values()) == 30_000
    ceiling = refs.run_ceiling(kafka_bootstrap, topic, 30_000, lambda _: None)
    assert ceiling.events == 30_000 and ceiling.events_per_s > 0
    assert ceiling.ids is not None and np.array_equal(np.sort(ceiling.ids), np.arange(30_000))


@pytest.mark.kafka
def test_rate_limited_producer_keeps_its_rate(kafka_bootstrap: str, topic: str) -> None:
    result = data.produce(kafka_bootstrap, topic, 6000, seed=1, start=100, rate=3000)
    assert result.events == 6000 and result.start_id == 100
    assert 1.6 <= result.seconds <= 4.0, result.seconds  # 2 s at 3,000/s, plus the final flush


@pytest.mark.kafka
def test_duckdb_reference_answers_equal_the_ground_truth(kafka_bootstrap: str, topic: str, tmp_path: Path) -> None:
    data.produce(kafka_bootstrap, topic, 20_000, seed=9)
    r = refs.run_duckdb(kafka_bootstrap, topic, 12_000, tmp_path / "ref.db", lambda _: None)
    assert r.events == 12_000 and r.ids is not None and len(np.unique(r.ids)) == 12_000
    truth = refs.truth_of(data.ground_truth(9, 20_000).take(r.ids))
    assert all(refs.answer_problems(q, r.answers[q], truth) == [] for q in refs.QUERIES)
    assert not (tmp_path / "ref.db").exists()


# -- the whole benchmark through the console script --------------------------------------------------
def _bench(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([COLONNADE, "bench", "adimpressions", "--events", "20000", "--reference-events", "2000",
                           "--freshness-seconds", "3", "--rate", "2000", "--out", str(out), *args],
                          capture_output=True, text=True, timeout=600)


def _check_report(report: dict[str, Any], out: Path, kind: str) -> None:
    total = report["total_events"]
    assert total == sum(p["events"] for p in report["produced"]) == 20_000 + 6_000
    final = report["final"]
    assert final["count"] == total
    assert final["id_sum"] == total * (total - 1) // 2
    assert final["answers_match"] is True and report["problems"] == []
    # the answers against a second engine: pyarrow's group-by over the regenerated events
    events = data.ground_truth(report["seed"], total)
    geo = events.column("geo").combine_chunks().cast(pa.string())
    by_geo = pa.table({"geo": geo, "bid": events.column("bid")}).group_by("geo").aggregate(
        [("bid", "count"), ("bid", "sum")])
    counts = dict(zip(by_geo.column("geo").to_pylist(), by_geo.column("bid_count").to_pylist(), strict=True))
    sums = dict(zip(by_geo.column("geo").to_pylist(), by_geo.column("bid_sum").to_pylist(), strict=True))
    assert [c for c, _ in final["answers"]["Q1"]] == sorted(counts.values(), reverse=True)[:20]
    assert all(counts[g] == c for c, g in final["answers"]["Q1"])
    assert all(abs(sums[g] - s) < 1e-6 for s, g in final["answers"]["Q2"])
    col = report["colonnade"]
    assert [c["events"] for c in col["checkpoints"]] == [6666, 13333, 20000]
    assert all(c["ingest_events_per_s"] > 0 and c["segments"] >= 1 for c in col["checkpoints"])
    assert col["sustained_events_per_s"] > 0
    assert report["stream_report"]["events"] == total and report["stream_report"]["rejected"] == 0
    assert len(report["queries"]) > 0 and all(q["rows"] <= total for q in report["queries"])
    fresh = col["freshness_phase"]["freshness"]
    assert fresh["commits"] > 0 and 0 < fresh["p50_s"] <= fresh["p95_s"]
    assert 55 <= report["mean_payload_bytes"] <= 68
    assert report["machine"]["kafka"] and report["machine"]["duckdb"]
    ceiling = report["references"]["ceiling"]
    assert ceiling["events"] == 20_000 and ceiling["events_per_s"] > 0
    assert report["reference_checks"]["ceiling"]["distinct_ids"] == 20_000
    assert report["reference_checks"]["duckdb"]["answers_match"] is True
    assert report["ratios"]["ingest_vs_ceiling"] > 0
    assert {t["target"].split(" ")[0] for t in report["targets"]} >= {"sustained", "Q1", "Q2", "Q3", "freshness"}
    for suffix in (".md", ".png"):
        assert (out / f"adimpressions-{kind}{suffix}").stat().st_size > 1000


@pytest.mark.kafka
def test_bench_on_the_embedded_store(kafka_bootstrap: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run = _bench(out, "--bootstrap", kafka_bootstrap, "--references", "ceiling,duckdb",
                 "--sample-on", "geo,publisher")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "main phase" in run.stderr and "Traceback" not in run.stderr
    report = json.loads((out / "adimpressions-sqlite.json").read_text())
    _check_report(report, out, "sqlite")
    assert report["preload"] is False and report["produced"][0]["phase"] == "main"
    assert "cassandra" not in report["references"]
    # the stream kept the sample current: it represents the last commit
    [sample] = report["final"]["samples"]
    assert report["sample"]["on"] == ["geo", "publisher"] and sample["rows"] > 0
    assert "sample kept current by every commit" in (out / "adimpressions-sqlite.md").read_text()


@pytest.mark.kafka
@pytest.mark.cassandra
def test_bench_on_cassandra_with_the_row_per_event_reference(kafka_bootstrap: str, cassandra_node: str,
                                                             cassandra_admin: Any, tmp_path: Path) -> None:
    keyspace = f"t_{uuid.uuid4().hex[:8]}"
    out = tmp_path / "out"
    try:
        run = _bench(out, "--bootstrap", kafka_bootstrap, "--store", f"cassandra://{cassandra_node}/{keyspace}",
                     "--preload")
    finally:
        cassandra_admin.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads((out / "adimpressions-cassandra.json").read_text())
    _check_report(report, out, "cassandra")
    assert report["preload"] is True and report["produced"][0]["phase"] == "preload"
    check = report["reference_checks"]["cassandra"]
    assert check["events"] == 2000 and check["distinct_ids"] == 2000 and check["answers_match"] is True
    assert report["references"]["cassandra"]["events_per_s"] > 0
    assert report["machine"]["cassandra"]


def test_bench_with_no_broker_is_one_line_error(tmp_path: Path) -> None:
    run = subprocess.run([COLONNADE, "bench", "adimpressions", "--events", "30", "--bootstrap", "127.0.0.1:1",
                          "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert run.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "Traceback" not in run.stderr


def test_unknown_reference_is_a_usage_error(tmp_path: Path) -> None:
    run = subprocess.run([COLONNADE, "bench", "adimpressions", "--references", "ceiling,spark",
                          "--out", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "unknown reference(s) spark" in run.stderr and "Traceback" not in run.stderr
