"""Grouped aggregates computed in the scan (partial aggregation), for queries of the shape::

    SELECT <group columns and aggregates, in any expressions> FROM dataset [AS alias]
    GROUP BY col [, col ...] [HAVING ...] [ORDER BY ...] [LIMIT ...]

where every GROUP BY column is read as a dictionary (a string column every live segment stored
as one) and every aggregate is ``count(*)``, ``count(col)``, ``sum(col)`` or ``avg(col)`` of an
integer or floating-point column (no DISTINCT, FILTER, WHERE, joins, subqueries, windows).

DuckDB groups a dictionary that reaches it through Arrow by hashing each row's string; the scan
already holds each segment's rows as small integer codes into the segment's dictionary. So each
segment is aggregated by code in the decode threads (rows, non-null counts and sums per code, in
one compiled pass per aggregated column: :mod:`colonnade.encoding.kernels`), and DuckDB gets one
row per (segment, group) instead of one per row: the query
is run over those partial rows, each aggregate replaced by its merge (``count(*)`` by the sum of
the row counts, ``avg(x)`` by the sum of the sums over the sum of the counts, ...). Its HAVING,
ORDER BY, LIMIT and expressions stay as written; the answer takes the names and types DuckDB
gives the original query (run once on an empty table of the dataset's schema).

Exactness: counts are exact. Integer sums are computed in float64, which is exact while every
partial sum stays below 2**53: a segment is only aggregated this way when its chunk statistics
bound ``rows * max(|min|, |max|)`` below that, else the query runs the normal way. Floating-point
sums add the same values in row order within a segment (DuckDB's own parallel sums differ in
the order they add in, too). sqlglot is imported on first use.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from colonnade.encoding import kernels
from colonnade.query.memo import Memo
from colonnade.query.rewrite import _column, one_table, parse

if TYPE_CHECKING:
    import duckdb
    from sqlglot import exp

    from colonnade.table.commits import Snapshot
    from colonnade.table.dataset import Dataset

PARTIALS = "__colonnade_partials"
ROWS = "__colonnade_rows"
#: Integer sums are exact in float64 below this (see the module docstring).
EXACT_SUM = 1 << 53
#: Groups per segment counted directly by code; more distinct code combinations (several group
#: columns) are numbered with np.unique first.
DIRECT_GROUPS = 1 << 18


@dataclass(frozen=True)
class GroupedQuery:
    """A query :func:`analyse` recognised: its dataset and alias (as written), group columns and
    aggregated columns (as written), and the same query over the partial rows (table
    :data:`PARTIALS`; its select items are named when answering)."""

    table: str
    alias: str
    keys: tuple[str, ...]
    columns: tuple[str, ...]  # aggregated columns, in the order of their partial columns
    sums: frozenset[str]  # aggregated columns whose sum is needed (sum or avg), lower case
    final: exp.Select
    #: the original query as sqlglot writes it back: answered only when DuckDB parses it as it
    #: parses the original (see :func:`faithful`)
    written: str = ""


_CLAUSES = ("distinct", "where", "qualify", "joins", "windows", "laterals", "pivots", "sample", "into",
            "kind", "connect", "prewhere", "offset")
_GROUP_BY = re.compile(r"\bgroup\s+by\b", re.IGNORECASE)


class _NotGrouped(Exception):
    """Something in the query the partial rows can't answer."""


def analyse(sql: str) -> GroupedQuery | None:
    """The grouped query ``sql`` is, or None."""
    if not _GROUP_BY.search(sql):
        return None
    from sqlglot import exp

    tree = parse(sql)
    if not isinstance(tree, exp.Select) or tree.args.get("with_") or tree.args.get("with"):
        return None
    found = one_table(tree)
    group = tree.args.get("group")
    if found is None or any(tree.args.get(c) for c in _CLAUSES) or not isinstance(group, exp.Group) or any(
            v for k, v in group.args.items() if k != "expressions"):
        return None  # also ROLLUP, CUBE, GROUPING SETS, GROUP BY ALL
    table, alias = found
    keys = [_column(k, alias) for k in group.expressions]
    if not keys or None in keys or any(str(k).lower().startswith("__colonnade_") for k in keys):
        return None  # GROUP BY 1, GROUP BY an expression (or a name the partial rows use)
    for node in tree.walk():
        if isinstance(node, (exp.Subquery, exp.Window, exp.Filter, exp.Lambda, exp.Anonymous)) or (
                isinstance(node, exp.Select) and node is not tree):
            return None  # a function sqlglot doesn't know may be an aggregate: not read
    key_names = {str(k).lower() for k in keys}
    names = {str(item.alias).lower() for item in tree.expressions if isinstance(item, exp.Alias)}
    final = tree.copy()
    columns: list[str] = []
    sums: set[str] = set()
    try:
        for part in ("expressions", "having", "order"):
            _check_columns(final, part, alias, key_names, names)
        for call in list(final.find_all(exp.AggFunc)):
            call.replace(_merge(call, alias, columns, sums))
    except _NotGrouped:
        return None
    clause: Any = final.args.get("from_") or final.args.get("from")
    clause.this.replace(exp.to_table(PARTIALS).as_(exp.to_identifier(alias, quoted=True)))
    return GroupedQuery(table, alias, tuple(str(k) for k in keys), tuple(columns), frozenset(sums), final,
                        tree.sql(dialect="duckdb"))


def _check_columns(select: exp.Select, clause: str, alias: str, keys: set[str], names: set[str]) -> None:
    """Every column read outside an aggregate is a group column (or, in HAVING and ORDER BY, an
    output name, which DuckDB reads first there, in the original as over the partial rows):
    nothing else is in the partial rows."""
    from sqlglot import exp

    found = select.args.get(clause)
    for part in found if isinstance(found, list) else [found] if found is not None else []:
        for node in part.walk():
            if isinstance(node, exp.Star) and not isinstance(node.parent, exp.Count):
                raise _NotGrouped
            if not isinstance(node, exp.Column) or node.find_ancestor(exp.AggFunc) is not None:
                continue
            name = _column(node, alias)
            if name is None or (name.lower() not in keys and (clause == "expressions" or name.lower() not in names)):
                raise _NotGrouped


def _merge(node: Any, alias: str, columns: list[str], sums: set[str]) -> exp.Expression:
    """An aggregate call's merge over the partial rows (``columns`` and ``sums`` note what
    the partial rows must hold for it)."""
    from sqlglot import exp

    def total(column: str) -> exp.Expression:
        return exp.Sum(this=exp.column(column, quoted=True))

    if isinstance(node, exp.Count) and isinstance(node.this, exp.Star) and not any(node.this.args.values()):
        return exp.cast(total(ROWS), "BIGINT")
    kinds: dict[type[exp.Expression], str] = {exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg"}
    kind = kinds.get(type(node))
    column = _column(node.this, alias) if kind is not None and node.this is not None else None
    if kind is None or column is None or any(v for k, v in node.args.items() if k not in ("this", "big_int")):
        raise _NotGrouped  # another aggregate, count(DISTINCT x), sum(x + 1), ...
    lower = [c.lower() for c in columns]
    if column.lower() not in lower:
        columns.append(column)
        lower.append(column.lower())
    i = lower.index(column.lower())
    if kind == "count":
        return exp.cast(total(_count(i)), "BIGINT")
    sums.add(column.lower())
    if kind == "sum":
        return total(_sum(i))
    return exp.Div(this=exp.cast(total(_sum(i)), "DOUBLE"), expression=exp.cast(total(_count(i)), "DOUBLE"))


def _count(i: int) -> str:
    return f"__colonnade_count_{i}"


def _sum(i: int) -> str:
    return f"__colonnade_sum_{i}"


#: DuckDB's aggregate function names (read once from ``duckdb_functions()``).
_AGGREGATES: set[str] = set()
_MERGED = {"count", "count_star", "sum", "avg"}


def only_merged_aggregates(con: duckdb.DuckDBPyConnection, sql: str) -> bool:
    """Whether every function ``sql`` calls that DuckDB knows as an aggregate is one whose merge
    :func:`analyse` wrote (DuckDB's own parse and catalog: sqlglot may read a DuckDB aggregate
    as a plain function)."""
    from colonnade.query.where import dicts_of, parsed_sql

    parsed = parsed_sql(con, sql)
    if parsed is None:
        return False
    if not _AGGREGATES:  # filled whole at once: another thread sees it empty or complete
        _AGGREGATES.update({str(n).lower() for (n,) in con.execute(
            "SELECT DISTINCT function_name FROM duckdb_functions() WHERE function_type = 'aggregate'").fetchall()})
    called = {str(d.get("function_name", "")).lower() for d in dicts_of(parsed["statements"])
              if d.get("class") in ("FUNCTION", "AGGREGATE") or "function_name" in d}
    return not any(name in _AGGREGATES and name not in _MERGED for name in called)


def faithful(con: duckdb.DuckDBPyConnection, sql: str, query: GroupedQuery) -> bool:
    """Whether DuckDB parses the query as sqlglot writes it back exactly as it parses ``sql``
    (but for text positions): then the query over the partial rows differs from the original
    only where :func:`analyse` changed it (sqlglot writes some functions differently, e.g.
    ``log2(x)`` as ``LOG(2, x)``, whose values differ in the last digit)."""
    from colonnade.query.where import parsed_sql

    original, written = parsed_sql(con, sql), parsed_sql(con, query.written)
    return original is not None and written is not None and _positionless(original) == _positionless(written)


def _positionless(tree: Any) -> Any:
    if isinstance(tree, dict):
        return {k: _positionless(v) for k, v in tree.items() if k != "query_location"}
    if isinstance(tree, list):
        return [_positionless(v) for v in tree]
    return tree


# -- answering ----------------------------------------------------------------------------------
def _summable(t: pa.DataType) -> bool:
    return (pa.types.is_signed_integer(t) or t in (pa.uint8(), pa.uint16(), pa.uint32())
            or pa.types.is_float32(t) or pa.types.is_float64(t))


def stored_columns(query: GroupedQuery, read_schema: pa.Schema) -> tuple[list[str], list[str]] | None:
    """The group and aggregated columns as stored, when their types allow partial rows: every
    group column read as a dictionary, every aggregated one a number; None otherwise."""
    by_lower = {n.lower(): n for n in read_schema.names}
    if any(c.lower() not in by_lower for c in (*query.keys, *query.columns)):
        return None
    keys = [by_lower[k.lower()] for k in query.keys]
    columns = [by_lower[c.lower()] for c in query.columns]
    if len(set(keys)) != len(keys) or any(not pa.types.is_dictionary(read_schema.field(k).type) for k in keys) \
            or any(not _summable(read_schema.field(c).type) for c in columns):
        return None
    return keys, columns


@dataclass
class Grouped:
    """A grouped query answered through partial rows: the answer, the query DuckDB ran over
    them, and what the scan pruned and read."""

    table: pa.Table
    dataset: str
    sql: str
    metrics: dict[str, Any]


def answer(con: duckdb.DuckDBPyConnection, query: GroupedQuery, ds: Dataset, snapshot: Snapshot,
           read_schema: pa.Schema, out_schema: pa.Schema) -> Grouped | None:
    """The answer of ``query`` over ``snapshot`` through partial rows, or None when the dataset
    doesn't allow it (a group column not read as a dictionary, an aggregated column that isn't
    a number, an integer sum that could leave float64's exact range, an answer that doesn't
    take the original's types). An error of the scan is raised as it is."""

    from colonnade.table.scan import Scan, _read_segments

    found = stored_columns(query, read_schema)
    if found is None or len(out_schema) != len(query.final.expressions) or \
            len({n.lower() for n in out_schema.names}) != len(out_schema):
        return None  # output names repeated: naming each item could change what ORDER BY reads
    keys, columns = found
    sums = [c.lower() in query.sums for c in query.columns]
    plan = Scan(ds, columns=tuple(dict.fromkeys([*keys, *columns])), snapshot=snapshot).plan()
    if not plan.segments:
        return None
    for seg in plan.segments:
        for c, wanted in zip(columns, sums, strict=True):
            st = seg.stats.get(c)
            if wanted and pa.types.is_integer(read_schema.field(c).type) and st is not None and st.rows > st.nulls:
                if st.min is None or st.max is None or seg.entry.rows * max(abs(st.min), abs(st.max)) >= EXACT_SUM:
                    return None
    fields = [pa.field(k, pa.dictionary(pa.int32(), read_schema.field(k).type.value_type)) for k in keys]
    fields.append(pa.field(ROWS, pa.int64()))
    for i, (c, wanted) in enumerate(zip(columns, sums, strict=True)):
        fields.append(pa.field(_count(i), pa.int64()))
        if wanted:
            fields.append(pa.field(_sum(i), pa.int64() if pa.types.is_integer(read_schema.field(c).type) else pa.float64()))
    schema = pa.schema(fields)
    at = {name: i for i, name in enumerate(plan.read_columns)}
    key_at, column_at = [at[k] for k in keys], [at[c] for c in columns]
    failed: list[BaseException] = []

    def partials() -> Iterator[pa.RecordBatch]:
        try:  # each segment aggregated in the decode threads, as soon as it is decoded
            yield from _read_segments(ds, plan, lambda batch: _partial(batch, schema, key_at, column_at, sums),
                                      eager=True)
        except Exception as exc:
            failed.append(exc)
            raise

    sql = _final_sql(query, out_schema)
    import duckdb

    reader = pa.RecordBatchReader.from_batches(schema, partials())
    con.register(PARTIALS, reader)
    try:
        table = con.sql(sql).to_arrow_table()
    except duckdb.Error:
        if failed:
            raise failed[0] from None
        return None  # the query runs the normal way, and says what is wrong
    finally:
        con.unregister(PARTIALS)
        reader.close()
    try:
        table = pa.Table.from_arrays([col.cast(f.type) for col, f in zip(table.columns, out_schema, strict=True)],
                                     schema=out_schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return Grouped(table, ds.name, sql, plan.metrics.to_dict() | {"answered_from": "partial aggregates per segment"})


#: The query over the partial rows, with its select items named as the answer's, per grouped
#: query and answer names (sqlglot writes it in about a millisecond: kept)
_FINAL_SQL: Memo[tuple[str, tuple[str, ...]], str] = Memo()


def _final_sql(query: GroupedQuery, out_schema: pa.Schema) -> str:
    def written() -> str:
        from sqlglot import exp

        final = query.final.copy()
        final.set("expressions", [exp.alias_(item.this if isinstance(item, exp.Alias) else item,
                                              exp.to_identifier(f.name, quoted=True))
                                  for item, f in zip(final.expressions, out_schema, strict=True)])
        return final.sql(dialect="duckdb")
    key = (query.final.sql(dialect="duckdb") if not query.written else query.written, tuple(out_schema.names))
    return _FINAL_SQL.get(key, written)


def _partial(batch: pa.RecordBatch, schema: pa.Schema, keys: list[int], columns: list[int],
             sums: list[bool], compiled: bool = True) -> pa.RecordBatch:
    """One segment's rows as one row per group: the group's values, its rows, and per
    aggregated column its non-null count and (when wanted) sum (null when it has no value).
    One key: by one compiled call when the extension was built (``compiled=False``: never),
    which gives what the code below does."""
    if compiled and len(keys) == 1:
        compact = kernels.partial(batch.column(keys[0]), [(batch.column(c), wanted)
                                                          for c, wanted in zip(columns, sums, strict=True)])
        if compact is not None:
            return pa.RecordBatch.from_arrays(compact, schema=schema)
    codes, m, split = _group_codes(batch, keys)
    # per aggregated column with nulls or a sum: its rows with a value and sum per code
    figures = {i: kernels.group_sums(codes, m, batch.column(c))
               for i, (c, wanted) in enumerate(zip(columns, sums, strict=True)) if wanted or batch.column(c).null_count}
    # rows per code: a column without nulls counted them already
    counts = next((figures[i][0] for i in figures if not batch.column(columns[i]).null_count), None)
    if counts is None:
        counts = kernels.group_rows(codes, m)
    slots = m + 1 if len(keys) == 1 else m  # one key: its nulls are code m
    counts = counts[:slots]
    present, key_codes = split(counts)
    arrays: list[pa.Array] = []
    for k, found in zip(keys, key_codes, strict=True):
        dictionary = batch.column(k).dictionary
        size = len(dictionary)
        arrays.append(pa.DictionaryArray.from_arrays(pa.array(found.astype(np.int32), mask=found == size), dictionary,
                                                     safe=False))  # codes < size: they index it
    arrays.append(pa.array(counts[present], pa.int64()))
    for i, (c, wanted) in enumerate(zip(columns, sums, strict=True)):
        if i not in figures:
            arrays.append(pa.array(counts[present], pa.int64()))
            continue
        count, total = figures[i][0][:slots][present], figures[i][1][:slots][present]
        arrays.append(pa.array(count, pa.int64()))
        if wanted:
            integer = pa.types.is_integer(batch.column(c).type)
            arrays.append(pa.array(total.astype(np.int64) if integer else total,
                                   pa.int64() if integer else pa.float64(), mask=count == 0))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _group_codes(batch: pa.RecordBatch, keys: list[int]) -> tuple[
        pa.Array | np.ndarray, int, Callable[[np.ndarray], tuple[np.ndarray, list[np.ndarray]]]]:
    """Each row's group as a code below m (what the kernels count; with one key, its
    dictionary indices, nulls as code m), m, and a function from the rows per code to the codes
    of the groups present and each key's dictionary index for them (its dictionary's size for
    null)."""
    if len(keys) == 1:
        array = batch.column(keys[0])

        def one(counts: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
            present = np.flatnonzero(counts)
            return present, [present]
        return array.indices, len(array.dictionary), one
    per_key: list[np.ndarray] = []
    sizes: list[int] = []
    for k in keys:
        array = batch.column(k)
        size = len(array.dictionary)
        indices = array.indices
        found = kernels.values_of(indices)
        if indices.null_count:  # nulls: a group of their own, code size
            found = np.where(kernels.valid(indices), found, size)
        per_key.append(found.astype(np.int64))
        sizes.append(size + 1)
    if math.prod(sizes) <= DIRECT_GROUPS:  # one code per combination (the last key fastest)
        codes = per_key[0]
        for found, size in zip(per_key[1:], sizes[1:], strict=True):
            codes = codes * size + found

        def combined(counts: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
            present = np.flatnonzero(counts)
            key_codes, rest = [], present
            for size in reversed(sizes):
                key_codes.append(rest % size)
                rest = rest // size
            return present, key_codes[::-1]
        return codes, math.prod(sizes), combined
    # too many combinations to count directly (or for int64): the distinct ones numbered
    distinct, numbered = np.unique(np.stack(per_key, axis=1), axis=0, return_inverse=True)

    def listed(counts: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        return np.arange(len(distinct)), [distinct[:, i] for i in range(len(keys))]
    return numbered.reshape(-1), len(distinct), listed


__all__ = ["Grouped", "GroupedQuery", "analyse", "answer", "faithful", "only_merged_aggregates", "stored_columns"]
