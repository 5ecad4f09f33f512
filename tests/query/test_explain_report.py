"""What ``explain`` reports, on both stores: partitions counted right at an exclusive bound,
columns read only to evaluate a filter listed apart, and why a filter was not used for pruning.
Answers are checked against DuckDB over the same rows as a plain Arrow table."""

from __future__ import annotations

import datetime as dt

import duckdb
import pyarrow as pa
import pytest

from colonnade.store import Store

DAYS = 90  # 2024-01-01 .. 2024-03-30: three month partitions


def table() -> pa.Table:
    start = dt.datetime(2024, 1, 1)
    rows = [start + dt.timedelta(hours=6 * i) for i in range(DAYS * 4)]
    return pa.table({
        "id": pa.array(range(len(rows)), pa.int64()),
        "d": pa.array([r.date() for r in rows], pa.date32()),
        "ts": pa.array(rows, pa.timestamp("s")),
        "name": pa.array([f"name-{i % 40}" for i in range(len(rows))]),
        "x": pa.array([i * 0.25 for i in range(len(rows))], pa.float64()),
    })


@pytest.fixture(scope="module")
def stores(module_store: Store) -> tuple[Store, duckdb.DuckDBPyConnection]:
    t = table()
    module_store.create_dataset("m", t.schema, partition_by="month(d)", segment_rows=40).append(t)
    module_store.create_dataset("h", t.schema, partition_by="day(ts)", segment_rows=40).append(t)
    reference = duckdb.connect()
    reference.register("m", t)
    reference.register("h", t)
    return module_store, reference


# (query, partitions that can hold a matching row)
EXCLUSIVE_BOUNDS = [
    ("SELECT count(*) FROM m WHERE d < DATE '2024-02-01'", 1),
    ("SELECT count(*) FROM m WHERE d < '2024-02-01'", 1),
    ("SELECT count(*) FROM m WHERE d > DATE '2024-02-29'", 1),
    ("SELECT count(*) FROM m WHERE d >= DATE '2024-02-01' AND d < DATE '2024-03-01'", 1),
    ("SELECT count(*) FROM m WHERE d <= DATE '2024-01-31'", 1),
    ("SELECT count(*) FROM m WHERE d < DATE '2024-02-02'", 2),
    ("SELECT count(*) FROM h WHERE ts < TIMESTAMP '2024-01-05'", 4),
    ("SELECT count(*) FROM h WHERE ts < '2024-01-05'", 4),
    ("SELECT count(*) FROM h WHERE ts > TIMESTAMP '2024-01-04 23:59:59' AND ts < TIMESTAMP '2024-01-06'", 1),
    ("SELECT count(*) FROM h WHERE ts >= TIMESTAMP '2024-01-04 23:59:59.5' AND ts < TIMESTAMP '2024-01-06'", 1),
]


@pytest.mark.parametrize(("query", "partitions"), EXCLUSIVE_BOUNDS)
def test_partitions_counted_right_at_an_exclusive_bound(stores: tuple[Store, duckdb.DuckDBPyConnection],
                                                        query: str, partitions: int) -> None:
    store, reference = stores
    assert store.sql(query).to_pylist() == reference.sql(query).to_arrow_table().to_pylist()
    totals = store.explain(query).totals()
    assert totals["partitions_scanned"] == partitions, totals


def test_filter_only_columns_are_listed_apart(stores: tuple[Store, duckdb.DuckDBPyConnection]) -> None:
    store, _ = stores
    report = store.explain("SELECT id FROM m WHERE name = 'name-3' AND d < DATE '2024-02-01'").to_dict()
    (scan,) = report["scans"]["m"]
    assert scan["columns"] == ["id"]
    assert scan["filter_columns"] == ["d", "name"]
    plain = store.explain("SELECT id, name FROM m").to_dict()["scans"]["m"][0]
    assert plain["filter_columns"] == []


def test_warnings_say_why_a_filter_was_not_used(stores: tuple[Store, duckdb.DuckDBPyConnection]) -> None:
    store, reference = stores
    query = ("SELECT count(*) FROM m WHERE upper(name) = 'NAME-3' AND CAST(id AS VARCHAR) = '7' "
             "AND x > 10")
    assert store.sql(query).to_pylist() == reference.sql(query).to_arrow_table().to_pylist()
    report = store.explain(query)
    assert "filter on `upper(name)` was not used for pruning: function calls are not projected" in \
        report.warnings, report.warnings
    assert any(w.startswith("filter on `CAST(id AS VARCHAR)`") and w.endswith("cast to VARCHAR is not order-preserving")
               for w in report.warnings), report.warnings
    assert report.to_dict()["warnings"] == report.warnings
    assert not any("x > 10" in w or "`x`" in w for w in report.warnings)  # used: x is a float column


def test_a_query_of_the_version_the_last_one_read_reports_only_its_own_scans(
        stores: tuple[Store, duckdb.DuckDBPyConnection]) -> None:
    """The cursor keeps what it registered for a version it read: the next query of that
    version reports its own scans, pruning and warnings, none of the last one's."""
    store, reference = stores
    warned = "SELECT count(*) AS n FROM m WHERE upper(name) = 'NAME-3'"
    pruned = "SELECT count(*) AS n FROM m WHERE d < DATE '2024-02-01' AND x > -1"
    first = store.explain(warned)
    assert first.warnings and len(first.scans["m"]) == 1
    for _ in range(2):
        again = store.explain(pruned)
        assert again.warnings == [] and len(again.scans["m"]) == 1, again.to_dict()
        assert again.totals()["segments_scanned"] < again.totals()["segments_total"]
        assert store.sql(pruned).to_pylist() == reference.sql(pruned).to_arrow_table().to_pylist()
    assert store.explain(warned).warnings == first.warnings
    assert store.sql(warned).to_pylist() == reference.sql(warned).to_arrow_table().to_pylist()


def test_no_warning_for_filters_duckdb_rewrites_into_pushed_ones(stores: tuple[Store, duckdb.DuckDBPyConnection]) -> None:
    store, _ = stores
    # DuckDB turns id + 1 > 300 into id > 299 and pushes it: nothing to warn about
    report = store.explain("SELECT count(*) FROM m WHERE id + 1 > 300")
    assert report.warnings == []
    assert report.totals()["segments_scanned"] < report.totals()["segments_total"]
    assert store.explain("SELECT count(*) FROM m WHERE id <> 3").warnings != []
