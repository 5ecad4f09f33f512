"""Scans: immutable builders that plan (prune) and then stream a dataset's record batches.

``plan()`` prunes partitions through the transforms (from the commit log alone), then reads the
segment index of the surviving partitions and prunes segments by chunk min/max. ``to_batches()``
is lazy: it fetches only the chunks of the needed columns of the surviving segments, in windows
that start at one segment and double up to :data:`WINDOW_SEGMENTS` / :data:`WINDOW_BYTES`. The
first :data:`EAGER_WINDOWS` windows are fetched only when the consumer asks for them, so a
consumer that stops early (DuckDB on ``LIMIT``) has read one or two segments; from then on
:data:`READ_AHEAD` windows are fetched and decoded ahead of the consumer by thread pools (kept
for the process's life and shared by its scans: starting a query's threads anew, each with
memory of its own to fault in, cost a 4M-row grouped query about a tenth of its CPU time). It
yields one batch per segment, each as soon as that segment's chunks are decoded (and finished),
not once its whole window is. The filter, if any, is applied exactly to what is read (in the
worker threads); pruning only skips what can't match.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from colonnade.encoding.chunk import ChunkFormatError, ChunkStats, decode_chunk
from colonnade.errors import CorruptChunkError, SchemaError
from colonnade.expressions.pruning import curve_boxes, partition_pruner, segment_pruner
from colonnade.expressions.tree import Node, columns_of, field_names, parse_expression
from colonnade.schema.curve import Curve
from colonnade.schema.curves import merge_ranges
from colonnade.schema.spec import DatasetSpec
from colonnade.storage.base import ChunkRef
from colonnade.table.cache import ChunkCache, cache_of
from colonnade.table.commits import SegmentEntry, Snapshot

if TYPE_CHECKING:
    import pandas as pd

    from colonnade.table.dataset import Dataset

#: Bytes of chunks fetched per window (one store request, decoded in parallel).
WINDOW_BYTES = 48 * 1024 * 1024
WINDOW_SEGMENTS = 64
#: Windows fetched only on demand (one segment each) before reading ahead starts.
EAGER_WINDOWS = 2
#: Windows fetched and decoded ahead of the consumer once reading ahead has started.
READ_AHEAD = 2
#: Segments of the first window of a scan that reads ahead from the start (then doubling): its
#: consumer gets batches while later windows are fetched.
READ_FIRST = 4
#: Threads fetching windows ahead, shared by the process's scans (each scan has READ_AHEAD
#: windows in flight at most; a fetch thread mostly waits for the store or for decoding).
FETCH_THREADS = 8
RANGES_SHOWN = 16  # key ranges listed per curve in a plan's metrics (all are counted)


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
    segments_read: int = 0
    columns: list[str] = field(default_factory=list)
    filter_columns: list[str] = field(default_factory=list)  # read only to evaluate the filter
    pruning_columns: list[str] = field(default_factory=list)  # columns whose predicates pruned
    filter: str | None = None
    # per curve transform whose partitions the scan pruned: the filter's box, the cells read
    # (of how many) and their key ranges (see _curve_report)
    curve_ranges: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Pruned:
    """Partitions and segments ruled out before a scan (by a SQL query's WHERE clauses), and the
    segment statistics read to decide them (so the scan does not read them again)."""

    partitions: frozenset[str]
    segments: frozenset[str]
    stats: dict[str, dict[str, ChunkStats]]
    columns: frozenset[str]


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
    #: columns yielded as stored (a dictionary of any index width, of any type, or not: it
    #: may differ from segment to segment), for readers that take each batch's own types
    as_stored: frozenset[str] = frozenset()


def read_schema(dataset_schema: pa.Schema, snapshot: Snapshot, columns: list[str]) -> pa.Schema:
    """The types scans yield: a string column stays dictionary-encoded when every live segment
    stored it that way (so the type is stable for the whole snapshot, whatever is pruned)."""
    fields = []
    dictionary = snapshot.dictionary_columns()
    for name in columns:
        f = dataset_schema.field(name)
        if (pa.types.is_string(f.type) or pa.types.is_large_string(f.type)) and name in dictionary:
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
    pruned: Pruned | None = None  # decided beforehand from a SQL query's WHERE clauses

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
        where = self.pruned
        pruning_columns = columns_of(node) | (set(where.columns) if where is not None else set())
        metrics = ScanMetrics(columns=columns, filter_columns=read_columns[len(columns):],
                              pruning_columns=sorted(pruning_columns),
                              filter=None if self.filter is None else str(self.filter))
        by_partition = snapshot.by_partition()
        metrics.partitions_total = len(by_partition)
        metrics.segments_total = len(snapshot.segments)
        spec = ds.spec_at(snapshot)
        partition_may_match = partition_pruner(node, spec)
        kept = {p: segs for p, segs in by_partition.items()
                if (where is None or p not in where.partitions) and partition_may_match(segs[0].values)}
        metrics.partitions_scanned = len(kept)
        metrics.curve_ranges = _curve_report(node, spec, by_partition, kept)
        planned: list[PlannedSegment] = []
        if kept:
            live = {s.segment: s for segs in kept.values() for s in segs}
            if where is not None and all(s in where.stats for s in live):
                stats_by_id = where.stats
            else:
                stats_by_id = ds.segment_stats(snapshot, list(kept))
            may_match = None if node is None else segment_pruner(node, schema)
            # commit order (a partition's own list is, when it is the only one kept)
            for s in next(iter(kept.values())) if len(kept) == 1 else snapshot.segments:
                if s.segment not in live or (where is not None and s.segment in where.segments):
                    continue
                stats = stats_by_id.get(s.segment)
                if stats is None:
                    raise CorruptChunkError(ds.name, "*", s.segment, "segment index row is missing")
                if may_match is None or may_match(stats, s.rows):
                    planned.append(PlannedSegment(s, stats))
        metrics.segments_scanned = len(planned)
        return ScanPlan(snapshot, tuple(columns), tuple(read_columns), tuple(planned),
                        read_schema(schema, snapshot, read_columns), metrics)

    # -- reading
    def to_batches(self, plan: ScanPlan | None = None, eager: bool = False) -> Iterator[pa.RecordBatch]:
        """The rows of the plan's segments that match the filter, projected to the plan's
        columns, lazily (see the module docstring); ``eager`` when every row is wanted: the
        segments are then fetched in full windows from the first, each read ahead."""
        plan = plan or self.plan()
        return _read_segments(self.dataset, plan, _finisher(self.filter, plan), eager)

    def output_schema(self, plan: ScanPlan) -> pa.Schema:
        return pa.schema([plan.schema.field(c) for c in plan.columns])

    def to_reader(self) -> pa.RecordBatchReader:
        plan = self.plan()
        return pa.RecordBatchReader.from_batches(self.output_schema(plan), self.to_batches(plan))

    def to_arrow(self) -> pa.Table:
        plan = self.plan()
        return pa.Table.from_batches(list(self.to_batches(plan, eager=True)), schema=self.output_schema(plan))

    def to_pandas(self) -> pd.DataFrame:
        return self.to_arrow().to_pandas()

    def count_rows(self) -> int:
        if self.filter is None:
            return (self.snapshot or self.dataset.snapshot(self.version)).rows
        return sum(b.num_rows for b in self.to_batches())


Finisher = Callable[[pa.RecordBatch], pa.RecordBatch]


def _finisher(expr: pc.Expression | None, plan: ScanPlan) -> Finisher | None:
    """What turns a segment's batch (read columns) into output rows: the filter, applied
    exactly, then the projection; None when the batch is already the output."""
    columns = list(plan.columns)
    if expr is None and len(plan.read_columns) == len(columns):
        return None
    if expr is None:
        return lambda batch: batch.select(columns)
    return lambda batch: batch.filter(expr).select(columns)


def _curve_report(node: Node | None, spec: DatasetSpec, by_partition: dict[str, list[SegmentEntry]],
                  kept: dict[str, list[SegmentEntry]]) -> list[dict[str, Any]]:
    """For each curve transform, when the scan pruned partitions: the key ranges of the cells
    read (merged), how many cells there are and were read, and the filter's bounding box when
    the scan's own filter gave one."""
    boxes = curve_boxes(node, spec)
    out = []
    for i, transform in enumerate(spec.partition_by):
        if not isinstance(transform, Curve):
            continue
        cells = {segs[0].values[i] for segs in by_partition.values()} - {None}
        read = {segs[0].values[i] for segs in kept.values()} - {None}
        if len(read) == len(cells) and i not in boxes:
            continue
        ranges = merge_ranges([(k, k) for k in read])
        out.append({"transform": str(transform), "box": list(boxes[i]) if i in boxes else None,
                    "ranges": len(ranges), "key_ranges": [list(r) for r in ranges[:RANGES_SHOWN]],
                    "cells_total": len(cells), "cells_read": len(read),
                    "null_partition_read": any(segs[0].values[i] is None for segs in kept.values())})
    return out


def _referenced(expr: pc.Expression, schema: pa.Schema) -> set[str]:
    """Columns an expression refers to, including parts pruning can't read; if the expression
    can't be read, every column whose name appears in its text (more than needed, never less)."""
    names = field_names(expr)
    if names is not None:
        return names
    text = str(expr)
    return {name for name in schema.names if name in text}


def _windows(segments: tuple[PlannedSegment, ...], columns: tuple[str, ...],
             eager: bool = False) -> Iterator[list[PlannedSegment]]:
    """Groups of segments fetched together: one segment for each of the first EAGER_WINDOWS,
    then twice as many each time (``eager``: READ_FIRST segments first), up to WINDOW_SEGMENTS
    segments or WINDOW_BYTES bytes."""
    window: list[PlannedSegment] = []
    size = 0
    limit, count = (READ_FIRST, EAGER_WINDOWS) if eager else (1, 0)
    for seg in segments:
        window.append(seg)
        size += sum(seg.stats[c].nbytes for c in columns if c in seg.stats)
        if size >= WINDOW_BYTES or len(window) >= limit:
            yield window
            window, size = [], 0
            count += 1
            if count >= EAGER_WINDOWS:
                limit = min(limit * 2, WINDOW_SEGMENTS)
    if window:
        yield window


def decode_column(dataset: str, ref: ChunkRef, data: bytes, target: pa.DataType | None) -> pa.Array:
    """The array of one fetched chunk, as ``target`` (None: as stored, dictionaries of any
    index width kept); CorruptChunkError naming the chunk if it is missing (empty) or damaged."""
    if not data:
        raise CorruptChunkError(dataset, ref.column, ref.segment, "chunk is missing from the store")
    try:
        array = decode_chunk(data, as_stored=target is None)
    except ChunkFormatError as exc:
        raise CorruptChunkError(dataset, ref.column, ref.segment, str(exc)) from None
    if target is not None and array.type != target:
        if pa.types.is_dictionary(array.type) and not pa.types.is_dictionary(target):
            array = pc.take(array.dictionary, array.indices)
        if array.type != target:
            array = array.cast(target)
    return array


#: Compressed bytes of chunks decoded by one task of the decode pool.
DECODE_GROUP_BYTES = 512 * 1024


def _decode_group(dataset: str, chunks: list[tuple[ChunkRef, bytes]], types: dict[str, pa.DataType | None],
                  cache: ChunkCache | None = None) -> list[pa.Array]:
    arrays = [decode_column(dataset, ref, data, types[ref.column]) for ref, data in chunks]
    if cache is not None:
        for (ref, _), array in zip(chunks, arrays, strict=True):
            cache.put((ref.segment, ref.column, str(types[ref.column])), array)
    return arrays


class _Cached:
    """An array at hand (cached, decoded in this thread, or of nulls), read like a future's."""

    __slots__ = ("_array",)

    def __init__(self, array: pa.Array) -> None:
        self._array = array

    def result(self) -> pa.Array:
        return self._array


class _Part:
    """One array of a decode task's result, read like a future's."""

    __slots__ = ("future", "_index")

    def __init__(self, future: Future[list[pa.Array]], index: int) -> None:
        self.future, self._index = future, index

    def result(self) -> pa.Array:
        return self.future.result()[self._index]


def _fetch_window(ds: Dataset, plan: ScanPlan, window: list[PlannedSegment],
                  pool: ThreadPoolExecutor, finish: Finisher | None) -> list[Future[pa.RecordBatch]]:
    tasks: list[Future[Any]] = []
    try:
        return _fetch_and_decode(ds, plan, window, pool, finish, tasks)
    except BaseException:
        wait(tasks)  # the pool outlives the scan: nothing of it still runs once it has failed
        raise


def _fetch_and_decode(ds: Dataset, plan: ScanPlan, window: list[PlannedSegment], pool: ThreadPoolExecutor,
                      finish: Finisher | None, tasks: list[Future[Any]]) -> list[Future[pa.RecordBatch]]:
    """A future of each segment's batch in the window, in order: its chunks fetched (in one
    request for the window), decoded by ``pool``, each task started noted in ``tasks``; a
    segment's batch is made (and finished) as soon as its own chunks are decoded, in the thread
    that decoded the last of them, not once the whole window is."""
    refs = [ChunkRef(s.entry.partition, c, s.entry.segment, s.entry.bucket)
            for s in window for c in plan.read_columns if c in s.stats]
    types: dict[str, pa.DataType | None] = {
        f.name: None if f.name in plan.as_stored else f.type for f in plan.schema}
    futures: dict[tuple[str, str], _Part | _Cached] = {}
    cache = cache_of(ds.store)
    if cache is not None:
        wanted = refs
        refs = []
        for ref in wanted:
            array = cache.get((ref.segment, ref.column, str(types[ref.column])))
            if array is None:
                refs.append(ref)
            else:
                futures[(ref.segment, ref.column)] = _Cached(array)
    # one small segment (a point lookup's, a scan's first windows) is decoded and filtered in
    # this thread: handing a few small chunks to the pool costs more than decoding them
    inline = len(window) == 1 and sum(
        window[0].stats[c].nbytes for c in plan.read_columns if c in window[0].stats) <= DECODE_GROUP_BYTES
    nbytes = 0
    group: list[tuple[ChunkRef, bytes]] = []
    group_bytes = 0

    def submit() -> None:
        # small chunks are decoded a group per task (a task per 4,000-row chunk costs about as
        # much in scheduling as the decode itself); large ones one per task
        if inline:
            for (ref, _), array in zip(group, _decode_group(ds.name, group, types, cache), strict=True):
                futures[(ref.segment, ref.column)] = _Cached(array)
        else:
            task = pool.submit(_decode_group, ds.name, list(group), types, cache)
            tasks.append(task)
            for i, (ref, _) in enumerate(group):
                futures[(ref.segment, ref.column)] = _Part(task, i)
        group.clear()

    try:
        for ref, data in ds.store.get_chunks(ds.name, refs):
            nbytes += len(data)
            group.append((ref, data))
            group_bytes += len(data)
            if group_bytes >= DECODE_GROUP_BYTES:
                submit()
                group_bytes = 0
        if group:
            submit()
    finally:
        plan.metrics.chunks_read += len(futures)
        plan.metrics.bytes_read += nbytes
    parts: list[list[_Part | _Cached]] = []
    for s in window:
        found: list[_Part | _Cached] = []
        for c in plan.read_columns:
            if c not in s.stats:  # column added after this segment
                found.append(_Cached(pa.nulls(s.entry.rows, plan.schema.field(c).type)))
                continue
            fut = futures.get((s.entry.segment, c))
            if fut is None:
                raise CorruptChunkError(ds.name, c, s.entry.segment, "chunk is missing from the store")
            found.append(fut)
        parts.append(found)
    plan.metrics.rows_scanned += sum(s.entry.rows for s in window)
    plan.metrics.segments_read += len(window)
    return [_batch_when_decoded(plan, s, found, finish) for s, found in zip(window, parts, strict=True)]


def _batch_when_decoded(plan: ScanPlan, segment: PlannedSegment, parts: list[_Part | _Cached],
                        finish: Finisher | None) -> Future[pa.RecordBatch]:
    """The future of one segment's batch, made (and finished) by whichever thread completes the
    last decode task it waits for (this one when none is left): the failure of a decode or of
    ``finish`` is the future's."""
    done: Future[pa.RecordBatch] = Future()
    waiting = {p.future for p in parts if isinstance(p, _Part)}
    left = len(waiting)
    lock = threading.Lock()

    def make() -> None:
        try:
            batch = _segment_batch(plan, segment, [p.result() for p in parts])
            done.set_result(finish(batch) if finish is not None else batch)
        except BaseException as exc:  # noqa: BLE001 - the consumer raises it
            done.set_exception(exc)

    def decoded(_: Future[Any]) -> None:
        nonlocal left
        with lock:
            left -= 1
            last = left == 0
        if last:
            make()

    if not waiting:
        make()
    for task in waiting:
        task.add_done_callback(decoded)
    return done


def _segment_batch(plan: ScanPlan, segment: PlannedSegment, arrays: list[pa.Array]) -> pa.RecordBatch:
    if arrays and plan.as_stored:
        return pa.RecordBatch.from_arrays(arrays, names=list(plan.read_columns))
    if arrays:
        return pa.RecordBatch.from_arrays(arrays, schema=plan.schema)
    return pa.record_batch({"_": pa.nulls(segment.entry.rows)}).select([])  # no column wanted: rows only


def _taken(futures: list[Future[pa.RecordBatch]]) -> Iterator[pa.RecordBatch]:
    """The batches of a window's futures, in order, those with rows."""
    for future in futures:
        batch = future.result()
        if batch.num_rows:
            yield batch


_POOLS: dict[int, tuple[ThreadPoolExecutor, ThreadPoolExecutor]] = {}
_POOLS_LOCK = threading.Lock()


def _pools() -> tuple[ThreadPoolExecutor, ThreadPoolExecutor]:
    """This process's decode and fetch pools. Decode tasks never wait for another task, so scans
    sharing them always progress; a forked child makes its own (its parent's threads aren't
    in it)."""
    pid = os.getpid()
    found = _POOLS.get(pid)
    if found is None:
        with _POOLS_LOCK:
            found = _POOLS.get(pid)
            if found is None:
                _POOLS.clear()
                found = (ThreadPoolExecutor(max(2, os.cpu_count() or 2), thread_name_prefix="colonnade-decode"),
                         ThreadPoolExecutor(FETCH_THREADS, thread_name_prefix="colonnade-fetch"))
                _POOLS[pid] = found
    return found


def _read_segments(ds: Dataset, plan: ScanPlan, finish: Finisher | None,
                   eager: bool = False) -> Iterator[pa.RecordBatch]:
    if not plan.segments:
        return
    decode_pool, fetch_pool = _pools()
    pending: deque[Future[list[Future[pa.RecordBatch]]]] = deque()
    windows = _windows(plan.segments, plan.read_columns, eager)

    # the consumer wants more: READ_AHEAD windows are fetched and decoded ahead of the one
    # it is taking batches from
    def read_ahead() -> None:
        while len(pending) < READ_AHEAD and (upcoming := next(windows, None)) is not None:
            pending.append(fetch_pool.submit(_fetch_window, ds, plan, upcoming, decode_pool, finish))

    taking: list[Future[pa.RecordBatch]] = []
    try:
        # the first windows are fetched only when the consumer gets there: a LIMIT that stops
        # within them has read EAGER_WINDOWS segments at most (``eager``: none is held back)
        for _ in range(0 if eager else EAGER_WINDOWS):
            window = next(windows, None)
            if window is None:
                return
            taking = _fetch_window(ds, plan, window, decode_pool, finish)
            yield from _taken(taking)
        read_ahead()
        while pending:
            taking = pending.popleft().result()
            read_ahead()
            yield from _taken(taking)
    finally:
        # wait: metrics are final, and nothing of the scan still runs, once it is closed
        wait(taking)
        for future in pending:
            if not future.cancel() and future.exception() is None:
                wait(future.result())
