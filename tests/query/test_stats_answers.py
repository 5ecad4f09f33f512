"""Aggregates answered from segment statistics: same answers and types as DuckDB over the raw
rows (random data with nulls, several partitions, time travel), no chunk read, and the
rewrites' SQL text (golden)."""

from __future__ import annotations

import datetime as dt
import json
import random
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from colonnade.query.rewrite import analyse, rewrite
from colonnade.store import Store

COLONNADE = str(Path(sys.executable).with_name("colonnade"))
SCHEMA = pa.schema([("region", pa.string()), ("n", pa.int32()), ("big", pa.int64()), ("x", pa.float64()),
                    ("d", pa.date32()), ("ts", pa.timestamp("us")), ("s", pa.string()), ("ok", pa.bool_())])


def _batch(seed: int, rows: int) -> pa.Table:
    rng = random.Random(seed)

    def maybe(v: object) -> object:
        return None if rng.random() < 0.15 else v

    return pa.table({
        "region": [rng.choice(["north", "south", "east", None]) for _ in range(rows)],
        "n": [maybe(rng.randint(-1000, 1000)) for _ in range(rows)],
        "big": [maybe(rng.randint(-2**62, 2**62)) for _ in range(rows)],
        "x": [maybe(rng.uniform(1, 100)) for _ in range(rows)],
        "d": [maybe(dt.date(2020, 1, 1) + dt.timedelta(days=rng.randint(0, 900))) for _ in range(rows)],
        "ts": [maybe(dt.datetime(2024, 1, 1) + dt.timedelta(seconds=rng.randint(0, 10**7))) for _ in range(rows)],
        "s": [maybe(f"v{rng.randint(0, 10**6):07d}") for _ in range(rows)],
        "ok": [maybe(rng.random() < 0.5) for _ in range(rows)],
    }, schema=SCHEMA)


BATCHES = [_batch(1, 700), _batch(2, 500), _batch(3, 300)]

QUERIES = [
    "SELECT count(*) FROM t",
    "SELECT count(n) FROM t",
    "SELECT count(*) AS rows_, count(x), min(n), max(n), min(big), max(big) FROM t",
    "SELECT min(x), max(x), min(d), max(d), min(ts), max(ts), min(ok), max(ok) FROM t",
    "SELECT min(s), max(s), count(s) FROM t",
    "SELECT count(*), min(n) FROM t WHERE region = 'north'",
    "SELECT count(*), max(d) FROM T WHERE region IN ('south', 'east') OR region IS NULL",
    "SELECT count(n), max(ts) FROM t AS e WHERE e.region <> 'north'",
    "SELECT count(*), min(n) FROM t WHERE region > 'zzz'",
    "SELECT count(*) FROM t WHERE NOT (region BETWEEN 'east' AND 'north')",
]


def _load(store: Store, partition_by: str) -> Store:
    ds = store.create_dataset("t", SCHEMA, partition_by=partition_by, segment_rows=128)
    for b in BATCHES:
        ds.append(b)
    return store


@pytest.fixture
def loaded(store: Store) -> Store:
    return _load(store, "region")


@pytest.mark.parametrize("version", [1, 3])
@pytest.mark.parametrize("query", QUERIES)
def test_same_answer_and_types_as_duckdb_without_reading_a_chunk(loaded: Store, query: str, version: int) -> None:
    reference = duckdb.connect()
    reference.register("t", pa.concat_tables(BATCHES[:version]))
    expected = reference.sql(query).to_arrow_table()
    got = loaded.sql(query, version=version)
    assert got.schema == expected.schema
    assert got.to_pylist() == expected.to_pylist()
    explained = loaded.explain(query, version=version)
    assert explained.totals()["chunks_read"] == 0
    assert explained.plan.startswith("answered from segment statistics")


@pytest.mark.parametrize("query", [
    "SELECT count(DISTINCT n) FROM t", "SELECT count(*) FROM t WHERE n > 5", "SELECT max(region) FROM t",
    "SELECT count(*) FROM t GROUP BY region", "SELECT min(n) + 1 FROM t",
    "SELECT count(*) FROM t TABLESAMPLE 10 ROWS", "SELECT count(n) FROM t AS e(n)",
])
def test_what_statistics_cannot_prove_is_read(loaded: Store, query: str) -> None:
    reference = duckdb.connect()
    reference.register("t", pa.concat_tables(BATCHES))
    got = loaded.sql(query)
    assert sorted(map(str, got.to_pylist())) == sorted(map(str, reference.sql(query).to_arrow_table().to_pylist()))
    assert loaded.explain(query).totals()["chunks_read"] > 0


def test_a_dictionary_stored_string_column_is_read(store: Store) -> None:
    """A dictionary chunk's bounds may come from dictionary values no row has: not used."""
    ds = store.create_dataset("t", pa.schema([("c", pa.string())]))
    ds.append(pa.table({"c": ["b", "a", "b", "a"] * 100}))
    assert store.sql("SELECT min(c), max(c) FROM t").to_pylist() == [{"min(c)": "a", "max(c)": "b"}]
    assert store.explain("SELECT min(c) FROM t").totals()["chunks_read"] > 0


def test_explain_json_in_the_cli_reports_no_chunk_read(loaded: Store) -> None:
    if not loaded.uri.startswith("sqlite"):
        uri = loaded.uri
    else:
        uri = loaded.chunk_store.path  # type: ignore[attr-defined]
    loaded.close()
    result = subprocess.run([COLONNADE, "--store", str(uri), "explain", "--json",
                             "SELECT count(*), max(n) FROM t WHERE region = 'east'"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["chunks_read"] == 0 and report["segments_total"] > 0


GOLDEN = [
    ("SELECT count(*) FROM t", ["count_star()"], ["CAST(4 AS BIGINT)"],
     'SELECT CAST(4 AS BIGINT) AS "count_star()"'),
    ("SELECT count(x) AS n, max(d) FROM t WHERE p = 'a'", ["n", "max(d)"],
     ["CAST(3 AS BIGINT)", "CAST('2024-01-02' AS DATE)"],
     'SELECT CAST(3 AS BIGINT) AS "n", CAST(\'2024-01-02\' AS DATE) AS "max(d)"'),
]


@pytest.mark.parametrize(("before", "names", "literals", "after"), GOLDEN)
def test_golden_rewrites(before: str, names: list[str], literals: list[str], after: str) -> None:
    plan = analyse(before)
    assert plan is not None
    assert rewrite(plan, names, literals) == after


@pytest.mark.parametrize("query", ["SELECT count(*) FROM t LIMIT 1", "SELECT count(*) FROM t, u",
                                   "SELECT count(*) FROM (SELECT * FROM t)", "SELECT min(x, 2) FROM t",
                                   "SELECT count(*) FROM t WHERE upper(p) = 'A'",
                                   "WITH t AS (SELECT 1 AS x) SELECT count(*) FROM t",
                                   "SELECT count(*) FROM t WHERE p IN (SELECT 1)"])
def test_rules_refuse_what_they_cannot_prove(query: str) -> None:
    assert analyse(query) is None


# -- WHERE on the source column of a time transform: exact when it falls on partition bounds ------
DECIDED = [  # every partition wholly in or out
    "SELECT count(*), min(n), max(ts) FROM t WHERE ts >= TIMESTAMP '2024-02-01'",
    "SELECT count(n) FROM t AS e WHERE e.ts < TIMESTAMP '2024-03-01' AND e.ts >= TIMESTAMP '2024-02-01'",
    "SELECT count(*), max(d) FROM t WHERE ts IS NULL",
    "SELECT count(*) FROM t WHERE ts >= TIMESTAMP '2030-01-01'",
]
UNDECIDED = [  # cuts through a month: read
    "SELECT count(*) FROM t WHERE ts >= TIMESTAMP '2024-02-15'",
    "SELECT min(n) FROM t WHERE ts < TIMESTAMP '2024-03-01 00:00:01'",
]


@pytest.fixture
def monthly(store: Store) -> Store:
    return _load(store, "month(ts)")


@pytest.mark.parametrize("query", DECIDED + UNDECIDED)
def test_a_where_the_transforms_decide_is_answered_from_statistics(monthly: Store, query: str) -> None:
    reference = duckdb.connect()
    reference.register("t", pa.concat_tables(BATCHES))
    expected = reference.sql(query).to_arrow_table()
    got = monthly.sql(query)
    assert got.schema == expected.schema and got.to_pylist() == expected.to_pylist()
    read = monthly.explain(query).totals()["chunks_read"]
    assert (read == 0) == (query in DECIDED), read
