"""``colonnade bench gdelt``: the GDELT layout study, measured in one run against references.

On one generated GDELT-shaped file it measures, as the median of several repetitions:
pyarrow's parse-only CSV rate; Colonnade's ingest rate; reading every column and one column
(MonthYear) to Arrow; the study's queries Q1–Q3; bytes stored — for Colonnade on the given
store and for the reference, DuckDB over a ZSTD Parquet file of the same rows. Every figure is
also given as a ratio to the reference measured in the same process, so results from a noisy
machine stay comparable. Colonnade's ingest (one run) is compared with pyarrow's parse-only
runs just before and after it, not with those at the start: the machine's speed drifts between
a run's phases. Before they are timed, each layout's reads and queries run untimed for
``--warmup`` seconds (:data:`WARMUP_S`), the same for every layout: the reads of a freshly
started Cassandra node are those of a JVM still compiling its read path. Answers of Q1–Q3 must
agree across layouts or the run fails.
"""

from __future__ import annotations

import functools
import json
import math
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from colonnade.bench import gdelt_data
from colonnade.errors import ColonnadeError

QUERIES = {
    "Q1": "SELECT count(NumArticles) FROM gdelt",
    "Q2": "SELECT Actor1Name, avg(AvgTone) AS tone FROM gdelt GROUP BY Actor1Name ORDER BY tone DESC, Actor1Name LIMIT 10",
    "Q3": "SELECT avg(AvgTone), min(AvgTone), max(AvgTone) FROM gdelt WHERE MonthYear = 198012",
}
FULL_ROWS = 4_037_539


class BenchError(ColonnadeError):
    """A benchmark run failed (e.g. layouts disagree on an answer)."""


@dataclass
class LayoutResult:
    """Measurements of one layout; seconds are medians over repetitions."""

    name: str
    rows: int
    ingest_s: float | None = None
    read_all_s: float | None = None
    read_one_s: float | None = None
    queries_s: dict[str, float] = field(default_factory=dict)
    bytes: int | None = None
    answers: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    fixed_s: float | None = None  # p50 of FIXED_SQL on FIXED_ROWS rows, after the first
    fixed_cached_s: float | None = None  # the same with the store's default decoded-chunk cache
    #: pyarrow's parse-only time of the same file, the mean of one run just before the ingest
    #: and one just after (the machine's speed drifts between a run's phases)
    parse_beside_s: float | None = None
    #: rounds of its reads and queries run untimed before they were timed (see WARMUP_S)
    warmup_rounds: int = 0

    def rate(self, seconds: float | None) -> float | None:
        return None if not seconds else self.rows / seconds

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "rows": self.rows, "ingest_s": self.ingest_s,
            "ingest_rows_per_s": self.rate(self.ingest_s), "read_all_s": self.read_all_s,
            "read_all_rows_per_s": self.rate(self.read_all_s), "read_one_s": self.read_one_s,
            "read_one_rows_per_s": self.rate(self.read_one_s), "queries_s": self.queries_s,
            "bytes": self.bytes, "answers": self.answers, "notes": self.notes, "fixed_s": self.fixed_s,
            "fixed_cached_s": self.fixed_cached_s, "parse_beside_s": self.parse_beside_s,
            "warmup_rounds": self.warmup_rounds,
        }


def _duckdb_answer(con: duckdb.DuckDBPyConnection, sql: str) -> pa.Table:
    return con.sql(sql).to_arrow_table()


def median_time(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(max(1, repeats)):
        result = None  # the previous answer is freed before the clock starts, not inside it
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


#: Seconds every layout's reads and queries run untimed before they are timed (each at least
#: once): a Cassandra node compiles its read path as it serves it (HotSpot's JIT: a node's first
#: reads after its start took it 2-3x the CPU of later ones here), which a node in service did
#: long ago; the reference's files are read from the page cache as the stores' are.
WARMUP_S = 30.0


def warm_up(runs: Sequence[Callable[[], Any]], seconds: float) -> int:
    """Run ``runs`` in turn, untimed, until ``seconds`` have passed (each at least once, unless
    ``seconds`` is 0); the rounds run."""
    if seconds <= 0:
        return 0
    start, rounds = time.perf_counter(), 0
    while True:
        for run in runs:
            run()
        rounds += 1
        if time.perf_counter() - start >= seconds:
            return rounds


def normalise(table: pa.Table) -> list[tuple[Any, ...]]:
    rows = table.to_pylist()
    return [tuple(r.values()) for r in rows]


def answers_agree(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]], rel: float = 1e-9) -> bool:
    if len(a) != len(b):
        return False
    for ra, rb in zip(a, b, strict=True):
        if len(ra) != len(rb):
            return False
        for x, y in zip(ra, rb, strict=True):
            if isinstance(x, float) or isinstance(y, float):
                if x is None or y is None or not math.isclose(x, y, rel_tol=rel, abs_tol=1e-9):
                    return False
            elif x != y:
                return False
    return True


def machine() -> dict[str, Any]:
    mem = None
    try:
        with open("/proc/meminfo") as f:
            mem = int(f.readline().split()[1]) * 1024
    except OSError:
        pass
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "cpu": cpu, "memory_bytes": mem, "python": platform.python_version(),
            "platform": platform.platform(), "pyarrow": pa.__version__, "duckdb": duckdb.__version__}


def ensure_data(data_dir: Path, rows: int, seed: int = 42) -> Path:
    """The generated TSV for (rows, seed), reused when already there."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / f"gdelt-{rows}-{seed}.tsv"
    marker = path.with_suffix(".ok")
    if not (path.exists() and marker.exists()):
        gdelt_data.generate(path, rows, seed=seed)
        marker.write_text(str(path.stat().st_size))
    return path


def load_gdelt(uri: str, tsv: Path, rows: int, echo: Callable[[str], None]) -> str:
    """The store at ``uri`` with dataset ``gdelt`` holding the rows of ``tsv`` (partitioned by
    MonthYear), ingested unless it already holds ``rows`` rows; returns the store's URI."""
    import colonnade
    from colonnade.ingest.pipeline import ingest

    with colonnade.connect(uri) as st:
        if "gdelt" not in st or st.dataset("gdelt").snapshot().rows != rows:
            if "gdelt" in st:
                st.drop_dataset("gdelt")
            echo(f"ingesting {rows:,} rows into {st.uri} ...")
            ingest(st, "gdelt", [tsv], fmt="csv", delimiter="\t", header=False,
                   schema=gdelt_data.GDELT_SCHEMA, partition_by="MonthYear", force=True)
        return st.uri


def csv_parse_only(path: Path) -> int:
    reader = pacsv.open_csv(path, read_options=gdelt_data.read_options(block_size=16 << 20),
                            parse_options=gdelt_data.parse_options(),
                            convert_options=gdelt_data.convert_options())
    return sum(b.num_rows for b in reader)


#: The fixed cost of a query: a 1,000-row dataset, one aggregate, p50 of FIXED_REPEATS runs after
#: a first one (which opens the dataset and warms DuckDB).
FIXED_ROWS = 1_000
FIXED_REPEATS = 31
FIXED_SQL = "SELECT count(*) AS n, sum(v) AS s FROM fixed_cost WHERE k % 7 = 3"
FIXED_ANSWER = {"n": 143, "s": sum(k * 0.5 for k in range(FIXED_ROWS) if k % 7 == 3)}


def fixed_table() -> pa.Table:
    return pa.table({"k": pa.array(range(FIXED_ROWS), pa.int64()),
                     "v": pa.array([k * 0.5 for k in range(FIXED_ROWS)], pa.float64())})


def fixed_cost(run: Callable[[], pa.Table], label: str) -> float:
    """p50 seconds of ``run`` (FIXED_SQL) after a first run; BenchError on a wrong answer."""
    run()
    times = []
    for _ in range(FIXED_REPEATS):
        start = time.perf_counter()
        got = run().to_pylist()
        times.append(time.perf_counter() - start)
        if got != [FIXED_ANSWER]:
            raise BenchError(f"{label}: {FIXED_SQL} gave {got}, expected {[FIXED_ANSWER]}")
    return statistics.median(times)


def run_reference(path: Path, rows: int, work: Path, repeats: int, warmup_s: float = WARMUP_S) -> LayoutResult:
    """DuckDB over a ZSTD Parquet file of the same rows."""
    result = LayoutResult("duckdb+parquet (reference)", rows)
    parquet = work / "gdelt.parquet"

    def write_parquet() -> None:
        reader = pacsv.open_csv(path, read_options=gdelt_data.read_options(block_size=16 << 20),
                                parse_options=gdelt_data.parse_options(),
                                convert_options=gdelt_data.convert_options())
        with pq.ParquetWriter(parquet, reader.schema, compression="zstd") as writer:
            for batch in reader:
                writer.write_batch(batch)

    result.ingest_s, _ = median_time(write_parquet, 1)
    result.bytes = parquet.stat().st_size
    con = duckdb.connect()
    try:
        con.execute(f"CREATE VIEW gdelt AS SELECT * FROM read_parquet('{parquet}')")
        read_all = functools.partial(_duckdb_answer, con, "SELECT * FROM gdelt")
        read_one = functools.partial(_duckdb_answer, con, "SELECT MonthYear FROM gdelt")
        queries = {q: functools.partial(_duckdb_answer, con, sql) for q, sql in QUERIES.items()}
        result.warmup_rounds = warm_up([read_all, read_one, *queries.values()], warmup_s)
        result.read_all_s, t = median_time(read_all, repeats)
        assert t.num_rows == rows
        result.read_one_s, t = median_time(read_one, repeats)
        for q, run in queries.items():
            result.queries_s[q], t = median_time(run, repeats)
            result.answers[q] = normalise(t)
        pq.write_table(fixed_table(), work / "fixed_cost.parquet", compression="zstd")
        con.execute(f"CREATE VIEW fixed_cost AS SELECT * FROM read_parquet('{work / 'fixed_cost.parquet'}')")
        result.fixed_s = fixed_cost(lambda: con.sql(FIXED_SQL).to_arrow_table(), result.name)
    finally:
        con.close()
    result.notes.append("ingest = CSV parse + ZSTD Parquet write")
    return result


def run_colonnade(path: Path, rows: int, store_uri: str, repeats: int, label: str,
                  warmup_s: float = WARMUP_S) -> LayoutResult:
    import colonnade
    from colonnade.ingest.pipeline import ingest
    from colonnade.table.cache import default_cache_mb

    result = LayoutResult(label, rows)
    store = colonnade.connect(store_uri)
    try:
        if "gdelt" in store:
            store.drop_dataset("gdelt")
        schema = gdelt_data.GDELT_SCHEMA
        before, _ = median_time(lambda: csv_parse_only(path), 1)
        start = time.perf_counter()
        ingest(store, "gdelt", [path], fmt="csv", delimiter="\t", header=False, schema=schema,
               partition_by="MonthYear", force=True)
        result.ingest_s = time.perf_counter() - start
        after, _ = median_time(lambda: csv_parse_only(path), 1)
        result.parse_beside_s = (before + after) / 2
        ds = store.dataset("gdelt")
        info = ds.describe()
        result.bytes = info["bytes"]
        if store_uri.startswith("cassandra"):
            # flushed and compacted before anything is read: the reads of a node that settled
            # after the load, not of one compacting the load's SSTables meanwhile (which took
            # 2-3x the node's CPU per query here)
            from colonnade.bench.layouts import store_disk_bytes

            on_disk, note = store_disk_bytes(store_uri)
            result.notes.append(f"chunk bytes as stored: {info['bytes']:,}")
            result.notes.append(note + ("; reads measured after it" if on_disk is not None else ""))
            if on_disk is not None:
                result.bytes = on_disk
        def read_all() -> pa.Table:
            return ds.scan().to_arrow()

        def read_one() -> pa.Table:
            return ds.scan(columns=["MonthYear"]).to_arrow()

        queries = {q: functools.partial(store.sql, sql) for q, sql in QUERIES.items()}
        result.warmup_rounds = warm_up([read_all, read_one, *queries.values()], warmup_s)
        result.read_all_s, t = median_time(read_all, repeats)
        if t.num_rows != rows:
            raise BenchError(f"{label}: read {t.num_rows} rows, expected {rows}")
        result.read_one_s, t = median_time(read_one, repeats)
        for q, run in queries.items():
            result.queries_s[q], t = median_time(run, repeats)
            result.answers[q] = normalise(t)
        if "fixed_cost" in store:
            store.drop_dataset("fixed_cost")
        small = fixed_table()
        store.create_dataset("fixed_cost", small.schema).append(small)
        result.fixed_s = fixed_cost(lambda: store.sql(FIXED_SQL), label)
        # and as a user's store object has it by default: decoded chunks kept between queries
        warm = colonnade.connect(store_uri, cache_mb=default_cache_mb())
        try:
            result.fixed_cached_s = fixed_cost(lambda: warm.sql(FIXED_SQL), f"{label}, chunk cache on")
        finally:
            warm.close()
        store.drop_dataset("fixed_cost")
        stored = store.chunk_store.stored_bytes("gdelt")
        if not store_uri.startswith("cassandra") and stored is not None:
            result.notes.append(f"SQLite file {Path(store.chunk_store.path).stat().st_size:,} bytes")  # type: ignore[attr-defined]
    finally:
        store.close()
    return result


def check_answers(results: list[LayoutResult]) -> None:
    """Answers must agree between layouts holding the same rows (baselines may hold a prefix)."""
    ref = results[0]
    for r in results[1:]:
        if r.rows != ref.rows:
            continue
        for q in QUERIES:
            if q in r.answers and q in ref.answers and not answers_agree(ref.answers[q], r.answers[q], rel=1e-6):
                raise BenchError(f"{r.name} answers {q} differently from {ref.name}: "
                                 f"{r.answers[q][:3]} vs {ref.answers[q][:3]}")


def _fmt_rate(v: float | None) -> str:
    if v is None:
        return "-"
    for unit, div in (("M", 1e6), ("k", 1e3)):
        if v >= div:
            return f"{v / div:,.1f}{unit} rec/s"
    return f"{v:,.0f} rec/s"


def _fmt_s(v: float | None) -> str:
    return "-" if v is None else (f"{v * 1000:,.1f} ms" if v < 1 else f"{v:,.2f} s")


def _fmt_bytes(v: int | None) -> str:
    return "-" if v is None else f"{v / 1e6:,.1f} MB"


def markdown_table(report: dict[str, Any]) -> str:
    layouts = report["layouts"]
    ref = layouts[-1]
    lines = ["| layout | disk | ingest | read every column | read 1 column (MonthYear) | Q1 | Q2 | Q3 |",
             "|---|---|---|---|---|---|---|---|"]
    for r in layouts:
        q = r["queries_s"]
        lines.append(
            f"| {r['name']} | {_fmt_bytes(r['bytes'])} | {_fmt_rate(r['ingest_rows_per_s'])} | "
            f"{_fmt_rate(r['read_all_rows_per_s'])} | {_fmt_rate(r['read_one_rows_per_s'])} | "
            f"{_fmt_s(q.get('Q1'))} | {_fmt_s(q.get('Q2'))} | {_fmt_s(q.get('Q3'))} |")
    lines.append("")
    lines.append(f"Ratios against {ref['name']} (time ratios: < 1 is faster; rate ratios: > 1 is faster; "
                 "bytes: < 1 is smaller):")
    lines.append("")
    lines.append("| layout | ingest rate | read all rate | read one rate | Q1 time | Q2 time | Q3 time | bytes |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for name, ratios in report["ratios"].items():
        cells = [ratios.get(k) for k in ("ingest", "read_all", "read_one", "Q1", "Q2", "Q3", "bytes")]
        lines.append(f"| {name} | " + " | ".join("-" if c is None else f"{c:.2f}x" for c in cells) + " |")
    prefix = [r for r in layouts if r["rows"] != report["rows"]]
    if prefix:
        lines.append("")
        per_record = ", ".join(f"{r['name']} {r['bytes'] / r['rows']:,.0f} B/record" for r in prefix if r["bytes"])
        lines.append(", ".join(r["name"] for r in prefix) + f": measured on the first {prefix[0]['rows']:,} of "
                     f"{report['rows']:,} rows, so their disk figures are for those rows ({per_record}) "
                     "and their ratios are per record.")
    if report.get("warmup_s"):
        lines.append("")
        lines.append(f"Before its timed runs (median of {report.get('repeats', 1)}), each layout's reads and "
                     f"queries ran untimed, in turn, for at least {report['warmup_s']:g} s and at least once "
                     "(a Cassandra node compiles its read path as it serves it; the reference's files are "
                     "in the page cache as the stores' are): "
                     + ", ".join(f"{r['name']} {r.get('warmup_rounds', 0)}x" for r in layouts) + ".")
    fixed = [(r["name"], r["fixed_s"]) for r in layouts if r.get("fixed_s")]
    if fixed:
        lines.append("")
        lines.append(f"Fixed cost (`{FIXED_SQL}` on {FIXED_ROWS:,} rows through the Python API, p50 of "
                     f"{FIXED_REPEATS} after the first; target ≤ 5 ms): "
                     + ", ".join(f"{n} {v * 1000:.1f} ms" for n, v in fixed) + " with chunks decoded on "
                     "every query (Colonnade's chunk cache off, as for every figure above)")
        cached = [(r["name"], r["fixed_cached_s"]) for r in layouts if r.get("fixed_cached_s")]
        if cached:
            lines[-1] += ("; with the decoded-chunk cache a store object has by default: "
                          + ", ".join(f"{n} {v * 1000:.1f} ms" for n, v in cached))
        lines[-1] += "."
    if report.get("parse_only_rows_per_s"):
        lines.append("")
        beside = {r["name"]: r["rows"] / r["parse_beside_s"] for r in layouts if r.get("parse_beside_s")}
        lines.append(f"pyarrow CSV parse-only: {_fmt_rate(report['parse_only_rows_per_s'])} (median of "
                     f"{report.get('repeats', 1)} at the start); "
                     + ", ".join(f"{n} ingest = {r:.2f}x parse-only" + (
                         f" (parse-only {_fmt_rate(beside[n])} in the runs just before and after it)"
                         if n in beside else "") for n, r in report["ingest_vs_parse"].items()))
    return "\n".join(lines)


def ratios(r: LayoutResult, ref: LayoutResult) -> dict[str, float | None]:
    """Per-record ratios, so layouts measured on a prefix of the rows compare too."""
    scale = ref.rows / r.rows if r.rows else 1.0

    def rr(a: float | None, b: float | None) -> float | None:
        return None if not a or not b else a / b

    def per_rec(v: float | None) -> float | None:
        return None if v is None else v * scale

    out = {
        "ingest": rr(ref.ingest_s, per_rec(r.ingest_s)), "read_all": rr(ref.read_all_s, per_rec(r.read_all_s)),
        "read_one": rr(ref.read_one_s, per_rec(r.read_one_s)), "bytes": rr(per_rec(r.bytes), ref.bytes),
    }
    for q in QUERIES:
        out[q] = rr(per_rec(r.queries_s.get(q)), ref.queries_s.get(q))
    return out


def main(rows: int = FULL_ROWS, store: str | None = None, out: str | Path = "bench-results",
         repeats: int = 3, baseline_rows: int = 200_000, layouts: list[str] | None = None,
         seed: int = 42, warmup_s: float = WARMUP_S, rounds: int | None = None,
         echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the benchmark; writes ``gdelt.json`` and ``gdelt.md`` into ``out`` and returns the report.
    ``rounds``: of the Colonnade layouts' and the reference's reads and queries timed round by
    round after their phases (:mod:`colonnade.bench.gdelt_rounds`; 0: none)."""
    from colonnade.bench import gdelt_rounds

    out_dir = Path(out)
    work = out_dir / "work"
    work.mkdir(parents=True, exist_ok=True)
    store_uri = store or f"sqlite:///{work / 'bench.db'}"
    echo(f"generating {rows:,} GDELT-shaped rows ...")
    path = ensure_data(out_dir / "data", rows, seed)
    parse_s, parsed = median_time(lambda: csv_parse_only(path), repeats)
    assert parsed == rows
    echo(f"pyarrow parse-only: {rows / parse_s:,.0f} rec/s")
    results: list[LayoutResult] = []
    wanted = set(layouts or ["colonnade", "embedded", "reference", "row", "wide", "blob"])
    if store_uri.startswith("cassandra"):
        if "colonnade" in wanted:
            echo("colonnade on cassandra ...")
            results.append(run_colonnade(path, rows, store_uri, repeats, "colonnade (cassandra)", warmup_s))
        extra = wanted & {"row", "wide", "blob"}
        if extra:
            from colonnade.bench.layouts import run_baselines

            results += run_baselines(path, rows, store_uri, min(baseline_rows, rows), sorted(extra), repeats,
                                     echo, warmup_s)
        if "embedded" in wanted:
            echo("colonnade on the embedded store ...")
            results.append(run_colonnade(path, rows, f"sqlite:///{work / 'bench.db'}", repeats, "colonnade (embedded)",
                                          warmup_s))
    else:
        echo("colonnade ...")
        results.append(run_colonnade(path, rows, store_uri, repeats, "colonnade (embedded)", warmup_s))
    echo("reference: duckdb over zstd parquet ...")
    ref = run_reference(path, rows, work, repeats, warmup_s)
    results.append(ref)
    check_answers([ref] + results[:-1])
    embedded_uri = store_uri if not store_uri.startswith("cassandra") else f"sqlite:///{work / 'bench.db'}"
    stores = {r.name: store_uri if "cassandra" in r.name else embedded_uri
              for r in results[:-1] if r.name.startswith("colonnade") and r.rows == rows}
    rounds = gdelt_rounds.ROUNDS if rounds is None else rounds
    alternated = None
    if rounds:
        echo(f"round by round: {', '.join([*stores, ref.name])} ({rounds} rounds) ...")
        alternated = gdelt_rounds.alternate(stores, work / "gdelt.parquet", rows, rounds, ref.name)
    report: dict[str, Any] = {
        "benchmark": "gdelt", "rows": rows, "seed": seed, "repeats": repeats, "warmup_s": warmup_s,
        "store": store_uri, "machine": machine(), "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "data_bytes": path.stat().st_size, "parse_only_s": parse_s, "parse_only_rows_per_s": rows / parse_s,
        "layouts": [r.to_dict() for r in results],
        "ratios": {r.name: ratios(r, ref) for r in results[:-1]},
        # against the parse-only runs beside each ingest (else the median at the start)
        "ingest_vs_parse": {r.name: (r.parse_beside_s or parse_s) / r.ingest_s for r in results[:-1]
                            if r.ingest_s and r.rows == rows},
        "rounds": alternated,
    }
    (out_dir / "gdelt.json").write_text(json.dumps(report, indent=2, default=str))
    table = markdown_table(report)
    if alternated is not None:
        table += "\n\n" + gdelt_rounds.markdown(alternated, rows)
    (out_dir / "gdelt.md").write_text(table + "\n")
    from colonnade.bench.charts import write_charts

    write_charts(report, out_dir)
    echo(table)
    return report
