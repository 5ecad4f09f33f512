"""Pruning rules: may a partition or a segment hold a row matching a predicate?

Each rule answers False only when it can prove no row matches; anything it can't prove is
True ("maybe"), so pruning never changes an answer. The filter itself is always applied to
the rows that are read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from colonnade.encoding.chunk import ChunkStats, physical_value
from colonnade.expressions.tree import And, Compare, Node, Or, Unknown
from colonnade.schema.curve import Curve
from colonnade.schema.curves import Box
from colonnade.schema.spec import DatasetSpec


def _cast_values(node: Compare, type_: pa.DataType) -> tuple[pa.Scalar, ...] | None:
    try:
        return tuple(v.cast(type_) for v in node.values)  # safe cast: 3.5 → int fails → None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError):
        return None


def _evaluate(node: Node | None, leaf: Any) -> bool:
    if node is None or isinstance(node, Unknown):
        return True
    if isinstance(node, And):
        return all(_evaluate(a, leaf) for a in node.args)
    if isinstance(node, Or):
        return any(_evaluate(a, leaf) for a in node.args)
    if isinstance(node, Compare):
        return bool(leaf(node))
    return True


def _compare_values(op: str, lo: Any, hi: Any, values: tuple[Any, ...]) -> bool:
    """May some x in [lo, hi] satisfy ``x op values``?"""
    try:
        if op in ("=", "in"):
            return any(lo <= v <= hi for v in values)
        v = values[0]
        if op == "<":
            return bool(lo < v)
        if op == "<=":
            return bool(lo <= v)
        if op == ">":
            return bool(hi > v)
        if op == ">=":
            return bool(hi >= v)
    except TypeError:
        return True
    return True


def partition_may_match(node: Node | None, spec: DatasetSpec, values: tuple[Any, ...]) -> bool:
    """False only if no row of the partition with these transform values can match."""
    return partition_pruner(node, spec)(values)


def partition_pruner(node: Node | None, spec: DatasetSpec) -> Callable[[tuple[Any, ...]], bool]:
    """``partition_may_match`` for one predicate over many partitions: each literal is cast
    and projected through each transform once (a scan looks at every partition)."""
    if node is None or not spec.partition_by:
        return lambda values: True
    schema = spec.schema
    projections: dict[tuple[int, int], tuple[str, tuple[Any, ...]] | None] = {}

    def projected(c: Compare, i: int) -> tuple[str, tuple[Any, ...]] | None:
        key = (id(c), i)
        if key not in projections:
            type_ = schema.field(c.column).type
            cast = _cast_values(c, type_)
            projections[key] = None if cast is None else \
                spec.partition_by[i].project(c.op, tuple(v.as_py() for v in cast), type_)
        return projections[key]

    def may_match(values: tuple[Any, ...]) -> bool:
        # a curve partition is judged by its cell's box (_cell_may_match), exactly: its key
        # ranges (curve_boxes) would only say the same, less precisely, at a cost per scan
        def leaf(c: Compare) -> bool:
            if c.column not in schema.names:
                return True
            for i, (transform, pv) in enumerate(zip(spec.partition_by, values, strict=True)):
                if isinstance(transform, Curve) and c.column in transform.sources:
                    if not _cell_may_match(c, transform, pv, schema.field(c.column).type):
                        return False
                    continue
                if transform.sources != (c.column,):
                    continue
                # every transform maps null to null and non-null to non-null
                if c.op == "is_null":
                    if pv is not None:
                        return False
                    continue
                if c.op == "is_valid":
                    if pv is None:
                        return False
                    continue
                if pv is None:
                    return False  # comparisons with NULL are never true
                found = projected(c, i)
                if found is None:
                    continue
                op, pvals = found
                if not _compare_values(op, pv, pv, pvals):
                    return False
            return True

        return _evaluate(node, leaf)

    return may_match


def _cell_may_match(c: Compare, curve: Curve, key: Any, type_: pa.DataType) -> bool:
    """May a row of the curve partition ``key`` satisfy ``c``? (Its cell bounds the column.)"""
    if c.op == "is_null":
        return key is None  # a partition with a key has both coordinates
    if c.op == "is_valid":
        return True
    bounds = curve.source_bounds(c.column, key, type_)
    if bounds is None:
        return True
    cast = _cast_values(c, type_)
    return True if cast is None else _compare_values(c.op, bounds[0], bounds[1], tuple(v.as_py() for v in cast))


def curve_boxes(node: Node | None, spec: DatasetSpec) -> dict[int, Box]:
    """For each curve transform of the partition spec that the predicate bounds: its position
    and the predicate's bounding box on its columns."""
    out = {}
    for i, transform in enumerate(spec.partition_by):
        if isinstance(transform, Curve):
            box = transform.box_for(node)
            if box is not None:
                out[i] = box
    return out


def segment_pruner(node: Node | None, schema: pa.Schema) -> Callable[[dict[str, ChunkStats], int], bool]:
    """``segment_may_match`` for one predicate over many segments: the literals are cast to
    their columns' types once (a scan plans thousands of segments with one filter)."""
    casts: dict[int, tuple[Any, ...] | None] = {}

    def physical(c: Compare) -> tuple[Any, ...] | None:
        key = id(c)
        if key not in casts:
            cast = _cast_values(c, schema.field(c.column).type)
            values = None if cast is None else tuple(physical_value(v) for v in cast)
            casts[key] = None if values is None or any(v is None for v in values) else values
        return casts[key]

    def may_match(stats: dict[str, ChunkStats], rows: int) -> bool:
        def leaf(c: Compare) -> bool:
            if c.column not in schema.names:
                return True
            s = stats.get(c.column)
            nulls, lo, hi = (rows, None, None) if s is None else (s.nulls, s.min, s.max)
            if c.op == "is_null":
                return nulls > 0
            if c.op == "is_valid":
                return nulls < rows
            if nulls >= rows:
                return False
            if lo is None or hi is None:
                return True
            values = physical(c)
            return True if values is None else _compare_values(c.op, lo, hi, values)

        return _evaluate(node, leaf)

    return may_match


def segment_may_match(node: Node | None, schema: pa.Schema, stats: dict[str, ChunkStats], rows: int) -> bool:
    """False only if the segment's chunk statistics prove that no row matches."""
    if node is None:
        return True
    return segment_pruner(node, schema)(stats, rows)
