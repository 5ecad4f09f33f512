"""Compaction: merging a partition's small segments into full ones, in one commit.

Streams leave many small segments (one or more per micro-batch and partition); every segment
costs a segment-index row, a request per column read and a pruning decision. ``compact`` takes,
per partition, the live segments smaller than the target (default: the dataset's
``segment_rows``), reads them in the order of their least sort-key value, and writes their rows
again as segments of up to the target rows (each sorted by the sort key), then commits
``remove n, add m`` (operation ``compact``). Full segments are neither read nor rewritten.

The commit declares that it read no partitions (its rows are the rows it removes): appends
committed meanwhile never conflict with it and are kept; an operation that removed one of the
same segments meanwhile (another compaction, a delete) makes it fail with
CommitConflictError. Versions before the compaction still read their old segments (``vacuum``
removes only segments no commit names).

Retention (:mod:`colonnade.table.retention`) runs first, when the dataset has it set.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from colonnade.config import WriteSettings
from colonnade.table.commits import AddSegments, Commit, RemoveSegments, SegmentEntry, Snapshot
from colonnade.table.scan import Scan
from colonnade.table.writer import SegmentWriter

if TYPE_CHECKING:
    from colonnade.encoding.chunk import ChunkStats
    from colonnade.table.dataset import Dataset
    from colonnade.table.deletion import DeleteResult


@dataclass(frozen=True)
class CompactResult:
    """What a compaction did; ``version`` is None when there was nothing to merge."""

    dataset: str
    version: int | None
    segments_before: int  # small segments merged (removed)
    segments_after: int  # segments written in their place
    rows: int
    partitions: int
    seconds: float
    target_rows: int
    retention: DeleteResult | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "version": self.version,
                "segments_before": self.segments_before, "segments_after": self.segments_after,
                "rows": self.rows, "partitions": self.partitions, "seconds": round(self.seconds, 3),
                "target_rows": self.target_rows,
                "retention": None if self.retention is None else self.retention.to_dict()}


def small_segments(snapshot: Snapshot, target_rows: int,
                   partitions: Iterable[str] | None = None) -> dict[str, list[SegmentEntry]]:
    """Per partition, its live segments smaller than ``target_rows`` (partitions with fewer
    than two such segments have nothing to merge and are left out)."""
    wanted = None if partitions is None else set(partitions)
    groups: dict[str, list[SegmentEntry]] = {}
    for s in snapshot.segments:
        if s.rows < target_rows and (wanted is None or s.partition in wanted):
            groups.setdefault(s.partition, []).append(s)
    return {p: segs for p, segs in groups.items() if len(segs) > 1}


def partitions_matching(ds: Dataset, where: str) -> list[str]:
    """Keys of the live partitions that may hold rows for which the SQL predicate ``where``
    is TRUE (decided from partition values alone)."""
    from colonnade.table.predicate import Predicate

    snapshot = ds.snapshot()
    values = {s.partition: s.values for s in snapshot.segments}
    with Predicate(ds.name, where, ds.schema_at(snapshot)) as predicate:
        return sorted(p for p, v in values.items() if predicate.may_match_partition(ds.spec, v))


def _sort_key(stats: dict[str, ChunkStats], sort_by: tuple[str, ...]) -> tuple[Any, ...]:
    """A segment's least sort-key value, as far as statistics tell (unknown sorts first)."""
    key = []
    for c in sort_by[:1]:  # segments are ordered by their first sort column's minimum
        st = stats.get(c)
        value = None if st is None else st.min
        key.append((value is not None, value if value is not None else 0))
    return tuple(key)


def compact(ds: Dataset, target_rows: int | None = None, partitions: Iterable[str] | None = None,
            now: float | None = None) -> CompactResult:
    """Merge the small segments of each partition (all, or the partition keys ``partitions``)
    into segments of up to ``target_rows`` rows, in one commit (see the module docstring)."""
    from colonnade.table.retention import apply_retention

    started = time.perf_counter()
    retention = apply_retention(ds, now=now)
    snapshot = ds.snapshot()
    target = target_rows or ds.spec.segment_rows
    if target < 1:
        raise ValueError("target rows must be ≥ 1")
    groups = small_segments(snapshot, target, partitions)
    if not groups:
        return CompactResult(ds.name, None, 0, 0, 0, 0, time.perf_counter() - started, target, retention)
    sort_by = ds.spec.sort_by
    if sort_by:
        stats = ds.segment_stats(snapshot, list(groups))
        for segs in groups.values():
            segs.sort(key=lambda s: _sort_key(stats.get(s.segment, {}), sort_by))
    chosen = [s for segs in groups.values() for s in segs]
    removed = tuple(s.segment for s in chosen)
    rows = sum(s.rows for s in chosen)
    commit = Commit.new("compact", info={"target_rows": target, "segments_removed": len(chosen),
                                         "rows": rows})
    spec = ds.spec.with_schema(ds.schema_at(snapshot))
    settings = WriteSettings.from_env(segment_rows=target, compression=spec.compression)
    writer = SegmentWriter(ds.store, spec, commit.id, settings)
    try:
        for batch in _read(ds, replace(snapshot, segments=tuple(chosen))):
            writer.write(batch)
        entries = writer.finish()
    except BaseException:
        writer.abort()
        raise
    done = ds.commit(commit.with_actions(RemoveSegments(removed), AddSegments(tuple(entries))),
                     reads=ds.reads(snapshot, removes=removed))
    return CompactResult(ds.name, done.version, len(chosen), len(entries), rows, len(groups),
                         time.perf_counter() - started, target, retention)


def _read(ds: Dataset, chosen: Snapshot) -> Iterator[pa.RecordBatch]:
    """Every row of ``chosen``'s segments, one batch per segment in their order, in the
    columns of the dataset's schema (dictionary-encoded where every segment is: passed on
    to the writer without decoding)."""
    yield from Scan(ds, snapshot=chosen).to_batches()
