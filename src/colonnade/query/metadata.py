"""Metadata tables, queryable in SQL with Trino's spelling: ``"t$commits"``, ``"t$segments"``,
``"t$partitions"`` (quoted: ``$`` is not an identifier character).

* ``t$commits``: one row per commit up to the pinned version: version, at, operation,
  read_version, writer, rows_added, segments_added, segments_removed, source;
* ``t$segments``: one row per live segment: partition, segment, rows, bytes, and ``columns``, a
  struct with one field per column: ``{nulls, min, max, bytes}`` (min and max typed as the
  column; NULL where the statistics don't know them);
* ``t$partitions``: one row per partition: partition, values (a struct of the partition
  transforms' values), segments, rows, bytes.

Statistics come from :meth:`Dataset.segment_stats` at the pinned snapshot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from colonnade.encoding.chunk import ChunkStats
    from colonnade.table.commits import Snapshot
    from colonnade.table.dataset import Dataset

METADATA_TABLES = ("commits", "segments", "partitions")


def metadata_table(ds: Dataset, snapshot: Snapshot, kind: str) -> pa.Table:
    if kind == "commits":
        return commits_table(ds, snapshot)
    if kind == "segments":
        return segments_table(ds, snapshot)
    if kind == "partitions":
        return partitions_table(ds, snapshot)
    raise ValueError(f"unknown metadata table {kind!r}")


def commits_table(ds: Dataset, snapshot: Snapshot) -> pa.Table:
    commits = ds.history(upto=snapshot.version) if snapshot.version else []
    return pa.table({
        "version": pa.array([c.version for c in commits], pa.int64()),
        "at": pa.array([int(c.at * 1_000_000) for c in commits], pa.int64()).cast(pa.timestamp("us", "UTC")),
        "operation": pa.array([c.kind for c in commits], pa.string()),
        "read_version": pa.array([c.commit_info.read_version for c in commits], pa.int64()),
        "writer": pa.array([c.commit_info.writer or None for c in commits], pa.string()),
        "rows_added": pa.array([c.rows_added for c in commits], pa.int64()),
        "segments_added": pa.array([len(c.added) for c in commits], pa.int64()),
        "segments_removed": pa.array([len(c.removed) for c in commits], pa.int64()),
        "source": pa.array([c.source for c in commits], pa.string()),
    })


def typed_values(values: list[Any], type_: pa.DataType) -> pa.Array:
    """Statistics values (the physical form of :class:`ChunkStats`) as an array of ``type_``;
    nulls where a value can't be represented."""
    physical: pa.DataType = type_
    if pa.types.is_date32(type_) or pa.types.is_time32(type_):
        physical = pa.int32()
    elif pa.types.is_date64(type_) or pa.types.is_timestamp(type_) or pa.types.is_time64(type_):
        physical = pa.int64()
    try:
        return pa.array(values, physical).cast(type_)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, OverflowError):
        return pa.nulls(len(values), type_)


def segments_table(ds: Dataset, snapshot: Snapshot) -> pa.Table:
    schema = ds.schema_at(snapshot)
    stats = ds.segment_stats(snapshot)
    segments = [s for s in snapshot.segments if s.segment in stats]
    fields, arrays = [], []
    for f in schema:
        per = [stats[s.segment].get(f.name) for s in segments]
        nulls = pa.array([s.rows if st is None else st.nulls for s, st in zip(segments, per, strict=True)],
                         pa.int64())
        lo = typed_values([None if st is None else st.min for st in per], f.type)
        hi = typed_values([None if st is None else st.max for st in per], f.type)
        nbytes = pa.array([0 if st is None else st.nbytes for st in per], pa.int64())
        arrays.append(pa.StructArray.from_arrays([nulls, lo, hi, nbytes], ["nulls", "min", "max", "bytes"]))
        fields.append(f.name)
    columns = (pa.StructArray.from_arrays(arrays, fields) if fields
               else pa.nulls(len(segments), pa.null()))
    return pa.table({
        "partition": pa.array([s.partition for s in segments], pa.string()),
        "segment": pa.array([s.segment for s in segments], pa.string()),
        "rows": pa.array([s.rows for s in segments], pa.int64()),
        "bytes": pa.array([_bytes(stats[s.segment]) for s in segments], pa.int64()),
        "columns": columns,
    })


def partitions_table(ds: Dataset, snapshot: Snapshot) -> pa.Table:
    stats = ds.segment_stats(snapshot)
    order: dict[str, list[Any]] = {}  # partition -> [values, segments, rows, bytes]
    for s in snapshot.segments:
        row = order.setdefault(s.partition, [s.values, 0, 0, 0])
        row[1] += 1
        row[2] += s.rows
        row[3] += _bytes(stats.get(s.segment, {}))
    transforms = ds.spec_at(snapshot).partition_by
    if transforms:
        schema = ds.schema_at(snapshot)
        value_arrays = []
        for i, t in enumerate(transforms):
            raw = [row[0][i] for row in order.values()]
            try:
                value_arrays.append(pa.array(raw))
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                value_arrays.append(pa.array([str(v) for v in raw]))
            if t.name == "identity" and t.source in schema.names and len(raw):
                try:
                    value_arrays[-1] = value_arrays[-1].cast(schema.field(t.source).type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    pass
        values: pa.Array = pa.StructArray.from_arrays(value_arrays, [t.field_name for t in transforms])
    else:
        values = pa.nulls(len(order), pa.null())
    return pa.table({
        "partition": pa.array(list(order), pa.string()),
        "values": values,
        "segments": pa.array([r[1] for r in order.values()], pa.int64()),
        "rows": pa.array([r[2] for r in order.values()], pa.int64()),
        "bytes": pa.array([r[3] for r in order.values()], pa.int64()),
    })


def _bytes(stats: dict[str, ChunkStats]) -> int:
    return sum(st.nbytes for st in stats.values())
