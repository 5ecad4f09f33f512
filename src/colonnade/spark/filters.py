"""Spark's pushed filters as Arrow expressions a scan evaluates exactly (and prunes with).

Filters arrive in one plain form, whichever side of Spark sends them (PySpark's filter objects,
or JSON from the JVM reader): ``{"op": "eq", "col": "a", "value": 1}``, ops ``eq``, ``eqns``
(``<=>``), ``gt``, ``ge``, ``lt``, ``le``, ``in`` (``values``), ``isnull``, ``notnull``,
``startswith``, ``endswith``, ``contains`` and ``not`` (``child``). Dates are ``{"date":
"YYYY-MM-DD"}``, decimals ``{"decimal": "1.5"}``.

A filter is taken only when its column is a top-level column of the dataset and its value(s)
convert exactly to the column's type; anything else is left to Spark (timestamps always: the
zone Spark means a literal in is its session's). Three-valued logic is the same on both sides:
a comparison with NULL is never true, and ``NOT`` of it neither.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from colonnade.schema.types import logical_schema

_COMPARE: dict[str, Callable[[pc.Expression, pc.Expression], pc.Expression]] = {
    "eq": lambda f, v: f == v,
    "gt": lambda f, v: f > v,
    "ge": lambda f, v: f >= v,
    "lt": lambda f, v: f < v,
    "le": lambda f, v: f <= v,
}
_STRING = {"startswith": "starts_with", "endswith": "ends_with", "contains": "match_substring"}
#: PySpark's filter classes (pyspark.sql.datasource) by name, as ops
_PYSPARK_OPS = {"EqualTo": "eq", "EqualNullSafe": "eqns", "GreaterThan": "gt", "GreaterThanOrEqual": "ge",
                "LessThan": "lt", "LessThanOrEqual": "le", "In": "in", "IsNull": "isnull",
                "IsNotNull": "notnull", "Not": "not", "StringStartsWith": "startswith",
                "StringEndsWith": "endswith", "StringContains": "contains"}


class _NotPushed(Exception):
    pass


def from_pyspark(flt: Any) -> dict[str, Any] | None:
    """A PySpark filter object in the plain form (None: one this module never takes)."""
    op = _PYSPARK_OPS.get(type(flt).__name__)
    if op is None:
        return None
    if op == "not":
        child = from_pyspark(flt.child)
        return None if child is None else {"op": "not", "child": child}
    if len(flt.attribute) != 1:
        return None
    out: dict[str, Any] = {"op": op, "col": flt.attribute[0]}
    if op == "in":
        out["values"] = [_plain(v) for v in flt.value]
    elif op not in ("isnull", "notnull"):
        out["value"] = _plain(flt.value)
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return {"timestamp": value.isoformat()}
    if isinstance(value, dt.date):
        return {"date": value.isoformat()}
    if isinstance(value, decimal.Decimal):
        return {"decimal": str(value)}
    return value


def to_expression(flt: dict[str, Any] | None, schema: pa.Schema) -> pc.Expression | None:
    """``flt`` as an expression over ``schema``'s columns, or None if it is left to Spark."""
    if flt is None:
        return None
    try:
        return _convert(flt, logical_schema(schema))
    except _NotPushed:
        return None


def _column(flt: dict[str, Any], schema: pa.Schema) -> tuple[pc.Expression, pa.DataType]:
    name = flt.get("col")
    if not isinstance(name, str) or name not in schema.names:
        raise _NotPushed
    return pc.field(name), schema.field(name).type


def _value(value: Any, t: pa.DataType) -> pa.Scalar:
    """``value`` as a scalar of the column's type, only when that is exact."""
    if isinstance(value, dict):
        if "date" in value and pa.types.is_date(t):
            value = dt.date.fromisoformat(value["date"])
        elif "decimal" in value and pa.types.is_decimal(t):
            value = decimal.Decimal(value["decimal"])
        else:
            raise _NotPushed
    if value is None or pa.types.is_timestamp(t):
        raise _NotPushed
    if isinstance(value, bool) != pa.types.is_boolean(t):
        raise _NotPushed
    if isinstance(value, float) and not pa.types.is_floating(t):
        raise _NotPushed
    try:
        return pa.scalar(value, type=t)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError,
            OverflowError):
        raise _NotPushed from None


def _convert(flt: dict[str, Any], schema: pa.Schema, negate: bool = False) -> pc.Expression:
    """``flt`` (or its negation) as an expression: NOT of a leaf is the leaf's NOT, except for
    ``IN``, whose NULL (a NULL value) Arrow's ``isin`` reports as false."""
    op = flt.get("op")
    if op == "not":
        return _convert(flt["child"], schema, not negate)
    if op == "in":
        field, t = _column(flt, schema)
        values = flt.get("values") or []
        if not values or any(v is None for v in values):
            raise _NotPushed
        found = field.isin(pa.array([_value(v, t).as_py() for v in values], type=t))
        return field.is_valid() & ~found if negate else found
    expr = _leaf(flt, str(op), schema)
    return ~expr if negate else expr


def _leaf(flt: dict[str, Any], op: str, schema: pa.Schema) -> pc.Expression:
    if op in _COMPARE:
        field, t = _column(flt, schema)
        return _COMPARE[op](field, pc.scalar(_value(flt.get("value"), t)))
    if op == "eqns":
        field, t = _column(flt, schema)
        if flt.get("value") is None:
            return field.is_null()
        return pc.if_else(field.is_null(), pc.scalar(False), field == pc.scalar(_value(flt["value"], t)))
    if op == "isnull":
        return _column(flt, schema)[0].is_null()
    if op == "notnull":
        return _column(flt, schema)[0].is_valid()
    if op in _STRING:
        field, t = _column(flt, schema)
        if not (pa.types.is_string(t) or pa.types.is_large_string(t)) or not isinstance(flt.get("value"), str):
            raise _NotPushed
        # a string column may be read dictionary-encoded: the string kernels want plain strings
        return getattr(pc, _STRING[op])(field.cast(t), pattern=flt["value"])
    raise _NotPushed


def conjunction(expressions: list[pc.Expression]) -> pc.Expression | None:
    """The AND of ``expressions`` (None when there are none)."""
    out: pc.Expression | None = None
    for e in expressions:
        out = e if out is None else out & e
    return out
