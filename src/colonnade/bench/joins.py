"""``colonnade bench joins``: joins, self-joins and concurrent scans, against DuckDB over Parquet.

On the GDELT-shaped rows of the layout study (dataset ``gdelt``, partitioned by ``MonthYear``)
and a dimension table of its actors (``actors``: one row per distinct actor name, with a kind
and a region derived from the name), it runs in one process, as the median of several runs:

- J1, a join of the events with the dimension, grouped by the dimension's kind;
- J2, the same join restricted to six months (partition pruning on the events' side);
- S1, a self-join of the events on consecutive ids (two full scans of three columns);
- S2, events against their actor's monthly average (the table read three times);

over the same rows as ZSTD Parquet files (DuckDB, the reference), and over Colonnade's stores
cold (decoded-chunk cache off: every scan decodes) and warm (the default cache: the scans of one
query and later queries decode each chunk once). Every answer is checked against the
reference's. It then reads every column of ``gdelt`` with 1, 2 and 4 queries at once (threads
of one process sharing one store object, cache off) and reports the rows per second of all of
them together, and as a ratio to one query.
"""

from __future__ import annotations

import functools
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from colonnade.bench.common import write_report
from colonnade.bench.gdelt import (
    FULL_ROWS,
    BenchError,
    _duckdb_answer,
    answers_agree,
    ensure_data,
    load_gdelt,
    normalise,
)
from colonnade.bench.metadata import _parquet

KINDS = ("state", "group", "person", "media")
QUERIES = {
    "J1": "SELECT a.kind, count(*) AS events, avg(g.AvgTone) AS tone FROM gdelt g "
          "JOIN actors a ON g.Actor1Name = a.name GROUP BY a.kind ORDER BY a.kind",
    "J2": "SELECT a.region, count(*) AS events, sum(g.NumArticles) AS articles FROM gdelt g "
          "JOIN actors a ON g.Actor1Name = a.name WHERE g.MonthYear BETWEEN 198201 AND 198206 "
          "GROUP BY a.region ORDER BY a.region",
    "S1": "SELECT count(*) AS pairs, avg(b.AvgTone - a.AvgTone) AS drift FROM gdelt a "
          "JOIN gdelt b ON b.GLOBALEVENTID = a.GLOBALEVENTID + 1 WHERE a.Actor1Name = b.Actor1Name",
    "S2": "WITH m AS (SELECT Actor1Name, MonthYear, avg(AvgTone) AS tone FROM gdelt GROUP BY ALL), "
          "t AS (SELECT MonthYear, count(*) AS n FROM gdelt GROUP BY ALL) "
          "SELECT g.MonthYear // 100 AS year, count(*) AS outliers, sum(1.0 / t.n) AS share "
          "FROM gdelt g JOIN m USING (Actor1Name, MonthYear) JOIN t USING (MonthYear) "
          "WHERE g.AvgTone > m.tone + 10 GROUP BY 1 ORDER BY 1",
}
CONCURRENCY = (1, 2, 4)


def actors(parquet: Path) -> pa.Table:
    """One row per distinct actor name of the events, with a kind and a region derived from it."""
    con = duckdb.connect()
    try:
        names = con.sql(f"SELECT DISTINCT Actor1Name AS name FROM read_parquet('{parquet}') "
                        "WHERE Actor1Name IS NOT NULL ORDER BY name").to_arrow_table().column("name").to_pylist()
    finally:
        con.close()
    digest = [sum(name.encode()) for name in names]
    return pa.table({"name": pa.array(names, pa.string()),
                     "kind": pa.array([KINDS[d % len(KINDS)] for d in digest], pa.string()),
                     "region": pa.array([f"R{d % 13:02d}" for d in digest], pa.string())})


def _timed(fn: Callable[[], pa.Table], repeats: int) -> tuple[float, pa.Table]:
    times, answer = [], None
    fn()  # first run: opens datasets, warms DuckDB (and the cache, when on)
    for _ in range(repeats):
        start = time.perf_counter()
        answer = fn()
        times.append(time.perf_counter() - start)
    assert answer is not None
    return statistics.median(times), answer


def _load(uri: str, tsv: Path, rows: int, dim: pa.Table, echo: Callable[[str], None]) -> str:
    import colonnade

    with colonnade.connect(load_gdelt(uri, tsv, rows, echo)) as st:
        if "actors" in st:
            st.drop_dataset("actors")
        st.create_dataset("actors", dim.schema).append(dim)
        return st.uri


def _concurrent_reads(uri: str, rows: int, repeats: int) -> dict[str, float]:
    """Rows per second of ``n`` read-alls at once (threads sharing one store, cache off)."""
    import colonnade

    out: dict[str, float] = {}
    with colonnade.connect(uri, cache_mb=0) as st:
        ds = st.dataset("gdelt")

        def read() -> None:
            got = sum(b.num_rows for b in ds.scan().to_batches())
            if got != rows:
                raise BenchError(f"read {got} rows of gdelt, expected {rows}")

        read()
        for n in CONCURRENCY:
            times = []
            for _ in range(repeats):
                threads = [threading.Thread(target=read) for _ in range(n)]
                start = time.perf_counter()
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                times.append(time.perf_counter() - start)
            out[str(n)] = n * rows / statistics.median(times)
    return out


def main(rows: int = FULL_ROWS, out: str | Path = "bench-results", store: str | None = None,
         repeats: int = 5, echo: Callable[[str], None] = print) -> dict[str, Any]:
    import colonnade

    out_dir = Path(out)
    work = out_dir / "work"
    work.mkdir(parents=True, exist_ok=True)
    tsv = ensure_data(out_dir / "data", rows)
    parquet = _parquet(tsv, work / f"gdelt-{rows}.parquet")
    dim = actors(parquet)
    dim_parquet = work / "actors.parquet"
    pq.write_table(dim, dim_parquet, compression="zstd")
    stores = {"embedded": _load(f"sqlite:///{(work / f'joins-{rows}.db').resolve()}", tsv, rows, dim, echo)}
    if store:
        stores["given"] = _load(store, tsv, rows, dim, echo)

    con = duckdb.connect()
    con.execute(f"CREATE VIEW gdelt AS SELECT * FROM read_parquet('{parquet}')")
    con.execute(f"CREATE VIEW actors AS SELECT * FROM read_parquet('{dim_parquet}')")
    times: dict[str, dict[str, float]] = {q: {} for q in QUERIES}
    truth: dict[str, list[tuple[Any, ...]]] = {}
    for q, sql in QUERIES.items():
        times[q]["parquet"], answer = _timed(functools.partial(_duckdb_answer, con, sql), repeats)
        truth[q] = normalise(answer)
    con.close()
    for label, uri in stores.items():
        for mode, cache in (("cold", 0), ("warm", None)):
            with colonnade.connect(uri, cache_mb=cache) as st:
                for q, sql in QUERIES.items():
                    key = f"{label} {mode}"
                    times[q][key], answer = _timed(functools.partial(st.sql, sql), repeats)
                    if not answers_agree(truth[q], normalise(answer), rel=1e-6):
                        raise BenchError(f"{q} over {key}: {normalise(answer)[:3]} ≠ DuckDB's {truth[q][:3]}")
            echo(f"{label} {mode}: " + "  ".join(f"{q} {times[q][f'{label} {mode}'] * 1e3:.0f} ms "
                                                 f"(parquet {times[q]['parquet'] * 1e3:.0f})" for q in QUERIES))
    scaling = {label: _concurrent_reads(uri, rows, max(1, repeats // 2)) for label, uri in stores.items()}
    for label, rates in scaling.items():
        echo(f"read-all at once ({label}): " + ", ".join(f"{n}: {r / 1e6:.2f}M rows/s" for n, r in rates.items()))
    report: dict[str, Any] = {
        "rows": rows, "repeats": repeats, "stores": stores, "actors": dim.num_rows, "queries": QUERIES,
        "seconds": times,
        "ratios": {q: {k: t["parquet"] / v for k, v in t.items() if k != "parquet"} for q, t in times.items()},
        "concurrent_read_all_rows_per_s": scaling,
    }
    text = write_report(out_dir / "joins", report, markdown, chart)
    echo(text)
    return report


def markdown(report: dict[str, Any]) -> str:
    stores = report["stores"]
    columns = [k for k in next(iter(report["seconds"].values())) if k != "parquet"]

    def name(key: str) -> str:
        label, mode = key.split(" ")
        return f"{'embedded' if label == 'embedded' else stores[label]} {mode}"

    lines = [f"{report['rows']:,} GDELT-shaped rows and {report['actors']:,} actors, median of "
             f"{report['repeats']} runs after a first; answers checked against DuckDB over ZSTD Parquet.",
             "Ratio = DuckDB over Parquet's time / Colonnade's (≥ 1: Colonnade faster); cold: decoded-chunk "
             "cache off, warm: the default cache.", "",
             "| query | DuckDB over Parquet | " + " | ".join(f"{name(k)} | ratio" for k in columns) + " |",
             "|---|---|" + "---|---|" * len(columns)]
    for q, t in report["seconds"].items():
        cells = [f"{t[k] * 1e3:.0f} ms | {report['ratios'][q][k]:.2f}x" for k in columns]
        lines.append(f"| {q} | {t['parquet'] * 1e3:.0f} ms | " + " | ".join(cells) + " |")
    lines += ["", "Queries:", ""] + [f"- {q}: `{sql}`" for q, sql in report["queries"].items()]
    lines += ["", "Reading every column of `gdelt` with several queries at once (threads sharing one store "
              "object, cache off): rows per second of all of them together, and as a ratio to one query.", "",
              "| store | " + " | ".join(f"{n} at once" for n in CONCURRENCY) + " |",
              "|---|" + "---|" * len(CONCURRENCY)]
    for label, rates in report["concurrent_read_all_rows_per_s"].items():
        one = rates["1"]
        lines.append(f"| {'embedded' if label == 'embedded' else stores[label]} | "
                     + " | ".join(f"{rates[str(n)] / 1e6:.2f}M ({rates[str(n)] / one:.2f}x)" for n in CONCURRENCY)
                     + " |")
    return "\n".join(lines) + "\n"


def chart(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    queries = list(report["seconds"])
    columns = [k for k in report["seconds"][queries[0]] if k != "parquet"]
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / max(1, len(columns))
    for i, key in enumerate(columns):
        ax.bar([x + i * width for x in range(len(queries))], [report["ratios"][q][key] for q in queries], width,
               label=key)
    ax.axhline(1.0, color="grey", linewidth=1)
    ax.set_xticks([x + width * (len(columns) - 1) / 2 for x in range(len(queries))], queries)
    ax.set_ylabel("DuckDB over Parquet time / Colonnade time")
    ax.set_title(f"Joins and self-joins, {report['rows']:,} rows")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
