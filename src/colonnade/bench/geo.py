"""``colonnade bench geo``: bounding-box queries over GDELT events keyed by space-filling curves.

One run, in a scratch embedded store (or ``--store``), on ``--rows`` GDELT-shaped rows
(:mod:`colonnade.bench.gdelt_data`, default 4,037,539) generated in memory once:

* **encode**: 10M random points to 32-bit Hilbert and Z-order keys (16 bits a coordinate),
  points/s, the median of five (target ≥ 20M/s);
* **ingest** the rows twice: dataset ``geo_curve`` partitioned by
  ``zorder(ActionGeo_Lat, ActionGeo_Long, 6)`` and sorted by ``hilbert(..., 16)``, and, for
  comparison, ``geo_month`` partitioned by ``MonthYear`` (the layout study's layout) and not
  sorted;
* **boxes**: ``--boxes`` squares each of 1°, 10° and 45°, centred on random events (seeded),
  ``SELECT count(*), sum(NumArticles), avg(AvgTone) ... WHERE lat BETWEEN .. AND lon BETWEEN ..``
  through both datasets and through DuckDB over a ZSTD Parquet file of the same rows. The
  Parquet file is written sorted by the same Hilbert key (row groups of 122,880 rows), which is
  what a competent user would do for box queries: DuckDB then skips row groups by their lat/lon
  min/max. Every answer is checked against DuckDB over the in-memory rows (count and sum exactly,
  the average to 1e-9 relative). Latency is the median of ``--repeats``; the share of segments
  (row groups for Parquet) each query reads is reported per box size (target for 1°: ≤ 2%).

JSON, Markdown and a PNG go to ``--out``.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from colonnade.bench.common import write_report

ROWS = 4_037_539
BOXES = 20
REPEATS = 3
SIDES = (1.0, 10.0, 45.0)
ENCODE_POINTS = 10_000_000
LAT, LON = "ActionGeo_Lat", "ActionGeo_Long"
CURVE_PARTITION = f"zorder({LAT}, {LON}, 6)"
CURVE_SORT = f"hilbert({LAT}, {LON}, 16)"
PARQUET_ROW_GROUP = 122_880


def _median_time(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def _first_row(run: Callable[[str], Any], query: str) -> dict[str, Any]:
    return dict(run(query).to_pylist()[0])


def encode_rates(points: int = ENCODE_POINTS, repeats: int = 5) -> dict[str, float]:
    """Points/s of each curve's key over random coordinates (16 bits a coordinate)."""
    import numpy as np
    import pyarrow as pa

    from colonnade.schema.curves import curve_keys

    rng = np.random.default_rng(0)
    lat, lon = pa.array(rng.uniform(-90, 90, points)), pa.array(rng.uniform(-180, 180, points))
    rates = {}
    for curve in ("hilbert", "zorder"):
        seconds, _ = _median_time(partial(curve_keys, curve, lat, lon, 16), repeats)
        rates[curve] = points / seconds
    return rates


def box_sql(table: str, box: tuple[float, float, float, float]) -> str:
    lat0, lat1, lon0, lon1 = box
    return (f"SELECT count(*) AS n, sum(NumArticles) AS articles, avg(AvgTone) AS tone FROM {table} "
            f"WHERE {LAT} BETWEEN {lat0} AND {lat1} AND {LON} BETWEEN {lon0} AND {lon1}")


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if a["n"] != b["n"] or (a["articles"] or 0) != (b["articles"] or 0):
        return False
    if a["tone"] is None or b["tone"] is None:
        return a["tone"] is None and b["tone"] is None
    return abs(a["tone"] - b["tone"]) <= 1e-9 * max(1.0, abs(b["tone"]))


def _row_groups_read(con: Any, path: Path, box: tuple[float, float, float, float]) -> tuple[int, int]:
    """Row groups of the Parquet file whose lat/lon min/max overlap the box, and all of them."""
    lat0, lat1, lon0, lon1 = box
    rows = con.sql(
        f"SELECT row_group_id, path_in_schema, stats_min_value, stats_max_value FROM parquet_metadata('{path}') "
        f"WHERE path_in_schema IN ('{LAT}', '{LON}')").fetchall()
    bounds: dict[int, dict[str, tuple[float, float]]] = {}
    for group, column, lo, hi in rows:
        if lo is not None and hi is not None:
            bounds.setdefault(group, {})[column] = (float(lo), float(hi))
    total = len({r[0] for r in rows})
    read = sum(1 for b in bounds.values()
               if not (LAT in b and (b[LAT][1] < lat0 or b[LAT][0] > lat1))
               and not (LON in b and (b[LON][1] < lon0 or b[LON][0] > lon1)))
    return read + (total - len(bounds)), total


def main(rows: int = ROWS, boxes: int = BOXES, repeats: int = REPEATS, store: str | None = None,
         out: Path | None = None, echo: Callable[[str], None] = print) -> dict[str, Any]:
    import duckdb
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    import colonnade
    from colonnade.bench.gdelt_data import iter_batches
    from colonnade.schema.curves import curve_keys

    rates = encode_rates()
    echo(f"encode 10M points: hilbert {rates['hilbert'] / 1e6:.1f}M/s, zorder {rates['zorder'] / 1e6:.1f}M/s")
    echo(f"generating {rows:,} GDELT-shaped rows")
    table = pa.Table.from_batches(list(iter_batches(rows)))
    truth = duckdb.connect()
    truth.register("raw", table)
    report: dict[str, Any] = {"rows": rows, "boxes_per_size": boxes, "repeats": repeats,
                              "store": store or "scratch sqlite", "encode_points_per_s": rates,
                              "curve_dataset": {"partition_by": CURVE_PARTITION, "sort_by": CURVE_SORT},
                              "month_dataset": {"partition_by": "MonthYear", "sort_by": None}}
    with tempfile.TemporaryDirectory(prefix="colonnade-bench-geo-") as tmp:
        parquet = Path(tmp) / "gdelt-hilbert.parquet"
        order = pc.sort_indices(pa.table({"k": curve_keys("hilbert", table.column(LAT), table.column(LON), 16)}),
                                sort_keys=[("k", "ascending", "at_end")])
        pq.write_table(table.take(order), parquet, compression="zstd", row_group_size=PARQUET_ROW_GROUP)
        report["parquet"] = {"bytes": parquet.stat().st_size, "row_group_rows": PARQUET_ROW_GROUP,
                             "sorted_by": CURVE_SORT, "compression": "zstd"}
        reference = duckdb.connect()
        uri = store or str(Path(tmp) / "bench.db")
        with colonnade.connect(uri) as s:
            for name, partition, sort in (("geo_curve", CURVE_PARTITION, CURVE_SORT), ("geo_month", "MonthYear", None)):
                if name in s:
                    s.drop_dataset(name)
                ds = s.create_dataset(name, table.schema, partition_by=partition, sort_by=sort)
                start = time.perf_counter()
                done = ds.append(table)
                seconds = time.perf_counter() - start
                key = "curve_dataset" if name == "geo_curve" else "month_dataset"
                report[key].update({"ingest_seconds": round(seconds, 2), "ingest_rows_per_s": round(rows / seconds),
                                    "segments": done.segments, "bytes": done.bytes,
                                    "off_curve_rows": done.off_curve})
                echo(f"ingest {name}: {rows / seconds:,.0f} rows/s, {done.segments:,} segments"
                     + (f", {done.off_curve:,} rows without coordinates" if done.off_curve else ""))
            report["sizes"] = _run_boxes(s, truth, reference, parquet, table, boxes, repeats, echo)
            for name in ("geo_curve", "geo_month"):
                s.drop_dataset(name)
    report["target_1deg_max_share"] = 0.02
    one = report["sizes"]["1"]
    report["target_met"] = bool(one["curve"]["max_share"] <= 0.02 and rates["hilbert"] >= 20e6
                                and all(v["correct"] for v in report["sizes"].values()))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        text = write_report(out / "geo", report, markdown, chart)
        echo(text)
    return report


def _run_boxes(s: Any, truth: Any, reference: Any, parquet: Path, table: Any, boxes: int, repeats: int,
               echo: Callable[[str], None]) -> dict[str, Any]:
    rng = random.Random(42)
    lat = table.column(LAT).to_numpy(zero_copy_only=False)
    lon = table.column(LON).to_numpy(zero_copy_only=False)
    import numpy as np

    valid = np.flatnonzero(np.isfinite(lat) & np.isfinite(lon))
    sizes: dict[str, Any] = {}
    for side in SIDES:
        runs = []
        for _ in range(boxes):
            i = int(valid[rng.randrange(len(valid))])
            box = (lat[i] - side / 2, lat[i] + side / 2, lon[i] - side / 2, lon[i] + side / 2)
            expected = truth.sql(box_sql("raw", box)).to_arrow_table().to_pylist()[0]
            run: dict[str, Any] = {"box": [round(v, 4) for v in box], "rows": expected["n"]}
            ok = True
            for name in ("geo_curve", "geo_month"):
                query = box_sql(name, box)
                seconds, got = _median_time(partial(_first_row, s.sql, query), repeats)
                scan = s.explain(query).to_dict()["scans"][name][0]
                ok = ok and _same(got, expected)
                run[name] = {"seconds": seconds, "segments_read": scan["segments_scanned"],
                             "segments_total": scan["segments_total"]}
            sql = box_sql(f"read_parquet('{parquet}')", box)
            seconds, got = _median_time(partial(_first_row, lambda q: reference.sql(q).to_arrow_table(), sql), repeats)
            ok = ok and _same(got, expected)
            read, total = _row_groups_read(reference, parquet, box)
            run["parquet"] = {"seconds": seconds, "segments_read": read, "segments_total": total}
            run["correct"] = ok
            runs.append(run)
        summary: dict[str, Any] = {"runs": runs, "correct": all(r["correct"] for r in runs)}
        for key, name in (("curve", "geo_curve"), ("month", "geo_month"), ("parquet", "parquet")):
            shares = [r[name]["segments_read"] / max(1, r[name]["segments_total"]) for r in runs]
            summary[key] = {"p50_seconds": statistics.median(r[name]["seconds"] for r in runs),
                            "mean_share": statistics.mean(shares), "max_share": max(shares)}
        summary["speedup_vs_parquet"] = summary["parquet"]["p50_seconds"] / summary["curve"]["p50_seconds"]
        sizes[f"{side:g}"] = summary
        echo(f"{side:g}° boxes: curve p50 {summary['curve']['p50_seconds'] * 1000:.1f} ms, segments read "
             f"{summary['curve']['mean_share']:.2%} (max {summary['curve']['max_share']:.2%}); "
             f"by month {summary['month']['mean_share']:.2%}; Parquet p50 "
             f"{summary['parquet']['p50_seconds'] * 1000:.1f} ms, row groups {summary['parquet']['mean_share']:.2%}"
             f"{'' if summary['correct'] else '; WRONG ANSWERS'}")
    return sizes


def markdown(r: dict[str, Any]) -> str:
    c, m, p = r["curve_dataset"], r["month_dataset"], r["parquet"]
    lines = [
        "# Bounding-box queries on GDELT with space-filling-curve keys", "",
        f"{r['rows']:,} GDELT-shaped rows, store {r['store']}; {r['boxes_per_size']} boxes per size centred on "
        f"random events, p50 of {r['repeats']} runs each; every answer checked against DuckDB over the rows.", "",
        f"- curve layout: partition by `{c['partition_by']}`, sort by `{c['sort_by']}`: {c['segments']:,} segments, "
        f"ingest {c['ingest_rows_per_s']:,} rows/s, {c['off_curve_rows']:,} rows without coordinates "
        "(kept in the NULL partition)",
        f"- month layout: partition by `MonthYear`, unsorted: {m['segments']:,} segments, "
        f"ingest {m['ingest_rows_per_s']:,} rows/s",
        f"- reference: DuckDB over ZSTD Parquet ({p['bytes'] / 1e6:,.1f} MB) sorted by `{p['sorted_by']}`, "
        f"row groups of {p['row_group_rows']:,} rows",
        f"- key encoding, 10M points: Hilbert {r['encode_points_per_s']['hilbert'] / 1e6:.1f}M/s, "
        f"Z-order {r['encode_points_per_s']['zorder'] / 1e6:.1f}M/s (target ≥ 20M/s)", "",
        "| box | curve p50 | curve segments read (mean / max) | month segments read | Parquet p50 | "
        "Parquet row groups read | Parquet p50 / curve p50 | answers |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for side, s in r["sizes"].items():
        lines.append(
            f"| {side}° | {s['curve']['p50_seconds'] * 1000:.1f} ms | {s['curve']['mean_share']:.2%} / "
            f"{s['curve']['max_share']:.2%} | {s['month']['mean_share']:.2%} | "
            f"{s['parquet']['p50_seconds'] * 1000:.1f} ms | {s['parquet']['mean_share']:.2%} | "
            f"{s['speedup_vs_parquet']:.2f}x | {'equal' if s['correct'] else 'WRONG'} |")
    lines += ["", f"Target: a 1° box reads ≤ 2% of the segments; met: {'yes' if r['target_met'] else 'no'}.", ""]
    return "\n".join(lines)


def chart(r: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sides = list(r["sizes"])
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), constrained_layout=True)
    width = 0.27
    for j, (key, label, colour) in enumerate((("curve", "curve keys", "#1f77b4"), ("month", "by month", "#ff7f0e"),
                                              ("parquet", "Parquet (sorted)", "#7f7f7f"))):
        xs = [i + (j - 1) * width for i in range(len(sides))]
        axes[0].bar(xs, [r["sizes"][s][key]["mean_share"] * 100 for s in sides], width, label=label, color=colour)
        if key != "month":
            axes[1].bar(xs, [r["sizes"][s][key]["p50_seconds"] * 1000 for s in sides], width, label=label,
                        color=colour)
    for ax, title, unit in ((axes[0], "share of segments / row groups read", "% (log)"),
                            (axes[1], "query latency (p50)", "ms")):
        ax.set_xticks(range(len(sides)), [f"{s}° box" for s in sides])
        ax.set_title(title, fontsize=11)
        ax.set_ylabel(unit, fontsize=8)
        ax.legend(fontsize=8)
    axes[0].set_yscale("log")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
