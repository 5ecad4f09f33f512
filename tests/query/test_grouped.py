"""Grouped aggregates computed in the scan (partial rows per segment, merged by DuckDB): the same
answers, names and types as DuckDB over the raw rows, on both stores; queries the partial rows
can't answer run the normal way; an error of the scan is raised as it is."""

from __future__ import annotations

import math
import random
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from colonnade.errors import CorruptChunkError
from colonnade.query.grouped import analyse
from colonnade.store import Store

SCHEMA = pa.schema([("k1", pa.string()), ("k2", pa.string()), ("i", pa.int32()), ("b", pa.int64()),
                    ("f", pa.float64()), ("g", pa.float32()), ("u", pa.uint32()), ("s", pa.string()),
                    ("big", pa.int64())])


def _batch(seed: int, rows: int) -> pa.Table:
    rng = random.Random(seed)

    def maybe(v: object, p: float = 0.15) -> object:
        return None if rng.random() < p else v

    return pa.table({
        "k1": [maybe(f"name {rng.randint(0, 40)}", 0.1) for _ in range(rows)],
        "k2": [maybe(rng.choice(["a", "b", "c"]), 0.2) for _ in range(rows)],
        "i": [maybe(rng.randint(-1000, 1000)) for _ in range(rows)],
        "b": [rng.randint(-10**9, 10**9) for _ in range(rows)],
        "f": [maybe(rng.choice([rng.uniform(-50, 50), -0.0, 1e300])) for _ in range(rows)],
        "g": [maybe(rng.uniform(0, 5)) for _ in range(rows)],
        "u": [maybe(rng.randint(0, 2**32 - 1)) for _ in range(rows)],
        "s": [f"unique {seed} {n}" for n in range(rows)],  # plain, not a dictionary
        "big": [rng.randint(2**61, 2**62) for _ in range(rows)],
    }, schema=SCHEMA)


BATCHES = [_batch(1, 1500), _batch(2, 900), _batch(3, 600)]

GROUPED = [
    "SELECT k1, count(*), count(i), sum(i), avg(i), sum(f), avg(f), count(g), sum(g), avg(g) FROM t GROUP BY k1",
    "SELECT k1, k2, count(*) AS n, sum(b) AS sb, avg(u) FROM t GROUP BY k1, k2 HAVING count(*) > 3 "
    "ORDER BY n DESC, sb, k1, k2 LIMIT 7",
    "SELECT upper(k2) AS up, avg(g) + 1 AS a, sum(u) FROM t AS e GROUP BY e.k2 ORDER BY up NULLS FIRST",
    "SELECT count(*) FROM t GROUP BY k1 ORDER BY 1",
    "SELECT k1, sum(f) / count(f) AS mean FROM t GROUP BY k1 HAVING mean > 0 ORDER BY k1",
    "SELECT k2, k1, sum(i) FILTER_ FROM t GROUP BY k2, k1".replace(" FILTER_", ""),
    "select K2 as grp, COUNT(*) from T group by k2 order by grp",
]

NOT_GROUPED = [  # (query, why the partial rows can't answer it)
    ("SELECT k1, min(i) FROM t GROUP BY k1", "min is not merged"),
    ("SELECT s, count(*) FROM t GROUP BY s", "s is not read as a dictionary"),
    ("SELECT k1, count(DISTINCT i) FROM t GROUP BY k1", "distinct"),
    ("SELECT k1, count(*) FROM t WHERE i > 0 GROUP BY k1", "WHERE"),
    ("SELECT k1, string_agg(k2, ',' ORDER BY k2) FROM t GROUP BY k1", "another aggregate"),
    ("SELECT k1, sum(i + 1) FROM t GROUP BY k1", "an expression aggregated"),
    ("SELECT k1, count(*) FILTER (WHERE i > 0) FROM t GROUP BY k1", "FILTER"),
    ("SELECT k1, sum(big) FROM t GROUP BY k1", "integer sums beyond float64's exact range"),
    ("SELECT k1, fsum(g) FROM t GROUP BY k1", "a DuckDB aggregate sqlglot doesn't know"),
    ("SELECT k1, sum(i) OVER () FROM t GROUP BY k1, i", "window"),
]


def _rows(table: pa.Table, ordered: bool) -> list[tuple[Any, ...]]:
    rows = [tuple(r.values()) for r in table.to_pylist()]
    return rows if ordered else sorted(rows, key=repr)


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def _ordered(query: str) -> bool:
    """Whether the query orders its answer (an ORDER BY after its last parenthesis)."""
    return "ORDER BY" in query.upper().rsplit(")", 1)[-1]


def _equal(expected: pa.Table, got: pa.Table, ordered: bool) -> None:
    assert got.schema == expected.schema
    want, have = _rows(expected, ordered), _rows(got, ordered)
    assert len(want) == len(have) > 0
    for w, h in zip(want, have, strict=True):
        assert all(_same(x, y) for x, y in zip(w, h, strict=True)), (w, h)


def _check(store: Store, query: str, version: int | None = None) -> None:
    reference = duckdb.connect()
    reference.register("t", pa.concat_tables(BATCHES[:version] if version else BATCHES))
    _equal(reference.sql(query).to_arrow_table(), store.sql(query, version=version), _ordered(query))


@pytest.fixture
def loaded(store: Store) -> Store:
    ds = store.create_dataset("t", SCHEMA, segment_rows=500)
    for b in BATCHES:
        ds.append(b)
    return store


@pytest.mark.parametrize("query", GROUPED)
def test_grouped_queries_are_answered_from_partial_rows(loaded: Store, query: str) -> None:
    assert analyse(query) is not None
    _check(loaded, query)
    _check(loaded, query, version=2)  # time travel: the pinned snapshot's segments only
    explained = loaded.explain(query)
    assert explained.plan.startswith("each segment aggregated in the scan"), explained.plan
    assert explained.totals()["chunks_read"] > 0 and explained.rows == loaded.sql(query).num_rows
    with loaded.sql_reader(query) as reader:  # streamed the same
        _equal(loaded.sql(query), reader.read_all(), _ordered(query))


@pytest.mark.parametrize(("query", "why"), NOT_GROUPED, ids=[w for _, w in NOT_GROUPED])
def test_what_partial_rows_cannot_answer_runs_the_normal_way(loaded: Store, query: str, why: str) -> None:
    _check(loaded, query)
    assert not loaded.explain(query).plan.startswith("each segment aggregated in the scan"), why


def test_names_that_could_mean_a_column_are_not_guessed(store: Store) -> None:
    """HAVING reads ``v``: an output name here, but also a column of the dataset (DuckDB reads
    the column, which is not grouped): the query runs the normal way and fails as DuckDB says."""
    ds = store.create_dataset("t", pa.schema([("k", pa.string()), ("v", pa.int64())]))
    ds.append(pa.table({"k": ["a", "b"] * 200, "v": list(range(400))}))
    query = "SELECT k, sum(v) AS v FROM t GROUP BY k HAVING v > 0"
    assert analyse(query) is not None
    reference = duckdb.connect()
    reference.register("t", pa.table({"k": ["a", "b"] * 200, "v": list(range(400))}))
    try:
        expected: object = sorted(reference.sql(query).fetchall())
    except duckdb.Error:
        expected = "error"
    try:
        got: object = sorted(tuple(r.values()) for r in store.sql(query).to_pylist())
    except Exception:  # noqa: BLE001 - the same failure as DuckDB's, as a QueryError
        got = "error"
    assert got == expected


def test_a_corrupt_chunk_is_reported_not_hidden(loaded: Store, raw_store: Any) -> None:
    ds = loaded.dataset("t")
    raw_store.flip_chunk_byte("t", ds.snapshot().segments[1], "f")
    with pytest.raises(CorruptChunkError) as info:
        loaded.sql("SELECT k1, sum(f) FROM t GROUP BY k1")
    assert info.value.column == "f"
