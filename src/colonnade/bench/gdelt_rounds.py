"""The GDELT study's reads and queries timed round by round across layouts.

Each layout's own phase of ``colonnade bench gdelt`` times its reads minutes apart from the
others', and this machine's speed drifts by more than the differences measured between phases
(the embedded store's read-every-column rate moved 1.5x between two runs of one day). Here,
after every phase, each round runs every layout's read of every column and then each query
once, one layout after another, starting with the next layout each round; a layout's figure is
its median over the rounds. Ratios within a round compare layouts measured seconds apart.

Each call's system CPU time and minor page faults are kept beside its time. A read of every
column builds about 1.5 GB of buffers: on this machine, a process reading the embedded store
again and again faulted in about 1 GB for each of its first three reads (230-260 thousand
faults, 0.3-0.5 s of system time; 0.52-0.57 s a read) and a few thousand pages for later ones
(0.05-0.1 s; 0.34-0.36 s a read). In the rounds, where the other layouts' reads come between
two reads of one, every read faulted in 110-320 thousand pages, and the slowest rounds were
those with the most system time.
"""

from __future__ import annotations

import resource
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from colonnade.bench.gdelt import QUERIES, BenchError, answers_agree, normalise

#: Rounds by default: each layout's reads and queries once a round.
ROUNDS = 7
READ_ALL = "read_all"


def _colonnade(uri: str) -> tuple[dict[str, Callable[[], pa.Table]], Callable[[], None]]:
    import colonnade

    store = colonnade.connect(uri)
    ds = store.dataset("gdelt")
    runs: dict[str, Callable[[], pa.Table]] = {READ_ALL: lambda: ds.scan().to_arrow()}
    for q, sql in QUERIES.items():
        runs[q] = lambda sql=sql: store.sql(sql)  # type: ignore[misc]
    return runs, store.close


def _reference(parquet: Path) -> tuple[dict[str, Callable[[], pa.Table]], Callable[[], None]]:
    con = duckdb.connect()
    con.execute(f"CREATE VIEW gdelt AS SELECT * FROM read_parquet('{parquet}')")
    runs: dict[str, Callable[[], pa.Table]] = {READ_ALL: lambda: con.sql("SELECT * FROM gdelt").to_arrow_table()}
    for q, sql in QUERIES.items():
        runs[q] = lambda sql=sql: con.sql(sql).to_arrow_table()  # type: ignore[misc]
    return runs, con.close


def alternate(stores: dict[str, str], parquet: Path | None, rows: int, rounds: int = ROUNDS,
              reference: str = "duckdb+parquet (reference)") -> dict[str, Any]:
    """Every layout's read of every column and Q1-Q3, round by round: ``stores`` maps a layout's
    name to its store's URI (each holding dataset ``gdelt`` of ``rows`` rows), ``parquet`` the
    reference's file. One untimed round first; BenchError when a layout reads other than
    ``rows`` rows or answers a query otherwise than the first layout."""
    opened = {name: _colonnade(uri) for name, uri in stores.items()}
    if parquet is not None:
        opened[reference] = _reference(parquet)
    names = list(opened)
    times: dict[str, dict[str, list[float]]] = {n: {k: [] for k in (READ_ALL, *QUERIES)} for n in names}
    # per timed call: the process's system CPU seconds and minor page faults
    system: dict[str, dict[str, dict[str, list[Any]]]] = {
        n: {k: {"system_s": [], "minor_faults": []} for k in times[n]} for n in names}
    answers: dict[str, dict[str, Any]] = {n: {} for n in names}
    try:
        for round_ in range(rounds + 1):
            order = names[round_ % len(names):] + names[:round_ % len(names)]
            for what in (READ_ALL, *QUERIES):
                for name in order:
                    result = None
                    before = resource.getrusage(resource.RUSAGE_SELF)
                    start = time.perf_counter()
                    result = opened[name][0][what]()
                    elapsed = time.perf_counter() - start
                    after = resource.getrusage(resource.RUSAGE_SELF)
                    if what == READ_ALL and result.num_rows != rows:
                        raise BenchError(f"{name}: read {result.num_rows} rows, expected {rows}")
                    if what != READ_ALL:
                        answers[name][what] = normalise(result)
                    if round_:  # the first round is untimed
                        times[name][what].append(elapsed)
                        system[name][what]["system_s"].append(after.ru_stime - before.ru_stime)
                        system[name][what]["minor_faults"].append(after.ru_minflt - before.ru_minflt)
    finally:
        for _, close in opened.values():
            close()
    first = names[0]
    for name in names[1:]:
        for q in QUERIES:
            if not answers_agree(answers[first][q], answers[name][q], rel=1e-6):
                raise BenchError(f"{name} answers {q} differently from {first} (rounds)")
    medians = {n: {k: statistics.median(v) for k, v in t.items()} for n, t in times.items()}
    out: dict[str, Any] = {"rounds": rounds, "order": names, "seconds": medians,
                           "spread": {n: {k: [min(v), max(v)] for k, v in t.items()} for n, t in times.items()}}
    out["system"] = system
    out["slowest_read_all"] = {n: _slowest(times[n][READ_ALL], system[n][READ_ALL]) for n in names}
    ratios: dict[str, dict[str, float]] = {}
    embedded = next((n for n in names if "embedded" in n), None)
    for name in names:
        r: dict[str, float] = {}
        if reference in medians and name != reference:
            r.update({q: medians[name][q] / medians[reference][q] for q in QUERIES})
            r["read_all_vs_reference"] = medians[reference][READ_ALL] / medians[name][READ_ALL]
        if embedded is not None and name not in (embedded, reference):
            r["read_all_vs_embedded"] = medians[embedded][READ_ALL] / medians[name][READ_ALL]
        if r:
            ratios[name] = r
    out["ratios"] = ratios
    return out


def _slowest(seconds: list[float], system: dict[str, list[Any]]) -> dict[str, float]:
    """The slowest of a layout's timed reads against its median one (of an even count, the
    upper of the middle two): seconds, system CPU seconds and minor page faults of each."""
    order = sorted(range(len(seconds)), key=seconds.__getitem__)
    slow, mid = order[-1], order[len(order) // 2]
    cpu, faults = system["system_s"], system["minor_faults"]
    return {"seconds": seconds[slow], "system_s": cpu[slow], "minor_faults": faults[slow],
            "median_seconds": seconds[mid], "median_system_s": cpu[mid], "median_minor_faults": faults[mid]}


def markdown(report: dict[str, Any], rows: int) -> str:
    """The rounds as a table, and their ratios."""
    rounds = report["rounds"]
    lines = [f"Round by round (median of {rounds} rounds after an untimed one; each round runs every "
             "layout's read of every column, then each query, one layout after another, starting "
             "with the next layout each round):", "",
             "| layout | read every column | Q1 | Q2 | Q3 | read all vs embedded | Q1 | Q2 | Q3 (vs reference) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name in report["order"]:
        s = report["seconds"][name]
        r = report["ratios"].get(name, {})

        def ratio(key: str, r: dict[str, float] = r) -> str:
            return f"{r[key]:.2f}x" if key in r else "-"

        lines.append(f"| {name} | {rows / s[READ_ALL] / 1e6:,.1f}M rec/s | "
                     + " | ".join(f"{s[q] * 1000:,.1f} ms" for q in QUERIES)
                     + f" | {ratio('read_all_vs_embedded')} | " + " | ".join(ratio(q) for q in QUERIES) + " |")
    slowest = report.get("slowest_read_all")
    if slowest:
        lines += ["", "The slowest read of every column of each layout against its median round "
                  "(this process's system CPU time and minor page faults during the read):", ""]
        lines += [f"- {name}: {v['seconds']:.2f} s, {v['system_s']:.2f} s system, {v['minor_faults']:,} faults; "
                  f"median round {v['median_seconds']:.2f} s, {v['median_system_s']:.2f} s system, "
                  f"{v['median_minor_faults']:,} faults" for name, v in slowest.items()]
    return "\n".join(lines)
