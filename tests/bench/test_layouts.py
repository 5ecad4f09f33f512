"""Tests of the GDELT layout study: the row-oriented baselines on Cassandra, the charts, and a
tiny end-to-end run of ``colonnade.bench.gdelt.main`` on a Cassandra store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from colonnade.bench import gdelt
from colonnade.bench.charts import write_charts
from colonnade.bench.layouts import BASELINES, parse_tsv, read_prefix, token_ranges

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _layout(name: str, rows: int, ingest: float | None, read_all: float | None, read_one: float | None,
            size: int | None) -> dict[str, Any]:
    return {"name": name, "rows": rows, "ingest_rows_per_s": ingest, "read_all_rows_per_s": read_all,
            "read_one_rows_per_s": read_one, "bytes": size, "queries_s": {}, "answers": {}, "notes": []}


# -- no Cassandra needed -----------------------------------------------------------------------------
@pytest.mark.unit
def test_charts_from_a_fabricated_report(tmp_path: Path) -> None:
    report = {
        "rows": 4_037_539, "repeats": 3, "store": "cassandra://127.0.0.1/bench",
        "machine": {"cpus": 2, "cpu": "Test CPU"},
        "layouts": [
            _layout("colonnade (cassandra)", 4_037_539, 150_000, 1_200_000, 30_000_000, 400_000_000),
            _layout("row", 200_000, 1_500, 9_000, 30_000, 32_000_000),
            _layout("wide", 200_000, 900, 8_000, 20_000, 27_000_000),
            _layout("blob", 200_000, 1_200, None, 60_000, None),  # a missing figure is drawn as such
            _layout("duckdb+parquet (reference)", 4_037_539, 300_000, 20_000_000, 400_000_000, 440_000_000),
        ],
    }
    paths = write_charts(report, tmp_path / "out")
    assert paths == [tmp_path / "out" / "gdelt.png"]
    data = paths[0].read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 20_000


@pytest.mark.unit
def test_ratios_are_per_record_for_a_prefix() -> None:
    ref = gdelt.LayoutResult("ref", 1000, ingest_s=1.0, read_all_s=1.0, read_one_s=1.0, bytes=1000,
                             queries_s={q: 1.0 for q in gdelt.QUERIES})
    # A tenth of the rows in a tenth of the time and bytes: the same per record.
    part = gdelt.LayoutResult("row", 100, ingest_s=0.1, read_all_s=0.2, read_one_s=0.05, bytes=100,
                              queries_s={q: 0.1 for q in gdelt.QUERIES})
    r = gdelt.ratios(part, ref)
    assert r["ingest"] == pytest.approx(1.0) and r["bytes"] == pytest.approx(1.0)
    assert r["read_all"] == pytest.approx(0.5) and r["read_one"] == pytest.approx(2.0)
    assert all(r[q] == pytest.approx(1.0) for q in gdelt.QUERIES)


@pytest.mark.unit
def test_check_answers_compares_only_equal_row_counts() -> None:
    full = gdelt.LayoutResult("ref", 1000, answers={"Q1": [(1000,)]})
    prefix = gdelt.LayoutResult("row", 100, answers={"Q1": [(100,)]})
    gdelt.check_answers([full, prefix])
    with pytest.raises(gdelt.BenchError, match="Q1"):
        gdelt.check_answers([full, prefix, gdelt.LayoutResult("other", 1000, answers={"Q1": [(999,)]})])


@pytest.mark.unit
def test_prefix_and_token_ranges(tmp_path: Path) -> None:
    path = gdelt.ensure_data(tmp_path, 500)
    prefix = parse_tsv(read_prefix(path, 123))
    assert prefix.num_rows == 123 and prefix.schema == parse_tsv(path.read_bytes()).schema
    assert prefix["GLOBALEVENTID"].to_pylist() == list(range(1, 124))
    assert parse_tsv(b"", ["MonthYear"]).num_rows == 0
    ranges = token_ranges(8)
    assert ranges[0][0] == -(2**63) and ranges[-1][1] == 2**63 - 1
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))


# -- on Cassandra ------------------------------------------------------------------------------------
@pytest.mark.cassandra
def test_baselines_connect_with_the_store_s_socket_options(cassandra_uri: str) -> None:
    """The baselines' connections have Nagle off, as the store's do: a request over one TCP
    segment would otherwise wait ~40 ms for a delayed ACK, a handicap of the setup, not of the
    layout."""
    import socket

    from colonnade.bench.layouts import connect
    from colonnade.config import parse_store_uri

    cluster, session = connect(parse_store_uri(f"{cassandra_uri}/colonnade_test_layouts"))
    try:
        session.execute("SELECT release_version FROM system.local")
        connections = [c for pool in session.get_pools() for c in pool.get_connections()]
        assert connections and all(
            c._socket.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) for c in connections)
    finally:
        cluster.shutdown()


@pytest.mark.cassandra
@pytest.mark.timeout(900)
def test_gdelt_benchmark_smoke_on_cassandra(cassandra_node: str, cassandra_admin: Any,
                                            cassandra_node_is_local: bool, tmp_path: Path) -> None:
    keyspace = "bench_smoke"
    try:
        report = gdelt.main(rows=3000, baseline_rows=1000, store=f"cassandra://{cassandra_node}/{keyspace}",
                            out=tmp_path, repeats=1, warmup_s=0.2, echo=lambda _: None)
    finally:
        for ks in (keyspace, f"{keyspace}_baselines"):
            cassandra_admin.execute(f"DROP KEYSPACE IF EXISTS {ks}", timeout=300)
    saved = json.loads((tmp_path / "gdelt.json").read_text())
    names = [r["name"] for r in saved["layouts"]]
    assert names == ["colonnade (cassandra)", *BASELINES, "colonnade (embedded)", "duckdb+parquet (reference)"]
    by_name = {r["name"]: r for r in saved["layouts"]}
    for name, layout in by_name.items():
        assert layout["rows"] == (1000 if name in BASELINES else 3000), name
        assert layout["read_all_rows_per_s"] and layout["read_one_rows_per_s"], name
        assert set(layout["answers"]) == set(gdelt.QUERIES), name
        # the fixed cost of a query was measured (its answer checked) on the stores and the reference
        assert (layout["fixed_s"] is None) == (name in BASELINES) and (layout["fixed_s"] or 0) < 1, name
        assert (layout["fixed_cached_s"] is None) == (not name.startswith("colonnade")), name
    assert "Fixed cost" in (tmp_path / "gdelt.md").read_text()
    # every layout's reads and queries ran untimed before they were timed, at least once
    assert saved["warmup_s"] == 0.2 and all(r["warmup_rounds"] >= 1 for r in saved["layouts"])
    assert "ran untimed, in turn, for at least 0.2 s" in (tmp_path / "gdelt.md").read_text()
    # each Colonnade ingest is compared with pyarrow's parse-only runs beside it
    for name in ("colonnade (cassandra)", "colonnade (embedded)"):
        layout = by_name[name]
        assert layout["parse_beside_s"] > 0, name
        assert saved["ingest_vs_parse"][name] == pytest.approx(layout["parse_beside_s"] / layout["ingest_s"]), name
    assert "in the runs just before and after it" in (tmp_path / "gdelt.md").read_text()
    # on a node of this machine, the store's reads came after its SSTables were flushed and compacted
    notes = by_name["colonnade (cassandra)"]["notes"]
    assert any("after nodetool flush + compact" in n and n.endswith("reads measured after it")
               for n in notes) == cassandra_node_is_local, notes
    # Answers were checked by the run: layouts holding the same rows agree, and so do the baselines.
    def agree(a: str, b: str) -> bool:
        return all(gdelt.answers_agree([tuple(r) for r in by_name[a]["answers"][q]],
                                       [tuple(r) for r in by_name[b]["answers"][q]], rel=1e-6)
                   for q in gdelt.QUERIES)

    assert agree("colonnade (cassandra)", "duckdb+parquet (reference)")
    assert agree("row", "wide") and agree("row", "blob")
    assert by_name["row"]["answers"]["Q1"] == [[1000]]
    # Bytes on disk are measured when the node is a LocalCluster node on this machine (as in
    # `make test`); only a node the suite was pointed at elsewhere may leave them unmeasured.
    local = any("nodetool flush" in n for n in by_name["row"]["notes"])
    assert local == cassandra_node_is_local, by_name["row"]["notes"]
    for name in ("colonnade (cassandra)", *BASELINES):
        assert (by_name[name]["bytes"] or 0) > 0 or not cassandra_node_is_local, name
    assert report["ratios"].keys() == set(names[:-1])
    md = (tmp_path / "gdelt.md").read_text()
    assert all(f"| {n} |" in md for n in names) and "first 1,000 of 3,000 rows" in md
    assert (tmp_path / "gdelt.png").read_bytes().startswith(PNG_MAGIC)
