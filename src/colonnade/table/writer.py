"""The write pipeline after the source: partition → buffer → sort → segment → encode → store.

Rows are split by partition value and buffered per partition; a partition's buffer becomes a
segment when it reaches ``segment_rows``, or earlier when all buffers together pass the memory
limit (so memory is bounded by configuration, not input size). Columns of a segment are encoded
in a thread pool (Arrow releases the GIL) while the store writes the previous segment from a
writer thread, through a bounded queue. Nothing is visible until the caller commits the returned
entries.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import random
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from colonnade.config import WriteSettings
from colonnade.encoding.chunk import FLAG_DICTIONARY, ChunkStats, encode_chunk
from colonnade.faults import fault_point
from colonnade.schema.spec import DatasetSpec
from colonnade.schema.transforms import Transform
from colonnade.storage.base import ChunkRef, ChunkStore, SegmentRow
from colonnade.table.commits import SegmentEntry

#: Segments of one partition written by one append share a bucket, up to this many and up to
#: BUCKET_BYTES of their Arrow data: on Cassandra a bucket is one Cassandra partition holding
#: every column of its segments, to be kept well under 100 MB (chunks are smaller than the
#: Arrow data, unless incompressible).
SEGMENTS_PER_BUCKET = 16
BUCKET_BYTES = 96 << 20
#: Batches without new rows after which a partition's buffer is cut into a segment.
IDLE_BATCHES = 2
STORE_BATCH = 8  # most segments stored in one round trip (see _store_loop)
SORTED_GROUP_SEGMENTS = 8  # segments of a partition a sorted dataset sorts together (see write)


@dataclass
class _Buffer:
    values: tuple[Any, ...]
    batches: list[pa.RecordBatch] = field(default_factory=list)
    rows: int = 0
    nbytes: int = 0
    segments_written: int = 0
    rows_written: int = 0
    buckets_filled: int = 0  # buckets this append closed
    bucket_segments: int = 0  # segments (and their Arrow bytes) in the bucket being filled
    bucket_bytes: int = 0
    runs: int = 0  # sorted flushes of a sorted dataset: each one run of disjoint segments
    last_batch: int = 0


def segment_stats_json(stats: dict[str, ChunkStats]) -> bytes:
    payload = {"at": time.time(), "columns": {c: s.to_json() for c, s in stats.items()}}
    return json.dumps(payload, separators=(",", ":")).encode()


def column_stats_text(stats: dict[str, ChunkStats]) -> str:
    """A segment's statistics as the commit log carries them (see ``SegmentEntry.stats``)."""
    return json.dumps({c: s.to_json() for c, s in stats.items()}, separators=(",", ":"))


_TEXT_CACHE: dict[str, dict[str, ChunkStats]] = {}


def column_stats_from_text(text: str) -> dict[str, ChunkStats]:
    """Decode ``SegmentEntry.stats`` (cached by content: segments are immutable)."""
    stats = _TEXT_CACHE.get(text)
    if stats is None:
        stats = {c: ChunkStats.from_json(v) for c, v in json.loads(text).items()}
        if len(_TEXT_CACHE) >= _STATS_CACHE_MAX:
            _TEXT_CACHE.clear()
        _TEXT_CACHE[text] = stats
    return stats


def segment_written_at(data: bytes) -> float:
    return float(json.loads(data).get("at", 0.0))


_STATS_CACHE: dict[bytes, dict[str, ChunkStats]] = {}
_STATS_CACHE_MAX = 200_000


def segment_stats_from_json(data: bytes) -> dict[str, ChunkStats]:
    """Decode a segment's statistics (cached by content: segments are immutable)."""
    key = hashlib.blake2b(data, digest_size=16).digest()
    stats = _STATS_CACHE.get(key)
    if stats is None:
        stats = {c: ChunkStats.from_json(v) for c, v in json.loads(data)["columns"].items()}
        if len(_STATS_CACHE) >= _STATS_CACHE_MAX:
            _STATS_CACHE.clear()
        _STATS_CACHE[key] = stats
    return stats


@dataclass
class _Pending:
    """A segment handed to the store thread while its columns are still being encoded."""

    partition: str
    values: tuple[Any, ...]
    bucket: int
    segment: str
    rows: int
    names: list[str]
    futures: list[Future[tuple[bytes, ChunkStats]]]


def _stored_parts(commit_id: str, p: _Pending, encoded: list[tuple[bytes, ChunkStats]]
                  ) -> tuple[SegmentRow, list[tuple[ChunkRef, bytes]], SegmentEntry]:
    """The segment row, chunks and log entry of segment ``p`` given its encoded columns."""
    stats = {name: st for name, (_, st) in zip(p.names, encoded, strict=True)}
    chunks = [(ChunkRef(p.partition, name, p.segment, p.bucket), data)
              for name, (data, _) in zip(p.names, encoded, strict=True)]
    row = SegmentRow(p.partition, p.segment, commit_id, p.rows, p.bucket, segment_stats_json(stats))
    entry = SegmentEntry(p.segment, p.partition, p.rows, p.bucket, p.values,
                         frozenset(n for n, st in stats.items() if st.dictionary), column_stats_text(stats))
    return row, chunks, entry


def write_segment(store: ChunkStore, spec: DatasetSpec, commit_id: str, table: pa.Table,
                  settings: WriteSettings, plain: Collection[str] = ()) -> SegmentEntry:
    """``table`` (rows of a dataset neither partitioned nor sorted, at most a segment's worth)
    stored as one segment, encoded on the calling thread: for a few thousand rows (a sample's
    share of an append) a :class:`SegmentWriter`'s threads cost more than they save.
    ``plain``: columns never stored as a dictionary (the rule decides the others)."""
    assert not spec.partition_by and not spec.sort_by
    encoded = [encode_chunk(column, settings.ipc_compression, False if name in plain else None,
                            settings.compression_level)
               for name, column in zip(table.column_names, table.columns, strict=True)]
    p = _Pending(spec.partition_key(()), (), random.randrange(0, 2**20) * 1024, uuid.uuid4().hex,
                 table.num_rows, table.column_names, [])
    row, chunks, entry = _stored_parts(commit_id, p, encoded)
    store.put_segments(spec.name, [row])  # its row first: every stored chunk has one
    fault_point("after_segment_row")
    store.put_chunks(spec.name, chunks)
    fault_point("after_chunks")
    return entry


def _run_starts(key_table: pa.Table) -> list[int]:
    """Row indices where the partition key differs from the previous row."""
    n = key_table.num_rows
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for col in key_table.columns:
        a, b = col.slice(1), col.slice(0, n - 1)
        change[1:] |= pc.fill_null(pc.not_equal(a, b), True).to_numpy(zero_copy_only=False)
    return list(np.flatnonzero(change).tolist())


class SegmentWriter:
    """Turns record batches of a dataset's schema into stored (uncommitted) segments."""

    def __init__(self, store: ChunkStore, spec: DatasetSpec, commit_id: str,
                 settings: WriteSettings | None = None,
                 on_segment: Callable[[SegmentEntry], None] | None = None,
                 plain: Collection[str] = ()) -> None:
        self.store = store
        self.spec = spec
        self._sort_keys = spec.sort_keys()
        self.commit_id = commit_id
        self.settings = settings or WriteSettings.from_env(segment_rows=spec.segment_rows,
                                                           compression=spec.compression)
        self.entries: list[SegmentEntry] = []
        self.rows = 0
        self.bytes_written = 0
        self._on_segment = on_segment
        self._buffers: dict[str, _Buffer] = {}
        self._buffered_bytes = 0
        self._bucket_base = random.randrange(0, 2**20) * 1024
        threads = self.settings.encode_threads or (os.cpu_count() or 2)
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="colonnade-encode")
        # segments whose columns are being encoded; bounded, so encoding can't run far ahead
        self._queue: queue.Queue[_Pending | None] = queue.Queue(maxsize=3)
        # per column: whether the last segment stored it as a dictionary (``plain``: never tried)
        self._dictionary_hint: dict[str, bool] = dict.fromkeys(plain, False)
        self._batches_seen = 0
        self._row_bytes = 0.0
        self._stored = threading.Condition()  # notified as the store thread stores segments
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._store_loop, name="colonnade-store-writer", daemon=True)
        self._thread.start()

    # -- the store writer thread
    def _store_loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            # the segments encoded meanwhile go together: one round trip for their rows and
            # one for their chunks (small segments, as a tile layer's, are mostly round trips)
            items, last = [item], False
            while len(items) < STORE_BATCH:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    last = True
                    break
                items.append(more)
            if self._error is None:
                try:
                    resolved = [self._resolve(i) for i in items]
                    # segment rows first: every stored chunk then has a row vacuum can find
                    self.store.put_segments(self.spec.name, [row for row, _, _ in resolved])
                    for _ in resolved:  # fault points count segments, however they are batched
                        fault_point("after_segment_row")
                    self.store.put_chunks(self.spec.name, [c for _, chunks, _ in resolved for c in chunks])
                    for _ in resolved:
                        fault_point("after_chunks")
                    with self._stored:
                        for row, chunks, entry in resolved:
                            self.entries.append(entry)
                            self.rows += row.rows
                            self.bytes_written += sum(len(d) for _, d in chunks)
                            if self._on_segment is not None:
                                self._on_segment(entry)
                        self._stored.notify_all()
                except BaseException as exc:  # surfaced to the caller by _check
                    with self._stored:
                        self._error = exc
                        self._stored.notify_all()
            if last:
                return

    def _resolve(self, p: _Pending) -> tuple[SegmentRow, list[tuple[ChunkRef, bytes]], SegmentEntry]:
        encoded = [f.result() for f in p.futures]
        for name, (data, _) in zip(p.names, encoded, strict=True):
            self._dictionary_hint[name] = bool(data[5] & FLAG_DICTIONARY)  # header flags byte
        return _stored_parts(self.commit_id, p, encoded)

    def _check(self) -> None:
        if self._error is not None:
            raise self._error

    # -- partitioning
    def _partition_runs(self, batch: pa.RecordBatch) -> list[tuple[tuple[Any, ...], pa.RecordBatch]]:
        transforms = self.spec.partition_by
        if not transforms:
            return [((), batch)]
        keys = [t.apply_columns([batch.column(c) for c in t.sources]) for t in transforms]
        first = [k[0].as_py() for k in keys] if batch.num_rows else []
        if all(pc.all(pc.equal(k, k[0])).as_py() and k.null_count == 0 for k in keys):
            return [(tuple(first), batch)]
        key_table = pa.table({f"k{i}": k for i, k in enumerate(keys)})
        starts = _run_starts(key_table)
        if len(starts) > max(64, batch.num_rows // 1000):
            # fragmented input: group rows by sorting once, then cut runs
            order = pc.sort_indices(key_table, sort_keys=[(f"k{i}", "ascending", "at_end") for i in range(len(keys))])
            batch = batch.take(order)
            key_table = key_table.take(order)
            starts = _run_starts(key_table)
        # input already grouped (the common case: data arrives in partition order): zero-copy slices
        bounds = starts + [batch.num_rows]
        cols = key_table.columns
        runs = []
        for s, e in zip(bounds[:-1], bounds[1:], strict=True):
            runs.append((tuple(c[s].as_py() for c in cols), batch.slice(s, e - s)))
        return runs

    def write(self, batch: pa.RecordBatch) -> None:
        """Add rows (a batch in the dataset's schema)."""
        self._check()
        if batch.num_rows == 0:
            return
        limit = self.settings.segment_rows
        # a sorted dataset buffers several segments of a partition, sorts them together and
        # cuts them in key order: its segments then hold disjoint key ranges (see _flush)
        threshold = limit * (SORTED_GROUP_SEGMENTS if self._sort_keys else 1)
        self._batches_seen += 1
        # the batch's buffers, cheaply; a slice of larger buffers (far wider than the batches
        # before it) counts its share of them only, which takes longer to find
        bytes_per_row = batch.get_total_buffer_size() / batch.num_rows
        if not self._row_bytes or bytes_per_row > 2 * self._row_bytes:
            bytes_per_row = batch.nbytes / batch.num_rows
        self._row_bytes = bytes_per_row
        for values, part in self._partition_runs(batch):
            key = self.spec.partition_key(values)
            buf = self._buffers.get(key)
            if buf is None:
                buf = self._buffers[key] = _Buffer(values)
            buf.batches.append(part)
            buf.last_batch = self._batches_seen
            buf.rows += part.num_rows
            size = int(part.num_rows * bytes_per_row)
            buf.nbytes += size
            self._buffered_bytes += size
            while buf.rows >= threshold:
                self._flush(key, buf.rows - buf.rows % limit if self._sort_keys else limit)
        # a partition that got no rows for IDLE_BATCHES batches is likely complete (input often
        # arrives in partition order): cut its segment now, so encoding overlaps reading
        for key, buf in list(self._buffers.items()):
            if buf.rows and self._batches_seen - buf.last_batch >= IDLE_BATCHES:
                self._flush(key, buf.rows)
        while self._buffered_bytes > self.settings.memory_limit and any(b.rows for b in self._buffers.values()):
            biggest = max(self._buffers, key=lambda k: self._buffers[k].nbytes)
            self._flush(biggest, self._buffers[biggest].rows)

    def _flush(self, key: str, rows: int) -> None:
        """Write ``rows`` buffered rows of partition ``key`` as segments: the first ``rows``
        (one segment), or, for a sorted dataset, the buffer sorted once and cut into segments
        of ``segment_rows`` (the last one shorter when ``rows`` is not a multiple), keeping
        the rest buffered."""
        buf = self._buffers[key]
        table = pa.Table.from_batches(buf.batches, schema=buf.batches[0].schema)
        limit = self.settings.segment_rows
        if self._sort_keys:
            # sorted once; full segments (and a tail when every row goes), as unsorted data is
            # cut: compaction then finds them full. Rows kept are the greatest keys of the lot.
            table = sort_segment(table, self._sort_keys)
            segments = [table.slice(start, min(limit, rows - start)) for start in range(0, rows, limit)]
            rest = table.slice(rows)
        else:
            segments, rest = [table.slice(0, rows)], table.slice(rows)
        # bytes as the buffer counted them, in proportion to rows (a table's nbytes, of slices
        # of many batches, takes long to find)
        row_bytes = buf.nbytes / buf.rows if buf.rows else 0.0
        self._buffered_bytes -= buf.nbytes
        # the buffer stays (empty) when all its rows go: its segment count keeps buckets bounded
        buf.batches = rest.to_batches() if rest.num_rows else []
        buf.rows = rest.num_rows
        buf.nbytes = int(rest.num_rows * row_bytes)
        self._buffered_bytes += buf.nbytes
        buf.runs += bool(self._sort_keys and segments)
        for segment in segments:
            buf.rows_written += segment.num_rows
            segment_bytes = int(segment.num_rows * row_bytes)
            if buf.bucket_segments and (buf.bucket_segments >= SEGMENTS_PER_BUCKET
                                        or buf.bucket_bytes + segment_bytes > BUCKET_BYTES):
                buf.buckets_filled += 1
                buf.bucket_segments = buf.bucket_bytes = 0
            bucket = self._bucket_base + buf.buckets_filled
            buf.bucket_segments += 1
            buf.bucket_bytes += segment_bytes
            buf.segments_written += 1
            self._write_segment(key, buf.values, bucket, segment, presorted=bool(self._sort_keys))

    def _write_segment(self, partition: str, values: tuple[Any, ...], bucket: int, table: pa.Table,
                       presorted: bool = False) -> None:
        if self.spec.sort_by and not presorted:
            table = sort_segment(table, self._sort_keys)
        segment_id = uuid.uuid4().hex
        compression = self.settings.ipc_compression
        names = table.column_names
        futures = []
        for name, column in zip(names, table.columns, strict=True):
            # a column that wasn't worth a dictionary in the last segment isn't tried again
            hint = None if self._dictionary_hint.get(name, True) else False
            futures.append(self._pool.submit(encode_chunk, column, compression, hint,
                                             self.settings.compression_level))
        self._check()
        self._queue.put(_Pending(partition, values, bucket, segment_id, table.num_rows, names, futures))

    def finish(self) -> list[SegmentEntry]:
        """Flush every buffer and wait until the store holds every segment.

        A partition of a sorted dataset flushed more than once (under memory pressure, or past
        a sorted group) holds runs whose key ranges overlap; when the partition fits in half the
        memory limit, its runs are read back, sorted with the rest of its rows and written again
        as segments with disjoint key ranges (the runs, never committed, are deleted): boxes and
        ranges then read one run's worth of segments, not one per flush."""
        try:
            merging = []
            for key, buf in list(self._buffers.items()):
                if self._sort_keys and buf.runs + bool(buf.rows) >= 2 and \
                        (buf.rows_written + buf.rows) * self._row_bytes <= self.settings.memory_limit // 2:
                    merging.append(key)
                elif buf.rows:
                    self._flush(key, buf.rows)
            for key in merging:
                self._merge_runs(key)
        finally:
            self._queue.put(None)
            self._thread.join()
            self._pool.shutdown(wait=True)
        self._check()
        return self.entries

    def _merge_runs(self, key: str) -> None:
        """Read back the segments written for partition ``key``, add them to its buffer and
        flush it whole (sorted once), then delete them (see finish)."""
        from colonnade.table.scan import decode_column

        buf = self._buffers[key]
        with self._stored:  # every segment of the partition stored (or the store failed)
            self._stored.wait_for(lambda: self._error is not None or sum(
                e.partition == key for e in self.entries) >= buf.segments_written)
        self._check()
        runs = [e for e in self.entries if e.partition == key]
        schema = buf.batches[0].schema if buf.batches else self.spec.schema
        data = dict(self.store.get_chunks(self.spec.name, [ChunkRef(e.partition, f.name, e.segment, e.bucket)
                                                           for e in runs for f in schema]))
        tables = []
        for e in runs:
            refs = [ChunkRef(e.partition, f.name, e.segment, e.bucket) for f in schema]
            tables.append(pa.Table.from_arrays([decode_column(self.spec.name, r, data.get(r, b""), f.type)
                                                for r, f in zip(refs, schema, strict=True)], schema=schema))
        gone = {e.segment for e in runs}
        with self._stored:
            self.entries = [e for e in self.entries if e.segment not in gone]
            self.rows -= sum(e.rows for e in runs)
            self.bytes_written -= sum(sum(st.nbytes for st in column_stats_from_text(e.stats).values())
                                      for e in runs if e.stats)
        batches = [b for t in tables for b in t.to_batches()] + buf.batches
        buf.batches = [b for b in batches if b.num_rows]
        buf.rows = sum(b.num_rows for b in buf.batches)
        self._buffered_bytes -= buf.nbytes
        buf.nbytes = int(buf.rows * self._row_bytes)
        self._buffered_bytes += buf.nbytes
        self._flush(key, buf.rows)
        self.store.delete_segments(self.spec.name, [SegmentRow(e.partition, e.segment, self.commit_id, e.rows,
                                                               e.bucket, b"") for e in runs], schema.names)

    def abort(self) -> None:
        """Stop without flushing (what was stored stays orphaned until vacuum)."""
        self._buffers.clear()
        self._queue.put(None)
        self._thread.join()
        self._pool.shutdown(wait=True, cancel_futures=True)


def sort_segment(table: pa.Table, keys: list[str | Transform]) -> pa.Table:
    """The rows of a segment in sort-key order (NULL keys last); a curve key is computed from
    its coordinate columns and not stored (the coordinates' own statistics then bound the
    segment's box)."""
    if all(isinstance(k, str) for k in keys):
        return table.sort_by([(k, "ascending") for k in keys])  # type: ignore[misc]
    columns = {f"k{i}": table.column(k) if isinstance(k, str) else
               k.apply_columns([table.column(c) for c in k.sources]) for i, k in enumerate(keys)}
    order = pc.sort_indices(pa.table(columns), sort_keys=[(name, "ascending", "at_end") for name in columns])
    return table.take(order)


def write_all(writer: SegmentWriter, batches: Iterable[pa.RecordBatch],
              prepare: Callable[[pa.RecordBatch], pa.RecordBatch],
              on_batch: Callable[[pa.RecordBatch], None] | None = None) -> list[SegmentEntry]:
    """Write every batch (as ``prepare`` makes it: conformed to the dataset schema) and finish;
    on any failure the writer is aborted (what it stored stays orphaned until vacuum)."""
    try:
        for batch in batches:
            writer.write(prepare(batch))
            if on_batch is not None:
                on_batch(batch)
        return writer.finish()
    except BaseException:
        writer.abort()
        raise
