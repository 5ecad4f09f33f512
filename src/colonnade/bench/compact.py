"""``colonnade bench compact``: is compaction cheap enough to run beside a stream?

One run, in a scratch embedded store (or ``--store``): GDELT-shaped rows
(:mod:`colonnade.bench.gdelt_data`, 57 columns) are generated in memory once, then per repeat

* **ingest (reference)**: the rows appended in one commit to a fresh dataset with full segments
  (``--full-rows``, default 65,536) — the store's own ingest rate of these rows;
* **compact**: the same rows appended as ``--segments`` commits of ``--segment-rows`` rows each
  (a stream's small segments; not timed), then ``compact()`` timed: reading them and writing
  full segments in one commit.

Both as rows/s, the median of ``--repeats``; the ratio compact/ingest is the figure of merit
(target ≥ 0.5x). JSON goes to ``--out``.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SEGMENTS = 1000
SEGMENT_ROWS = 4000
FULL_ROWS = 65_536
REPEATS = 3


def main(segments: int = SEGMENTS, segment_rows: int = SEGMENT_ROWS, full_rows: int = FULL_ROWS,
         repeats: int = REPEATS, store: str | None = None, out: Path | None = None,
         echo: Callable[[str], None] = print) -> dict[str, Any]:
    import pyarrow as pa

    import colonnade
    from colonnade.bench.gdelt_data import iter_batches

    rows = segments * segment_rows
    echo(f"generating {rows:,} GDELT-shaped rows ({segments:,} × {segment_rows:,})")
    batches = list(iter_batches(rows, batch_rows=segment_rows))
    schema = batches[0].schema
    ingest_s: list[float] = []
    compact_s: list[float] = []
    last: Any = None
    with tempfile.TemporaryDirectory(prefix="colonnade-bench-compact-") as tmp:
        uri = store or str(Path(tmp) / "bench.db")
        with colonnade.connect(uri) as s:
            for run in range(repeats):
                for name in (f"bench_ingest_{run}", f"bench_small_{run}"):
                    if name in s:
                        s.drop_dataset(name)
                reference = s.create_dataset(f"bench_ingest_{run}", schema, segment_rows=full_rows)
                start = time.perf_counter()
                reference.append(pa.Table.from_batches(batches))
                ingest_s.append(time.perf_counter() - start)
                small = s.create_dataset(f"bench_small_{run}", schema, segment_rows=full_rows)
                for batch in batches:
                    small.append(batch)
                start = time.perf_counter()
                last = small.compact()
                compact_s.append(time.perf_counter() - start)
                echo(f"  run {run + 1}: ingest {rows / ingest_s[-1]:,.0f} rows/s, "
                     f"compact {rows / compact_s[-1]:,.0f} rows/s")
                s.drop_dataset(f"bench_ingest_{run}")
                s.drop_dataset(f"bench_small_{run}")
    ingest_rps = rows / statistics.median(ingest_s)
    compact_rps = rows / statistics.median(compact_s)
    result = {"rows": rows, "segments_before": last.segments_before, "segments_after": last.segments_after,
              "segment_rows": segment_rows, "full_rows": full_rows, "repeats": repeats,
              "ingest_rows_per_s": round(ingest_rps), "compact_rows_per_s": round(compact_rps),
              "ratio": round(compact_rps / ingest_rps, 3), "compact_seconds": round(statistics.median(compact_s), 3),
              "ingest_seconds": round(statistics.median(ingest_s), 3), "store": store or "scratch sqlite"}
    echo(f"compact: {last.segments_before:,} segments → {last.segments_after:,}, {rows:,} rows, "
         f"{statistics.median(compact_s):.2f} s; {compact_rps:,.0f} rows/s vs ingest {ingest_rps:,.0f} "
         f"rows/s: {compact_rps / ingest_rps:.2f}x (median of {repeats})")
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "compact.json").write_text(json.dumps(result, indent=2) + "\n")
    return result
