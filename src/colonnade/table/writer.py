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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from colonnade.config import WriteSettings
from colonnade.encoding.chunk import ChunkStats, encode_chunk
from colonnade.schema.spec import DatasetSpec
from colonnade.storage.base import ChunkRef, ChunkStore, SegmentRow
from colonnade.table.commits import SegmentEntry

#: Segments of one partition written by one append share a bucket, up to this many.
SEGMENTS_PER_BUCKET = 16


@dataclass
class _Buffer:
    values: tuple[Any, ...]
    batches: list[pa.RecordBatch] = field(default_factory=list)
    rows: int = 0
    nbytes: int = 0
    segments_written: int = 0


def segment_stats_json(stats: dict[str, ChunkStats]) -> bytes:
    payload = {"at": time.time(), "columns": {c: s.to_json() for c, s in stats.items()}}
    return json.dumps(payload, separators=(",", ":")).encode()


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
                 on_segment: Callable[[SegmentEntry], None] | None = None) -> None:
        self.store = store
        self.spec = spec
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
        self._queue: queue.Queue[tuple[SegmentRow, list[tuple[ChunkRef, bytes]]] | None] = queue.Queue(maxsize=3)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._store_loop, name="colonnade-store-writer", daemon=True)
        self._thread.start()

    # -- the store writer thread
    def _store_loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if self._error is not None:
                continue
            row, chunks = item
            try:
                # segment row first: every stored chunk then has a row vacuum can find
                self.store.put_segments(self.spec.name, [row])
                self.store.put_chunks(self.spec.name, chunks)
            except BaseException as exc:  # surfaced to the caller by _check
                self._error = exc

    def _check(self) -> None:
        if self._error is not None:
            raise self._error

    # -- partitioning
    def _partition_runs(self, batch: pa.RecordBatch) -> list[tuple[tuple[Any, ...], pa.RecordBatch]]:
        transforms = self.spec.partition_by
        if not transforms:
            return [((), batch)]
        keys = [t.apply(batch.column(t.source)) for t in transforms]
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
        for values, part in self._partition_runs(batch):
            key = self.spec.partition_key(values)
            buf = self._buffers.get(key)
            if buf is None:
                buf = self._buffers[key] = _Buffer(values)
            buf.batches.append(part)
            buf.rows += part.num_rows
            size = part.nbytes
            buf.nbytes += size
            self._buffered_bytes += size
            while buf.rows >= limit:
                self._flush(key, limit)
        while self._buffered_bytes > self.settings.memory_limit and self._buffers:
            biggest = max(self._buffers, key=lambda k: self._buffers[k].nbytes)
            self._flush(biggest, self._buffers[biggest].rows)

    def _flush(self, key: str, rows: int) -> None:
        buf = self._buffers[key]
        table = pa.Table.from_batches(buf.batches, schema=buf.batches[0].schema)
        segment, rest = table.slice(0, rows), table.slice(rows)
        self._buffered_bytes -= buf.nbytes
        if rest.num_rows:
            buf.batches = rest.to_batches()
            buf.rows = rest.num_rows
            buf.nbytes = rest.nbytes
            self._buffered_bytes += buf.nbytes
        else:
            del self._buffers[key]
        bucket = self._bucket_base + buf.segments_written // SEGMENTS_PER_BUCKET
        buf.segments_written += 1
        self._write_segment(key, buf.values, bucket, segment)

    def _write_segment(self, partition: str, values: tuple[Any, ...], bucket: int, table: pa.Table) -> None:
        if self.spec.sort_by:
            table = table.sort_by([(c, "ascending") for c in self.spec.sort_by])
        segment_id = uuid.uuid4().hex
        compression = self.settings.ipc_compression
        names = table.column_names
        encoded = list(self._pool.map(lambda c: encode_chunk(c, compression), table.columns))
        stats = {name: s for name, (_, s) in zip(names, encoded, strict=True)}
        chunks = [(ChunkRef(partition, name, segment_id, bucket), data)
                  for name, (data, _) in zip(names, encoded, strict=True)]
        row = SegmentRow(partition, segment_id, self.commit_id, table.num_rows, bucket, segment_stats_json(stats))
        entry = SegmentEntry(segment_id, partition, table.num_rows, bucket, values,
                             frozenset(n for n, s in stats.items() if s.dictionary))
        self._check()
        self._queue.put((row, chunks))
        self.entries.append(entry)
        self.rows += table.num_rows
        self.bytes_written += sum(len(d) for _, d in chunks)
        if self._on_segment is not None:
            self._on_segment(entry)

    def finish(self) -> list[SegmentEntry]:
        """Flush every buffer and wait until the store holds every segment."""
        try:
            for key in list(self._buffers):
                self._flush(key, self._buffers[key].rows)
        finally:
            self._queue.put(None)
            self._thread.join()
            self._pool.shutdown(wait=True)
        self._check()
        return self.entries

    def abort(self) -> None:
        """Stop without flushing (what was stored stays orphaned until vacuum)."""
        self._buffers.clear()
        self._queue.put(None)
        self._thread.join()
        self._pool.shutdown(wait=True, cancel_futures=True)
