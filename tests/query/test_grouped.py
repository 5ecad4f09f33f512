"""Grouped aggregates computed in the scan (partial rows per segment, merged by DuckDB): the same
answers, names and types as DuckDB over the raw rows, on both stores; queries the partial rows
can't answer run the normal way; an error of the scan is raised as it is."""

from __future__ import annotations

import math
import random
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from colonnade.errors import CorruptChunkError
from colonnade.query.grouped import ROWS, _partial, analyse, only_merged_aggregates
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
    # output names shadowing columns that are not grouped: DuckDB reads the names first
    "SELECT k1, sum(i) AS i, count(*) AS f FROM t GROUP BY k1 HAVING i > 0 ORDER BY i, f, k1",
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
    ("SELECT k1, fsum(g) FROM t GROUP BY k1", "a function sqlglot doesn't know"),
    ("SELECT k1, count(*) FROM t AS e(x, k1) GROUP BY k1", "column aliases on the table"),
    ("SELECT k1, count(*) FROM t UNPIVOT (val FOR col IN (i, b)) GROUP BY k1", "UNPIVOT"),
    ("SELECT k1, count(*) FROM t TABLESAMPLE 100% GROUP BY k1", "TABLESAMPLE"),
    ("SELECT count(*) AS k1, k1 FROM t GROUP BY k1 ORDER BY k1, 2", "repeated output names"),
    ("SELECT k1, log2(count(*)) AS l FROM t GROUP BY k1", "a function sqlglot writes back differently"),
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


def test_grouped_queries_are_answered_from_partial_rows(loaded: Store) -> None:
    # one dataset for every query (a fresh one per query made this file minutes long on Cassandra)
    for query in GROUPED:
        assert analyse(query) is not None, query
        _check(loaded, query)
        _check(loaded, query, version=2)  # time travel: the pinned snapshot's segments only
        explained = loaded.explain(query)
        assert explained.plan.startswith("each segment aggregated in the scan"), (query, explained.plan)
        assert explained.totals()["chunks_read"] > 0 and explained.rows == loaded.sql(query).num_rows, query
        with loaded.sql_reader(query) as reader:  # streamed the same
            _equal(loaded.sql(query), reader.read_all(), _ordered(query))
        with loaded.sql_reader(query, batch_rows=3) as reader:  # in batches of at most batch_rows
            batches = list(reader)
            assert all(b.num_rows <= 3 for b in batches) and len(batches) > 1, query
            _equal(loaded.sql(query), pa.Table.from_batches(batches, reader.schema), _ordered(query))


def test_what_partial_rows_cannot_answer_runs_the_normal_way(loaded: Store) -> None:
    for query, why in NOT_GROUPED:
        _check(loaded, query)
        assert not loaded.explain(query).plan.startswith("each segment aggregated in the scan"), why


def test_session_settings_are_not_ignored(loaded: Store) -> None:
    """A setting of the session can change an answer's types: after a SET, grouped queries are
    answered on the session's own cursor (the normal way)."""
    query = "SELECT k1, sum(i) / count(i) AS q FROM t GROUP BY k1"
    loaded.sql("SET integer_division = true")
    reference = duckdb.connect()
    reference.execute("SET integer_division = true")
    reference.register("t", pa.concat_tables(BATCHES))
    _equal(reference.sql(query).to_arrow_table(), loaded.sql(query), False)


def test_a_group_by_without_from_is_duckdbs(store: Store) -> None:
    assert analyse("SELECT 1 AS k, count(*) GROUP BY k") is None
    assert store.sql("SELECT 1 AS k, count(*) AS n GROUP BY k").to_pylist() == [{"k": 1, "n": 1}]


def test_duckdb_aggregates_other_than_the_merged_ones_are_refused() -> None:
    """The second check, on DuckDB's own parse and catalog, whatever sqlglot reads a call as."""
    con = duckdb.connect()
    assert only_merged_aggregates(con, "SELECT k, count(*), count(x), sum(x), avg(x) FROM t GROUP BY k")
    for call in ("mode(x)", "fsum(x)", "min(x)", "string_agg(x, ',')", "mean(x)", "histogram(x)"):
        assert not only_merged_aggregates(con, f"SELECT k, {call} FROM t GROUP BY k"), call


@pytest.mark.parametrize(("rows", "values", "keys"), [(3000, 5, 3), (5000, 30, 2), (5000, 600, 2), (7000, 7000, 5)])
def test_partial_rows_group_every_combination_of_keys(rows: int, values: int, keys: int) -> None:
    """Up to DIRECT_GROUPS combinations are counted by one code; more (600 x 600), or more than
    int64 holds (7001**5), are numbered first: the same groups as Arrow's group_by either way."""
    rng = np.random.default_rng(rows + keys)
    arrays = [pa.DictionaryArray.from_arrays(pa.array(rng.integers(0, values, rows).astype(np.int32),
                                                      mask=rng.random(rows) < 0.1),
                                             pa.array([f"v{k}_{i}" for i in range(values)])) for k in range(keys)]
    names = [f"k{k}" for k in range(keys)]
    batch = pa.record_batch([*arrays, pa.array(rng.standard_normal(rows))], names=[*names, "x"])
    schema = pa.schema([pa.field(n, pa.dictionary(pa.int32(), pa.string())) for n in names] +
                       [pa.field(ROWS, pa.int64()), pa.field("c", pa.int64()), pa.field("s", pa.float64())])
    got = _partial(batch, schema, list(range(keys)), [keys], [True])
    plain = pa.table({n: a.cast(pa.string()) for n, a in zip(names, arrays, strict=True)} | {"x": batch.column(keys)})
    want = plain.group_by(names).aggregate([([], "count_all"), ("x", "sum")])
    assert sorted(((*(r[n] for n in names), r[ROWS]) for r in got.to_pylist()), key=repr) == \
        sorted(((*(r[n] for n in names), r["count_all"]) for r in want.to_pylist()), key=repr)
    sums = {tuple(r[n] for n in names): r["s"] for r in got.to_pylist()}
    assert all(math.isclose(sums[tuple(r[n] for n in names)], r["x_sum"], rel_tol=1e-12, abs_tol=1e-12)
               for r in want.to_pylist())


def test_a_corrupt_chunk_is_reported_not_hidden(loaded: Store, raw_store: Any) -> None:
    ds = loaded.dataset("t")
    raw_store.flip_chunk_byte("t", ds.snapshot().segments[1], "f")
    query = "SELECT k1, sum(f) FROM t GROUP BY k1"
    with pytest.raises(CorruptChunkError) as info:
        loaded._answers.grouped(query, None, None)  # raised by the partial rows' scan itself
    assert info.value.column == "f"
    with pytest.raises(CorruptChunkError):
        loaded.sql(query)


def _value_column(rng: np.random.Generator, t: pa.DataType, rows: int, nulls: float) -> pa.Array:
    mask = rng.random(rows) < nulls if nulls else None
    if pa.types.is_floating(t):
        values = rng.standard_normal(rows) * 1e3
        values[rng.random(rows) < 0.01] = -0.0
        return pa.array(values.astype(t.to_pandas_dtype()), t, mask=mask)
    info = np.iinfo(t.to_pandas_dtype())
    low, high = max(int(info.min), -(1 << 40)), min(int(info.max), 1 << 40)
    return pa.array(rng.integers(low, high, rows, endpoint=True).astype(t.to_pandas_dtype()), t, mask=mask)


@pytest.mark.parametrize("seed", range(6))
def test_the_compiled_partial_rows_are_the_python_ones(seed: int) -> None:
    """One key: the compiled pass gives what the NumPy code gives, bit for bit, for every value
    type, nulls in the key and in the values or none, sums wanted or not, sliced batches, and a
    key whose every row is null or none is."""
    rng = np.random.default_rng(seed)
    rows = int(rng.integers(1, 9000))
    size = int(rng.integers(1, 3000))
    key_nulls = [0.0, 0.3, 1.0, 0.02][seed % 4]
    key = pa.DictionaryArray.from_arrays(
        pa.array(rng.integers(0, size, rows).astype(np.int32), mask=rng.random(rows) < key_nulls if key_nulls else None),
        pa.array([f"v{i}" for i in range(size)]))
    types = [pa.float64(), pa.float32(), pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(),
             pa.uint32()]
    chosen = [types[i] for i in rng.choice(len(types), size=int(rng.integers(1, 5)), replace=False)]
    values = [_value_column(rng, t, rows, float(rng.choice([0.0, 0.1, 0.9]))) for t in chosen]
    wanted = [bool(rng.integers(0, 2)) for _ in chosen]
    batch = pa.record_batch([key, *values], names=["k", *[f"x{i}" for i in range(len(values))]])
    start = int(rng.integers(0, max(1, rows // 3)))
    batch = batch.slice(start, rows - start - int(rng.integers(0, max(1, rows // 3))))
    fields = [pa.field("k", pa.dictionary(pa.int32(), pa.string())), pa.field(ROWS, pa.int64())]
    for i, (t, w) in enumerate(zip(chosen, wanted, strict=True)):
        fields.append(pa.field(f"c{i}", pa.int64()))
        if w:
            fields.append(pa.field(f"s{i}", pa.float64() if pa.types.is_floating(t) else pa.int64()))
    schema = pa.schema(fields)
    columns = list(range(1, len(values) + 1))
    compiled = _partial(batch, schema, [0], columns, wanted)
    python = _partial(batch, schema, [0], columns, wanted, compiled=False)
    assert compiled.schema == python.schema and compiled.num_rows == python.num_rows
    for a, b in zip(compiled.columns, python.columns, strict=True):
        assert a.is_valid().equals(b.is_valid())
        if pa.types.is_dictionary(a.type):
            assert a.cast(pa.string()).equals(b.cast(pa.string()))
        else:  # sums bit for bit (-0.0 included)
            valid = np.asarray(a.is_valid())
            width = {8: np.uint64}[a.type.bit_width // 8]
            got, want = (np.frombuffer(x.buffers()[1], width)[x.offset:x.offset + len(x)] for x in (a, b))
            assert np.array_equal(got[valid], want[valid])


def test_the_compiled_partial_refuses_indices_outside_the_dictionary() -> None:
    key = pa.DictionaryArray.from_arrays(pa.array([0, 1, 5], pa.int32()), pa.array(["a", "b"]), safe=False)
    batch = pa.record_batch([key, pa.array([1.0, 2.0, 3.0])], names=["k", "x"])
    schema = pa.schema([pa.field("k", pa.dictionary(pa.int32(), pa.string())), pa.field(ROWS, pa.int64()),
                        pa.field("c", pa.int64()), pa.field("s", pa.float64())])
    for compiled in (True, False):
        with pytest.raises(ValueError, match="out of range"):
            _partial(batch, schema, [0], [1], [True], compiled=compiled)


@pytest.mark.parametrize("columns", [0, 1, 64, 65, 70])
def test_partial_rows_of_no_column_or_many_columns(columns: int) -> None:
    """count(*) alone (no aggregated column) and more columns than the compiled pass takes (the
    NumPy code runs): the same partial rows either way."""
    rng = np.random.default_rng(columns)
    rows = 3000
    key = pa.DictionaryArray.from_arrays(pa.array(rng.integers(0, 40, rows).astype(np.int32),
                                                  mask=rng.random(rows) < 0.2), pa.array([f"v{i}" for i in range(40)]))
    values = [pa.array(rng.integers(-5, 5, rows), pa.int64(), mask=rng.random(rows) < 0.1) for _ in range(columns)]
    batch = pa.record_batch([key, *values], names=["k", *[f"x{i}" for i in range(columns)]])
    fields = [pa.field("k", pa.dictionary(pa.int32(), pa.string())), pa.field(ROWS, pa.int64())]
    for i in range(columns):
        fields += [pa.field(f"c{i}", pa.int64()), pa.field(f"s{i}", pa.int64())]
    schema = pa.schema(fields)
    compiled = _partial(batch, schema, [0], list(range(1, columns + 1)), [True] * columns)
    python = _partial(batch, schema, [0], list(range(1, columns + 1)), [True] * columns, compiled=False)
    assert compiled.equals(python)
    assert sum(compiled.column(ROWS).to_pylist()) == rows
