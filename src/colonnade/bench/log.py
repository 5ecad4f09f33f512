"""``colonnade bench log``: what a long commit log costs a reader and a writer.

Two datasets in one store: one with ``--small`` one-row commits (default 20), one with
``--commits`` (default 20,000), as a stream committing every second makes in under six hours.
For each, median of ``--repeats`` runs, each from a freshly opened store (nothing cached):

* **open**: the live state of the latest version (newest checkpoint + the commits after it);
* **open + plan**: that, plus planning a scan whose filter prunes every segment by its min/max
  (the planner reads the segment index of the live segments);
* **sql**: a fresh ``Store`` answering ``SELECT count(*) ... WHERE id < 0``;
* **source lookup**: finding whether a source identity was ingested (an ingest's first step);
* **replay (reference)**: the same state computed from the whole log, as without checkpoints.

Appends are timed too: commits per second over the first and the last 100 commits of the long
log. Ratios long/short are within one run. JSON and Markdown go to ``--out``.
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
REPEATS = 5


def _median_time(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _fill(store: Any, name: str, commits: int, echo: Callable[[str], None]) -> dict[str, float]:
    import pyarrow as pa

    ds = store.create_dataset(name, pa.schema([("id", pa.int64()), ("v", pa.float64())]))
    marks: dict[int, float] = {}
    start = time.perf_counter()
    for i in range(commits):
        ds.append(pa.table({"id": [i], "v": [i * 0.5]}), source=f"bench-log:{name}:{i}")
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
         repeats: int = REPEATS, echo: Callable[[str], None] = print) -> dict[str, Any]:
    import colonnade
    from colonnade.config import parse_store_uri
    from colonnade.table.log import checkpoint_interval

    directory = Path(out or "bench-results")
    directory.mkdir(parents=True, exist_ok=True)
    uri = store or f"sqlite:///{directory / 'bench-log.db'}"
    names = {"short": f"log_{small}", "long": f"log_{commits}"}
    with colonnade.connect(uri) as st:
        for name in names.values():
            if name in st:
                st.drop_dataset(name)
        echo(f"writing {small:,} and {commits:,} one-row commits into {st.uri}")
        fills = {key: _fill(st, name, n, echo)
                 for (key, name), n in zip(names.items(), (small, commits), strict=True)}
    results = {key: {**_measure(uri, name, repeats), **fills[key]} for key, name in names.items()}
    keys = ("open_s", "open_plan_s", "sql_s", "source_lookup_s", "replay_s")
    ratios = {k: results["long"][k] / results["short"][k] if results["short"][k] else None for k in keys}
    report = {"store": str(parse_store_uri(uri).display), "commits": commits,
              "small": small, "repeats": repeats, "checkpoint_interval": checkpoint_interval(),
              "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                          "platform": platform.platform()},
              "results": results, "ratios_long_over_short": ratios}
    (directory / "log.json").write_text(json.dumps(report, indent=2))
    lines = [f"# Commit log: {small:,} vs {commits:,} one-row commits",
             "", f"Store `{report['store']}`, checkpoint every {report['checkpoint_interval']} commits, "
             f"median of {repeats}, fresh store per run.", "",
             f"| measure | {small:,} commits | {commits:,} commits | ratio |", "|---|---|---|---|"]
    for k in keys:
        ratio = ratios[k]
        lines.append(f"| {k[:-2].replace('_', ' ')} | {results['short'][k] * 1000:.1f} ms | "
                     f"{results['long'][k] * 1000:.1f} ms | {'' if ratio is None else f'{ratio:.2f}x'} |")
    lines += ["", f"Appends on the long log: {results['long']['first_commits_per_s']:,.0f} commits/s over "
              f"the first 100, {results['long']['last_commits_per_s']:,.0f} over the last 100; "
              f"{results['long']['segments']:,} live segments, {results['long']['checkpoints']} checkpoints."]
    (directory / "log.md").write_text("\n".join(lines) + "\n")
    echo("\n".join(lines))
    return report
