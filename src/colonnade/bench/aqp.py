"""``colonnade bench aqp``: approximate answers from a stratified sample against exact answers,
on the ad impressions of the streaming study (:mod:`colonnade.bench.adimpressions_data`).

One run, in a scratch embedded store (or ``--store``):

1. **Ingest with and without a sample.** The events are appended in commits of
   :data:`COMMIT_EVENTS` to two datasets, one with a sample on ``(geo, publisher)`` (created
   while it is empty: every commit maintains it) and one without, alternately (ABBA: which one
   goes first alternates, so neither always follows the other): the difference is what keeping
   the sample current costs per appended row. This is done ``--ingest-rounds`` times (default
   3), from empty datasets each time, and the median round's share reported: single runs
   spread by several points on a busy machine.
2. **Build.** A second sample of the whole dataset is built from scratch (then dropped).
3. **Seed queries** (the study's Q1–Q3), exactly and ``WITH ERROR 0.1 BEHAVIOR 'do_nothing'``,
   median of ``--repeats``; the exact answers are checked against the ground truth (the events
   regenerated from their seed), the approximate ones are compared with it group by group.
4. **Random queries** (``--queries``, default 500): group columns, filters on sample and other
   columns, and count(*), count(col), sum, avg, each with its bounds at confidence 0.95; the
   share of groups whose true answer lies within the bounds (coverage) per aggregate kind, and
   the stated relative errors against the actual ones. The truth is DuckDB over the generated
   events in memory.

JSON, Markdown and a PNG go to ``--out`` (``aqp-sqlite.*`` or ``aqp-cassandra.*``).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

EVENTS = 30_000_000
COMMIT_EVENTS = 1_048_576
FRACTION = 0.01
MIN_PER_STRATUM = 50
ON = ("geo", "publisher")
QUERIES = 500
ERROR = 0.1
REPEATS = 3
#: Rounds of the ingest comparison (its median is reported).
ROUNDS = 3
SEED = 7
DATASET = "adImpressions"
PLAIN = "adImpressions_plain"
CONFIDENCE = 0.95
KINDS = ("count_star", "count", "sum", "avg")


@dataclass(frozen=True)
class RandomQuery:
    sql: str  # with {table}; the aggregates are named a0, a1, ...
    groups: tuple[str, ...]
    kinds: tuple[str, ...]


def random_queries(n: int, seed: int) -> list[RandomQuery]:
    """``n`` queries: 0-2 group columns (sample columns or not), 0-2 filters, 1-3 aggregates."""
    import numpy as np

    from colonnade.bench.adimpressions_data import GEOS, PUBLISHERS

    rng = np.random.default_rng(seed)
    group_choices = [(), ("geo",), ("publisher",), ("geo", "publisher"), ("website",),
                     ("geo", "website"), ("advertiser",)]
    out = []
    for _ in range(n):
        groups = group_choices[int(rng.integers(len(group_choices)))]
        if "website" in groups or "advertiser" in groups:  # thousands of values: keep a slice
            col = "website" if "website" in groups else "advertiser"
            prefix = "site_" if col == "website" else "adv"
            filters = [f"{col} < '{prefix}{int(rng.integers(2, 9))}'"]
        else:
            filters = []
        for _ in range(int(rng.integers(0, 3))):
            pick = int(rng.integers(4))
            if pick == 0:
                geos = rng.choice(len(GEOS), size=int(rng.integers(1, 8)), replace=False)
                filters.append("geo IN (" + ", ".join(f"'{GEOS[g]}'" for g in geos) + ")")
            elif pick == 1:
                pubs = rng.choice(len(PUBLISHERS), size=int(rng.integers(1, 20)), replace=False)
                filters.append("publisher IN (" + ", ".join(f"'{PUBLISHERS[p]}'" for p in pubs) + ")")
            elif pick == 2:
                filters.append(f"bid {'<' if rng.random() < 0.5 else '>'} {rng.uniform(0.05, 0.95):.2f}")
            else:
                filters.append(f"cookie < 'c{int(rng.integers(1, 9))}'")
        kinds = tuple(sorted(set(rng.choice(KINDS, size=int(rng.integers(1, 4))).tolist()),
                             key=KINDS.index))
        aggs = []
        for i, kind in enumerate(kinds):
            expr = {"count_star": "count(*)", "count": "count(bid)", "sum": "sum(bid)",
                    "avg": "avg(bid)"}[kind]
            aggs.append(f"{expr} AS a{i}, lower_bound(a{i}) AS lo{i}, upper_bound(a{i}) AS hi{i}, "
                        f"relative_error(a{i}) AS re{i}")
        select = ", ".join([*groups, *aggs])
        where = f" WHERE {' AND '.join(filters)}" if filters else ""
        group = f" GROUP BY {', '.join(groups)}" if groups else ""
        out.append(RandomQuery(f"SELECT {select} FROM {{table}}{where}{group}", groups, kinds))
    return out


def _median_time(run: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main(events: int = EVENTS, store: str | None = None, out: Path | None = None,
         fraction: float = FRACTION, queries: int = QUERIES, repeats: int = REPEATS,
         seed: int = SEED, rounds: int = ROUNDS, echo: Callable[[str], None] = print) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="colonnade-bench-aqp-") as tmp:
        uri = store or str(Path(tmp) / "bench.db")
        report = _run(uri, events, fraction, queries, repeats, seed, rounds, echo)
    report["store"] = store or "scratch sqlite"
    if out is not None:
        from colonnade.bench.aqp_report import chart, markdown
        from colonnade.bench.common import write_report

        out.mkdir(parents=True, exist_ok=True)
        kind = "cassandra" if (store or "").startswith("cassandra:") else "sqlite"
        echo(write_report(out / f"aqp-{kind}", report, markdown, chart))
    return report


def _run(uri: str, events: int, fraction: float, queries: int, repeats: int, seed: int,
         rounds: int, echo: Callable[[str], None]) -> dict[str, Any]:
    import duckdb
    import pyarrow as pa

    import colonnade
    from colonnade.bench.adimpressions_data import SCHEMA
    from colonnade.bench.adimpressions_data import events as generate
    from colonnade.bench.adimpressions_refs import QUERIES as SEED_QUERIES

    report: dict[str, Any] = {"events": events, "fraction": fraction, "on": list(ON),
                              "min_per_stratum": MIN_PER_STRATUM, "error": ERROR,
                              "confidence": CONFIDENCE, "repeats": repeats, "seed": seed}
    truth = duckdb.connect()
    with colonnade.connect(uri) as s:
        # 1. ingest with and without the sample, ``rounds`` times from empty datasets (the
        # share moves by a few points between runs on a busy machine: the median is reported)
        echo(f"appending {events:,} ad impressions to {DATASET} (with a sample) and {PLAIN}, "
             f"{rounds} time{'s' if rounds > 1 else ''}")
        measured = [_ingest_round(s, events, fraction, seed, r) for r in range(rounds)]
        # the ground truth: the events made again from their seed, into DuckDB's own storage
        # (not held as Arrow tables in the memory the appends allocate from), after the timed
        # appends (built between them, it made the measured cost of the sample 2-4 points higher)
        for at in range(0, events, COMMIT_EVENTS):
            table = pa.concat_tables(list(generate(seed, at, min(COMMIT_EVENTS, events - at)))).cast(SCHEMA)
            truth.register("generated", table.select(["publisher", "advertiser", "website", "geo", "bid", "cookie"]))
            truth.execute("INSERT INTO events SELECT * FROM generated" if at else
                          "CREATE TABLE events AS SELECT * FROM generated")
            truth.unregister("generated")
        report["ingest"] = _ingest_report(measured, events)
        echo(f"  ingest {report['ingest']['plain_rows_per_s']:,} rows/s without a sample, "
             f"{report['ingest']['sampled_rows_per_s']:,} with: keeping it current takes "
             f"{report['ingest']['cost_share']:.1%} of ingest throughput (median of "
             + ", ".join(f"{r['cost_share']:.1%}" for r in report["ingest"]["rounds"]) + ")")
        [info] = s.samples(DATASET)
        report["sample"] = info.to_dict()
        report["sample"]["share"] = round(info.rows / events, 5)
        # 2. a build from scratch
        start = time.perf_counter()
        rebuilt = s.create_sample(DATASET, list(ON), fraction, name="bench_rebuild",
                                  min_per_stratum=MIN_PER_STRATUM, seed=seed + 1)
        build = time.perf_counter() - start
        s.drop_sample(rebuilt.name)
        report["build"] = {"seconds": round(build, 3), "rows_per_s": round(events / build)}
        echo(f"  sample {info.name}: {info.rows:,} rows ({info.rows / events:.2%}) in "
             f"{info.strata:,} strata; built from scratch in {build:.1f} s")
        report["seed_queries"] = _seed_queries(s, truth, SEED_QUERIES, repeats, echo)
        report["random"] = _random_queries(s, truth, queries, seed, echo)
    return report


def _ingest_round(s: Any, events: int, fraction: float, seed: int, number: int) -> dict[str, Any]:
    """One round of the ingest comparison: both datasets made afresh (the sample listed while
    its dataset is empty), then ``events`` appended to each in commits of
    :data:`COMMIT_EVENTS`, in turn: first one then the other, each first every other commit
    (ABBA; an append runs faster after one that left more memory mapped, so a fixed order would
    credit one side with the other's allocations), the round's first commit alternating too."""
    import pyarrow as pa

    from colonnade.bench.adimpressions_data import SCHEMA
    from colonnade.bench.adimpressions_data import events as generate

    for name in (DATASET, PLAIN):
        if name in s:
            for info in s.samples(name):
                s.drop_sample(info.name)
            s.drop_dataset(name)
    sampled = s.create_dataset(DATASET, SCHEMA)
    plain = s.create_dataset(PLAIN, SCHEMA)
    s.create_sample(DATASET, list(ON), fraction, min_per_stratum=MIN_PER_STRATUM, seed=seed)
    times = {"plain": 0.0, "sampled": 0.0}
    shares: list[float] = []  # of each commit's pair of appends
    done = 0
    while done < events:
        count = min(COMMIT_EVENTS, events - done)
        table = pa.concat_tables(list(generate(seed, done, count))).cast(SCHEMA)
        order = (("plain", plain), ("sampled", sampled))
        took = {}
        for key, ds in order if (done // COMMIT_EVENTS + number) % 2 == 0 else order[::-1]:
            start = time.perf_counter()
            ds.append(table)
            took[key] = time.perf_counter() - start
            times[key] += took[key]
        shares.append(1 - took["plain"] / took["sampled"])
        done += count
    s.drop_dataset(PLAIN)
    return {"plain_seconds": times["plain"], "sampled_seconds": times["sampled"], "shares": shares}


def _ingest_report(rounds: list[dict[str, Any]], events: int) -> dict[str, Any]:
    """The share of ingest throughput keeping the sample current takes: the median of the
    rounds' (each 1 - its time without the sample / its time with it)."""
    plain = sum(r["plain_seconds"] for r in rounds)
    sampled = sum(r["sampled_seconds"] for r in rounds)
    each = [1 - r["plain_seconds"] / r["sampled_seconds"] for r in rounds]
    return {
        "rounds": [{"plain_seconds": round(r["plain_seconds"], 3), "sampled_seconds": round(r["sampled_seconds"], 3),
                    "cost_share": round(share, 4)} for r, share in zip(rounds, each, strict=True)],
        "plain_seconds": round(plain, 3), "sampled_seconds": round(sampled, 3),
        "plain_rows_per_s": round(events * len(rounds) / plain),
        "sampled_rows_per_s": round(events * len(rounds) / sampled),
        "cost_share": round(statistics.median(each), 4),
        # the median of every commit's pair (less swayed by this machine's noise)
        "cost_share_median_commit": round(statistics.median([x for r in rounds for x in r["shares"]]), 4),
        "extra_time": round(sampled / plain - 1, 4),
        "maintenance_us_per_row": round((sampled - plain) / (events * len(rounds)) * 1e6, 3),
        "commit_events": COMMIT_EVENTS}


def _approximate(sql: str, behavior: str = "do_nothing") -> str:
    return f"{sql} WITH ERROR {ERROR} CONFIDENCE {CONFIDENCE} BEHAVIOR '{behavior}'"


def _seed_queries(s: Any, truth: Any, seed_queries: dict[str, str], repeats: int,
                  echo: Callable[[str], None]) -> list[dict[str, Any]]:
    out = []
    for name, sql in seed_queries.items():
        exact_s, exact = _median_time(partial(s.sql, sql), repeats)
        approx_s, approx = _median_time(partial(s.sql, _approximate(sql)), repeats)
        default_s, _ = _median_time(partial(s.sql, _approximate(sql, "run_on_full_table")), 1)
        expected = truth.sql(sql.replace("adImpressions", "events")).to_arrow_table()
        exact_ok = sorted(map(_rounded, exact.to_pylist())) == sorted(map(_rounded, expected.to_pylist()))
        value, key = exact.column_names
        true = {r[key]: r[value] for r in truth.sql(
            sql.replace("adImpressions", "events").split(" ORDER BY")[0]).to_arrow_table().to_pylist()}
        errors = [abs(r[value] - true[r[key]]) / abs(true[r[key]]) for r in approx.to_pylist()
                  if true.get(r[key])]
        row = {"query": name, "sql": sql, "exact_ms": round(exact_s * 1000, 1),
               "approx_ms": round(approx_s * 1000, 1), "speedup": round(exact_s / approx_s, 1),
               "default_behavior_ms": round(default_s * 1000, 1), "exact_correct": exact_ok,
               "groups": approx.num_rows,
               "max_actual_relative_error": round(max(errors), 5) if errors else None,
               "median_actual_relative_error": round(statistics.median(errors), 5) if errors else None}
        out.append(row)
        echo(f"  {name}: exact {row['exact_ms']} ms, WITH ERROR {row['approx_ms']} ms "
             f"({row['speedup']}x); largest actual relative error "
             f"{row['max_actual_relative_error']}; exact answer {'correct' if exact_ok else 'WRONG'}")
    return out


def _rounded(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(round(v, 6) if isinstance(v, float) else v for v in row.values())


def _random_queries(s: Any, truth: Any, n: int, seed: int, echo: Callable[[str], None]) -> dict[str, Any]:
    covered = {k: 0 for k in KINDS}
    groups = {k: 0 for k in KINDS}
    unknown = {k: 0 for k in KINDS}
    exact = {k: 0 for k in KINDS}
    ratios: dict[str, list[float]] = {k: [] for k in KINDS}
    approx_total = exact_total = 0.0
    missing = 0
    for q in random_queries(n, seed):
        start = time.perf_counter()
        got = s.sql(_approximate(q.sql.format(table=DATASET))).to_pylist()
        approx_total += time.perf_counter() - start
        start = time.perf_counter()
        plain = q.sql.format(table="events")
        exact_sql = _without_error_functions(plain, len(q.kinds))
        true_rows = truth.sql(exact_sql).to_arrow_table().to_pylist()
        exact_total += time.perf_counter() - start
        truth_by = {tuple(r[g] for g in q.groups): r for r in true_rows}
        seen = set()
        for r in got:
            key = tuple(r[g] for g in q.groups)
            seen.add(key)
            t = truth_by.get(key)
            for i, kind in enumerate(q.kinds):
                if t is None or t[f"a{i}"] is None or r[f"a{i}"] is None:
                    continue
                if r[f"re{i}"] is None or r[f"lo{i}"] is None or r[f"hi{i}"] is None:
                    unknown[kind] += 1
                    continue
                if r[f"re{i}"] == 0:  # exact: whole strata
                    exact[kind] += 1
                    continue
                groups[kind] += 1
                covered[kind] += r[f"lo{i}"] - 1e-9 <= t[f"a{i}"] <= r[f"hi{i}"] + 1e-9
                if r[f"re{i}"] > 0:
                    actual = abs(r[f"a{i}"] - t[f"a{i}"]) / max(abs(t[f"a{i}"]), 1.0)
                    ratios[kind].append(actual / r[f"re{i}"])
        missing += sum(1 for k in truth_by if k not in seen)
    result: dict[str, Any] = {
        "queries": n, "approx_seconds": round(approx_total, 2), "truth_seconds": round(exact_total, 2),
        "groups_missing_from_sample": missing,
        "kinds": {k: {"groups": groups[k], "covered": covered[k],
                      "coverage": round(covered[k] / groups[k], 4) if groups[k] else None,
                      "error_unknown": unknown[k], "exact": exact[k],
                      "median_actual_over_stated": round(statistics.median(ratios[k]), 3) if ratios[k] else None}
                  for k in KINDS}}
    for k, v in result["kinds"].items():
        echo(f"  {k}: coverage {v['coverage']} over {v['groups']:,} groups (0.95 stated; "
             f"{v['error_unknown']} with too few sample rows to tell); actual/stated relative "
             f"error, median {v['median_actual_over_stated']}")
    return result


def _without_error_functions(sql: str, aggregates: int) -> str:
    import re

    for i in range(aggregates):
        sql = re.sub(rf", lower_bound\(a{i}\) AS lo{i}, upper_bound\(a{i}\) AS hi{i}, "
                     rf"relative_error\(a{i}\) AS re{i}", "", sql)
    return sql
