"""Spark's pushed filters as Arrow expressions a scan evaluates exactly (and prunes with).

A filter is taken only when its column is a top-level column of the dataset and its value(s)
convert exactly to the column's type; anything else is left to Spark. Three-valued logic is
the same on both sides: a comparison with NULL is never true, and ``NOT`` of it neither.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import datasource as sds

from colonnade.schema.types import logical_schema

_COMPARE: dict[type, Callable[[pc.Expression, pc.Expression], pc.Expression]] = {
    sds.EqualTo: lambda f, v: f == v,
    sds.GreaterThan: lambda f, v: f > v,
    sds.GreaterThanOrEqual: lambda f, v: f >= v,
    sds.LessThan: lambda f, v: f < v,
    sds.LessThanOrEqual: lambda f, v: f <= v,
}
_STRING = {sds.StringStartsWith: "starts_with", sds.StringEndsWith: "ends_with",
           sds.StringContains: "match_substring"}


class _NotPushed(Exception):
    pass


def to_expression(flt: Any, schema: pa.Schema) -> pc.Expression | None:
    """``flt`` as an expression over ``schema``'s columns, or None if it is left to Spark."""
    try:
        return _convert(flt, logical_schema(schema))
    except _NotPushed:
        return None


def _column(flt: Any, schema: pa.Schema) -> tuple[pc.Expression, pa.DataType]:
    attribute = flt.attribute
    if len(attribute) != 1 or attribute[0] not in schema.names:
        raise _NotPushed
    return pc.field(attribute[0]), schema.field(attribute[0]).type


def _value(value: Any, t: pa.DataType) -> pa.Scalar:
    """``value`` as a scalar of the column's type, only when that is exact: timestamps are left
    to Spark (the zone it means a Python datetime in is its session's, not the data's)."""
    if value is None or pa.types.is_timestamp(t) or isinstance(value, dt.datetime):
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


def _convert(flt: Any, schema: pa.Schema, negate: bool = False) -> pc.Expression:
    """``flt`` (or its negation) as an expression: NOT of a leaf is the leaf's NOT, except for
    ``IN``, whose NULL (a NULL value) Arrow's ``isin`` reports as false."""
    kind = type(flt)
    if kind is sds.Not:
        return _convert(flt.child, schema, not negate)
    if kind is sds.In:
        field, t = _column(flt, schema)
        if not flt.value or any(v is None for v in flt.value):
            raise _NotPushed
        found = field.isin(pa.array([_value(v, t).as_py() for v in flt.value], type=t))
        return field.is_valid() & ~found if negate else found
    expr = _leaf(flt, kind, schema)
    return ~expr if negate else expr


def _leaf(flt: Any, kind: type, schema: pa.Schema) -> pc.Expression:
    if kind in _COMPARE:
        field, t = _column(flt, schema)
        return _COMPARE[kind](field, pc.scalar(_value(flt.value, t)))
    if kind is sds.EqualNullSafe:
        field, t = _column(flt, schema)
        if flt.value is None:
            return field.is_null()
        return pc.if_else(field.is_null(), pc.scalar(False), field == pc.scalar(_value(flt.value, t)))
    if kind is sds.IsNull:
        return _column(flt, schema)[0].is_null()
    if kind is sds.IsNotNull:
        return _column(flt, schema)[0].is_valid()
    if kind in _STRING:
        field, t = _column(flt, schema)
        if not (pa.types.is_string(t) or pa.types.is_large_string(t)) or not isinstance(flt.value, str):
            raise _NotPushed
        # a string column may be read dictionary-encoded: the string kernels want plain strings
        return getattr(pc, _STRING[kind])(field.cast(t), pattern=flt.value)
    raise _NotPushed


def conjunction(expressions: list[pc.Expression]) -> pc.Expression | None:
    """The AND of ``expressions`` (None when there are none)."""
    out: pc.Expression | None = None
    for e in expressions:
        out = e if out is None else out & e
    return out
