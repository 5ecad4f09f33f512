"""What ``colonnade describe`` shows of a dataset: size, layout, bytes per column and
partition, and its newest commits."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from colonnade.schema.types import type_name

if TYPE_CHECKING:
    from colonnade.table.dataset import Dataset


def describe(ds: Dataset, versions: int | None = 20) -> dict[str, Any]:
    """Size, layout, bytes per column and partition, and the newest ``versions`` commits
    (all with None; a stream makes tens of thousands: the SQL table ``"name$commits"``
    lists them all)."""
    snapshot = ds.snapshot()
    partitions = sorted({s.partition for s in snapshot.segments})
    stats = ds.segment_stats(snapshot)
    col_bytes: dict[str, int] = dict.fromkeys(ds.schema.names, 0)
    part_bytes: dict[str, int] = {}
    for seg in snapshot.segments:
        for c, st in stats.get(seg.segment, {}).items():
            col_bytes[c] = col_bytes.get(c, 0) + st.nbytes
            part_bytes[seg.partition] = part_bytes.get(seg.partition, 0) + st.nbytes
    oldest = max(ds.store.oldest_version(ds.name), 1) if snapshot.version else 0
    after = 0 if versions is None else max(0, snapshot.version - versions)
    return {
        "name": ds.name,
        "store": ds.store.uri,
        "rows": snapshot.rows,
        "segments": len(snapshot.segments),
        "partitions": len(partitions),
        "bytes": sum(col_bytes.values()),
        "version": snapshot.version,
        "partition_by": [str(t) for t in ds.spec.partition_by],
        "sort_by": list(ds.spec.sort_by),
        "segment_rows": ds.spec.segment_rows,
        "columns": [{"name": f.name, "type": type_name(f.type), "bytes": col_bytes.get(f.name, 0)}
                    for f in ds.schema],
        "partition_bytes": part_bytes,
        "versions": [{"version": c.version, "kind": c.kind, "at": c.at, "rows_added": c.rows_added,
                      "segments_added": len(c.added), "segments_removed": len(c.removed),
                      "source": c.source} for c in ds.history(after=after, upto=snapshot.version)],
        "versions_kept": snapshot.version - oldest + 1 if snapshot.version else 0,
    }
