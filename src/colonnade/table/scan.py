"""Scans: immutable builders that plan (prune) and then stream a dataset's record batches.

``plan()`` prunes partitions through the transforms (from the commit log alone), then reads the
segment index of the surviving partitions and prunes segments by chunk min/max. ``to_batches()``
fetches only the chunks of the needed columns of the surviving segments, in windows fetched and
decoded ahead of the consumer by a thread pool, and yields one batch per segment. The filter, if
any, is applied exactly to what is read; pruning only skips what can't match.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from colonnade.encoding.chunk import ChunkFormatError, ChunkStats, decode_chunk
from colonnade.errors import CorruptChunkError, SchemaError
from colonnade.query.expressions import Node, columns_of, field_names, parse_expression
from colonnade.query.pruning import partition_may_match, segment_may_match
from colonnade.storage.base import ChunkRef
from colonnade.table.commits import SegmentEntry, Snapshot
from colonnade.table.writer import segment_stats_from_json

if TYPE_CHECKING:
    import pandas as pd

    from colonnade.table.dataset import Dataset

#: Bytes of chunks fetched per window (one store request, decoded in parallel).
WINDOW_BYTES = 48 * 1024 * 1024
WINDOW_SEGMENTS = 64


@dataclass
class ScanMetrics:
    """What a scan pruned and read; ``explain`` reports these."""

    partitions_total: int = 0
    partitions_scanned: int = 0
    segments_total: int = 0
    segments_scanned: int = 0
    chunks_read: int = 0
    bytes_read: int = 0
    rows_scanned: int = 0
    columns: list[str] = field(default_factory=list)
    filter: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class PlannedSegment:
    entry: SegmentEntry
    stats: dict[str, ChunkStats]


@dataclass(frozen=True)
class ScanPlan:
    snapshot: Snapshot
    columns: tuple[str, ...]  # output columns
    read_columns: tuple[str, ...]  # output + filter columns
    segments: tuple[PlannedSegment, ...]
    schema: pa.Schema  # schema of the batches to_batches yields (read_columns)
    metrics: ScanMetrics


def read_schema(dataset_schema: pa.Schema, snapshot: Snapshot, columns: list[str]) -> pa.Schema:
    """The types scans yield: a string column stays dictionary-encoded when every live segment
    stored it that way (so the type is stable for the whole snapshot, whatever is pruned)."""
    fields = []
    for name in columns:
        f = dataset_schema.field(name)
        if (pa.types.is_string(f.type) or pa.types.is_large_string(f.type)) and snapshot.segments and all(
                name in s.dictionary for s in snapshot.segments):
            f = pa.field(name, pa.dictionary(pa.int32(), f.type))
        fields.append(f)
    return pa.schema(fields)


@dataclass(frozen=True)
class Scan:
    dataset: Dataset
    columns: tuple[str, ...] | None = None
    filter: pc.Expression | None = None
    version: int | None = None
    snapshot: Snapshot | None = None
    apply_filter: bool = True

    # -- builder
    def select(self, *columns: str) -> Scan:
        return replace(self, columns=tuple(columns))

    def where(self, expr: pc.Expression | None) -> Scan:
        return replace(self, filter=expr)

    def at_version(self, version: int | None) -> Scan:
        return replace(self, version=version, snapshot=None)

    def _repr_html_(self) -> str:
        """The plan, and the first rows when they are cheap to read (never a full scan)."""
        from colonnade.notebook import scan_html

        return scan_html(self)

    # -- planning
    def plan(self) -> ScanPlan:
        ds = self.dataset
        snapshot = self.snapshot or ds.snapshot(self.version)
        schema = ds.schema_at(snapshot)
        columns = list(self.columns) if self.columns is not None else list(schema.names)
        missing = [c for c in columns if c not in schema.names]
        if missing:
            raise SchemaError(f"dataset {ds.name!r} has no column(s) {', '.join(missing)}")
        node: Node | None = parse_expression(self.filter)
        read_columns = list(columns)
        if self.filter is not None:
            for c in sorted(_referenced(self.filter, schema) | columns_of(node)):
                if c in schema.names and c not in read_columns:
                    read_columns.append(c)
        metrics = ScanMetrics(columns=columns, filter=None if self.filter is None else str(self.filter))
        by_partition: dict[str, list[SegmentEntry]] = {}
        for s in snapshot.segments:
            by_partition.setdefault(s.partition, []).append(s)
        metrics.partitions_total = len(by_partition)
        metrics.segments_total = len(snapshot.segments)
        kept = {p: segs for p, segs in by_partition.items()
                if partition_may_match(node, ds.spec, segs[0].values)}
        metrics.partitions_scanned = len(kept)
        planned: list[PlannedSegment] = []
        if kept:
            live = {s.segment: s for segs in kept.values() for s in segs}
            rows = ds.store.get_segments(ds.name, list(kept))
            stats_by_id = {r.segment: segment_stats_from_json(r.stats) for r in rows if r.segment in live}
            for s in snapshot.segments:  # commit order
                if s.segment not in live:
                    continue
                stats = stats_by_id.get(s.segment)
                if stats is None:
                    raise CorruptChunkError(ds.name, "*", s.segment, "segment index row is missing")
                if segment_may_match(node, schema, stats, s.rows):
                    planned.append(PlannedSegment(s, stats))
        metrics.segments_scanned = len(planned)
        return ScanPlan(snapshot, tuple(columns), tuple(read_columns), tuple(planned),
                        read_schema(schema, snapshot, read_columns), metrics)

    # -- reading
    def to_batches(self, plan: ScanPlan | None = None) -> Iterator[pa.RecordBatch]:
        plan = plan or self.plan()
        for batch in _read_segments(self.dataset, plan):
            if self.filter is not None and not self.apply_filter:
                yield batch  # the consumer filters (and projects) itself
            elif self.filter is not None:
                table = pa.Table.from_batches([batch]).filter(self.filter)
                yield from table.select(list(plan.columns)).to_batches()
            elif len(plan.read_columns) != len(plan.columns):
                yield batch.select(list(plan.columns))
            else:
                yield batch

    def to_reader(self) -> pa.RecordBatchReader:
        plan = self.plan()
        schema = pa.schema([plan.schema.field(c) for c in plan.columns])
        if self.filter is not None and not self.apply_filter:
            schema = plan.schema
        return pa.RecordBatchReader.from_batches(schema, self.to_batches(plan))

    def to_arrow(self) -> pa.Table:
        plan = self.plan()
        schema = pa.schema([plan.schema.field(c) for c in plan.columns])
        return pa.Table.from_batches(list(self.to_batches(plan)), schema=schema)

    def to_pandas(self) -> pd.DataFrame:
        return self.to_arrow().to_pandas()

    def count_rows(self) -> int:
        if self.filter is None:
            return (self.snapshot or self.dataset.snapshot(self.version)).rows
        return self.to_arrow().num_rows


def _referenced(expr: pc.Expression, schema: pa.Schema) -> set[str]:
    """Columns an expression refers to, including parts pruning can't read; if the expression
    can't be read, every column whose name appears in its text (more than needed, never less)."""
    names = field_names(expr)
    if names is not None:
        return names
    text = str(expr)
    return {name for name in schema.names if name in text}


def _windows(segments: tuple[PlannedSegment, ...], columns: tuple[str, ...]) -> Iterator[list[PlannedSegment]]:
    window: list[PlannedSegment] = []
    size = 0
    for seg in segments:
        window.append(seg)
        size += sum(seg.stats[c].nbytes for c in columns if c in seg.stats)
        if size >= WINDOW_BYTES or len(window) >= WINDOW_SEGMENTS:
            yield window
            window, size = [], 0
    if window:
        yield window


def _decode(dataset: str, ref: ChunkRef, data: bytes, target: pa.DataType) -> pa.Array:
    if not data:
        raise CorruptChunkError(dataset, ref.column, ref.segment, "chunk is missing from the store")
    try:
        array = decode_chunk(data)
    except ChunkFormatError as exc:
        raise CorruptChunkError(dataset, ref.column, ref.segment, str(exc)) from None
    if array.type != target:
        if pa.types.is_dictionary(array.type) and not pa.types.is_dictionary(target):
            array = pc.take(array.dictionary, array.indices)
        if array.type != target:
            array = array.cast(target)
    return array


def _fetch_window(ds: Dataset, plan: ScanPlan, window: list[PlannedSegment],
                  pool: ThreadPoolExecutor) -> list[pa.RecordBatch]:
    refs = [ChunkRef(s.entry.partition, c, s.entry.segment, s.entry.bucket)
            for s in window for c in plan.read_columns if c in s.stats]
    types = {f.name: f.type for f in plan.schema}
    futures: dict[tuple[str, str], Future[pa.Array]] = {}
    nbytes = 0
    for ref, data in ds.store.get_chunks(ds.name, refs):
        nbytes += len(data)
        futures[(ref.segment, ref.column)] = pool.submit(_decode, ds.name, ref, data, types[ref.column])
    batches = []
    for s in window:
        arrays = []
        for c in plan.read_columns:
            if c not in s.stats:
                arrays.append(pa.nulls(s.entry.rows, types[c]))  # column added after this segment
                continue
            fut = futures.get((s.entry.segment, c))
            if fut is None:
                raise CorruptChunkError(ds.name, c, s.entry.segment, "chunk is missing from the store")
            arrays.append(fut.result())
        if arrays:
            batches.append(pa.RecordBatch.from_arrays(arrays, schema=plan.schema))
        else:  # no column wanted (e.g. count(*)): a batch of rows without columns
            batches.append(pa.RecordBatch.from_struct_array(pa.array([{}] * s.entry.rows, pa.struct([]))))
    plan.metrics.chunks_read += len(refs)
    plan.metrics.bytes_read += nbytes
    plan.metrics.rows_scanned += sum(s.entry.rows for s in window)
    return batches


def _read_segments(ds: Dataset, plan: ScanPlan) -> Iterator[pa.RecordBatch]:
    if not plan.segments:
        return
    threads = max(2, os.cpu_count() or 2)
    with ThreadPoolExecutor(threads, thread_name_prefix="colonnade-decode") as decode_pool, \
            ThreadPoolExecutor(1, thread_name_prefix="colonnade-fetch") as fetch_pool:
        windows = list(_windows(plan.segments, plan.read_columns))
        pending: Future[list[pa.RecordBatch]] | None = fetch_pool.submit(
            _fetch_window, ds, plan, windows[0], decode_pool)
        for i in range(len(windows)):
            assert pending is not None
            batches = pending.result()
            pending = (fetch_pool.submit(_fetch_window, ds, plan, windows[i + 1], decode_pool)
                       if i + 1 < len(windows) else None)
            yield from batches
