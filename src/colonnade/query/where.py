"""Read the WHERE clauses of a SQL query into pruning predicates, one tree per dataset.

DuckDB pushes to a scan only the ``column op constant`` filters it translates to Arrow: a
comparison for which it casts the column (``ts >= TIMESTAMP '...'`` on a ``timestamp[s]``
column), any filter on a float column, or an ``IN`` list with a NULL never reach the scanner.
This module reads the query with DuckDB's own parser (``json_serialize_sql``) and turns each
dataset's WHERE conjuncts that are safe to prune with into :class:`Probe` leaves;
:mod:`colonnade.query.probes` checks their types and decides them against partition and segment
bounds by evaluating the same SQL in DuckDB. Every conjunct that can't be used is kept as a
:class:`Rejected` with the reason, for ``explain``.

Safe means: the dataset is named once in the query (so every scan of it comes from that one
reference), and the conjunct is in the WHERE clause of the SELECT whose FROM holds the reference,
alone or joined (inner, cross, left, right, full; on the side an outer join fills with NULLs only
predicates that are false on NULL). A row of the dataset that fails such a conjunct contributes
to no row of that SELECT, so skipping it changes no answer. A probe compares the column, bare or
through casts, with constants; :mod:`~colonnade.query.probes` proves the casts exact and
order-preserving before using it.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from colonnade.expressions.tree import And, Node, Or, Unknown
from colonnade.query.memo import Memo

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

#: Name of the column that stands for the dataset's column in probe expressions.
PLACEHOLDER = "__colonnade_v"

_COMPARE = {"COMPARE_EQUAL": "=", "COMPARE_LESSTHAN": "<", "COMPARE_LESSTHANOREQUALTO": "<=",
            "COMPARE_GREATERTHAN": ">", "COMPARE_GREATERTHANOREQUALTO": ">="}
_FLIP = {"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_TYPE_OF = {v: k for k, v in _COMPARE.items()}
#: Deterministic functions allowed on the constant side (operators, interval literals).
_CONSTANT_FUNCTIONS = {"+", "-", "*", "/", "//", "%", "trunc", "to_years", "to_months", "to_weeks",
                       "to_days", "to_hours", "to_minutes", "to_seconds", "to_milliseconds",
                       "to_microseconds", "make_date", "make_timestamp", "make_time"}
_OPERATORS = {"+", "-", "*", "/", "//", "%", "^", "**", "||", "<<", ">>", "&", "|"}
_LIKE = {"~~", "!~~", "~~*", "!~~*", "~~~", "like_escape", "ilike_escape", "glob", "regexp_matches",
         "prefix", "suffix", "contains", "starts_with"}
_JOINS = {"INNER": (False, False), "LEFT": (False, True), "RIGHT": (True, False),
          "FULL": (True, True), "OUTER": (True, True)}


@dataclass(frozen=True)
class Constant:
    """A constant side: its expression (DuckDB's JSON) and whether it is a bare string literal
    (which DuckDB casts to the column's type)."""

    expr: str
    string_literal: bool


@dataclass(frozen=True)
class Probe(Node):
    """A predicate on one column that some value of ``[lo, hi]`` may satisfy.

    ``kind`` is ``compare`` (then ``alternatives``), ``is_null`` or ``is_valid``. Each
    alternative is a conjunction of checks ``(bound, index)``: ``checks[index]`` (a boolean
    expression over :data:`PLACEHOLDER`, as DuckDB's JSON) evaluated at ``lo`` or ``hi``; a
    value of ``[lo, hi]`` may match if some alternative has no check that is false. That holds
    because every check is ``f(x) >= c`` (an up-set: true somewhere iff true at ``hi``) or
    ``f(x) <= c`` (true at ``lo``), where ``f`` is the column side, which must be monotonic.
    """

    column: str
    kind: str
    expr: str  # the predicate (DuckDB's JSON)
    alias: str = ""  # how the query names the dataset (for re-running ``expr`` alone)
    subject: str = ""  # the column side as written (DuckDB's JSON)
    column_side: str = ""  # JSON of the column side over PLACEHOLDER (casts of it, or itself)
    constants: tuple[Constant, ...] = ()
    checks: tuple[str, ...] = ()
    alternatives: tuple[tuple[tuple[str, int], ...], ...] = ()
    pushed: bool = False  # DuckDB pushes this very predicate to the scan itself


#: Literal kinds DuckDB casts to the column's type (so it pushes ``column op literal`` as is).
_CAST_TO_COLUMN = {"STRING"}
_INTEGER_LITERAL_COLUMNS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
_TYPE_NAMES = {"date32[day]": "DATE", "timestamp[us]": "TIMESTAMP", "int64": "BIGINT", "int32": "INTEGER",
               "string": "VARCHAR", "large_string": "VARCHAR"}


@dataclass(frozen=True)
class Rejected:
    """A conjunct (or part of one) on a dataset that pruning does not use, and why.
    Expressions are kept as DuckDB's JSON; :func:`sql_text` turns them into SQL for messages."""

    subject: str  # what is filtered on, e.g. upper(name)
    columns: frozenset[str]
    reason: str
    conjunct: str = ""  # the whole WHERE conjunct it is part of ("" if it can't run alone)
    alias: str = ""  # how the query names the dataset there

    def message(self, subject_sql: str) -> str:
        return f"filter on `{_unquoted(subject_sql)}` was not used for pruning: {self.reason}"


_QUOTED = re.compile(r'"([A-Za-z_][A-Za-z0-9_]*)"')


def _unquoted(sql: str) -> str:
    """DuckDB's SQL with plain identifiers unquoted (``upper("name")`` → ``upper(name)``),
    outside string literals: easier to read in a message."""
    parts = sql.split("'")
    return "'".join(_QUOTED.sub(r"\1", p) if i % 2 == 0 else p for i, p in enumerate(parts))


@dataclass
class DatasetWhere:
    """What the WHERE clauses of a query say about one dataset."""

    node: Node | None = None
    rejected: list[Rejected] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


#: What :func:`read_where` found, by query text and datasets' schemas (it depends on nothing
#: else: the parse is the parser's, and the schemas give the columns' names and types). Keyed
#: by the schema objects' identities, not their values (hashing a 57-column schema takes about
#: as long as reading a small query's WHERE): each entry holds its schemas, so no other object
#: can take one's id while the entry is kept, and an equal schema in another object is a miss.
_READ: Memo[tuple[str, tuple[tuple[str, int], ...]],
            tuple[tuple[pa.Schema, ...], dict[str, DatasetWhere]]] = Memo(64)


def read_where(con: duckdb.DuckDBPyConnection, query: str,
               schemas: dict[str, pa.Schema]) -> dict[str, DatasetWhere]:
    """Pruning predicates and rejected filters per dataset (keys: names as in ``schemas``);
    the caller's to change (a repeated query's are copies of what was found the first time)."""
    key = (query, tuple((name, id(schema)) for name, schema in schemas.items()))
    _, found = _READ.get(key, lambda: (tuple(schemas.values()), _read_where(con, query, schemas)))
    return {name: DatasetWhere(w.node, list(w.rejected), list(w.notes)) for name, w in found.items()}


def _read_where(con: duckdb.DuckDBPyConnection, query: str,
                schemas: dict[str, pa.Schema]) -> dict[str, DatasetWhere]:
    parsed = parsed_sql(con, query)
    if parsed is None or len(parsed["statements"]) != 1:
        return {}
    statement = parsed["statements"][0]
    if any(d.get("type") == "TABLE_FUNCTION" for d in dicts_of(statement)):
        return {}  # query_table('t') and the like scan datasets without naming them
    by_lower = {name.lower(): name for name in schemas}
    counts: dict[str, int] = {}
    for d in dicts_of(statement):
        if d.get("type") == "BASE_TABLE" and isinstance(d.get("table_name"), str):
            name = by_lower.get(d["table_name"].lower())
            if name is not None:
                counts[name] = counts.get(name, 0) + 1
        if "cte_map" in d:
            for entry in (d["cte_map"] or {}).get("map") or []:
                name = by_lower.get(str(entry.get("key", "")).lower())
                if name is not None:
                    counts[name] = counts.get(name, 0) + 2  # a CTE of that name hides the dataset
    reader = _Reader(schemas, by_lower)
    out: dict[str, DatasetWhere] = {}
    for d in dicts_of(statement):
        if d.get("type") == "SELECT_NODE" and d.get("where_clause") is not None:
            reader.select(d, counts, out)
    for name, n in counts.items():
        if n > 1:
            out.setdefault(name, DatasetWhere()).notes.append(
                f"filters on `{name}` were not analysed for pruning: `{name}` appears more than once "
                "in the query (only what DuckDB pushes down is used)")
    return out


#: DuckDB's parse of the query texts read last (each query is read by several steps: the names
#: it reads, its statement kinds, its WHERE clauses); None for a text it can't serialize.
_PARSED: Memo[str, dict[str, Any] | None] = Memo(64)


def parsed_sql(con: duckdb.DuckDBPyConnection, query: str) -> dict[str, Any] | None:
    """``query`` as DuckDB's parser reads it (``json_serialize_sql``: parsed, not bound; SELECT
    statements only), with at least one statement; None when it can't be serialized. Shared:
    callers must not change it."""
    return _PARSED.get(query, lambda: _parse(con, query))


def _parse(con: duckdb.DuckDBPyConnection, query: str) -> dict[str, Any] | None:
    try:
        parsed = json.loads(con.execute("SELECT json_serialize_sql(?::VARCHAR)", [query]).fetchall()[0][0])
    except Exception:  # noqa: BLE001 - not serializable: the caller reads it another way or not at all
        return None
    if not isinstance(parsed, dict) or parsed.get("error") or not parsed.get("statements"):
        return None
    return parsed


def statement_kinds(con: duckdb.DuckDBPyConnection, query: str) -> list[str]:
    """The kind of each statement of ``query`` (``SELECT``, ``CREATE``...): from the parse
    :func:`parsed_sql` keeps when it serializes (only SELECT statements do), else from
    ``duckdb.extract_statements`` (whose errors are raised)."""
    import duckdb

    parsed = parsed_sql(con, query)
    if parsed is not None:
        return ["SELECT"] * len(parsed["statements"])
    return [st.type.name for st in duckdb.extract_statements(query)]


def dicts_of(tree: Any) -> list[dict[str, Any]]:
    """Every JSON object in a parsed statement (DuckDB's json_serialize_sql), depth first."""
    out: list[dict[str, Any]] = []
    stack = [tree]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            out.append(x)
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    return out


@dataclass(frozen=True)
class _Ref:
    """A dataset's reference in a FROM clause."""

    dataset: str
    alias: str
    nullable: bool  # on the side an outer join fills with NULLs
    alone: bool  # the only relation of the FROM clause: unqualified names may refer to it


class _Reader:
    def __init__(self, schemas: dict[str, pa.Schema], by_lower: dict[str, str]) -> None:
        self.schemas = schemas
        self.by_lower = by_lower

    # -- FROM
    def _leaves(self, ref: dict[str, Any], nullable: bool, out: list[tuple[dict[str, Any], bool]]) -> bool:
        """Collect (relation, nullable) of a FROM tree; False if its shape is not one we read."""
        kind = ref.get("type")
        if kind == "JOIN":
            if ref.get("ref_type") not in ("REGULAR", "CROSS") or ref.get("using_columns"):
                return False
            sides = _JOINS.get(str(ref.get("join_type")))
            if sides is None:
                return False
            return (self._leaves(ref["left"], nullable or sides[0], out)
                    and self._leaves(ref["right"], nullable or sides[1], out))
        out.append((ref, nullable))
        return True

    def select(self, node: dict[str, Any], counts: dict[str, int], out: dict[str, DatasetWhere]) -> None:
        leaves: list[tuple[dict[str, Any], bool]] = []
        if node.get("sample"):
            return  # USING SAMPLE draws from the FROM clause before WHERE: pruning would change the draw
        if node.get("from_table") is None or not self._leaves(node["from_table"], False, leaves):
            return
        for rel, nullable in leaves:
            if rel.get("type") != "BASE_TABLE":
                continue
            name = self.by_lower.get(str(rel.get("table_name", "")).lower())
            if name is None or counts.get(name) != 1:
                continue
            if rel.get("sample") or rel.get("at_clause") or rel.get("column_name_alias"):
                continue  # sampled, time-travelling or renamed columns: not read here
            ref = _Ref(name, str(rel.get("alias") or rel["table_name"]), nullable, len(leaves) == 1)
            self._where(ref, node["where_clause"], out.setdefault(name, DatasetWhere()))

    # -- WHERE
    def _where(self, ref: _Ref, where: dict[str, Any], into: DatasetWhere) -> None:
        usable: list[Node] = []
        for conjunct in _conjuncts(where):
            if not self._columns(conjunct, ref):
                continue  # about other tables
            got = self._convert(conjunct, ref)
            if isinstance(got, Rejected):
                # (re-run alone for explain, unless it holds a subquery: that would scan tables)
                alone = not any(d.get("class") == "SUBQUERY" for d in dicts_of(conjunct))
                into.rejected.append(replace(got, conjunct=self._json(conjunct) if alone else "", alias=ref.alias))
            else:
                usable.append(got)
        if usable:
            into.node = usable[0] if len(usable) == 1 else And(tuple(usable))

    def _column(self, expr: dict[str, Any], ref: _Ref) -> str | None:
        """The dataset column a COLUMN_REF names, or None (another table, outer query, ...)."""
        names = [str(n) for n in expr.get("column_names") or []]
        if len(names) == 2 and names[0].lower() == ref.alias.lower():
            wanted = names[1]
        elif len(names) == 1 and ref.alone:
            wanted = names[0]
        else:
            return None
        matches = [c for c in self.schemas[ref.dataset].names if c.lower() == wanted.lower()]
        return matches[0] if len(matches) == 1 else None

    def _columns(self, expr: dict[str, Any], ref: _Ref) -> set[str]:
        """Dataset columns referred to in an expression (outside subqueries)."""
        found: set[str] = set()
        stack: list[Any] = [expr]
        while stack:
            x = stack.pop()
            if isinstance(x, dict):
                if x.get("class") == "SUBQUERY":
                    continue
                if x.get("class") == "COLUMN_REF":
                    c = self._column(x, ref)
                    if c is not None:
                        found.add(c)
                    continue
                stack.extend(x.values())
            elif isinstance(x, list):
                stack.extend(x)
        return found

    @staticmethod
    def _json(expr: dict[str, Any]) -> str:
        return json.dumps(expr)  # turned into SQL only if a message needs it (sql_text)

    def _reject(self, subject: dict[str, Any], ref: _Ref, reason: str) -> Rejected:
        return Rejected(self._json(subject), frozenset(self._columns(subject, ref)), reason)

    def _convert(self, expr: dict[str, Any], ref: _Ref) -> Node | Rejected:
        kind = expr.get("type")
        if kind == "CONJUNCTION_AND":
            parts = [self._convert(c, ref) for c in expr.get("children") or []]
            kept = tuple(p for p in parts if isinstance(p, Node))
            if not kept:
                return next(p for p in parts if isinstance(p, Rejected))
            return kept[0] if len(kept) == 1 else And(kept)
        if kind == "CONJUNCTION_OR":
            branches = []
            for child in expr.get("children") or []:
                if not self._columns(child, ref):
                    return self._reject(expr, ref, "a branch of the OR is about other columns")
                got = self._convert(child, ref)
                if isinstance(got, Rejected):
                    return Rejected(self._json(expr), frozenset(self._columns(expr, ref)),
                                    f"a branch of the OR can't be used ({got.reason})")
                branches.append(got)
            return Or(tuple(branches))
        if kind in _COMPARE:
            return self._comparison(expr, ref)
        if kind == "COMPARE_BETWEEN":
            return self._range(expr, ref)
        if kind == "COMPARE_IN":
            return self._in(expr, ref)
        if kind in ("OPERATOR_IS_NULL", "OPERATOR_IS_NOT_NULL"):
            child = (expr.get("children") or [None])[0]
            side = self._column_side(child, ref) if isinstance(child, dict) else None
            if isinstance(side, Rejected) or side is None:
                return side or self._reject(expr, ref, "not a column")
            if kind == "OPERATOR_IS_NULL" and ref.nullable:
                return self._reject(expr, ref, "IS NULL on the NULL-filled side of an outer join")
            column, side_json = side
            return Probe(column, "is_null" if kind == "OPERATOR_IS_NULL" else "is_valid",
                         self._json(expr), ref.alias, self._json(child), side_json,
                         pushed=child.get("class") == "COLUMN_REF")
        if kind in ("COMPARE_NOTEQUAL", "COMPARE_DISTINCT_FROM", "COMPARE_NOT_DISTINCT_FROM"):
            return self._reject(expr, ref, "`<>` and IS [NOT] DISTINCT FROM can't rule out a segment by its min/max")
        if kind == "OPERATOR_NOT" or kind == "COMPARE_NOT_IN":
            return self._reject(expr, ref, "NOT (...) is not projected")
        if expr.get("class") == "FUNCTION":
            if expr.get("function_name") in _LIKE:
                return self._reject(expr, ref, "pattern matches (LIKE, regexp) are not projected")
            return self._reject(expr, ref, "function calls are not projected")
        if expr.get("class") == "COLUMN_REF":
            return self._reject(expr, ref, "a bare boolean column is not projected")
        return self._reject(expr, ref, "not a comparison of a column with constants")

    def _column_side(self, expr: dict[str, Any], ref: _Ref) -> tuple[str, str] | Rejected | None:
        """(column, JSON over PLACEHOLDER) if ``expr`` is a column of the dataset, bare or cast;
        a Rejected if it involves the dataset otherwise; None if it doesn't involve it."""
        columns = self._columns(expr, ref)
        if not columns:
            return None
        if len(columns) > 1:
            return self._reject(expr, ref, "compares several columns")
        node = expr
        while node.get("class") == "CAST":
            node = node["child"]
        if node.get("class") == "COLUMN_REF":
            out = copy.deepcopy(expr)
            inner = out
            while inner.get("class") == "CAST":
                inner = inner["child"]
            inner["column_names"] = [PLACEHOLDER]
            return next(iter(columns)), json.dumps(out)
        if node.get("class") == "FUNCTION":
            if node.get("function_name") in _OPERATORS:
                return self._reject(expr, ref, "arithmetic on columns is not projected")
            return self._reject(expr, ref, "function calls are not projected")
        return self._reject(expr, ref, f"{str(node.get('class', '?')).lower()} expressions on columns are not projected")

    def _constant(self, expr: dict[str, Any], ref: _Ref) -> Constant | str:
        """The constant side, or why it isn't one."""
        for d in dicts_of(expr):
            cls = d.get("class")
            if cls == "SUBQUERY":
                return "compares with a subquery"
            if cls == "COLUMN_REF":
                return "compares with another column"
            if cls == "PARAMETER":
                return "compares with a query parameter"
            if cls == "COLLATE":
                return "collations are not projected"
            if cls == "FUNCTION" and d.get("function_name") not in _CONSTANT_FUNCTIONS:
                return f"compares with {d.get('function_name')}(...), which is not a constant"
            if cls not in (None, "CONSTANT", "CAST", "FUNCTION", "TYPE"):
                return "compares with an expression that is not a constant"
        bare = expr.get("class") == "CONSTANT" and (expr.get("literal") or {}).get("kind") == "STRING"
        return Constant(json.dumps(expr), bare)

    def _sides(self, column_expr: dict[str, Any], constants: list[dict[str, Any]], whole: dict[str, Any],
               ref: _Ref) -> tuple[str, str, tuple[Constant, ...]] | Rejected:
        side = self._column_side(column_expr, ref)
        if side is None:
            return self._reject(whole, ref, "compares a constant with a column expression")
        if isinstance(side, Rejected):
            return side
        out = []
        for c in constants:
            got = self._constant(c, ref)
            if isinstance(got, str):
                return Rejected(self._json(column_expr), frozenset(self._columns(column_expr, ref)), got)
            out.append(got)
        return side[0], side[1], tuple(out)

    def _comparison(self, expr: dict[str, Any], ref: _Ref) -> Node | Rejected:
        op = _COMPARE[expr["type"]]
        left, right = expr["left"], expr["right"]
        if self._columns(left, ref) and self._columns(right, ref):
            return self._reject(expr, ref, "compares two columns")
        if not self._columns(left, ref):
            left, right, op = right, left, _FLIP[op]
        sides = self._sides(left, [right], expr, ref)
        if isinstance(sides, Rejected):
            return sides
        column, side_json, (constant,) = sides
        checks: tuple[str, ...]
        if op == "=":
            checks = (_check(side_json, ">=", constant), _check(side_json, "<=", constant))
            alternatives: tuple[tuple[tuple[str, int], ...], ...] = ((("hi", 0), ("lo", 1)),)
        else:
            checks = (_check(side_json, op, constant),)
            alternatives = (((("hi" if op in (">", ">=") else "lo"), 0),),)
        return Probe(column, "compare", self._json(expr), ref.alias, self._json(left), side_json, (constant,),
                     checks, alternatives, self._pushed(ref, left, [right]))

    def _range(self, expr: dict[str, Any], ref: _Ref) -> Node | Rejected:
        sides = self._sides(expr["input"], [expr["lower"], expr["upper"]], expr, ref)
        if isinstance(sides, Rejected):
            return sides
        column, side_json, (lower, upper) = sides
        checks = (_check(side_json, ">=", lower), _check(side_json, "<=", upper))
        return Probe(column, "compare", self._json(expr), ref.alias, self._json(expr["input"]), side_json,
                     (lower, upper), checks, ((("hi", 0), ("lo", 1)),),
                     self._pushed(ref, expr["input"], [expr["lower"], expr["upper"]]))

    def _in(self, expr: dict[str, Any], ref: _Ref) -> Node | Rejected:
        children = expr.get("children") or []
        if len(children) < 2:
            return self._reject(expr, ref, "an empty IN list")
        sides = self._sides(children[0], children[1:], expr, ref)
        if isinstance(sides, Rejected):
            return sides
        column, side_json, constants = sides
        checks: list[str] = []
        alternatives = []
        for constant, raw in zip(constants, children[1:], strict=True):
            if raw.get("class") == "CONSTANT" and (raw.get("literal") or {}).get("kind") == "NULL_LITERAL":
                continue  # x = NULL is never true: that value matches no row
            alternatives.append((("hi", len(checks)), ("lo", len(checks) + 1)))
            checks += [_check(side_json, ">=", constant), _check(side_json, "<=", constant)]
        return Probe(column, "compare", self._json(expr), ref.alias, self._json(children[0]), side_json,
                     constants, tuple(checks), tuple(alternatives), self._pushed(ref, children[0], children[1:]))

    def _pushed(self, ref: _Ref, column_expr: dict[str, Any], constants: list[dict[str, Any]]) -> bool:
        """Does DuckDB push ``column op constants`` to the scan as it is (so that the scan's own
        pruning covers it)? True only for forms checked to be pushed: a bare column that is not
        a float, compared with string literals (cast to the column's type), integer literals on
        an integer column, or literals typed as the column is. Getting this wrong only loses
        pruning: a probe marked pushed is not evaluated."""
        if column_expr.get("class") != "COLUMN_REF":
            return False
        column = self._column(column_expr, ref)
        if column is None:
            return False
        type_name = str(self.schemas[ref.dataset].field(column).type)
        if type_name in ("float", "double", "halffloat"):
            return False  # DuckDB keeps float comparisons (NaN orders differently in Arrow)
        for c in constants:
            if c.get("class") == "CAST" and c["child"].get("class") == "CONSTANT":
                typed = str((c.get("type_expr") or {}).get("type_name", "")).upper()
                if typed != _TYPE_NAMES.get(type_name) or c.get("try_cast"):
                    return False
                continue
            kind = (c.get("literal") or {}).get("kind") if c.get("class") == "CONSTANT" else None
            if kind in _CAST_TO_COLUMN:
                continue
            if kind == "INTEGER" and type_name in _INTEGER_LITERAL_COLUMNS and _fits(c["literal"]["text"], type_name):
                continue
            return False  # (a NULL in an IN list, too: DuckDB does not push that IN)
        return True


def _fits(text: str, type_name: str) -> bool:
    """Is the integer literal ``text`` in the range of the integer type (else DuckDB casts the
    column to a wider type, and does not push the comparison)?"""
    try:
        value = int(text)
    except ValueError:
        return False
    bits = int(type_name.lstrip("uint"))
    if type_name.startswith("u"):
        return 0 <= value < 2 ** bits
    return -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)


def sql_text(con: duckdb.DuckDBPyConnection, expr: str) -> str:
    """DuckDB's SQL for an expression kept as its JSON."""
    statement = {"error": False, "statements": [{"node": {
        "type": "SELECT_NODE", "modifiers": [], "cte_map": {"map": []}, "select_list": [json.loads(expr)],
        "from_table": {"type": "EMPTY", "sample": None}, "where_clause": None,
        "group_expressions": [], "group_sets": [], "aggregate_handling": "STANDARD_HANDLING",
        "having": None, "sample": None, "qualify": None}, "named_param_map": []}]}
    try:
        text = str(con.execute("SELECT json_deserialize_sql(?::JSON)", [json.dumps(statement)]).fetchall()[0][0])
    except Exception:  # noqa: BLE001 - a message without the text is still a message
        return "?"
    return text[len("SELECT "):] if text.startswith("SELECT ") else text


def _conjuncts(expr: dict[str, Any]) -> list[dict[str, Any]]:
    if expr.get("type") == "CONJUNCTION_AND":
        return [c for child in expr.get("children") or [] for c in _conjuncts(child)]
    return [expr]


def _check(side_json: str, op: str, constant: Constant) -> str:
    return json.dumps({"class": "COMPARISON", "type": _TYPE_OF[op], "alias": "",
                       "query_location": 18446744073709551615,
                       "left": json.loads(side_json), "right": json.loads(constant.expr)})


def probes_of(node: Node | None) -> list[Probe]:
    if isinstance(node, Probe):
        return [node]
    if isinstance(node, And | Or):
        return [p for a in node.args for p in probes_of(a)]
    return []


def replace_probes(node: Node | None, keep: set[int]) -> Node | None:
    """The tree with every probe whose id() is not in ``keep`` replaced by Unknown."""
    if isinstance(node, Probe):
        return node if id(node) in keep else Unknown("probe rejected")
    if isinstance(node, And):
        return And(tuple(replace_probes(a, keep) or Unknown() for a in node.args))
    if isinstance(node, Or):
        return Or(tuple(replace_probes(a, keep) or Unknown() for a in node.args))
    return node
