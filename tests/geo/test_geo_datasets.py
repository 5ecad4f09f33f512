"""GDELT-shaped events partitioned by a Z-order cell and sorted by a Hilbert key, on both stores:
bounding-box queries (1°, 10°, 45°, written as BETWEEN, >=/< and mixed) answer as DuckDB does
over the raw rows, read fewer segments the smaller the box, and rows with NULL, NaN or
out-of-range coordinates are kept (in the curve's NULL partition), counted and found."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from click.testing import CliRunner

from colonnade.bench.gdelt_data import GDELT_SCHEMA, iter_batches
from colonnade.cli.main import cli
from colonnade.store import Store

LAT, LON = "ActionGeo_Lat", "ActionGeo_Long"
PARTITION = f"zorder({LAT}, {LON}, 6)"
SORT = f"hilbert({LAT}, {LON}, 16)"
ROWS = 60_000
BAD = [(None, 10.0), (10.0, None), (math.nan, 5.0), (95.0, 5.0), (-90.5, 5.0), (10.0, 181.0), (10.0, -math.inf)]


def events() -> pa.Table:
    table = pa.Table.from_batches(list(iter_batches(ROWS, seed=11)))
    lat = table.column(LAT).to_pylist()
    lon = table.column(LON).to_pylist()
    for i, (a, o) in enumerate(BAD):  # the generator writes NULL for both or neither
        lat[100 + i], lon[100 + i] = a, o
    table = table.set_column(table.schema.get_field_index(LAT), LAT, pa.array(lat, pa.float64()))
    return table.set_column(table.schema.get_field_index(LON), LON, pa.array(lon, pa.float64()))


def outside(data: pa.Table) -> int:
    """Rows with no cell: a NULL, NaN or out-of-range coordinate."""
    lat, lon = data.column(LAT).to_pylist(), data.column(LON).to_pylist()
    return sum(1 for a, o in zip(lat, lon, strict=True)
               if a is None or o is None or not (-90 <= a <= 90 and -180 <= o <= 180))


def box_query(lat: float, lon: float, side: float, form: str) -> str:
    lat0, lat1, lon0, lon1 = lat - side / 2, lat + side / 2, lon - side / 2, lon + side / 2
    where = {
        "between": f"{LAT} BETWEEN {lat0} AND {lat1} AND {LON} BETWEEN {lon0} AND {lon1}",
        "half-open": f"{LAT} >= {lat0} AND {LAT} < {lat1} AND {LON} >= {lon0} AND {LON} < {lon1}",
        "mixed": f"{lon0} <= {LON} AND {LAT} > {lat0} AND {LON} <= {lon1} AND {LAT} <= {lat1}",
    }[form]
    return (f"SELECT count(*) AS n, sum(NumArticles) AS articles, min(GLOBALEVENTID) AS first "
            f"FROM gdelt WHERE {where}")


@pytest.fixture(scope="module")
def loaded(module_store: Store) -> tuple[Store, pa.Table]:
    """Loaded once per backend: the tests that use it only read."""
    store, data = module_store, events()
    ds = store.create_dataset("gdelt", GDELT_SCHEMA, partition_by=PARTITION, sort_by=SORT, segment_rows=1500)
    result = ds.append(data)
    assert result.off_curve == outside(data) > len(BAD)
    return store, data


def test_box_queries_answer_as_duckdb_and_small_boxes_read_few_segments(loaded: tuple[Store, pa.Table]) -> None:
    store, data = loaded
    con = duckdb.connect()
    con.register("gdelt", data)
    rng = random.Random(5)
    valid = data.filter(pc.is_finite(data.column(LAT))).select([LAT, LON]).to_pylist()
    read: dict[float, list[int]] = {}
    total = None
    for side in (1.0, 10.0, 45.0):
        for i in range(6):
            point = rng.choice(valid)  # boxes around real events, so most find rows
            query = box_query(point[LAT], point[LON], side, ("between", "half-open", "mixed")[i % 3])
            assert store.sql(query).to_pylist() == con.sql(query).to_arrow_table().to_pylist(), query
            report = store.explain(query).to_dict()
            scan = report["scans"]["gdelt"][0]
            total = scan["segments_total"]
            read.setdefault(side, []).append(scan["segments_scanned"])
            curve = scan["curve_ranges"][0]
            assert curve["transform"] == PARTITION and curve["cells_read"] < curve["cells_total"]
    mean = {side: sum(v) / len(v) for side, v in read.items()}
    assert mean[1.0] < mean[10.0] < mean[45.0], read
    assert total is not None and max(read[1.0]) <= 0.02 * total, (read, total)


def test_rows_without_a_cell_are_kept_and_found(loaded: tuple[Store, pa.Table]) -> None:
    store, data = loaded
    con = duckdb.connect()
    con.register("gdelt", data)
    for where in (f"{LAT} > 90", f"{LAT} < -90 OR {LON} > 180", f"{LAT} IS NULL", f"{LON} IS NULL",
                  f"isnan({LAT})", f"{LAT} = 10 AND {LON} > 179", f"{LAT} BETWEEN 9 AND 11"):
        query = f"SELECT GLOBALEVENTID, {LAT}, {LON} FROM gdelt WHERE {where} ORDER BY GLOBALEVENTID"
        # repr: NaN is not equal to itself
        assert repr(store.sql(query).to_pylist()) == repr(con.sql(query).to_arrow_table().to_pylist()), where
    assert store.sql("SELECT count(*) AS n FROM gdelt").to_pylist() == [{"n": ROWS}]


def test_a_scan_filter_reports_its_box_and_key_ranges(loaded: tuple[Store, pa.Table]) -> None:
    store, data = loaded
    expr = (pc.field(LAT) >= 38.0) & (pc.field(LAT) <= 39.0) & (pc.field(LON) >= -77.5) & (pc.field(LON) < -76.5)
    scan = store.dataset("gdelt").scan(columns=["GLOBALEVENTID"], filter=expr)
    plan = scan.plan()
    curve = plan.metrics.curve_ranges[0]
    assert curve["box"] == [38.0, 39.0, -77.5, -76.5] and 1 <= curve["ranges"] <= 2
    assert plan.metrics.partitions_scanned <= 3  # the box's cells (one or two) and the NULL partition
    got = sorted(scan.to_arrow().column(0).to_pylist())
    assert got == sorted(data.filter(expr).column("GLOBALEVENTID").to_pylist()) and got


def test_rows_are_stored_in_hilbert_order_within_a_segment(loaded: tuple[Store, pa.Table]) -> None:
    from colonnade.schema.curves import cell_box, curve_keys

    store, _ = loaded
    ds = store.dataset("gdelt")
    key, segments = max(((segs[0].values[0], segs) for segs in ds.snapshot().by_partition().values()
                         if segs[0].values[0] is not None), key=lambda kv: sum(s.rows for s in kv[1]))
    lat_lo, lat_hi, lon_lo, lon_hi = cell_box("zorder", key, 6)
    expr = ((pc.field(LAT) >= lat_lo) & (pc.field(LAT) <= lat_hi)
            & (pc.field(LON) >= lon_lo) & (pc.field(LON) <= lon_hi))
    batches = [b for b in ds.scan(columns=[LAT, LON], filter=expr).to_batches() if b.num_rows > 1]
    assert sum(b.num_rows for b in batches) >= sum(s.rows for s in segments) - len(batches)
    for batch in batches:  # a batch is part of one segment
        keys = curve_keys("hilbert", batch.column(LAT), batch.column(LON), 16).to_pylist()
        assert keys == sorted(keys)


def test_cli_ingest_and_explain_with_curve_keys(tmp_path: Path) -> None:
    data = events().select(["GLOBALEVENTID", "NumArticles", LAT, LON])
    source = tmp_path / "events.csv"
    import pyarrow.csv as pacsv

    pacsv.write_csv(data, source)
    store = str(tmp_path / "s.db")
    runner = CliRunner()
    done = runner.invoke(cli, ["--store", store, "ingest", "gdelt", str(source),
                               "--partition-by", PARTITION, "--sort-by", SORT], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    assert f"{outside(data):,} rows with NULL, NaN or out-of-range coordinates" in done.output, done.output
    info = runner.invoke(cli, ["--store", store, "describe", "gdelt", "--json"], catch_exceptions=False)
    assert json.loads(info.output)["sort_by"] == [SORT]
    query = f"SELECT count(*) FROM gdelt WHERE {LAT} BETWEEN 38 AND 39 AND {LON} BETWEEN -78 AND -77"
    out = runner.invoke(cli, ["--store", store, "explain", "--json", query], catch_exceptions=False)
    curve = json.loads(out.output)["scans"]["gdelt"][0]["curve_ranges"][0]
    assert curve["cells_read"] == 1 and curve["key_ranges"] == [[curve["key_ranges"][0][0]] * 2]
    bad = runner.invoke(cli, ["--store", store, "ingest", "other", str(source),
                              "--partition-by", "zorder(ActionGeo_Lat, Nope, 6)"])
    assert bad.exit_code != 0 and "Nope" in bad.output and "Traceback" not in bad.output
