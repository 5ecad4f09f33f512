"""``colonnade bench log``: what a long commit log costs a reader and a writer.

Three datasets in one store, all written with one-row appends (a stream committing every second
makes 20,000 commits in under six hours):

* **short**: ``--small`` commits (default 20), the reference;
* **long**: ``--commits`` commits (default 20,000) and as many live segments, nothing compacted;
* **stream**: the same number of commits with a compaction every ``--compact-every`` commits
  (default 1,000), as a stream keeps its table: the log is as long, the live segments few; its
  commits carry no source identity (a stream's offsets are one marker per topic partition,
  overwritten by each commit), while the short and long logs record one per commit, as file
  ingests do.

For each, median of ``--repeats`` runs, each from a freshly opened store (nothing cached):

* **open**: the live state of the latest version (newest checkpoint + the commits after it);
* **open + plan**: that, plus planning a scan whose filter prunes every segment by its min/max
  (the statistics come from the log);
* **sql**: a fresh ``Store`` answering ``SELECT count(*) ... WHERE id < 0``;
* **source lookup**: finding whether a source identity was ingested (an ingest's first step);
* **replay (reference)**: the same state computed from the whole log, as without checkpoints.

The long log's cost grows with its live segments, the stream's should not grow with its length.
Appends are timed too: commits per second over the first and the last 100 commits of the long
log. Ratios over the short log are within one run. JSON and Markdown go to ``--out``
(``log-<store kind>.json`` / ``.md``).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SMALL = 20
COMMITS = 20_000
COMPACT_EVERY = 1_000
REPEATS = 5


def _median_time(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _fill(store: Any, name: str, commits: int, echo: Callable[[str], None],
          compact_every: int | None = None) -> dict[str, float]:
    import pyarrow as pa

    ds = store.create_dataset(name, pa.schema([("id", pa.int64()), ("v", pa.float64())]))
    marks: dict[int, float] = {}
    start = time.perf_counter()
    for i in range(commits):
        # a file ingest records its source identity; a stream records its offsets under one
        # app id per topic partition, which keeps no per-commit state
        source = None if compact_every else f"bench-log:{name}:{i}"
        ds.append(pa.table({"id": [i], "v": [i * 0.5]}), source=source)
        if compact_every and (i + 1) % compact_every == 0:
            ds.compact()
        marks[i + 1] = time.perf_counter() - start
        if (i + 1) % 1000 == 0:
            echo(f"  {name}: {i + 1:,} commits, {(i + 1) / marks[i + 1]:,.0f} commits/s")
    first = min(100, commits)
    last_span = marks[commits] - marks.get(commits - first, 0.0)
    return {"first_commits_per_s": first / marks[first] if marks[first] else 0.0,
            "last_commits_per_s": first / last_span if last_span else 0.0,
            "seconds": marks[commits]}


def _measure(uri: str, name: str, repeats: int) -> dict[str, float]:
    import pyarrow.compute as pc

    import colonnade
    from colonnade.table.commits import Snapshot

    def fresh(fn: Callable[[Any], Any]) -> Callable[[], Any]:
        def run() -> Any:
            with colonnade.connect(uri) as store:
                return fn(store)
        return run

    out = {
        "open_s": _median_time(fresh(lambda s: s.dataset(name).snapshot()), repeats),
        "open_plan_s": _median_time(fresh(lambda s: s.dataset(name).scan(filter=pc.field("id") < 0).plan()),
                                    repeats),
        "sql_s": _median_time(fresh(lambda s: s.sql(f"SELECT count(*) FROM {name} WHERE id < 0")), repeats),
        "source_lookup_s": _median_time(fresh(lambda s: s.dataset(name).find_source("bench-log:none")),
                                        repeats),
        "replay_s": _median_time(fresh(lambda s: Snapshot.replay(name, s.dataset(name).history())), repeats),
    }
    with colonnade.connect(uri) as store:
        ds = store.dataset(name)
        out["version"] = ds.version
        out["segments"] = len(ds.snapshot().segments)
        out["checkpoints"] = len(store.chunk_store.list_checkpoints(name))
    return out


def main(commits: int = COMMITS, small: int = SMALL, store: str | None = None, out: Path | str | None = None,
         repeats: int = REPEATS, compact_every: int = COMPACT_EVERY,
         echo: Callable[[str], None] = print) -> dict[str, Any]:
    import colonnade
    from colonnade.config import parse_store_uri
    from colonnade.table.log import checkpoint_interval

    directory = Path(out or "bench-results")
    directory.mkdir(parents=True, exist_ok=True)
    uri = store or f"sqlite:///{directory / 'bench-log.db'}"
    names = {"short": f"log_{small}", "long": f"log_{commits}", "stream": f"log_{commits}_compacted"}
    sizes = {"short": (small, None), "long": (commits, None), "stream": (commits, compact_every)}
    with colonnade.connect(uri) as st:
        for name in names.values():
            if name in st:
                st.drop_dataset(name)
        echo(f"writing {small:,} and twice {commits:,} one-row commits (the second compacted every "
             f"{compact_every:,}) into {st.uri}")
        fills = {key: _fill(st, name, sizes[key][0], echo, compact_every=sizes[key][1])
                 for key, name in names.items()}
    results = {key: {**_measure(uri, name, repeats), **fills[key]} for key, name in names.items()}
    keys = ("open_s", "open_plan_s", "sql_s", "source_lookup_s", "replay_s")
    ratios = {key: {k: results[key][k] / results["short"][k] if results["short"][k] else None for k in keys}
              for key in ("long", "stream")}
    kind = uri.split("://", 1)[0] if "://" in uri else "sqlite"
    report = {"store": str(parse_store_uri(uri).display), "commits": commits, "compact_every": compact_every,
              "small": small, "repeats": repeats, "checkpoint_interval": checkpoint_interval(),
              "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                          "platform": platform.platform()},
              "results": results, "ratios_over_short": ratios}
    (directory / f"log-{kind}.json").write_text(json.dumps(report, indent=2))
    lines = [f"# Commit log: {small:,} vs {commits:,} one-row commits ({kind})",
             "", f"Store `{report['store']}`, checkpoint every {report['checkpoint_interval']} commits, "
             f"median of {repeats}, fresh store per run. *stream*: the same {commits:,} commits with a "
             f"compaction every {compact_every:,} (the log is as long, the live segments few).", "",
             f"| measure | {small:,} commits | {commits:,} commits | ratio | stream: {commits:,} commits "
             "| ratio |", "|---|---|---|---|---|---|"]
    for k in keys:
        cells = [f"{results[key][k] * 1000:.1f} ms" for key in ("short", "long", "stream")]
        r = [ratios[key][k] for key in ("long", "stream")]
        lines.append(f"| {k[:-2].replace('_', ' ')} | {cells[0]} | {cells[1]} | "
                     f"{'' if r[0] is None else f'{r[0]:.2f}x'} | {cells[2]} | {'' if r[1] is None else f'{r[1]:.2f}x'} |")
    lines.append(f"| live segments | {results['short']['segments']:,} | {results['long']['segments']:,} | | "
                 f"{results['stream']['segments']:,} | |")
    lines += ["", f"Appends on the long log: {results['long']['first_commits_per_s']:,.0f} commits/s over "
              f"the first 100, {results['long']['last_commits_per_s']:,.0f} over the last 100; "
              f"the stream's: {results['stream']['first_commits_per_s']:,.0f} and "
              f"{results['stream']['last_commits_per_s']:,.0f} (compactions included); "
              f"{results['long']['checkpoints']} checkpoints."]
    (directory / f"log-{kind}.md").write_text("\n".join(lines) + "\n")
    echo("\n".join(lines))
    return report
