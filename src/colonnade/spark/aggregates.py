"""Aggregations Spark pushes to the JVM reader's tasks (``colonnade.ColonnadeScan``): each task
aggregates the rows of its segments (grouped by columns; ``count(*)``, ``count``, ``sum``,
``min``, ``max`` of columns) and hands Spark one row per group of keys, which Spark merges with
the other tasks' rows (``avg`` reaches us as the sum and count Spark splits it into).

DuckDB aggregates, so values compare and sum as in ``Store.sql``. A group column stored as a
dictionary is grouped by its indices (dictionaries unified across the batches of a run of up to
RUN_ROWS rows), not by hashing its values row by row; the run's result is then looked up in the
dictionary, and the runs' results merged (sums of sums and counts, min of minima, max of maxima).
Memory holds one run's columns.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from colonnade.errors import ColonnadeError
from colonnade.spark.reading import SegmentGroup, read_group, spark_arrow_schema
from colonnade.sqlnames import quoted
from colonnade.store import Store

#: Rows aggregated at once (the batches of a run are held together).
RUN_ROWS = 1 << 20
FUNCTIONS = ("countstar", "count", "sum", "min", "max")
#: How a run's partial value of each function is merged with the other runs'.
_MERGE = {"countstar": "sum", "count": "sum", "sum": "sum", "min": "min", "max": "max"}

_root: duckdb.DuckDBPyConnection | None = None
_root_lock = threading.Lock()


def _cursor() -> duckdb.DuckDBPyConnection:
    """A cursor of the process's DuckDB (tasks aggregate at once, each with its own)."""
    global _root
    with _root_lock:
        if _root is None:
            _root = duckdb.connect()
        return _root.cursor()


def columns_of(aggregation: dict[str, Any]) -> list[str]:
    """The columns an aggregation reads: its group columns, then its aggregates' (once each)."""
    columns: list[str] = []
    for c in [*aggregation["group_by"], *(a.get("col") for a in aggregation["aggregates"])]:
        if c is not None and c not in columns:
            columns.append(c)
    return columns


def result_schema(aggregation: dict[str, Any], read: pa.Schema) -> pa.Schema:
    """The group columns, then one column per aggregate, in the types of Spark's partial
    aggregates (count: int64; sum: int64 of integers, float64 of floats; min, max: the column's)."""
    fields = [pa.field(c, read.field(c).type) for c in aggregation["group_by"]]
    for i, a in enumerate(aggregation["aggregates"], 1):
        fn, col = a.get("fn"), a.get("col")
        if fn not in FUNCTIONS or (fn != "countstar" and col not in read.names):
            raise ColonnadeError(f"an aggregate the reader does not compute: {a}")
        t = pa.int64() if fn in ("countstar", "count") else read.field(col).type
        if fn == "sum":
            if not (pa.types.is_integer(t) or pa.types.is_floating(t)):
                raise ColonnadeError(f"sum of a column of type {t} is not computed by the reader")
            t = pa.int64() if pa.types.is_integer(t) else pa.float64()
        fields.append(pa.field(f"agg_{i}", t))
    return pa.schema(fields)


def aggregate_group(store: Store, name: str, schema: pa.Schema, aggregation: dict[str, Any],
                    expr: pc.Expression | None, group: SegmentGroup) -> pa.Table:
    """``aggregation`` (``group_by``: columns; ``aggregates``: ``{"fn": ..., "col": ...}``) over
    the rows of ``group`` that match ``expr``, as :func:`result_schema` says. Without group
    columns, one row even for no rows."""
    columns = columns_of(aggregation)
    read = spark_arrow_schema(schema, columns)
    target = result_schema(aggregation, read)
    batches = read_group(store, name, schema, columns, expr, group, as_stored=True)
    if not columns:  # count(*) only: the batches' lengths
        rows = sum(b.num_rows for b in batches)
        return pa.table([pa.array([rows], pa.int64()) for _ in target], schema=target)
    partials = [_partial(aggregation, read, run) for run in _runs(batches)]
    if not partials:
        partials = [_partial(aggregation, read, [])]
    if len(partials) == 1:
        answer = partials[0]
    else:
        merged = [quoted(c) for c in aggregation["group_by"]]
        merged += [f"{_MERGE[a['fn']]}(__a{i})" for i, a in enumerate(aggregation["aggregates"])]
        answer = _sql(pa.concat_tables(partials), merged, aggregation["group_by"])
    try:
        return pa.Table.from_arrays([a.cast(f.type) for a, f in zip(answer.columns, target, strict=True)],
                                    schema=target)
    except pa.ArrowInvalid as exc:  # a sum of integers beyond int64, as Spark's own sum would fail
        raise ColonnadeError(f"aggregate out of range: {exc}") from None


def _runs(batches: Iterable[pa.RecordBatch]) -> Iterator[list[pa.RecordBatch]]:
    run: list[pa.RecordBatch] = []
    rows = 0
    for b in batches:
        if b.num_rows:
            run.append(b)
            rows += b.num_rows
        if rows >= RUN_ROWS:
            yield run
            run, rows = [], 0
    if run:
        yield run


def _partial(aggregation: dict[str, Any], read: pa.Schema, run: list[pa.RecordBatch]) -> pa.Table:
    """One run's aggregation: group columns (values), then ``__a0``, ``__a1``, ... (counts and
    sums as DuckDB gives them: wider than the result's)."""
    group_by = aggregation["group_by"]
    keys: list[str] = []
    arrays: dict[str, pa.Array | pa.ChunkedArray] = {}
    dictionaries: dict[str, pa.Array] = {}
    for i, c in enumerate(group_by):
        key = f"__k{i}"
        values = [b.column(c) for b in run]
        if values and all(pa.types.is_dictionary(v.type) for v in values):
            unified = pa.chunked_array([pa.DictionaryArray.from_arrays(v.indices.cast(pa.int32()), v.dictionary)
                                        for v in values]).unify_dictionaries()
            dictionaries[key] = unified.chunk(0).dictionary
            arrays[key] = pa.chunked_array([chunk.indices for chunk in unified.chunks], pa.int32())
        else:
            arrays[key] = _plain(values, read.field(c).type)
        keys.append(key)
    for c in {a["col"] for a in aggregation["aggregates"] if a.get("col")}:
        arrays[c] = _plain([b.column(c) for b in run], read.field(c).type)
    select = list(keys)
    for i, a in enumerate(aggregation["aggregates"]):
        fn = a["fn"]
        select.append(("count(*)" if fn == "countstar" else f"{fn}({quoted(a['col'])})") + f" AS __a{i}")
    answer = _sql(pa.table(arrays), select, keys)
    for i, key in enumerate(keys):  # indices back to values
        values = answer.column(key)
        if key in dictionaries:
            values = dictionaries[key].take(values)
        answer = answer.set_column(i, group_by[i], values)
    return answer


def _plain(values: list[pa.Array], t: pa.DataType) -> pa.ChunkedArray:
    return pa.chunked_array([v.dictionary_decode() if pa.types.is_dictionary(v.type) else v for v in values], t)


def _sql(table: pa.Table, select: list[str], group_by: list[str]) -> pa.Table:
    sql = f"SELECT {', '.join(select)} FROM __colonnade_rows"
    if group_by:
        sql += f" GROUP BY {', '.join(quoted(c) for c in group_by)}"
    cursor = _cursor()
    try:
        cursor.register("__colonnade_rows", table)
        return cursor.sql(sql).to_arrow_table()
    finally:
        cursor.close()
