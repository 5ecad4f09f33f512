"""Deleting the rows a SQL predicate is TRUE for, in one commit (copy-on-write).

Per partition and segment, from the cheapest evidence up (see :mod:`colonnade.table.predicate`):

1. a partition whose values cannot match is not touched, nor are its segments' statistics read;
2. a partition all of whose rows match (a predicate aligned with the partition transforms) has
   its segments removed without reading anything more;
3. a segment whose min/max and null counts rule the predicate out is not touched; one whose
   statistics prove every row matches is removed without reading its chunks;
4. every other segment is read and evaluated by DuckDB: untouched if no row matches, removed if
   all do, else removed and its remaining rows written as new segments.

The commit (operation ``delete``: remove the segments of 2-4, add the rewritten ones) declares
the partitions it read (1's survivors): an append to one of them, or a removal of one of the
same segments, committed meanwhile makes it fail with CommitConflictError. Readers pinned to an
earlier version still read the deleted rows (``vacuum`` removes only segments no commit names).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from colonnade.config import WriteSettings
from colonnade.errors import CorruptChunkError
from colonnade.table.commits import AddSegments, Commit, RemoveSegments, SegmentEntry
from colonnade.table.predicate import Predicate
from colonnade.table.scan import Scan
from colonnade.table.writer import SegmentWriter

if TYPE_CHECKING:
    from colonnade.table.dataset import Dataset


@dataclass(frozen=True)
class DeleteResult:
    """What a delete did; ``version`` is None when no row matched (nothing committed)."""

    dataset: str
    where: str
    version: int | None
    rows_deleted: int
    segments_removed: int  # removed whole, without rewriting
    segments_rewritten: int  # removed and written again without the deleted rows
    segments_written: int
    segments_read: int  # whose chunks were read to evaluate the predicate
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "where": self.where, "version": self.version,
                "rows_deleted": self.rows_deleted, "segments_removed": self.segments_removed,
                "segments_rewritten": self.segments_rewritten, "segments_written": self.segments_written,
                "segments_read": self.segments_read, "seconds": round(self.seconds, 3)}


def delete(ds: Dataset, where: str, info: dict[str, Any] | None = None) -> DeleteResult:
    """Delete the rows of ``ds`` for which the SQL predicate ``where`` is TRUE (see the module
    docstring); PredicateError, with nothing changed, if it does not parse or names a column
    the dataset lacks."""
    started = time.perf_counter()
    snapshot = ds.snapshot()
    schema = ds.schema_at(snapshot)
    spec = ds.spec.with_schema(schema)
    with Predicate(ds.name, where, schema) as predicate:
        by_partition: dict[str, list[SegmentEntry]] = {}
        for s in snapshot.segments:
            by_partition.setdefault(s.partition, []).append(s)
        read: set[str] = set()
        whole: list[SegmentEntry] = []
        candidates: list[SegmentEntry] = []
        for partition, segments in by_partition.items():
            values = segments[0].values
            if not predicate.may_match_partition(spec, values):
                continue  # 1.
            read.add(partition)
            (whole if predicate.all_match_partition(spec, values) else candidates).extend(segments)  # 2.
        stats = ds.segment_stats(snapshot, sorted({s.partition for s in candidates})) if candidates else {}
        to_read: list[SegmentEntry] = []
        for s in candidates:  # 3.
            st = stats.get(s.segment)
            if st is None:
                raise CorruptChunkError(ds.name, "*", s.segment, "segment index row is missing")
            if not predicate.may_match_segment(st, s.rows):
                continue
            (whole if predicate.all_match_segment(st, s.rows) else to_read).append(s)
        commit = Commit.new("delete", info={"where": where, **(info or {})})
        removed = [s.segment for s in whole]
        deleted = sum(s.rows for s in whole)
        rewritten = 0
        settings = WriteSettings.from_env(segment_rows=spec.segment_rows, compression=spec.compression)
        writer = SegmentWriter(ds.store, spec, commit.id, settings)
        try:
            batches = Scan(ds, snapshot=replace(snapshot, segments=tuple(to_read))).to_batches()
            for segment, batch in zip(to_read, batches, strict=True):  # 4. one batch per segment
                if batch.num_rows != segment.rows:
                    raise CorruptChunkError(ds.name, "*", segment.segment,
                                            f"{batch.num_rows} rows read, the log says {segment.rows}")
                matched = predicate.matches(pa.Table.from_batches([batch]))
                hits = int(matched.sum())
                if hits == 0:
                    continue
                removed.append(segment.segment)
                deleted += hits
                if hits < segment.rows:
                    writer.write(batch.filter(pa.array(~matched)))
                    rewritten += 1
            entries = writer.finish()
        except BaseException:
            writer.abort()
            raise
    whole_count = len(removed) - rewritten
    if not removed:
        return DeleteResult(ds.name, where, None, 0, 0, 0, 0, len(to_read), time.perf_counter() - started)
    actions: list[Any] = [RemoveSegments(tuple(removed))]
    if entries:
        actions.append(AddSegments(tuple(entries)))
    done = ds.commit(commit.with_actions(*actions),
                     reads=ds.reads(snapshot, removes=removed, partitions=read))
    return DeleteResult(ds.name, where, done.version, deleted, whole_count, rewritten, len(entries),
                        len(to_read), time.perf_counter() - started)
