"""Charts of a GDELT benchmark report: one PNG, ``gdelt.png``, with four log-scale panels.

Each panel is a horizontal bar per layout — ingest rate, read-every-column rate, read-one-column
rate (records per second, longer is faster) and bytes on disk per record (shorter is smaller) —
with the value written at the end of its bar. Bytes are per record because the row-oriented
baselines may hold only a prefix of the rows. Matplotlib's Agg backend is used, so no display is
needed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

PANELS = (
    ("ingest_rows_per_s", "ingest", "records/s (longer is faster)"),
    ("read_all_rows_per_s", "read every column", "records/s (longer is faster)"),
    ("read_one_rows_per_s", "read one column (MonthYear)", "records/s (longer is faster)"),
    ("bytes_per_record", "disk", "bytes per record (shorter is smaller)"),
)
COLOURS = {"colonnade": "#1f77b4", "reference": "#7f7f7f", "baseline": "#ff7f0e"}


def _kind(name: str) -> str:
    if name.startswith("colonnade"):
        return "colonnade"
    return "reference" if "reference" in name else "baseline"


def _value(layout: dict[str, Any], key: str) -> float | None:
    if key == "bytes_per_record":
        b, rows = layout.get("bytes"), layout.get("rows")
        return b / rows if b and rows else None
    v = layout.get(key)
    return float(v) if v else None


def _label(v: float, key: str) -> str:
    if key == "bytes_per_record":
        return f"{v:,.0f} B"
    for unit, div in (("M", 1e6), ("k", 1e3)):
        if v >= div:
            return f"{v / div:,.1f}{unit}/s"
    return f"{v:,.0f}/s"


def _name(layout: dict[str, Any], rows: int) -> str:
    name = str(layout["name"])
    if layout.get("rows") and layout["rows"] != rows:
        name += f"\n(first {layout['rows']:,} rows)"
    return name


def write_charts(report: dict[str, Any], out_dir: Path) -> list[Path]:
    """Write ``gdelt.png`` into ``out_dir`` and return the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layouts = list(report["layouts"])
    rows = int(report.get("rows") or 0)
    names = [_name(r, rows) for r in layouts]
    colours = [COLOURS[_kind(r["name"])] for r in layouts]
    fig, axes = plt.subplots(2, 2, figsize=(13, 3.0 + 0.55 * len(layouts) * 2), constrained_layout=True)
    for ax, (key, title, unit) in zip(axes.flat, PANELS, strict=True):
        values = [_value(r, key) for r in layouts]
        shown = [v for v in values if v]
        positions = range(len(layouts))
        ax.barh(positions, [v or 0 for v in values], color=colours, height=0.6)
        ax.set_yticks(list(positions), names, fontsize=8)
        ax.invert_yaxis()  # first layout on top, as in the Markdown table
        ax.set_title(title, fontsize=11)
        ax.set_xlabel(unit + ", log scale", fontsize=8)
        ax.grid(axis="x", which="major", alpha=0.3)
        if shown:
            ax.set_xscale("log")
            low, high = min(shown), max(shown)
            ax.set_xlim(low / 3, high * 12)  # room for the labels right of the longest bar
        else:
            ax.set_xticks([])
        for y, v in zip(positions, values, strict=True):
            if v:
                ax.text(v * 1.15, y, _label(v, key), va="center", fontsize=8)
            else:
                ax.text(0.01, y, "not measured", va="center", fontsize=8, color="#999999",
                        transform=ax.get_yaxis_transform())
    from colonnade.config import parse_store_uri

    store = parse_store_uri(report["store"]).display if report.get("store") else ""
    machine = report.get("machine") or {}
    where = f"{machine.get('cpus', '?')} CPUs, {machine.get('cpu', '')}".strip().rstrip(",")
    fig.suptitle(f"GDELT layout study: {rows:,} records, median of {report.get('repeats', '?')} — "
                 f"{store} — {where}", fontsize=10)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = Path(out_dir) / "gdelt.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


# -- ad impressions ----------------------------------------------------------------------------------
QUERY_COLOURS = {"Q1": "#1f77b4", "Q2": "#2ca02c", "Q3": "#d62728"}
REFERENCE_COLOURS = {"ceiling": "#7f7f7f", "duckdb": "#9467bd", "cassandra": "#ff7f0e"}


def write_adimpressions_chart(report: dict[str, Any], path: Path) -> Path:
    """One PNG of an ad impressions report, four panels: Colonnade's ingest rate over time (5-s
    windows, the references' mean rates as dashed lines), each query's latency over time,
    freshness per commit over time (checkpoints marked in all three), and each query's p50 time
    per million events scanned for Colonnade and the references (log scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    col = report["colonnade"]
    refs = {k: v for k, v in (report.get("references") or {}).items() if "skipped" not in v}
    fig, axes = plt.subplots(2, 2, figsize=(14, 8.5), constrained_layout=True)
    ax = axes[0][0]
    timeline = dict(col.get("ingest_timeline") or [])
    if timeline:
        end = max(timeline)
        xs = list(range(0, end + 1))
        per_s = [timeline.get(x, 0) for x in xs]
        smooth = [sum(per_s[max(0, i - 4):i + 1]) / len(per_s[max(0, i - 4):i + 1]) for i in range(len(per_s))]
        ax.plot(xs, smooth, color=COLOURS["colonnade"], label="colonnade (5-s mean)")
    for key, r in refs.items():
        if r.get("events_per_s"):
            ax.axhline(r["events_per_s"], ls="--", color=REFERENCE_COLOURS.get(key, "#333333"),
                       label=f"{r['name']}: {_label(r['events_per_s'], '')}")
    ax.set_title("ingest rate while querying", fontsize=11)
    ax.set_xlabel("seconds since the stream started", fontsize=8)
    ax.set_ylabel("events/s (log)", fontsize=8)
    ax.set_yscale("log")
    ax.legend(fontsize=7)
    ax = axes[0][1]
    for q, colour in QUERY_COLOURS.items():
        runs = [r for r in report.get("queries", []) if r["query"] == q]
        ax.scatter([r["started"] for r in runs], [r["seconds"] for r in runs], s=6, color=colour, label=q)
    ax.set_title("query latency while ingesting (colonnade)", fontsize=11)
    ax.set_xlabel("seconds since the stream started (query start)", fontsize=8)
    ax.set_ylabel("seconds", fontsize=8)
    ax.legend(fontsize=7)
    ax = axes[1][0]
    commits = [c for c in report.get("commits", []) if c.get("freshness_s") is not None]
    main = [c for c in commits if c["total"] <= report["events"]]
    after = [c for c in commits if c["total"] > report["events"]]
    ax.scatter([c["at"] for c in main], [c["freshness_s"] for c in main], s=6, color="#8c564b",
               label="main phase (full speed: includes the backlog)")
    ax.scatter([c["at"] for c in after], [c["freshness_s"] for c in after], s=6, color="#17becf",
               label=f"at {report.get('freshness_rate') or 0:,.0f} events/s")
    ax.set_title("freshness per commit (visible − oldest event's Kafka timestamp)", fontsize=11)
    ax.set_xlabel("seconds since the stream started", fontsize=8)
    ax.set_ylabel("seconds", fontsize=8)
    if commits:
        ax.set_yscale("log")
    ax.legend(fontsize=7)
    for a in (axes[0][0], axes[0][1], axes[1][0]):
        for c in col.get("checkpoints", []):
            a.axvline(c["at_s"], color="#bbbbbb", lw=0.8)
            a.text(c["at_s"], 1.0, c["label"], fontsize=7, transform=a.get_xaxis_transform(), ha="center",
                   va="bottom")
    ax = axes[1][1]
    systems = [("colonnade", col.get("queries_main") or {})]
    from colonnade.bench.adimpressions_refs import QueryRun
    from colonnade.bench.adimpressions_report import latency_summary

    for key in ("duckdb", "cassandra"):
        if key in refs:
            systems.append((key, latency_summary([QueryRun(**q) for q in refs[key].get("queries", [])])))
    width = 0.8 / max(1, len(systems))
    for i, (name, lat) in enumerate(systems):
        values = [float((lat.get(q) or {}).get("p50_s_per_million_events") or 0) for q in QUERY_COLOURS]
        bars = [j + i * width for j in range(len(QUERY_COLOURS))]
        ax.bar(bars, values, width=width, label=name,
               color=COLOURS["colonnade"] if name == "colonnade" else REFERENCE_COLOURS[name])
        for x, v in zip(bars, values, strict=True):
            if v:
                ax.text(x, v * 1.1, f"{v:.3g}", ha="center", fontsize=7)
    ax.set_xticks([j + width * (len(systems) - 1) / 2 for j in range(len(QUERY_COLOURS))], list(QUERY_COLOURS))
    ax.set_yscale("log")
    ax.set_title("query p50 per million events scanned, while ingesting", fontsize=11)
    ax.set_ylabel("seconds per million events (log)", fontsize=8)
    ax.legend(fontsize=7)
    machine = report.get("machine") or {}
    fig.suptitle(f"Ad impressions: {report['events']:,} events via Kafka into {report.get('store', '')} — "
                 f"{machine.get('cpus', '?')} CPUs, {machine.get('cpu', '')}", fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
