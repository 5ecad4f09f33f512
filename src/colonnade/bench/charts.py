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
