"""Vacuum: removing the segments (and their chunks) that no kept version names.

A version reads the segments live in it, so the segments every kept version may read are those
live at the oldest kept version (K) plus those added by the kept commits after it. Every other
segment-index row of the dataset is one of:

* **expired**: named by a stored log entry (a commit that added or removed it, a fallback
  checkpoint below K, the list of segments only expired versions read that ``expire`` keeps in
  the checkpoint of K) but live in no kept version — removed by an overwrite, a compaction or a
  delete at a version R ≤ K, so only versions below R, all expired, read it. It goes now.
* **orphan**: named by nothing in the log — written by a writer that crashed or lost, or by one
  still running that has not committed yet — or one whose log entries were all removed (two
  expires without a vacuum between). It goes once it is older than the grace period (default 1 hour), which is what keeps a
  running writer's not yet committed segments.

Safe beside writers and readers: the segment rows are listed *before* the log is read, so a
segment committed meanwhile is either not in the listing or named by the log read after it; a
reader pinned to a kept version reads only segments live at K or added after K. The state at K is
read at the mark the store holds then; if a concurrent ``expire`` raises the mark and removes
commits after it meanwhile, the gap is seen and the log is read again at the new mark. Segment
rows are removed after their chunks, so a vacuum cut short is finished by the next one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from colonnade.errors import CorruptCheckpointError, StoreError, VersionNotFoundError
from colonnade.storage.base import ChunkStore, SegmentRow
from colonnade.table import log
from colonnade.table.writer import segment_stats_from_json, segment_written_at

if TYPE_CHECKING:
    from colonnade.table.dataset import Dataset

#: How often the log is read again when a concurrent expire moved the mark under us.
_ATTEMPTS = 5


@dataclass(frozen=True)
class RemovedSegment:
    segment: str
    partition: str
    rows: int
    bytes: int
    reason: str  # "orphan" | "expired"

    def to_dict(self) -> dict[str, Any]:
        return {"segment": self.segment, "partition": self.partition, "rows": self.rows,
                "bytes": self.bytes, "reason": self.reason}


@dataclass(frozen=True)
class VacuumReport:
    """What ``vacuum`` removed (or, with ``dry_run``, would remove)."""

    dataset: str
    dry_run: bool
    oldest: int  # the oldest kept version the vacuum kept everything for
    removed: tuple[RemovedSegment, ...]

    @property
    def segments(self) -> int:
        return len(self.removed)

    @property
    def orphans(self) -> int:
        return sum(r.reason == "orphan" for r in self.removed)

    @property
    def expired(self) -> int:
        return sum(r.reason == "expired" for r in self.removed)

    @property
    def partitions(self) -> int:
        return len({r.partition for r in self.removed})

    @property
    def rows(self) -> int:
        return sum(r.rows for r in self.removed)

    @property
    def bytes(self) -> int:
        return sum(r.bytes for r in self.removed)

    def to_dict(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "dry_run": self.dry_run, "oldest_kept_version": self.oldest,
                "segments": self.segments, "orphans": self.orphans, "expired": self.expired,
                "partitions": self.partitions, "rows": self.rows, "bytes": self.bytes,
                "removed": [r.to_dict() for r in self.removed]}


def vacuum_segments(ds: Dataset, grace_seconds: float = 3600.0, dry_run: bool = False,
                    now: float | None = None) -> VacuumReport:
    """Remove (or with ``dry_run`` only list) the segments of ``ds`` no kept version names."""
    store, name = ds.store, ds.name
    rows = store.get_segments(name)  # 1. list first, 2. then read the log
    oldest, needed, named = _kept_segments(store, name)
    now = time.time() if now is None else now
    removed: list[tuple[SegmentRow, RemovedSegment]] = []
    for row in rows:
        if row.segment in needed:
            continue
        if row.segment in named:
            reason = "expired"
        elif now - segment_written_at(row.stats) >= grace_seconds:
            reason = "orphan"
        else:
            continue  # perhaps a running writer's, about to be committed
        nbytes = sum(s.nbytes for s in segment_stats_from_json(row.stats).values())
        removed.append((row, RemovedSegment(row.segment, row.partition, row.rows, nbytes, reason)))
    if removed and not dry_run:
        columns = set(ds.spec.schema.names)
        for row, _ in removed:
            columns.update(segment_stats_from_json(row.stats))
        store.delete_segments(name, [row for row, _ in removed], sorted(columns))
    return VacuumReport(name, dry_run, oldest, tuple(r for _, r in removed))


def _kept_segments(store: ChunkStore, name: str) -> tuple[int, set[str], set[str]]:
    """(the oldest kept version, segments some kept version reads, segments the stored log
    names at all)."""
    for _ in range(_ATTEMPTS):
        oldest = store.oldest_version(name)
        try:
            state = log.load_snapshot(store, name, oldest)
        except VersionNotFoundError:
            continue  # the mark rose meanwhile
        stored = log.history(store, name)  # every stored commit, the fallback's below K too
        newer = [c for c in stored if c.version > state.version]
        if newer and newer[0].version != state.version + 1:
            continue  # commits after our K were expired meanwhile: read again at the new mark
        needed = {s.segment for s in state.segments}
        named = set(needed)
        for c in stored:
            named.update(s.segment for s in c.added)
            named.update(c.removed)
        for c in newer:
            needed.update(s.segment for s in c.added)
        for version in store.list_checkpoints(name):
            if version > oldest:
                continue
            data = store.get_checkpoint(name, version)
            try:  # what a fallback names, and what expire listed, was committed
                if data is not None:
                    named.update(log.checkpoint_expired(name, version, data))
                    if version < oldest:
                        named.update(s.segment for s in log.decode_checkpoint(name, version, data).segments)
            except CorruptCheckpointError:
                pass  # damaged: its segments wait for the grace period
        return oldest, needed, named
    raise StoreError(f"dataset {name!r}: the oldest kept version kept moving while vacuum read the "
                     f"log ({_ATTEMPTS} times); nothing was removed, run it again")
