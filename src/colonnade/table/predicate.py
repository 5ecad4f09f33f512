"""A SQL predicate (DuckDB's dialect) over one dataset's columns, as deletes and retention use it.

DuckDB evaluates it on rows (a row matches where it is TRUE; NULL does not match), so the rows
it selects are exactly what ``SELECT ... WHERE predicate`` selects. To decide segments without
reading their rows, the predicate is also read (with DuckDB's own parser) into a predicate tree
(:mod:`colonnade.expressions.tree`) where it is made of comparisons of a column with constants
(``= <> < <= > >= IN BETWEEN IS [NOT] NULL``, ``AND``, ``OR``, ``NOT``); anything else is
:class:`~colonnade.expressions.tree.Unknown`. From the tree:

* **may match** (the pruning rules of :mod:`colonnade.expressions.pruning`): a partition or
  segment that cannot hold a matching row is not touched;
* **all match**: every row of a partition (from the source range its partition value stands
  for, see :meth:`~colonnade.schema.transforms.Transform.source_range`) or of a segment (from
  its min/max and null count) satisfies the predicate. An unknown part, a float column (NaN
  orders differently in SQL and Arrow) or a constant that doesn't convert exactly to the
  column's type makes the answer "not proven", never a wrong yes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from colonnade.encoding.chunk import ChunkStats, physical_value
from colonnade.errors import PredicateError
from colonnade.expressions.pruning import partition_may_match, segment_may_match
from colonnade.expressions.tree import And, Compare, Node, Or, Unknown
from colonnade.sqlnames import quoted

if TYPE_CHECKING:
    import duckdb

    from colonnade.schema.spec import DatasetSpec

_COMPARE = {"COMPARE_EQUAL": "=", "COMPARE_LESSTHAN": "<", "COMPARE_LESSTHANOREQUALTO": "<=",
            "COMPARE_GREATERTHAN": ">", "COMPARE_GREATERTHANOREQUALTO": ">=",
            "COMPARE_NOTEQUAL": "<>"}
_FLIP = {"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<=", "<>": "<>"}
_NEGATE = {"=": "<>", "<>": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
_ROW = "__colonnade_row"


class Predicate:
    """A checked predicate over ``schema`` (PredicateError, one line, if it does not parse, names
    a column the dataset lacks, or is not a boolean); :meth:`close` when done."""

    def __init__(self, dataset: str, text: str, schema: pa.Schema) -> None:
        import duckdb

        self.dataset, self.text, self.schema = dataset, text.strip(), schema
        if not self.text:
            raise PredicateError(dataset, text, "the predicate is empty")
        self._con = duckdb.connect()
        try:
            self._check()
            self.node = self._tree()
        except BaseException:
            self._con.close()
            raise

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> Predicate:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def _relation(self) -> str:
        return quoted(self.dataset)

    def _statement(self, select: str) -> str:
        return f"SELECT {select} FROM {self._relation} WHERE {self.text}"

    def _check(self) -> None:
        import duckdb

        try:
            statements = duckdb.extract_statements(self._statement("*"))
        except duckdb.Error as exc:
            raise PredicateError(self.dataset, self.text, _first_line(exc)) from None
        if len(statements) != 1:
            raise PredicateError(self.dataset, self.text, "not one predicate")
        empty = pa.table({f.name: pa.array([], f.type) for f in self.schema})
        self._con.register(self.dataset, empty)
        try:
            self._con.execute(self._statement("count(*)")).fetchall()  # binds it: columns, types
            typed = self._con.sql(f"SELECT ({self.text}) AS p FROM {self._relation} LIMIT 0").to_arrow_table()
        except duckdb.Error as exc:
            raise PredicateError(self.dataset, self.text, _first_line(exc)) from None
        finally:
            self._con.unregister(self.dataset)
        if not pa.types.is_boolean(typed.schema.field("p").type):
            raise PredicateError(self.dataset, self.text, f"it is not true or false but "
                                 f"{typed.schema.field('p').type}")

    # -- rows
    def matches(self, table: pa.Table) -> np.ndarray:
        """Which rows of ``table`` (the dataset's columns) the predicate is TRUE for."""
        indexed = table.append_column(_ROW, pa.array(np.arange(table.num_rows, dtype=np.int64)))
        self._con.register(self.dataset, indexed)
        try:
            hit = self._con.sql(self._statement(_ROW)).to_arrow_table().column(0).to_numpy()
        finally:
            self._con.unregister(self.dataset)
        mask = np.zeros(table.num_rows, dtype=bool)
        mask[hit] = True
        return mask

    # -- segments and partitions
    def may_match_partition(self, spec: DatasetSpec, values: tuple[Any, ...]) -> bool:
        return partition_may_match(self.node, spec, values)

    def may_match_segment(self, stats: dict[str, ChunkStats], rows: int) -> bool:
        return segment_may_match(self.node, self.schema, stats, rows)

    def all_match_partition(self, spec: DatasetSpec, values: tuple[Any, ...]) -> bool:
        """Whether every row of the partition with these transform values matches."""
        def bounds(column: str) -> tuple[bool, Any, Any] | None:
            type_ = self.schema.field(column).type
            for transform, pv in zip(spec.partition_by, values, strict=True):
                if transform.sources != (column,):
                    continue
                if pv is None:
                    return True, None, None  # every value of the column is null
                found = transform.source_range(pv, type_)
                if found is not None:
                    return False, found[0], found[1]
            return None

        return _all(self.node, self.schema, bounds)

    def all_match_segment(self, stats: dict[str, ChunkStats], rows: int) -> bool:
        """Whether every row of a segment with these statistics matches."""
        def bounds(column: str) -> tuple[bool, Any, Any] | None:
            s = stats.get(column)
            if s is None or s.nulls >= rows:
                return True, None, None  # a column added after the segment: all null
            if s.nulls:
                return None  # some null, some not: not decided here
            return False, s.min, s.max

        return _all(self.node, self.schema, bounds)

    # -- reading the predicate
    def _tree(self) -> Node:
        raw = self._con.execute("SELECT json_serialize_sql(?)", [self._statement("*")]).fetchall()
        parsed = json.loads(raw[0][0]) if raw else {}
        if parsed.get("error"):
            return Unknown("unparsed")
        where = parsed["statements"][0]["node"].get("where_clause")
        return self._node(where) if where else Unknown("no where clause")

    def _column(self, e: dict[str, Any]) -> str | None:
        if e.get("class") != "COLUMN_REF":
            return None
        names = e.get("column_names") or []
        if len(names) == 2 and names[0].lower() != self.dataset.lower():
            return None
        if len(names) not in (1, 2):
            return None
        wanted = names[-1].lower()
        found = [n for n in self.schema.names if n.lower() == wanted]
        return found[0] if len(found) == 1 else None

    def _constant(self, e: dict[str, Any], column: str) -> pa.Scalar | None:
        """The value of a constant side, as the column's type, when DuckDB compares it with
        the column as that type (else None)."""
        if e.get("class") == "CAST" and e.get("child", {}).get("class") == "CONSTANT":
            literal = e["child"]
        elif e.get("class") == "CONSTANT":
            literal = e
        else:
            return None
        type_ = self.schema.field(column).type
        if pa.types.is_dictionary(type_):
            type_ = type_.value_type
        text = _sql_of(self._con, e)
        if text is None:
            return None
        is_string_literal = literal is e and (literal.get("literal") or {}).get("kind") == "STRING"
        duck = _DUCK_TYPES.get(str(type_))
        try:
            if is_string_literal and duck is not None:  # DuckDB casts a string literal to the column's type
                value = self._con.sql(f"SELECT TRY_CAST({text} AS {duck})").to_arrow_table().column(0)[0]
            else:
                value = self._con.sql(f"SELECT {text}").to_arrow_table().column(0)[0]
        except Exception:  # noqa: BLE001 - a constant we can't evaluate alone is just unknown
            return None
        if not value.is_valid or not _comparable(type_, value.type):
            return None
        try:
            return value.cast(type_)  # safe: 5.5 → int fails
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError):
            return None

    def _compare(self, left: dict[str, Any], op: str, right: dict[str, Any]) -> Node:
        column, other = self._column(left), right
        if column is None:
            column, other, op = self._column(right), left, _FLIP[op]
        if column is None:
            return Unknown("not a column compared with a constant")
        value = self._constant(other, column)
        if value is None:
            return Unknown("constant of another type")
        if op == "<>":
            return Or((Compare(column, "<", (value,)), Compare(column, ">", (value,))))
        return Compare(column, op, (value,))

    def _node(self, e: dict[str, Any]) -> Node:
        kind = e.get("type")
        children = e.get("children") or []
        if kind == "CONJUNCTION_AND":
            return And(tuple(self._node(c) for c in children))
        if kind == "CONJUNCTION_OR":
            return Or(tuple(self._node(c) for c in children))
        if kind in _COMPARE and "left" in e:
            return self._compare(e["left"], _COMPARE[kind], e["right"])
        if kind == "COMPARE_BETWEEN":
            return And((self._compare(e["input"], ">=", e["lower"]), self._compare(e["input"], "<=", e["upper"])))
        if kind == "COMPARE_IN" and children:
            column = self._column(children[0])
            values = [self._constant(c, column) for c in children[1:]] if column else [None]
            if column is None or any(v is None for v in values):
                return Unknown("IN")
            return Compare(column, "in", tuple(v for v in values if v is not None))
        if kind in ("OPERATOR_IS_NULL", "OPERATOR_IS_NOT_NULL") and len(children) == 1:
            column = self._column(children[0])
            if column is None:
                return Unknown("IS NULL")
            return Compare(column, "is_null" if kind == "OPERATOR_IS_NULL" else "is_valid")
        if kind == "OPERATOR_NOT" and len(children) == 1:
            return _negate(self._node(children[0]))
        return Unknown(str(kind))


def _negate(node: Node) -> Node:
    """NOT of a tree, true exactly where the tree is false (Kleene logic: De Morgan holds, and
    ``NOT x < v`` is ``x >= v``: both are NULL where x is)."""
    if isinstance(node, And):
        return Or(tuple(_negate(a) for a in node.args))
    if isinstance(node, Or):
        return And(tuple(_negate(a) for a in node.args))
    if isinstance(node, Compare):
        if node.op == "is_null":
            return Compare(node.column, "is_valid")
        if node.op == "is_valid":
            return Compare(node.column, "is_null")
        if node.op in _NEGATE and len(node.values) == 1:
            op = _NEGATE[node.op]
            if op == "<>":
                return Or((Compare(node.column, "<", node.values), Compare(node.column, ">", node.values)))
            return Compare(node.column, op, node.values)
    return Unknown("NOT")


_DUCK_TYPES = {"date32[day]": "DATE", "timestamp[s]": "TIMESTAMP_S", "timestamp[ms]": "TIMESTAMP_MS",
               "timestamp[us]": "TIMESTAMP", "timestamp[ns]": "TIMESTAMP_NS"}


def _comparable(column: pa.DataType, constant: pa.DataType) -> bool:
    """Whether DuckDB compares a column of this type with such a constant as the column's type
    (a float column never: NaN orders differently in SQL and Arrow)."""
    if pa.types.is_integer(column) or pa.types.is_decimal(column):
        return pa.types.is_integer(constant) or pa.types.is_decimal(constant)
    if pa.types.is_string(column) or pa.types.is_large_string(column):
        return pa.types.is_string(constant) or pa.types.is_large_string(constant)
    if pa.types.is_date32(column):
        return pa.types.is_date32(constant)
    if pa.types.is_timestamp(column) and column.tz is None:
        return (pa.types.is_timestamp(constant) and constant.tz is None) or pa.types.is_date32(constant)
    if pa.types.is_boolean(column):
        return pa.types.is_boolean(constant)
    return False


def _sql_of(con: duckdb.DuckDBPyConnection, expr: dict[str, Any]) -> str | None:
    """DuckDB's SQL text of an expression kept as its JSON."""
    statement = {"error": False, "statements": [{"node": {
        "type": "SELECT_NODE", "modifiers": [], "cte_map": {"map": []}, "select_list": [expr],
        "from_table": {"type": "EMPTY", "sample": None}, "where_clause": None,
        "group_expressions": [], "group_sets": [], "aggregate_handling": "STANDARD_HANDLING",
        "having": None, "sample": None, "qualify": None}, "named_param_map": []}]}
    try:
        rows = con.execute("SELECT json_deserialize_sql(?::JSON)", [json.dumps(statement)]).fetchall()
    except Exception:  # noqa: BLE001
        return None
    text = str(rows[0][0]) if rows else ""
    return text[len("SELECT "):] if text.startswith("SELECT ") else None


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


Bounds = Callable[[str], "tuple[bool, Any, Any] | None"]  # column -> (all null, lo, hi) or unknown


def _all(node: Node | None, schema: pa.Schema, bounds: Bounds) -> bool:
    """Whether every row whose column values lie within ``bounds`` satisfies ``node``."""
    if node is None:
        return True
    if isinstance(node, And):
        return all(_all(a, schema, bounds) for a in node.args)
    if isinstance(node, Or):
        return any(_all(a, schema, bounds) for a in node.args)  # sufficient, not necessary
    if not isinstance(node, Compare) or node.column not in schema.names:
        return False
    if pa.types.is_floating(schema.field(node.column).type):
        return False
    found = bounds(node.column)
    if found is None:
        return False
    all_null, lo, hi = found
    if node.op == "is_null":
        return all_null
    if node.op == "is_valid":
        return not all_null
    if all_null or lo is None or hi is None:
        return False
    values = [physical_value(v) for v in node.values]
    if any(v is None for v in values):
        return False
    try:
        if node.op == "=":
            return bool(lo == hi == values[0])
        if node.op == "in":
            return bool(lo == hi and lo in values)
        v = values[0]
        return bool({"<": hi < v, "<=": hi <= v, ">": lo > v, ">=": lo >= v}.get(node.op, False))
    except TypeError:
        return False
