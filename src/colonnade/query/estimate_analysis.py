"""What an approximate query asks of a sample: :func:`analyse` reads a query's head (the
statement without its ``WITH ERROR`` tail) into an :class:`Approximable`, or says in one line
why a sample can't answer it (for ``explain``).

A sample can answer a query that reads one dataset (no join, subquery, set operation or CTE)
and aggregates with count(*), count(x), sum(x) and avg(x) (x any expression of the row), grouped
by any expressions (also by position, by alias and GROUP BY ALL). Its select list, HAVING and
ORDER BY are rewritten twice: over the estimator's columns (an aggregate becomes
``__aqp_est<k>``, ``relative_error(a)`` becomes ``__aqp_relative_error<k>``) and over the
dataset's rows (the error functions as their exact values), so that
:mod:`colonnade.query.estimates` only assembles SQL. Unaliased expressions are named as DuckDB
names them, which DuckDB's own parser tells.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from colonnade.query.estimate_sql import PREFIX, GroupKey, duckdb_names

if TYPE_CHECKING:
    from sqlglot import exp
    from sqlglot.tokens import Token

#: The error functions, as SQL names them.
ERROR_FUNCTIONS = ("absolute_error", "relative_error", "lower_bound", "upper_bound")
#: What an error function is when the answer is exact.
_EXACT_ERRORS = {"absolute_error": "CAST(0 AS DOUBLE)", "relative_error": "CAST(0 AS DOUBLE)",
                 "lower_bound": "CAST(NULL AS DOUBLE)", "upper_bound": "CAST(NULL AS DOUBLE)"}


@dataclass(frozen=True)
class Aggregate:
    """count_star | count | sum | avg, of an argument (SQL over the dataset's rows) that reads
    ``columns`` (lower-cased); ``text`` names it in messages (``avg(bid)``)."""

    kind: str
    argument: str | None
    columns: frozenset[str]
    text: str


@dataclass(frozen=True)
class Item:
    """A select-list expression, over the estimates and over the dataset's rows; its output
    name (None: a grouped column, which DuckDB names as the dataset does) and the aggregates
    (indexes) it reads."""

    estimate: str
    exact: str
    name: str | None
    aggregates: frozenset[int]


@dataclass(frozen=True)
class OrderTerm:
    """An ORDER BY term: by select-list ``position`` (1-based), else by an expression (over the
    estimates and over the dataset's rows); ``ordered`` is the term with ``{}`` for its key."""

    position: int | None
    estimate: str | None
    exact: str | None
    ordered: str


@dataclass(frozen=True)
class Approximable:
    """An aggregate query that a sample can answer: the dataset it reads (``table`` as written,
    ``source`` its FROM clause), its query column set (``columns``: the columns its WHERE, GROUP
    BY and HAVING read outside aggregates, lower-cased), and its parts as SQL: GROUP BY keys,
    aggregates, WHERE, the select list, HAVING over the estimates and over the dataset's rows,
    ORDER BY, LIMIT and OFFSET."""

    table: str
    source: str
    columns: frozenset[str]
    group_by: tuple[GroupKey, ...]
    aggregates: tuple[Aggregate, ...]
    where: str | None
    items: tuple[Item, ...]
    having: str | None
    exact_having: str | None
    order: tuple[OrderTerm, ...]
    limit: int | None
    offset: int | None

    @property
    def checked(self) -> tuple[int, ...]:
        """The aggregates whose error decides whether a row fails: those of the select list."""
        return tuple(sorted(set().union(*(i.aggregates for i in self.items))))


class _Refused(Exception):
    """Why a query can't be answered from a sample (one line, for ``explain``)."""


# -- analysis -------------------------------------------------------------------------------------
def analyse(sql: str) -> Approximable | str:
    """What ``sql`` (without its ``WITH ERROR`` tail) asks of a sample, or why a sample can't
    answer it."""
    import sqlglot

    try:
        trees = [t for t in sqlglot.parse(sql, read="duckdb") if t is not None]
    except sqlglot.errors.SqlglotError as exc:
        return f"the query does not parse: {str(exc).splitlines()[0]}"
    if len(trees) != 1:
        return "only a single statement can be answered from a sample"
    try:
        return _Analysis(trees[0], sql).run()
    except _Refused as refused:
        return str(refused)


def _key(node: exp.Expr) -> str:
    """``node`` compared as DuckDB would: identifiers and function names without case."""
    from sqlglot import exp

    copy = node.copy()
    while isinstance(copy, exp.Paren):
        copy = copy.this
    for n in copy.walk():
        if isinstance(n, exp.Identifier):
            n.set("this", n.name.lower())
            n.set("quoted", True)
        elif isinstance(n, exp.Anonymous):
            n.set("this", n.name.lower())
    return type(copy).__name__ + ":" + _sql(copy)


def _sql(node: exp.Expr) -> str:
    return node.sql(dialect="duckdb")


def _error_function(node: exp.Expr) -> str | None:
    from sqlglot import exp

    name = node.name.lower() if isinstance(node, exp.Anonymous) else ""
    return name if name in ERROR_FUNCTIONS else None


class _Analysis:
    def __init__(self, tree: exp.Expr, sql: str) -> None:
        self.tree = tree
        self.sql = sql
        self.aggregates: list[Aggregate] = []
        self.aggregate_index: dict[str, int] = {}
        self.group_index: dict[str, GroupKey] = {}
        self.aliases: dict[str, exp.Expr] = {}

    def run(self) -> Approximable:
        from sqlglot import exp

        select = self._shape()
        table = select.args["from_"].this
        alias = table.alias_or_name.lower()
        for column in select.find_all(exp.Column):  # one table: its qualifier says nothing
            if column.table.lower() in (alias, table.name.lower()) and not column.args.get("db"):
                column.set("table", None)
        items: list[tuple[exp.Expr, str | None]] = [
            (e.this, e.alias) if isinstance(e, exp.Alias) else (e, None)
            for e in select.expressions]
        self.aliases = {name.lower(): e for e, name in items if name}
        keys = self._group_by(select, items)
        where = select.args.get("where")
        if where is not None:
            self._plain(where.this, "WHERE")
        out_items = []
        texts = _item_texts(self.sql, len(items))
        unnamed = [texts[i] if texts else _sql(e) for i, (e, name) in enumerate(items)
                   if name is None and not isinstance(e, exp.Column)]
        names = iter(duckdb_names(unnamed))
        for e, name in items:
            used: set[int] = set()
            estimate = self._rewrite(e, estimates=True, aliases=False, used=used)
            exact = self._rewrite(e, estimates=False, aliases=False, used=set())
            if name is None and isinstance(e, exp.Column):
                name = None if isinstance(estimate, exp.Column) and not estimate.table \
                    and not estimate.name.startswith(PREFIX) else e.name
            elif name is None:
                name = next(names) or _sql(e)
            out_items.append(Item(_sql(estimate), _sql(exact), name, frozenset(used)))
        if not any(i.aggregates for i in out_items):
            raise _Refused("no count, sum or avg in the select list: nothing to estimate")
        having = select.args.get("having")
        having_sqls = [None, None] if having is None else [
            _sql(self._rewrite(having.this, estimates=flag, aliases=True, used=set()))
            for flag in (True, False)]
        limit, offset = (self._count(select, clause) for clause in ("limit", "offset"))
        order = self._order(select, out_items, items)  # before the aggregates: it may add some
        return Approximable(
            table=table.name, source=_sql(table),
            columns=self._columns(where.this if where is not None else None, keys, having),
            group_by=tuple(keys), aggregates=tuple(self.aggregates),
            where=_sql(where.this) if where is not None else None,
            items=tuple(out_items), having=having_sqls[0], exact_having=having_sqls[1],
            order=order, limit=limit, offset=offset)

    def _shape(self) -> exp.Select:
        """The SELECT, when it is a single one over one dataset."""
        from sqlglot import exp

        tree = self.tree
        if isinstance(tree, exp.SetOperation):
            raise _Refused("set operations (UNION, EXCEPT, INTERSECT) cannot be answered from a "
                           "sample")
        if not isinstance(tree, exp.Select):
            raise _Refused("only a SELECT can be answered from a sample")
        if tree.args.get("with_"):
            raise _Refused("a query with a WITH clause (CTE) cannot be answered from a sample")
        if tree.args.get("distinct"):
            raise _Refused("SELECT DISTINCT cannot be answered from a sample")
        if tree.args.get("joins") or tree.args.get("laterals") or tree.args.get("pivots"):
            raise _Refused("a join cannot be answered from a sample: read one dataset")
        for clause in ("qualify", "windows"):
            if tree.args.get(clause):
                raise _Refused("window functions cannot be estimated from a sample")
        unsupported = [k for k in ("into", "connect", "prewhere", "sample", "kind", "locks")
                       if tree.args.get(k)]
        if unsupported:
            raise _Refused(f"{unsupported[0].upper()} cannot be answered from a sample")
        source = tree.args.get("from_")
        table = source.this if source is not None else None
        extras = ("joins", "laterals", "pivots", "sample", "version")
        one_table = isinstance(table, exp.Table) and isinstance(table.this, exp.Identifier) \
            and not any(table.args.get(k) for k in extras) \
            and (not table.db or table.db.lower() in ("main", "temp"))
        if not one_table:
            raise _Refused("the query must read one dataset (no subquery or table function in "
                           "FROM)")
        for node in tree.walk():
            if isinstance(node, exp.Window):
                raise _Refused("window functions cannot be estimated from a sample")
            if node is not tree and isinstance(node, (exp.Select, exp.Subquery, exp.Exists)):
                raise _Refused("subqueries cannot be answered from a sample")
            if isinstance(node, exp.Star) and not isinstance(node.parent, exp.Count):
                raise _Refused("SELECT * cannot be estimated from a sample: name the columns")
        return tree.copy()

    def _group_by(self, select: exp.Select, items: list[tuple[exp.Expr, str | None]]
                  ) -> list[GroupKey]:
        from sqlglot import exp

        group = select.args.get("group")
        if group is None:
            return []
        if any(group.args.get(k) for k in ("grouping_sets", "cube", "rollup", "totals")) or any(
                isinstance(e, (exp.Rollup, exp.Cube, exp.GroupingSets)) for e in group.expressions):
            raise _Refused("GROUPING SETS, ROLLUP and CUBE cannot be answered from a sample")
        found: list[exp.Expr] = []
        if group.args.get("all"):
            found = [e for e, _ in items if not self._has_aggregate(e)]
        for e in group.expressions:
            if isinstance(e, exp.Literal) and e.is_int:
                position = int(e.name)
                if not 1 <= position <= len(items):
                    raise _Refused(f"GROUP BY position {position} is not in the select list")
                e = items[position - 1][0]
            elif isinstance(e, exp.Column) and not e.table and e.name.lower() in self.aliases:
                aliased = self.aliases[e.name.lower()]  # an alias, unless its expression reads
                if not any(c.name.lower() == e.name.lower() for c in aliased.find_all(exp.Column)):
                    e = aliased  # a column of that very name (then DuckDB takes the column)
            found.append(e)
        keys: list[GroupKey] = []
        for e in found:
            self._plain(e, "GROUP BY")
            while isinstance(e, exp.Paren):
                e = e.this
            if _key(e) in self.group_index:
                continue
            is_column = isinstance(e, exp.Column) and not e.table
            column = _sql(e.this) if is_column else f"{PREFIX}g{len(keys)}"
            keys.append(GroupKey(_sql(e), column, is_column))
            self.group_index[_key(e)] = keys[-1]
        return keys

    def _has_aggregate(self, node: exp.Expr) -> bool:
        from sqlglot import exp

        return any(isinstance(n, exp.AggFunc) or _error_function(n) for n in node.walk())

    def _plain(self, node: exp.Expr, clause: str) -> None:
        """WHERE and GROUP BY hold no aggregate and no error function."""
        from sqlglot import exp

        for n in node.walk():
            if _error_function(n):
                raise _Refused(f"{n.name.lower()}() is not allowed in {clause}")
            if isinstance(n, exp.AggFunc):
                raise _Refused(f"an aggregate is not allowed in {clause}")

    def _aggregate(self, node: exp.Expr) -> int | None:
        """The index of the aggregate ``node`` is (registering it); None if it is none."""
        from sqlglot import exp

        if isinstance(node, exp.Filter) and isinstance(node.this, exp.AggFunc):
            raise _Refused("aggregates with FILTER cannot be estimated from a sample")
        argument = node.this if isinstance(node, exp.AggFunc) else None
        if isinstance(node, exp.Anonymous) and node.name.lower() == "count_star" \
                and not node.expressions:
            kind = "count_star"
        elif isinstance(node, exp.Count):
            kind = "count_star" if argument is None or isinstance(argument, exp.Star) else "count"
        elif isinstance(node, (exp.Sum, exp.Avg)):
            kind = "sum" if isinstance(node, exp.Sum) else "avg"
        elif isinstance(node, (exp.Min, exp.Max)):
            raise _Refused("min/max cannot be estimated from a sample")
        elif isinstance(node, exp.AggFunc):
            name = _sql(node).split("(")[0].lower()
            raise _Refused(f"{name}() cannot be estimated from a sample: only count, sum and avg "
                           "can")
        else:
            return None
        name = "count" if kind == "count_star" else kind
        if isinstance(argument, exp.Distinct):
            inside = ", ".join(_sql(e) for e in argument.expressions)
            raise _Refused(f"{name}(DISTINCT {inside}) cannot be estimated from a sample")
        extra = [k for k, v in node.args.items() if v and k not in ("this", "big_int")]
        if extra or (isinstance(argument, exp.Star) and any(argument.args.values())):
            raise _Refused(f"{_sql(node)} cannot be estimated from a sample")
        if kind == "count_star":
            argument = None
        elif argument is None:
            raise _Refused(f"{name}() needs an argument")
        else:
            self._plain(argument, "an aggregate's argument")
        key = kind + ":" + (_key(argument) if argument is not None else "")
        if key not in self.aggregate_index:
            argument_sql = _sql(argument) if argument is not None else None
            columns = frozenset(_column_name(c) for c in argument.find_all(exp.Column)) \
                if argument is not None else frozenset()
            self.aggregate_index[key] = len(self.aggregates)
            self.aggregates.append(Aggregate(kind, argument_sql, columns,
                                             f"{name}({argument_sql or '*'})"))
        return self.aggregate_index[key]

    def _rewrite(self, node: exp.Expr, estimates: bool, aliases: bool, used: set[int]
                 ) -> exp.Expr:
        """``node`` over the estimates (group keys and aggregates as the estimator's columns),
        or over the dataset's rows (error functions as their exact values). ``aliases``: a
        column may name a select-list expression (HAVING, ORDER BY)."""
        import sqlglot
        from sqlglot import exp

        def visit(n: exp.Expr) -> exp.Expr:
            if isinstance(n, (exp.Identifier, exp.Literal, exp.DataType)):
                return n
            key = self.group_index.get(_key(n))
            if key is not None:
                return sqlglot.parse_one(key.column, read="duckdb") if estimates else n.copy()
            function = _error_function(n)
            if function:
                return self._error(n, function, estimates, used)
            k = self._aggregate(n)
            if k is not None:
                used.add(k)
                return exp.column(f"{PREFIX}est{k}") if estimates else n.copy()
            if isinstance(n, exp.Column):
                if aliases and not n.table and n.name.lower() in self.aliases:
                    inner = self._rewrite(self.aliases[n.name.lower()], estimates, False, used)
                    return exp.Paren(this=inner)
                raise _Refused(f"column {_sql(n)} must be in GROUP BY or inside count, sum or "
                               "avg")
            return n

        return node.transform(visit)

    def _error(self, n: exp.Expr, function: str, estimates: bool, used: set[int]
               ) -> exp.Expr:
        import sqlglot
        from sqlglot import exp

        target = n.expressions[0] if len(n.expressions) == 1 else None
        if isinstance(target, exp.Column) and not target.table \
                and target.name.lower() in self.aliases:
            target = self.aliases[target.name.lower()]
        k = self._aggregate(target) if target is not None else None
        if k is None:
            given = ", ".join(_sql(e) for e in n.expressions) or "nothing"
            raise _Refused(f"{function}() takes an aggregate (count, sum or avg) or its alias, "
                           f"not {given}")
        used.add(k)
        if estimates:
            return exp.column(f"{PREFIX}{function}{k}")
        return sqlglot.parse_one(_EXACT_ERRORS[function], read="duckdb")

    def _order(self, select: exp.Select, out: list[Item],
               items: list[tuple[exp.Expr, str | None]]) -> tuple[OrderTerm, ...]:
        from sqlglot import exp

        order = select.args.get("order")
        if order is None:
            return ()
        names = {(i.name or e.name).lower(): position for position, (i, (e, _)) in
                 enumerate(zip(out, items, strict=True), 1) if i.name or isinstance(e, exp.Column)}
        terms = []
        for ordered in order.expressions:
            this = ordered.this
            template = ordered.copy()
            template.set("this", exp.column(f"{PREFIX}sort"))
            text = _sql(template).replace(f"{PREFIX}sort", "{}", 1)
            if isinstance(this, exp.Var) and this.name.upper() == "ALL":
                raise _Refused("ORDER BY ALL cannot be answered from a sample: name the columns")
            if isinstance(this, exp.Literal) and this.is_int:
                if not 1 <= int(this.name) <= len(out):
                    raise _Refused(f"ORDER BY position {this.name} is not in the select list")
                terms.append(OrderTerm(int(this.name), None, None, text))
            elif isinstance(this, exp.Column) and not this.table and this.name.lower() in names:
                terms.append(OrderTerm(names[this.name.lower()], None, None, text))
            else:
                estimate, exact = (self._rewrite(this, estimates=flag, aliases=True, used=set())
                                   for flag in (True, False))
                terms.append(OrderTerm(None, _sql(estimate), _sql(exact), text))
        return tuple(terms)

    def _count(self, select: exp.Select, clause: str) -> int | None:
        from sqlglot import exp

        node = select.args.get(clause)
        if node is None:
            return None
        value = node.args.get("expression")
        options = node.args.get("limit_options")
        if not isinstance(value, exp.Literal) or not value.is_int or (
                options is not None and any(options.args.values())):
            raise _Refused(f"{clause.upper()} must be a whole number to be answered from a sample")
        return int(value.name)

    def _columns(self, where: exp.Expr | None, keys: list[GroupKey],
                 having: exp.Having | None) -> frozenset[str]:
        import sqlglot
        from sqlglot import exp

        found: set[str] = set()

        def measured(n: exp.Expr) -> bool:
            # columns inside aggregates (HAVING sum(x) > 0) are measured, not selected on
            return isinstance(n, exp.AggFunc) or bool(_error_function(n))

        def visit(root: exp.Expr) -> None:
            for n in root.walk(prune=measured):
                if not isinstance(n, exp.Column):
                    continue
                aliased = not n.table and n.name.lower() in self.aliases
                if aliased and _key(n) not in self.group_index:
                    visit(self.aliases[n.name.lower()])  # HAVING r <> 'x', r an alias
                else:
                    found.add(_column_name(n))

        for root in [where, having.this if having is not None else None,
                     *(sqlglot.parse_one(k.expression, read="duckdb") for k in keys)]:
            if root is not None:
                visit(root)
        return frozenset(found)


def _column_name(column: exp.Column) -> str:
    """The dataset column a reference reads (the struct's, for ``s.field``), lower-cased."""
    return (column.table or column.name).lower()


def _item_texts(sql: str, count: int) -> list[str] | None:
    """The select list's expressions as written (DuckDB names an unaliased expression by
    its own printing of it), or None if the tokens don't split into ``count`` of them."""
    import sqlglot
    from sqlglot.tokens import TokenType

    try:
        tokens = sqlglot.tokenize(sql, read="duckdb")
    except sqlglot.errors.SqlglotError:
        return None
    ends = {TokenType.FROM, TokenType.WHERE, TokenType.GROUP_BY, TokenType.HAVING,
            TokenType.QUALIFY, TokenType.WINDOW, TokenType.ORDER_BY, TokenType.LIMIT,
            TokenType.OFFSET, TokenType.SEMICOLON}
    depth, started = 0, False
    parts: list[list[Token]] = []
    current: list[Token] = []
    for token in tokens:
        if not started:
            started = token.token_type == TokenType.SELECT
            continue
        if token.token_type in (TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE):
            depth += 1
        elif token.token_type in (TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE):
            depth -= 1
        elif depth == 0 and (token.token_type in ends or token.token_type == TokenType.COMMA):
            parts.append(current)
            current = []
            if token.token_type != TokenType.COMMA:
                break
            continue
        current.append(token)
    else:
        parts.append(current)
    if len(parts) != count or not all(parts):
        return None
    return [sql[p[0].start:p[-1].end + 1] for p in parts]
