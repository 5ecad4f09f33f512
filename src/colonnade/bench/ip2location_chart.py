"""The chart of ``colonnade bench ip2location``: one PNG, three panels.

1. load rate over time: Colonnade's (addresses handed to the writers per second, all workers)
   and each row layout's inserts per second, log scale;
2. point-lookup latency: every lookup of each system as a dot, sorted (p50 and p95 marked),
   log scale (the row layouts: with ``ALLOW FILTERING``, and with the partition key given);
3. bytes stored per address, per column (Colonnade).

Matplotlib's Agg backend: no display needed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

COLONNADE = "#1f77b4"
LAYOUT_COLOURS = {"country": "#ff7f0e", "country_region_city": "#2ca02c"}


def per_second(timeline: list[tuple[float, int]], width: float = 1.0) -> tuple[list[float], list[float]]:
    """Rates (rows/s) over windows of ``width`` seconds of a cumulative (seconds, rows) timeline."""
    if len(timeline) < 2:
        return [], []
    end = max(t for t, _ in timeline)
    xs: list[float] = []
    ys: list[float] = []
    points = sorted(timeline)
    at, j, prev = width, 0, 0
    while at - width < end:
        while j < len(points) and points[j][0] <= at:
            j += 1
        done = points[j - 1][1] if j else 0
        xs.append(at)
        ys.append((done - prev) / width)
        prev = done
        at += width
    return xs, ys


def write_chart(report: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(17, 5.2), constrained_layout=True)
    layouts = ((report.get("reference") or {}).get("layouts") or {})
    ax = axes[0]
    load = report["load"]
    width = max(1.0, load["seconds"] / 60)
    xs, ys = per_second([(float(t), int(n)) for t, n in load["timeline"]], width)
    ax.plot(xs, [y or float("nan") for y in ys], color=COLONNADE, drawstyle="steps-pre",
            label=f"colonnade ({report['store_kind']}): {load['rows_per_s']:,.0f}/s overall")
    for name, r in layouts.items():
        w = max(5.0, r["seconds"] / 10)  # progress comes every 5,000 rows: windows must hold some
        rx, ry = per_second([(float(t), int(n)) for t, n in r["timeline"]], w)
        ax.plot(rx, [y or float("nan") for y in ry], color=LAYOUT_COLOURS.get(name, "#777777"), drawstyle="steps-pre",
                label=f"rows {r['primary_key']}: {r['rows_per_s']:,.0f}/s")
    ax.set_yscale("log")
    ax.set_title("load rate over time", fontsize=11)
    ax.set_xlabel("seconds since the load started", fontsize=8)
    ax.set_ylabel("addresses (rows) per second, log", fontsize=8)
    ax.legend(fontsize=7)
    ax = axes[1]
    series = [("colonnade", [r["seconds"] for r in report["queries"]["lookups"]["runs"]], COLONNADE)]
    for name, r in layouts.items():
        colour = LAYOUT_COLOURS.get(name, "#777777")
        key = name.replace("_", "+")
        for kind, label in (("ip_only", "ALLOW FILTERING"), ("partition_key_known", "key known")):
            runs = [x["seconds"] for x in r["lookups"][kind]["runs"] if x["error"] is None]
            series.append((f"rows: {key}\n{label}", runs, colour))
    for i, (_, values, colour) in enumerate(series):
        ordered = sorted(values)
        if not ordered:
            continue
        n = len(ordered)
        ax.scatter([i + (k / max(1, n - 1) - 0.5) * 0.6 for k in range(n)], [v * 1000 for v in ordered], s=5,
                   color=colour)
        p50, p95 = ordered[max(0, (n + 1) // 2 - 1)], ordered[max(0, -(-95 * n // 100) - 1)]
        ax.hlines([p50 * 1000, p95 * 1000], i - 0.35, i + 0.35, colors=["black", "grey"], linewidth=1)
        ax.text(i, p95 * 1000 * 1.15, f"p50 {p50 * 1000:.1f}\np95 {p95 * 1000:.1f}", ha="center", fontsize=7)
    ax.set_xticks(range(len(series)), [s[0] for s in series], fontsize=7, rotation=15)
    ax.set_yscale("log")
    ax.set_ylabel("milliseconds per lookup, log", fontsize=8)
    ax.set_title("point lookups WHERE ip = X (sorted; p50 black, p95 grey)", fontsize=11)
    ax = axes[2]
    cols = load["column_bytes"]
    names = list(cols)
    values = [cols[c] / max(1, load["rows"]) for c in names]
    ax.barh(range(len(names)), values, color=COLONNADE)
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.invert_yaxis()
    for y, v in enumerate(values):
        ax.text(v, y, f" {v:.4f}", va="center", fontsize=7)
    ax.set_title(f"bytes stored per address: {load['bytes_per_address']:.3f} in all", fontsize=11)
    ax.set_xlabel("bytes per address", fontsize=8)
    m = report.get("machine") or {}
    fig.suptitle(f"IP2Location DB11-like: {report['addresses']:,} addresses ({report['ranges']:,} ranges) into "
                 f"{report['store']} — {m.get('cpus', '?')} CPUs, {m.get('cpu', '')}", fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
