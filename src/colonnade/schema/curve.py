"""The curve transform ``zorder(LAT, LON, BITS)`` / ``hilbert(LAT, LON, BITS)``: a partition
transform and sort key over two coordinate columns.

Unlike the one-column transforms it does not project a predicate on one column: a WHERE clause
is read as a bounding box (``box_of``: ANDs intersect, ORs take the hull, anything else leaves
the box open). A partition whose cell (the box of its key, ``source_bounds``) does not meet the
box holds no matching row; ``curves.box_ranges`` gives the same cells as key ranges under a
range budget, and explain reports the keys of the cells read. The NULL partition (NULL, NaN or
out-of-range coordinates) is never ruled out this way: such a row may still match a predicate
on one coordinate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import pyarrow as pa

from colonnade.errors import SpecError
from colonnade.expressions.tree import And, Compare, Node, Or
from colonnade.schema.curves import (
    CURVES,
    MAX_BITS,
    Box,
    cell_box,
    curve_keys,
)
from colonnade.schema.transforms import Predicate, Transform, quote_name

_OPEN = (-math.inf, math.inf)
_EMPTY = (math.inf, -math.inf)
Interval = tuple[float, float]


class Curve(Transform):
    """Keys of a space-filling curve over (latitude, longitude), ``2 * bits`` bits wide."""

    def __init__(self, curve: str, lat: str, lon: str, bits: int) -> None:
        if curve not in CURVES:
            raise SpecError(f"unknown curve {curve!r}: use zorder or hilbert")
        if not 1 <= bits <= MAX_BITS:
            raise SpecError(f"{curve}({lat}, {lon}, {bits}): bits must be between 1 and {MAX_BITS}")
        self.name = curve
        self.lat, self.lon, self.bits = lat, lon, bits
        self.source = lat  # the first column; ``sources`` names both

    @property
    def sources(self) -> tuple[str, ...]:
        return (self.lat, self.lon)

    def check_type(self, type_: pa.DataType) -> None:
        if not (pa.types.is_integer(type_) or pa.types.is_floating(type_) or pa.types.is_decimal(type_)):
            raise SpecError(f"{self} needs numeric coordinate columns, not {type_}")

    def apply(self, array: pa.Array) -> pa.Array:
        raise SpecError(f"{self} needs two columns")

    def apply_columns(self, columns: Sequence[pa.Array]) -> pa.Array:
        lat, lon = columns
        return curve_keys(self.name, lat, lon, self.bits)

    def project(self, op: str, values: tuple[Any, ...], type_: pa.DataType) -> Predicate | None:
        return None  # one coordinate alone says little about a key: see ``box_for``

    def source_bounds(self, column: str, key: Any, type_: pa.DataType) -> tuple[float, float] | None:
        """The least and greatest values of ``column`` (one of the two sources) in the
        partition with this key, or None if not known (the NULL partition, or a column that is
        not floating point: the bounds are floats)."""
        if key is None or not pa.types.is_floating(type_) or column not in self.sources:
            return None
        lat_lo, lat_hi, lon_lo, lon_hi = _cell_box(self.name, key, self.bits)
        return (lat_lo, lat_hi) if column == self.lat else (lon_lo, lon_hi)

    def box_for(self, node: Node | None) -> Box | None:
        """The predicate's bounding box on this transform's columns (empty when it can't be
        true), or None when the predicate leaves the box open."""
        if node is None:
            return None
        lat, lon = box_of(node, self.lat, self.lon)
        if lat == _OPEN and lon == _OPEN:
            return None
        return (max(lat[0], -90.0), min(lat[1], 90.0), max(lon[0], -180.0), min(lon[1], 180.0))

    def __str__(self) -> str:
        return f"{self.name}({quote_name(self.lat)}, {quote_name(self.lon)}, {self.bits})"


@lru_cache(maxsize=65_536)
def _cell_box(curve: str, key: int, bits: int) -> Box:
    return cell_box(curve, key, bits)


def _interval(c: Compare) -> Interval:
    if c.op == "is_null":
        return _EMPTY  # a NULL coordinate has no key: such rows are in the NULL partition
    if c.op == "is_valid":
        return _OPEN
    try:
        values = [float(v.as_py()) for v in c.values]
    except (TypeError, ValueError, OverflowError):
        return _OPEN
    if not values or any(math.isnan(v) for v in values):
        return _OPEN
    if c.op in ("=", "in"):
        return min(values), max(values)
    if c.op in ("<", "<="):
        return -math.inf, values[0]
    if c.op in (">", ">="):
        return values[0], math.inf
    return _OPEN


def box_of(node: Node, lat: str, lon: str) -> tuple[Interval, Interval]:
    """The intervals of ``lat`` and ``lon`` outside which ``node`` can't be true (an empty
    interval when it can't be true at all for non-NULL coordinates)."""
    if isinstance(node, Compare):
        if node.column == lat:
            return _interval(node), _OPEN
        if node.column == lon:
            return _OPEN, _interval(node)
        return _OPEN, _OPEN
    if isinstance(node, And):
        a_lo, a_hi, o_lo, o_hi = -math.inf, math.inf, -math.inf, math.inf
        for arg in node.args:
            (l0, l1), (n0, n1) = box_of(arg, lat, lon)
            a_lo, a_hi, o_lo, o_hi = max(a_lo, l0), min(a_hi, l1), max(o_lo, n0), min(o_hi, n1)
        return (a_lo, a_hi), (o_lo, o_hi)
    if isinstance(node, Or):
        boxes = [box_of(arg, lat, lon) for arg in node.args]
        live = [b for b in boxes if b[0][0] <= b[0][1] and b[1][0] <= b[1][1]]
        if not live:
            return _EMPTY, _EMPTY
        return ((min(b[0][0] for b in live), max(b[0][1] for b in live)),
                (min(b[1][0] for b in live), max(b[1][1] for b in live)))
    return _OPEN, _OPEN


def parse_curve(fn: str, args: list[tuple[str, str]]) -> Curve | None:
    """``zorder``/``hilbert`` with tokens ``LAT , LON , BITS``, or None if they don't fit."""
    kinds = [k for k, _ in args]
    if fn in CURVES and len(args) == 5 and kinds[1] == kinds[3] == "," and kinds[4] == "number" \
            and kinds[0] in ("name", "quoted") and kinds[2] in ("name", "quoted"):
        return Curve(fn, args[0][1], args[2][1], int(args[4][1]))
    return None
