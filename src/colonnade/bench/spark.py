"""``colonnade bench spark``: Spark SQL over Colonnade against Spark over ZSTD Parquet, one run.

On the GDELT-shaped rows (the layout study's data) a local Spark (``local[2]``) runs Q1–Q3 and a
read of every column (written to Spark's ``noop`` sink) over: the same rows as one ZSTD Parquet
file (Spark's vectorized Parquet reader, default settings), Colonnade's embedded store, and the
store given with ``--store`` (e.g. Cassandra). Runs are interleaved, the median of ``repeats``
after a warm-up is kept, and every answer is checked against DuckDB over the Parquet file. Both
sides get the same session: ``spark.sql.shuffle.partitions`` 4, driver memory 4 GiB, adaptive
execution on (Spark's default). Colonnade's decoded-chunk cache is off (``COLONNADE_CACHE_MB=0``):
every read decodes, as every Parquet read does. Aggregations are pushed down as each reader does
by default (Colonnade's tasks aggregate their own segments; Parquet answers count/min/max from
footers). It also times planning a read of a dataset of ``--plan-segments`` segments (load to
planned input partitions).
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from colonnade.bench.common import write_report
from colonnade.bench.gdelt import FULL_ROWS, QUERIES, BenchError, ensure_data, load_gdelt
from colonnade.bench.metadata import _parquet

READ_ALL = "read every column"
SESSION = {"spark.sql.shuffle.partitions": "4", "spark.driver.memory": "4g",
           # Parquet answers count/min/max from its footers too (off by default in Spark)
           "spark.sql.parquet.aggregatePushdown": "true",
           "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"}


def _session() -> tuple[Any, bool]:
    """The session (a running one is used as it is, and not stopped), and whether it is new."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["COLONNADE_CACHE_MB"] = "0"  # inherited by the reader's helper process
    from pyspark.sql import SparkSession

    import colonnade.spark

    running = SparkSession.getActiveSession()
    if running is not None:
        colonnade.spark.register(running)
        return running, False
    builder = SparkSession.builder.master("local[2]").appName("colonnade-bench-spark")
    for k, v in SESSION.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    colonnade.spark.register(spark)
    return spark, True


def _truth(parquet: Path) -> dict[str, list[tuple[Any, ...]]]:
    import duckdb

    con = duckdb.connect()
    con.execute(f"CREATE VIEW gdelt AS SELECT * FROM read_parquet('{parquet}')")
    return {name: [tuple(r) for r in con.sql(sql).fetchall()] for name, sql in QUERIES.items()}


def _same(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> bool:
    def eq(x: Any, y: Any) -> bool:
        if isinstance(x, float) and isinstance(y, float):
            return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9)
        return bool(x == y)
    return len(a) == len(b) and all(len(r) == len(s) and all(eq(x, y) for x, y in zip(r, s, strict=True))
                                    for r, s in zip(a, b, strict=True))


def _plan_time(spark: Any, uri: str, segments: int, repeats: int, echo: Callable[[str], None]) -> dict[str, Any]:
    """Seconds from load() to planned input partitions for a dataset of ``segments`` segments."""
    import colonnade

    name = f"plan_{segments}"
    with colonnade.connect(uri) as st:
        if name not in st or len(st.dataset(name).snapshot().segments) != segments:
            if name in st:
                st.drop_dataset(name)
            echo(f"writing a dataset of {segments:,} segments into {st.uri} ...")
            ds = st.create_dataset(name, pa.schema([("k", pa.int64()), ("v", pa.float64())]), segment_rows=10)
            n = segments * 10
            ds.append(pa.table({"k": pa.array(range(n), pa.int64()), "v": pa.array([0.5] * n)}))
        got = len(st.dataset(name).snapshot().segments)
    times = []
    partitions = 0
    for _ in range(repeats + 1):
        start = time.perf_counter()
        df = spark.read.format("colonnade").option("store", uri).load(name)
        partitions = df.rdd.getNumPartitions()
        times.append(time.perf_counter() - start)
    # the first load in this JVM also reads the version's log; later ones reuse the helper's snapshot
    return {"segments": got, "partitions": partitions, "seconds": statistics.median(times[1:]),
            "first_seconds": times[0]}


def main(rows: int = FULL_ROWS, out: str | Path = "bench-results", store: str | None = None,
         repeats: int = 5, plan_segments: int = 10_000, echo: Callable[[str], None] = print) -> dict[str, Any]:
    out_dir = Path(out)
    work = out_dir / "work"
    work.mkdir(parents=True, exist_ok=True)
    tsv = ensure_data(out_dir / "data", rows)
    parquet = _parquet(tsv, work / f"gdelt-{rows}.parquet")
    truth = _truth(parquet)
    stores = {"embedded": load_gdelt(f"sqlite:///{(work / f'spark-{rows}.db').resolve()}", tsv, rows, echo)}
    if store:
        stores["given"] = load_gdelt(store, tsv, rows, echo)
    spark, new = _session()
    try:
        frames = {"parquet": spark.read.parquet(str(parquet.resolve()))}
        for label, uri in stores.items():
            frames[label] = spark.read.format("colonnade").option("store", uri).load("gdelt")
        timings: dict[str, dict[str, list[float]]] = {q: {k: [] for k in frames} for q in [*QUERIES, READ_ALL]}
        for query, per in timings.items():
            for run in range(repeats + 1):
                for label, df in frames.items():
                    df.createOrReplaceTempView("gdelt")
                    start = time.perf_counter()
                    if query == READ_ALL:
                        df.write.format("noop").mode("overwrite").save()
                    else:
                        got = [tuple(r) for r in spark.sql(QUERIES[query]).collect()]
                        if not _same(got, truth[query]):
                            raise BenchError(f"{query} over {label}: {got[:3]} ≠ DuckDB's {truth[query][:3]}")
                    if run:  # the first run warms the JVM, caches and the reader's helper
                        per[label].append(time.perf_counter() - start)
            echo(f"{query:18} " + "  ".join(f"{k} {statistics.median(v) * 1e3:8.1f} ms" for k, v in per.items()))
        planning = {label: _plan_time(spark, uri, plan_segments, 3, echo) for label, uri in stores.items()}
    finally:
        if new:
            spark.stop()
    import pyspark

    report: dict[str, Any] = {
        "rows": rows, "repeats": repeats, "spark": pyspark.__version__, "master": "local[2]",
        "session": SESSION, "stores": stores, "parquet_bytes": parquet.stat().st_size,
        "queries": {q: {k: statistics.median(v) for k, v in per.items()} for q, per in timings.items()},
        "planning": planning,
    }
    report["ratios"] = {q: {k: t["parquet"] / t[k] for k in stores} for q, t in report["queries"].items()}
    for label, p in planning.items():
        echo(f"planning a read of {p['segments']:,} segments ({label}): {p['seconds'] * 1e3:.0f} ms "
             f"(first {p['first_seconds'] * 1e3:.0f} ms), {p['partitions']} input partitions")
    text = write_report(out_dir / "spark", report, markdown, chart)
    echo(text)
    return report


def markdown(report: dict[str, Any]) -> str:
    stores = report["stores"]
    names = {"embedded": "Colonnade (embedded)", "given": f"Colonnade ({stores.get('given', '')})"}
    lines = [f"Spark {report['spark']} `{report['master']}`, {report['rows']:,} GDELT-shaped rows, median of "
             f"{report['repeats']} runs after a warm-up; answers checked against DuckDB over the Parquet file.",
             "Rate = Spark over ZSTD Parquet's time / the time over Colonnade (≥ 1: Colonnade faster).", "",
             "| query | Spark over Parquet | " + " | ".join(f"{names[k]} | rate" for k in stores) + " |",
             "|---|---|" + "---|---|" * len(stores)]
    for q, t in report["queries"].items():
        cells = [f"{t[k] * 1e3:.0f} ms | {report['ratios'][q][k]:.2f}x" for k in stores]
        lines.append(f"| {q} | {t['parquet'] * 1e3:.0f} ms | " + " | ".join(cells) + " |")
    lines.append("")
    for label, p in report["planning"].items():
        first = f" (the first load of its version: {p['first_seconds'] * 1e3:.0f} ms)" if "first_seconds" in p else ""
        lines.append(f"Planning a read of a dataset of {p['segments']:,} segments ({names[label]}): "
                     f"{p['seconds'] * 1e3:.0f} ms{first} ({p['partitions']} input partitions).")
    lines.append("")
    lines.append("Session: " + ", ".join(f"`{k}={v}`" for k, v in report["session"].items())
                 + "; Colonnade's decoded-chunk cache off (`COLONNADE_CACHE_MB=0`).")
    lines.append("")
    lines.append("Aggregations pushed down on both sides, as each reader does by default: Colonnade's answers Q1 "
                 "at planning from segment statistics and computes Q2's and Q3's aggregates in its tasks "
                 "(one row per group and input partition, merged by Spark; option `pushAggregates`); Spark's "
                 "Parquet reader answers count, min and max from footers.")
    return "\n".join(lines) + "\n"


def chart(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    queries = list(report["queries"])
    stores = list(report["stores"])
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / max(1, len(stores))
    for i, label in enumerate(stores):
        values = [report["ratios"][q][label] for q in queries]
        ax.bar([x + i * width for x in range(len(queries))], values, width, label=f"Colonnade ({label})")
    ax.axhline(1.0, color="grey", linewidth=1)
    ax.set_xticks([x + width * (len(stores) - 1) / 2 for x in range(len(queries))], queries)
    ax.set_ylabel("Spark over Parquet time / time over Colonnade")
    ax.set_title(f"Spark {report['spark']} local[2], {report['rows']:,} rows")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
