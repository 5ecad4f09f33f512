"""Approximate answers to aggregate queries from a stratified sample, with error bounds, as
SnappyData's ``WITH ERROR`` gives them: what a query asks (:func:`analyse`), the one DuckDB
query that answers it from a sample (:func:`sample_sql`), the query that answers it exactly
(:func:`exact_sql`) and what a result whose error is too large becomes (:func:`apply_behavior`).

A query a sample can answer reads one dataset (no join, subquery, set operation or CTE) and
aggregates with count(*), count(x), sum(x) and avg(x) (x any expression of the row), grouped by
any expressions; WHERE, HAVING, ORDER BY and LIMIT are kept. In the select list, HAVING and ORDER
BY, ``absolute_error(a)``, ``relative_error(a)``, ``lower_bound(a)`` and ``upper_bound(a)`` give
the error of an aggregate ``a``, written out or by its alias (exactly: 0, 0, NULL, NULL).

Types: a count's estimate is a BIGINT (rounded), as the exact count is; sums and averages are
DOUBLE, also when the exact sum is a HUGEINT or DECIMAL (an estimate has no exact digits);
errors and bounds are DOUBLE (a count's bounds are not rounded). Output names are DuckDB's.

A row fails the error limit when the relative error of an aggregate of its select list exceeds
the limit or is NULL (unknown: too few sample rows, see :mod:`colonnade.query.estimate_sql`).
Only the rows the sample's answer returns are checked: a group that HAVING dropped, or that no
sample row represents, is not re-run by ``partial_run_on_base_table``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from colonnade.errors import QueryError
from colonnade.query.estimate_analysis import Aggregate, Approximable, Item, OrderTerm, analyse
from colonnade.query.estimate_sql import (
    MIN_DOMAIN_ROWS,
    PREFIX,
    Estimate,
    estimator_ctes,
    sql_literal,
    summary_column,
    t_quantile,
)
from colonnade.sqlnames import quoted

if TYPE_CHECKING:
    from colonnade.query.error_clause import ErrorClause

__all__ = ["Aggregate", "Approximable", "Item", "OrderTerm", "SampleQuery", "analyse",
           "apply_behavior", "exact_sql", "sample_sql", "t_quantile"]


@dataclass(frozen=True)
class SampleQuery:
    """The query over a sample: ``visible`` output columns, then the ``hidden`` ones (sort
    keys, one relative error per checked aggregate, the group keys). ``deferred``: ORDER BY,
    LIMIT and OFFSET are left to :func:`apply_behavior` (a partial re-run merges first)."""

    sql: str
    visible: int
    hidden: tuple[str, ...]
    query: Approximable
    exact: str
    deferred: bool


# -- SQL ------------------------------------------------------------------------------------------
def _named(sql: str, name: str | None) -> str:
    return sql if name is None else f"{sql} AS {quoted(name)}"


def _order_by(q: Approximable, column: Callable[[int], str] = str) -> str:
    """ORDER BY over the answer's columns: the select list, then one sort key per expression
    term (as the sample query and a partial re-run lay them out); ``column`` names the i-th
    (1-based) column (by default by its position)."""
    terms, expression = [], len(q.items)
    for term in q.order:
        if term.position is None:
            expression += 1
        terms.append(term.ordered.format(column(term.position or expression)))
    return f"\nORDER BY {', '.join(terms)}" if terms else ""


def _limit(q: Approximable) -> str:
    return (f"\nLIMIT {q.limit}" if q.limit is not None else "") + (
        f"\nOFFSET {q.offset}" if q.offset is not None else "")


def sample_sql(q: Approximable, clause: ErrorClause, sample_rel: str, strata_rel: str,
               stratified_on: Collection[str] = (),
               summary: tuple[str, Mapping[str, tuple[int, bool]]] | None = None) -> SampleQuery:
    """The query that answers ``q`` from the sample ``sample_rel`` with strata ``strata_rel``
    (names or parenthesized queries). ``stratified_on``: the sample's columns; an aggregate
    is then exact when it and the query's WHERE and GROUP BY read only those (a count(*) of
    whole strata). ``summary``: a summary of the sample per stratum (see
    :func:`~colonnade.query.estimate_sql.estimator_ctes`), read instead of its rows when the
    query allows."""
    on = {c.lower() for c in stratified_on}
    estimates = [Estimate(a.kind, a.argument, bool(on) and q.columns <= on and a.columns <= on)
                 for a in q.aggregates]
    if summary is not None and not (on and q.columns <= on and all(
            a.kind == "count_star" or ((found := summary_column(a.argument, summary[1])) is not None
                                       and (a.kind == "count" or found[1])) for a in estimates)):
        summary = None
    sort_keys = [t.estimate for t in q.order if t.position is None]
    errors = [f"{PREFIX}relative_error{k}" for k in q.checked]
    keys = [f"{PREFIX}key{i}" for i in range(len(q.group_by))]
    columns = ([_named(i.estimate, i.name) for i in q.items]
               + [f"{s} AS {PREFIX}order{j}" for j, s in enumerate(sort_keys)] + errors
               + [f"{g.column} AS {key}" for g, key in zip(q.group_by, keys, strict=True)])
    deferred = clause.error is not None and clause.behavior == "partial_run_on_base_table"
    sql = (estimator_ctes(sample_rel, strata_rel, q.where, q.group_by, estimates, clause.confidence, summary)
           + "\nSELECT " + ",\n  ".join(columns) + f"\nFROM {PREFIX}bounds"
           + (f"\nWHERE {q.having}" if q.having else "")
           + ("" if deferred else _order_by(q) + _limit(q)))
    hidden = tuple([f"{PREFIX}order{j}" for j in range(len(sort_keys))] + errors + keys)
    return SampleQuery(sql, len(q.items), hidden, q, exact_sql(q), deferred)


def exact_sql(q: Approximable) -> str:
    """``q`` run exactly on the dataset, error functions as 0 (errors) and NULL (bounds),
    with the same output names."""
    return _exact(q)


def _exact(q: Approximable, predicate: str | None = None, merging: bool = False) -> str:
    """``merging``: for a partial re-run, with the sort keys and without ORDER BY and LIMIT;
    ``predicate`` is added to WHERE."""
    columns = [_named(i.exact, i.name) for i in q.items]
    if merging:
        columns += [f"{t.exact} AS {PREFIX}order{j}"
                    for j, t in enumerate(t for t in q.order if t.position is None)]
    where = " AND ".join(f"({w})" for w in (q.where, predicate) if w)
    order = ", ".join(t.ordered.format(t.position or t.exact) for t in q.order)
    sql = f"SELECT {', '.join(columns)} FROM {q.source}" + (f" WHERE {where}" if where else "")
    if q.group_by:
        sql += f" GROUP BY {', '.join(g.expression for g in q.group_by)}"
    if q.exact_having:
        sql += f" HAVING {q.exact_having}"
    if not merging:
        sql += (f" ORDER BY {order}" if order else "") + _limit(q).replace("\n", " ")
    return sql


# -- behavior --------------------------------------------------------------------------------------
def apply_behavior(result: pa.Table, sq: SampleQuery, clause: ErrorClause,
                   run_exact: Callable[[str], pa.Table]) -> pa.Table:
    """The answer: ``result`` (of ``sq.sql``) without its hidden columns, where rows whose
    error exceeds the limit are left (do_nothing), have their failing aggregates and those
    aggregates' errors set to NULL (local_omit), raise :class:`QueryError` (strict), make the
    whole query run exactly with ``run_exact`` (run_on_full_table) or have their groups run
    exactly and merged in (partial_run_on_base_table; ORDER BY and LIMIT apply after)."""
    import numpy as np
    import pyarrow.compute as pc

    q = sq.query
    fails = _failing(result, sq, clause)
    nothing = np.zeros(result.num_rows, bool)
    row_fails = np.logical_or.reduce([nothing, *fails.values()])
    if not row_fails.any() or clause.behavior == "do_nothing":
        return _ordered(result, sq) if sq.deferred else result.select(range(sq.visible))
    if clause.behavior == "local_omit":
        columns = []
        for item, column in zip(q.items, result.columns[:sq.visible], strict=True):
            mask = np.logical_or.reduce([nothing, *(fails[k] for k in item.aggregates)])
            columns.append(pc.if_else(mask, pa.scalar(None, column.type), column)
                           if mask.any() else column)
        return pa.Table.from_arrays(columns, names=result.column_names[:sq.visible])
    if clause.behavior == "strict":
        raise QueryError(_strict_message(result, sq, clause, fails, int(np.argmax(row_fails))))
    if clause.behavior == "run_on_full_table" or not q.group_by:
        return run_exact(sq.exact)
    return _partial(result, sq, row_fails, run_exact)


def _partial(result: pa.Table, sq: SampleQuery, row_fails: Any,
             run_exact: Callable[[str], pa.Table]) -> pa.Table:
    """The passing rows, and the failing groups run exactly (matched on their keys, NULL
    too), ordered and limited together."""
    q = sq.query
    keys = [f"{PREFIX}key{i}" for i in range(len(q.group_by))]
    failed = result.filter(pa.array(row_fails)).select(keys).to_pylist()
    rows = {tuple(sql_literal(v) for v in row.values()) for row in failed}
    if any(None in row for row in rows):
        return run_exact(sq.exact)  # a key with no SQL literal (a list, a struct)
    values = ", ".join("(" + ", ".join(str(v) for v in row) + ")" for row in sorted(rows))
    matches = " AND ".join(f"{PREFIX}failed.{PREFIX}k{i} IS NOT DISTINCT FROM ({g.expression})"
                           for i, g in enumerate(q.group_by))
    names = ", ".join(f"{PREFIX}k{i}" for i in range(len(keys)))
    exact = run_exact(_exact(q, f"EXISTS (SELECT 1 FROM (VALUES {values}) AS {PREFIX}failed"
                                f"({names}) WHERE {matches})", merging=True))
    passing = result.filter(pa.array(~row_fails)).select(range(_width(sq)))
    if exact.num_columns != passing.num_columns:
        raise QueryError(f"the exact re-run returned {exact.num_columns} columns, not "
                         f"{passing.num_columns}")
    exact = pa.Table.from_arrays(  # the estimates' types (an exact sum may be a HUGEINT)
        [c.cast(f.type, safe=False) for c, f in zip(exact.columns, passing.schema, strict=True)],
        schema=passing.schema)
    return _ordered(pa.concat_tables([passing, exact]), sq)


def _width(sq: SampleQuery) -> int:
    """The select list and the sort keys."""
    return sq.visible + sum(1 for t in sq.query.order if t.position is None)


def _failing(result: pa.Table, sq: SampleQuery, clause: ErrorClause) -> dict[int, Any]:
    """Per checked aggregate, which rows fail (numpy booleans); nothing without a limit."""
    import pyarrow.compute as pc

    if clause.error is None:
        return {}
    out = {}
    for k in sq.query.checked:
        error = result.column(f"{PREFIX}relative_error{k}")
        fails = pc.or_(pc.is_null(error, nan_is_null=True),
                       pc.fill_null(pc.greater(error, clause.error), True))
        out[k] = fails.to_numpy(zero_copy_only=False)
    return out


def _ordered(table: pa.Table, sq: SampleQuery) -> pa.Table:
    """The select list of ``table`` (which also has the sort keys) with ORDER BY, LIMIT and
    OFFSET applied, DuckDB doing the sorting (its collation and NULL order)."""
    q = sq.query
    table = table.select(range(_width(sq)))
    if q.order or q.limit is not None or q.offset is not None:
        import duckdb

        rows = table.rename_columns([f"c{i}" for i in range(table.num_columns)]).append_column(
            f"{PREFIX}row", pa.array(range(table.num_rows), pa.int64()))
        con = duckdb.connect()
        try:
            con.register(f"{PREFIX}merged", rows)
            order = _order_by(q, lambda i: f"c{i - 1}") + _limit(q)
            keep = con.sql(f"SELECT {PREFIX}row FROM {PREFIX}merged{order}").to_arrow_table()
        finally:
            con.close()
        table = table.take(keep.column(0))
    return table.select(range(sq.visible))


def _strict_message(result: pa.Table, sq: SampleQuery, clause: ErrorClause,
                    fails: dict[int, Any], row: int) -> str:
    q = sq.query
    k = next(k for k in q.checked if fails[k][row])
    error = result.column(f"{PREFIX}relative_error{k}")[row].as_py()
    keys = ", ".join(f"{g.expression}={_shown(result.column(f'{PREFIX}key{i}')[row].as_py())}"
                     for i, g in enumerate(q.group_by))
    what = f"the estimate of {q.aggregates[k].text}" + (f" for {keys}" if keys else "")
    limit = f"{clause.error:g}"
    if error is None or error != error:
        how = (f"has an unknown error (fewer than {MIN_DOMAIN_ROWS} sample rows, or a stratum "
               "of one sample row)")
    else:
        how = f"has a relative error of {error:.4g}, above {limit}"
    return f"WITH ERROR {limit} BEHAVIOR 'strict': {what} {how}"


def _shown(value: Any) -> str:
    return "NULL" if value is None else repr(value) if isinstance(value, str) else str(value)
