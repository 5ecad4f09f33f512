"""Rewrites of aggregate queries that segment statistics answer, as small pure rules.

In the style of sqlglot's optimizer ``RULES``: :data:`RULES` is a tuple of functions, each
taking what the previous one established and returning its own finding, or None when it can't
prove its part (the query then runs normally). Together they recognise::

    SELECT count(*), count(col), min(col), max(col) [AS name] ... FROM dataset [AS alias]
    [WHERE <predicate on identity partition columns and constants>]

with nothing else (no DISTINCT, GROUP BY, HAVING, ORDER BY, LIMIT, joins, subqueries, CTEs,
window functions). Such a WHERE is true or false for every row of a partition alike, so whole
partitions are in or out. :func:`rewrite` then turns the query into the constant SELECT that
statistics decide (``SELECT CAST(1200 AS BIGINT) AS "count_star()", ...``), for ``explain`` and
for the golden tests. Whether the statistics are exact for a column is decided by
:mod:`colonnade.query.stats_answers`; sqlglot is imported on first use.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlglot import exp

AGGREGATES = ("count_star", "count", "min", "max")


@dataclass(frozen=True)
class Aggregate:
    kind: str  # count_star | count | min | max
    column: str | None  # as written (None for count(*))


@dataclass(frozen=True)
class StatsQuery:
    """An aggregate query that statistics may answer: its dataset (as written), aggregates,
    and the WHERE predicate (sqlglot tree, None if there is none) with the columns it reads."""

    table: str
    alias: str
    aggregates: tuple[Aggregate, ...]
    where: exp.Expression | None
    where_columns: frozenset[str]


def parse(sql: str) -> exp.Expression | None:
    """One statement of DuckDB's dialect as a sqlglot tree, or None."""
    import sqlglot

    try:
        trees = sqlglot.parse(sql, read="duckdb")
    except sqlglot.errors.SqlglotError:
        return None
    found: list[Any] = [t for t in trees if t is not None]
    return found[0] if len(found) == 1 else None


# -- the rules -----------------------------------------------------------------------------------
def lone_select(tree: exp.Expression) -> exp.Select | None:
    """``tree`` if it is one SELECT with no CTE and nothing nested: no subquery, no window."""
    from sqlglot import exp

    if not isinstance(tree, exp.Select) or tree.args.get("with_") or tree.args.get("with"):
        return None
    if any(isinstance(n, (exp.Subquery, exp.Window, exp.Select)) and n is not tree for n in tree.walk()):
        return None
    return tree


def plain_select(tree: exp.Expression) -> exp.Select | None:
    """A single SELECT with one FROM and no clause that changes what aggregates see."""
    from sqlglot import exp

    select = lone_select(tree)
    if select is None:
        return None
    for clause in ("distinct", "group", "having", "order", "limit", "offset", "qualify", "joins",
                   "windows", "laterals", "pivots", "sample", "into", "kind", "connect", "prewhere"):
        if select.args.get(clause):
            return None
    if not isinstance(select.args.get("from_") or select.args.get("from"), exp.From):
        return None
    return select


def one_table(select: exp.Select) -> tuple[str, str] | None:
    """(dataset, alias) of a FROM that is one table of the default schema."""
    from sqlglot import exp

    clause: Any = select.args.get("from_") or select.args.get("from")
    source = clause.this if clause is not None else None
    if not isinstance(source, exp.Table) or not isinstance(source.this, exp.Identifier):
        return None
    # nothing else attached to the table: TABLESAMPLE, PIVOT, UNPIVOT, AT (...), WITH
    # ORDINALITY and column aliases (AS e(a, b)) all change the rows or names it gives
    if any(v for k, v in source.args.items() if k not in ("this", "alias", "db", "catalog")):
        return None
    alias = source.args.get("alias")
    if alias is not None and alias.args.get("columns"):
        return None
    if (source.db and source.db.lower() not in ("main", "temp")) or (
            source.catalog and source.catalog.lower() not in ("memory", "temp")):
        return None
    return source.name, source.alias_or_name


def _column(node: exp.Expression, alias: str) -> str | None:
    from sqlglot import exp

    if not isinstance(node, exp.Column) or not isinstance(node.this, exp.Identifier):
        return None
    if node.table and node.table.lower() != alias.lower() or node.args.get("db"):
        return None
    return str(node.name)


def exact_aggregates(select: exp.Select, alias: str) -> tuple[Aggregate, ...] | None:
    """Every selected expression is count(*), count(col), min(col) or max(col), maybe named."""
    from sqlglot import exp

    out = []
    for item in select.expressions:
        node = item.this if isinstance(item, exp.Alias) else item
        if isinstance(node, exp.Count) and isinstance(node.this, exp.Star) and not any(node.this.args.values()):
            out.append(Aggregate("count_star", None))
            continue
        kind = {exp.Count: "count", exp.Min: "min", exp.Max: "max"}.get(type(node))
        if kind is None or any(v for k, v in node.args.items() if k not in ("this", "big_int")):
            return None  # min(x, n), count(DISTINCT x) and the like
        column = _column(node.this, alias)
        if column is None:
            return None
        out.append(Aggregate(kind, column))
    return tuple(out) or None


_WHERE_NODES = ("Paren", "Not", "And", "Or", "EQ", "NEQ", "GT", "GTE", "LT", "LTE", "In", "Between",
                "Is", "Literal", "Boolean", "Null", "Cast", "DataType", "Neg", "Column", "Identifier",
                "NullSafeEQ", "NullSafeNEQ")


def partition_where(select: exp.Select, alias: str) -> tuple[exp.Expression | None, frozenset[str]] | None:
    """The WHERE predicate and the columns it reads, when it reads only columns and constants
    through comparisons, IN, BETWEEN, IS [NOT] NULL, casts and boolean logic ((None, ∅) without
    WHERE); the caller checks that those columns are identity partition columns."""
    from sqlglot import exp

    where = select.args.get("where")
    if where is None:
        return None, frozenset()
    columns = set()
    for node in where.this.walk():
        if type(node).__name__ not in _WHERE_NODES:
            return None
        if isinstance(node, exp.In) and node.args.get("query"):
            return None
        if isinstance(node, exp.Column):
            name = _column(node, alias)
            if name is None:
                return None
            columns.add(name)
    return where.this, frozenset(columns)


#: The rules, in order; :func:`analyse` applies them.
RULES: tuple[Callable[..., Any], ...] = (parse, plain_select, one_table, exact_aggregates, partition_where)


_AGGREGATE_CALL = re.compile(r"\b(count|min|max)\s*\(", re.IGNORECASE)


def analyse(sql: str) -> StatsQuery | None:
    """The statistics query ``sql`` is, or None."""
    if not _AGGREGATE_CALL.search(sql):
        return None  # no count/min/max call: not one, and no parse (a point lookup's hot path)
    tree = parse(sql)
    select = plain_select(tree) if tree is not None else None
    table = one_table(select) if select is not None else None
    if select is None or table is None:
        return None
    name, alias = table
    aggregates = exact_aggregates(select, alias)
    where = partition_where(select, alias)
    if aggregates is None or where is None:
        return None
    return StatsQuery(name, alias, aggregates, where[0], where[1])


def rewrite(query: StatsQuery, names: list[str], literals: list[str]) -> str:
    """The constant SELECT that answers ``query``: each output ``names[i]`` is ``literals[i]``
    (SQL of a typed constant, e.g. ``CAST(12 AS BIGINT)``)."""
    from sqlglot import exp

    select = exp.select(*(exp.alias_(exp.maybe_parse(lit, dialect="duckdb"), exp.to_identifier(n, quoted=True))
                          for n, lit in zip(names, literals, strict=True)))
    return select.sql(dialect="duckdb")


def where_sql(query: StatsQuery) -> str | None:
    return None if query.where is None else query.where.sql(dialect="duckdb")
