"""``colonnade bench metadata``: aggregate queries answered from metadata, against DuckDB.

On the GDELT-shaped data it times ``SELECT count(*) FROM gdelt`` and Q1
(``SELECT count(NumArticles) FROM gdelt``) through ``Store.sql`` (answered from segment
statistics) and through DuckDB over a ZSTD Parquet file of the same rows, as the median of
several runs after a warm-up, and prints the ratios. DuckDB gets the settings a competent user
would choose: the Parquet metadata cache on (``enable_object_cache``), the file read through a
view, default threads. Both answers are checked against the same ground truth (the Parquet
file read by pyarrow).
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.compute as pc
import pyarrow.parquet as pq

from colonnade.bench import gdelt_data
from colonnade.bench.gdelt import FULL_ROWS, BenchError, ensure_data

QUERIES = {"count(*)": "SELECT count(*) FROM gdelt", "Q1": "SELECT count(NumArticles) FROM gdelt"}
DUCKDB_SETTINGS = ("SET enable_object_cache = true",)


def _fetch(con: duckdb.DuckDBPyConnection, sql: str) -> list[Any]:
    return con.sql(sql).fetchall()


def _median(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    result = fn()  # warm-up (caches, connections)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def _parquet(tsv: Path, path: Path) -> Path:
    if not path.exists():
        import pyarrow.csv as pacsv

        reader = pacsv.open_csv(tsv, read_options=gdelt_data.read_options(block_size=16 << 20),
                                parse_options=gdelt_data.parse_options(),
                                convert_options=gdelt_data.convert_options())
        tmp = path.with_suffix(".tmp")
        with pq.ParquetWriter(tmp, reader.schema, compression="zstd") as writer:
            for batch in reader:
                writer.write_batch(batch)
        tmp.rename(path)
    return path


def main(rows: int = FULL_ROWS, out: str | Path = "bench-results", store: str | None = None,
         repeats: int = 15, echo: Callable[[str], None] = print) -> dict[str, Any]:
    import colonnade
    from colonnade.ingest.pipeline import ingest

    out_dir = Path(out)
    work = out_dir / "work"
    work.mkdir(parents=True, exist_ok=True)
    tsv = ensure_data(out_dir / "data", rows)
    parquet = _parquet(tsv, work / f"gdelt-{rows}.parquet")
    truth_table = pq.read_table(parquet, columns=["NumArticles"])
    truth = {"count(*)": truth_table.num_rows,
             "Q1": truth_table.num_rows - truth_table.column(0).null_count}
    assert pc.count(truth_table.column(0)).as_py() == truth["Q1"]
    uri = store or f"sqlite:///{work / f'metadata-{rows}.db'}"
    st = colonnade.connect(uri)
    try:
        if "gdelt" not in st or st.dataset("gdelt").snapshot().rows != rows:
            if "gdelt" in st:
                st.drop_dataset("gdelt")
            echo(f"ingesting {rows:,} rows into {st.uri} ...")
            ingest(st, "gdelt", [tsv], fmt="csv", delimiter="\t", header=False, schema=gdelt_data.GDELT_SCHEMA,
                   partition_by="MonthYear", force=True)
        con = duckdb.connect()
        for setting in DUCKDB_SETTINGS:
            con.execute(setting)
        con.execute(f"CREATE VIEW gdelt AS SELECT * FROM read_parquet('{parquet}')")
        report: dict[str, Any] = {"rows": rows, "store": st.uri, "repeats": repeats,
                                  "duckdb_settings": list(DUCKDB_SETTINGS), "queries": {}}
        for name, sql in QUERIES.items():
            ours, answer = _median(functools.partial(st.sql, sql), repeats)
            theirs, reference = _median(functools.partial(_fetch, con, sql), repeats)
            got = answer.column(0)[0].as_py()
            if got != truth[name] or reference[0][0] != truth[name]:
                raise BenchError(f"{name}: colonnade {got}, duckdb {reference[0][0]}, truth {truth[name]}")
            report["queries"][name] = {"sql": sql, "colonnade_s": ours, "duckdb_s": theirs,
                                       "ratio": ours / theirs, "answer": got}
        con.close()
    finally:
        st.close()
    echo(f"{rows:,} rows; store {report['store']}; median of {repeats} runs after a warm-up")
    echo(f"duckdb over zstd parquet, with: {'; '.join(DUCKDB_SETTINGS)} (view over read_parquet, default threads)")
    for name, q in report["queries"].items():
        echo(f"{name:9} {q['sql']:40} colonnade {q['colonnade_s'] * 1e3:8.3f} ms   duckdb "
             f"{q['duckdb_s'] * 1e3:8.3f} ms   ratio {q['ratio']:.3f}x   answer {q['answer']:,}")
    return report
