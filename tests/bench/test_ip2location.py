"""``colonnade bench ip2location``: the DB11-like generator and its expansion, and small runs of
the whole benchmark through the real console script whose report must hold checked answers and
every target, met or not."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from colonnade.bench import ip2location_data as data
from colonnade.bench.ip2location_chart import per_second

COLONNADE = str(Path(sys.executable).with_name("colonnade"))


# -- the generator -----------------------------------------------------------------------------------
@pytest.mark.unit
def test_the_table_is_a_pure_function_of_its_arguments() -> None:
    a, b = data.range_table(2_000_000, 3000, seed=7), data.range_table(2_000_000, 3000, seed=7)
    for name in ("ip_from", "length", "city", "starts"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert list(a.places.city_name) == list(b.places.city_name)
    assert data.expand(a, 123_456, 200_000).equals(data.expand(b, 123_456, 200_000))
    other = data.range_table(2_000_000, 3000, seed=8)
    assert not np.array_equal(a.length, other.length)
    # the table's shape: exactly the addresses asked for, ranges in ip order, disjoint, in IPv4
    assert a.ranges == 3000 and a.addresses == 2_000_000 and int(a.length.sum()) == 2_000_000
    assert (a.length >= 1).all() and a.ip_from[0] == data.FIRST_IP
    assert (a.ip_from[1:] > a.ip_to[:-1]).all() and a.ip_to[-1] <= data.LAST_IP
    assert len(a.gaps()) > 0  # some unallocated space between ranges


@pytest.mark.unit
def test_the_table_is_skewed_like_db11() -> None:
    t = data.range_table(20_000_000, seed=1)
    assert t.ranges == data.default_ranges(20_000_000) == 28_571
    lengths = np.sort(t.length)
    median = lengths[len(lengths) // 2]
    # many small ranges, a few huge ones
    assert median < lengths.mean() / 3
    assert lengths[-1] > 500 * median
    assert lengths[-10:].sum() > 0.05 * t.addresses
    counts = data.country_counts(t)
    assert sum(counts.values()) == t.addresses
    assert len(counts) >= 200 and len(t.places.country_code) == data.COUNTRIES == 250
    share = sorted(counts.values(), reverse=True)
    assert 0.1 < share[0] / t.addresses < 0.5  # Zipf-ish: one large country, a long tail
    assert share[0] > 10 * share[20] > 0
    # regions and cities per country; one time zone per region, one zip per city
    assert len(set(t.places.region_name)) == len(t.places.region_name) > 500
    assert len(t.places.city_name) > 5000
    assert all(len(z) == 5 and z.isdigit() for z in t.places.city_zip[:100])
    assert all(tz[0] in "+-" and tz[3] == ":" for tz in t.places.time_zone)


@pytest.mark.unit
def test_expansion_equals_the_naive_expansion_in_any_slicing() -> None:
    t = data.range_table(5000, 80, seed=3)
    naive = [dict(zip(data.FIELDS, r, strict=True)) for r in data.naive_rows(t)]
    assert len(naive) == 5000
    whole = pa.Table.from_batches(list(data.batches(t, 0, 5000, batch_rows=257)))
    assert whole.num_rows == 5000 and whole.column("ip").type == pa.int64()
    assert whole.to_pylist() == naive
    assert pc.all(pc.greater(whole.column("ip")[1:], whole.column("ip")[:-1])).as_py()  # sorted by ip
    for lo, hi in ((0, 1), (17, 18), (999, 2345), (4990, 5000), (3000, 3000)):
        assert data.expand(t, lo, hi).to_pylist() == naive[lo:hi]
    # the ground truth agrees with the rows: every address, a gap, the prefix
    for i in (0, 1, 1234, 4999):
        assert data.location_of(t, naive[i]["ip"]) == naive[i]
        assert data.location_of(t, naive[i]["ip"], rows=i) is None
    assert all(data.location_of(t, int(g)) is None for g in t.gaps())
    assert np.array_equal(t.ip_of_row(np.arange(5000)), np.array([r["ip"] for r in naive]))
    assert data.country_counts(t, 1500) == dict(Counter(r["country_code"] for r in naive[:1500]))
    with pytest.raises(ValueError, match="outside"):
        data.expand(t, 0, 5001)


@pytest.mark.unit
def test_load_rate_windows_of_a_cumulative_timeline() -> None:
    xs, ys = per_second([(0.0, 0), (0.5, 100), (1.5, 300), (2.0, 600)], width=1.0)
    assert xs == [1.0, 2.0] and ys == [100.0, 500.0]
    assert per_second([(0.0, 0)]) == ([], [])


# -- the whole benchmark through the console script --------------------------------------------------
def _bench(out: Path, *args: str, addresses: int = 600_000) -> subprocess.CompletedProcess[str]:
    return subprocess.run([COLONNADE, "bench", "ip2location", "--addresses", str(addresses), "--out", str(out),
                           *args], capture_output=True, text=True, timeout=900)


def _check_report(out: Path, kind: str, addresses: int, seed: int = 42) -> dict[str, Any]:
    report = json.loads((out / f"ip2location-{kind}.json").read_text())
    assert report["problems"] == [] and report["addresses"] == addresses
    load, q = report["load"], report["queries"]
    assert load["rows"] == addresses and load["rows_per_s"] > 0 and load["workers"] == 2
    assert load["stored_bytes"] == sum(load["column_bytes"].values()) > 0
    assert load["timeline"][-1][1] == addresses
    assert q["count"]["answer"] == addresses and q["count"]["answered_from"] == "statistics"
    lookups = q["lookups"]
    assert lookups["n"] >= 50 and all(r["ok"] for r in lookups["runs"])
    assert {r["found"] for r in lookups["runs"]} == {True, False}  # allocated and unallocated ips
    # a lookup reads one segment of several
    assert lookups["explain"]["segments_read"] == 1 < lookups["explain"]["segments_total"]
    assert 0 < lookups["p50_s"] <= lookups["p95_s"]
    # counts by country against the rows themselves (the expansion, counted by Arrow)
    table = data.range_table(addresses, report["ranges"], seed)
    codes = pa.concat_arrays([b.column("country_code").dictionary_decode()
                              for b in data.batches(table, 0, addresses)])
    counted = {v["values"]: v["counts"] for v in pc.value_counts(codes).to_pylist()}
    assert [c["answer"] for c in q["by_country"]] == [counted[c["country"]] for c in q["by_country"]]
    assert all(c["ok"] for c in q["by_country"]) and len(q["by_country"]) == 3
    # ... reading the country codes alone (the first column: not the ip column's ~1 byte a row)
    assert all(c["explain"]["bytes_read"] < 0.05 * addresses for c in q["by_country"])
    names = " ".join(t["target"] for t in report["targets"])
    for part in ("addresses/s", "30x", "byte stored per address", "count(*)", "point lookup p50"):
        assert part in names
    assert all(t["met"] in (True, False, None) for t in report["targets"])
    assert any(t["met"] is not None for t in report["targets"])
    text = (out / f"ip2location-{kind}.md").read_text()
    assert "## Targets" in text and "## Checks" in text
    assert "| yes |" in text or "| **no** |" in text
    assert (out / f"ip2location-{kind}.png").stat().st_size > 10_000
    assert report["machine"]["cpus"] and report["machine"]["pyarrow"]
    return report


def test_bench_on_the_embedded_store_without_cassandra(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run = _bench(out, "--workers", "2", "--reference-rows", "20000", "--cassandra", "127.0.0.1:1")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Traceback" not in run.stderr
    report = _check_report(out, "sqlite", 600_000)
    assert report["reference"] == {"skipped": "no Cassandra answers at 127.0.0.1:1"}
    assert "skipped: no Cassandra answers" in (out / "ip2location-sqlite.md").read_text()
    assert report["load"]["disk_bytes"] > report["load"]["stored_bytes"]
    assert report["ratios"] == {}


@pytest.mark.cassandra
def test_bench_on_cassandra_with_the_row_layouts(cassandra_node: str, cassandra_admin: Any, tmp_path: Path) -> None:
    keyspace = f"t_{uuid.uuid4().hex[:8]}"
    out = tmp_path / "out"
    try:
        run = _bench(out, "--workers", "2", "--reference-rows", "5000",
                     "--store", f"cassandra://{cassandra_node}/{keyspace}")
    finally:
        cassandra_admin.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    report = _check_report(out, "cassandra", 600_000)
    ref = report["reference"]
    assert ref["contact"] == cassandra_node and ref["processes"] in (1, 2, 4)
    assert set(ref["calibration_rows_per_s"]) == {"1", "2", "4"}
    for name, layout in ref["layouts"].items():
        assert layout["rows"] == 5_000 and layout["rows_per_s"] > 0 and layout["problems"] == [], name
        assert layout["count"]["answer"] == 5_000 or layout["count"]["error"]
        ip_only = layout["lookups"]["ip_only"]
        assert ip_only["n"] + ip_only["errors"] >= 50
        assert all(r["ok"] for r in ip_only["runs"] if r["error"] is None)
        truth = data.country_counts(data.range_table(600_000, report["ranges"], 42), 5_000)
        assert all(c["answer"] == truth[c["country"]] for c in layout["by_country"] if c["error"] is None)
    assert set(report["ratios"]) == {"load_vs_country", "load_vs_country_region_city"}
    assert report["machine"]["cassandra_driver"]
    # the reference tables are gone
    tables = {r.table_name for r in cassandra_admin.execute(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = 'colonnade_bench_refs'")}
    assert ref["tag"] and not any(t.endswith(ref["tag"]) for t in tables)


@pytest.mark.parametrize(("args", "message"), [
    (["--addresses", "0"], "--addresses must be at least 1"),
    (["--addresses", "1000", "--ranges", "1001"], "--ranges must be between 1 and --addresses"),
    (["--workers", "0"], "--workers must be at least 1"),
    (["--reference-rows", "-1"], "--reference-rows must be 0 or more"),
])
def test_bad_options_are_one_line_errors(tmp_path: Path, args: list[str], message: str) -> None:
    run = subprocess.run([COLONNADE, "bench", "ip2location", "--out", str(tmp_path), *args],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], run.stderr
    assert not list(tmp_path.glob("ip2location-*"))


def test_an_unreachable_store_is_a_one_line_error(tmp_path: Path) -> None:
    run = subprocess.run([COLONNADE, "bench", "ip2location", "--addresses", "1000", "--out", str(tmp_path),
                          "--store", "cassandra://127.0.0.1:1/nowhere"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "Traceback" not in run.stderr
