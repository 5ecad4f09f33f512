"""Checking a dataset's stored chunks: every chunk of every live segment is read, its checksum
and row count checked (``colonnade verify``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from colonnade.encoding.chunk import ChunkFormatError, decode_chunk
from colonnade.errors import CorruptChunkError
from colonnade.storage.base import ChunkRef
from colonnade.table.writer import segment_stats_from_json

if TYPE_CHECKING:
    from colonnade.table.dataset import Dataset


def verify_chunks(ds: Dataset, version: int | None = None) -> tuple[int, list[CorruptChunkError]]:
    """Check every chunk of every live segment; returns (chunks checked, problems)."""
    snapshot = ds.snapshot(version)
    problems: list[CorruptChunkError] = []
    checked = 0
    partitions = sorted({s.partition for s in snapshot.segments})
    rows = {r.segment: r for r in ds.store.get_segments(ds.name, partitions)} if partitions else {}
    for seg in snapshot.segments:
        row = rows.get(seg.segment)
        if row is None:
            problems.append(CorruptChunkError(ds.name, "*", seg.segment, "segment index row is missing"))
            continue
        stats = segment_stats_from_json(row.stats)
        refs = [ChunkRef(seg.partition, c, seg.segment, seg.bucket) for c in stats]
        seen = set()
        for ref, data in ds.store.get_chunks(ds.name, refs):
            seen.add(ref.column)
            checked += 1
            try:
                if not data:
                    raise ChunkFormatError("chunk is missing from the store")
                array = decode_chunk(data)
                if len(array) != stats[ref.column].rows:
                    raise ChunkFormatError(f"{len(array)} rows, the index says {stats[ref.column].rows}")
            except ChunkFormatError as exc:
                problems.append(CorruptChunkError(ds.name, ref.column, ref.segment, str(exc)))
        for c in stats:
            if c not in seen:
                problems.append(CorruptChunkError(ds.name, c, seg.segment, "chunk is missing from the store"))
    return checked, problems
