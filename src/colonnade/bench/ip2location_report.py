"""The report of ``colonnade bench ip2location``: ratios, targets, machine and versions, Markdown."""

from __future__ import annotations

from typing import Any

#: Targets (not tuned to the results: a miss is reported with what the profile shows).
MIN_LOAD = {"cassandra": 1_000_000, "sqlite": 2_000_000}  # addresses/s
MIN_LOAD_VS_ROWS = 30.0
MAX_BYTES_PER_ADDRESS = 1.0
MAX_COUNT_S = 0.050
COUNT_TARGET_ROWS = 100_000_000
MAX_LOOKUP_P50_CASSANDRA_S = 0.020


def best_reference(report: dict[str, Any]) -> dict[str, Any] | None:
    """The faster of the row layouts (the stronger reference)."""
    layouts = (report.get("reference") or {}).get("layouts") or {}
    done = [v for v in layouts.values() if v.get("rows_per_s")]
    return max(done, key=lambda v: v["rows_per_s"]) if done else None


def ratios(report: dict[str, Any]) -> dict[str, float]:
    rate = report["load"]["rows_per_s"]
    out: dict[str, float] = {}
    for name, r in ((report.get("reference") or {}).get("layouts") or {}).items():
        if r.get("rows_per_s"):
            out[f"load_vs_{name}"] = rate / r["rows_per_s"]
    return out


def targets(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target with the measured figure and whether it is met (None: not measured here)."""
    kind = report["store_kind"]
    load = report["load"]
    q = report["queries"]
    out: list[dict[str, Any]] = []
    floor = MIN_LOAD.get(kind)
    if floor:
        out.append({"target": f"load >= {floor:,} addresses/s into {kind}", "measured": load["rows_per_s"],
                    "unit": "/s", "met": load["rows_per_s"] >= floor})
    best = best_reference(report)
    out.append({"target": f"load >= {MIN_LOAD_VS_ROWS:g}x the faster row layout measured in the same run",
                "measured": load["rows_per_s"] / best["rows_per_s"] if best else None, "unit": "x",
                "met": (load["rows_per_s"] / best["rows_per_s"] >= MIN_LOAD_VS_ROWS) if best else None})
    out.append({"target": f"<= {MAX_BYTES_PER_ADDRESS:g} byte stored per address",
                "measured": load["bytes_per_address"], "unit": "B",
                "met": load["bytes_per_address"] <= MAX_BYTES_PER_ADDRESS})
    rows = report["addresses"]
    count = q["count"]["median_s"]
    note = "" if rows >= COUNT_TARGET_ROWS else f" (measured over {rows:,} rows)"
    out.append({"target": f"exact count(*) over {COUNT_TARGET_ROWS / 1e6:g}M rows <= {MAX_COUNT_S * 1000:g} ms{note}",
                "measured": count, "unit": "s",
                "met": (count <= MAX_COUNT_S) if rows >= COUNT_TARGET_ROWS else None})
    p50 = q["lookups"]["p50_s"]
    if kind == "cassandra":
        out.append({"target": f"point lookup p50 <= {MAX_LOOKUP_P50_CASSANDRA_S * 1000:g} ms on Cassandra",
                    "measured": p50, "unit": "s", "met": p50 is not None and p50 <= MAX_LOOKUP_P50_CASSANDRA_S})
    else:
        out.append({"target": f"point lookup p50 <= {MAX_LOOKUP_P50_CASSANDRA_S * 1000:g} ms on Cassandra",
                    "measured": p50, "unit": "s", "met": None, "note": "a Cassandra target: not this store"})
    return out


def versions(contact: str | None) -> dict[str, Any]:
    """Hardware and the versions of everything measured."""
    import numpy

    import colonnade
    from colonnade.bench.gdelt import machine

    out = machine()
    out.update({"colonnade": colonnade.__version__, "numpy": numpy.__version__})
    try:
        import cassandra as driver

        out["cassandra_driver"] = driver.__version__
    except ImportError:
        pass
    out["cassandra_contact"] = contact
    return out


# -- Markdown --------------------------------------------------------------------------------------
def _ms(v: float | None) -> str:
    return "-" if v is None else (f"{v * 1000:,.1f} ms" if v < 1 else f"{v:,.2f} s")


def _rate(v: float | None) -> str:
    return "-" if not v else f"{v:,.0f}/s"


def _shown(t: dict[str, Any]) -> str:
    v = t["measured"]
    if v is None:
        return "-"
    return {"/s": _rate(v), "x": f"{v:,.0f}x", "B": f"{v:.3f} B", "s": _ms(v)}[t["unit"]]


def _per(nbytes: int | None, rows: int) -> str:
    if not nbytes:
        return "-"
    per = nbytes / max(1, rows)
    return f"{per:,.3f}" if per < 10 else f"{per:,.1f}"


def _met(m: bool | None) -> str:
    return "n/a" if m is None else ("yes" if m else "**no**")


def markdown(report: dict[str, Any]) -> str:
    load, q, m = report["load"], report["queries"], report.get("machine", {})
    lines = [f"# IP2Location DB11-like bulk load ({report['store_kind']})", "",
             f"A generated DB11-like table of {report['ranges']:,} IPv4 ranges (seed {report['seed']}) expanded to "
             f"one row per address: **{report['addresses']:,} rows** loaded into `{report['store']}` by "
             f"{load['workers']} worker processes (each generates its slice of the address space and writes it "
             f"with `write_part`), committed once.", "",
             "## Load", "",
             "| system | rows | wall time | addresses/s | bytes stored per address | on disk per address |",
             "|---|---|---|---|---|---|",
             f"| colonnade ({report['store_kind']}) | {load['rows']:,} | {load['seconds']:,.1f} s | "
             f"**{_rate(load['rows_per_s'])}** | {load['bytes_per_address']:.3f} | {_per(load.get('disk_bytes'), load['rows'])} |"]
    ref = report.get("reference") or {}
    for r in (ref.get("layouts") or {}).values():
        lines.append(f"| cassandra rows `{r['primary_key']}` | {r['rows']:,} | {r['seconds']:,.1f} s | "
                     f"{_rate(r['rows_per_s'])} | - | {_per(r.get('disk_bytes'), r['rows'])} |")
    if ref.get("skipped"):
        lines.append(f"| cassandra rows (both layouts) | skipped: {ref['skipped']} | | | | |")
    col_bytes = load["column_bytes"]
    lines += ["", f"Wall time runs from starting the workers to the commit (process start-up and data generation "
                  f"included); the commit took {_ms(load['commit_s'])}. Worker CPU: "
                  + ", ".join(f"{c:,.1f} s" for c in load["worker_cpu_s"])
                  + f" ({sum(load['worker_cpu_s']) / max(1, load['rows']) * 1e9:,.0f} ns per address). "
                  f"{load['segments']:,} segments. Stored bytes (chunk bytes the store holds, per column, per "
                  "address): " + ", ".join(f"{k} {v / max(1, load['rows']):.4f}" for k, v in col_bytes.items())
                  + (f"; the SQLite file is {load['disk_bytes'] / 2**20:,.1f} MiB" if report["store_kind"] == "sqlite"
                     and load.get("disk_bytes") else "")
                  + (f"; {load['disk_note']}" if load.get("disk_note") else "") + ".", ""]
    lines += ["## Queries", "", "| query | colonnade | " + " | ".join(
        f"rows `{r['primary_key']}`" for r in (ref.get("layouts") or {}).values()) + " |",
        "|---|---|" + "---|" * len(ref.get("layouts") or {})]
    c = q["count"]
    cells = []
    for r in (ref.get("layouts") or {}).values():
        rc = r["count"]
        cells.append(f"{rc['answer']:,} in {_ms(rc['seconds'])}" if rc["error"] is None else
                     f"failed after {_ms(rc['seconds'])}: {rc['error'][:120]}")
    lines.append(f"| `SELECT count(*)` | {c['answer']:,} in {_ms(c['median_s'])} (median of {len(c['runs_s']) - 1}; "
                 f"first {_ms(c['first_s'])}; answered from {c['answered_from']}) | " + " | ".join(cells) + " |")
    lk = q["lookups"]
    cells = []
    for r in (ref.get("layouts") or {}).values():
        a, b = r["lookups"]["ip_only"], r["lookups"]["partition_key_known"]
        cells.append(f"{_ms(a['p50_s'])} / {_ms(a['p95_s'])} (n={a['n']}, {a['errors']} failed); partition key "
                     f"known: {_ms(b['p50_s'])} / {_ms(b['p95_s'])}")
    lines.append(f"| `WHERE ip = X` p50 / p95 | {_ms(lk['p50_s'])} / {_ms(lk['p95_s'])} (n={lk['n']}; read "
                 f"{lk['explain'].get('segments_read', '-')} of {lk['explain'].get('segments_total', '-')} segments, "
                 f"{lk['explain'].get('chunks_read', '-')} chunks) | " + " | ".join(cells) + " |")
    for i, bc in enumerate(q["by_country"]):
        cells = []
        for r in (ref.get("layouts") or {}).values():
            rb = r["by_country"][i] if i < len(r["by_country"]) else None
            cells.append("-" if rb is None else (f"{rb['country']}: {rb['answer']:,} in {_ms(rb['seconds'])}"
                                                 if rb["error"] is None else f"{rb['country']}: failed: {rb['error'][:80]}"))
        lines.append(f"| `count(*) WHERE country_code = '{bc['country']}'` | {bc['answer']:,} in {_ms(bc['seconds'])} "
                     f"({bc['explain'].get('answered_from')}, {bc['explain'].get('chunks_read', 0)} chunks) | "
                     + " | ".join(cells) + " |")
    if ref.get("layouts"):
        lines += ["", f"The row layouts hold the first {ref['rows']:,} addresses only (their own lookups and "
                      "countries are drawn from that prefix: a smaller table than Colonnade's). `WHERE ip = X` on "
                      "them needs `ALLOW FILTERING` (ip is a clustering column: one seek per partition); "
                      "\"partition key known\" is the same lookup given the answer's partition key, which an ip "
                      "lookup does not know."]
    lines += ["", "## Checks", ""]
    lines.append(f"- colonnade: count(*), {lk['n']} lookups ({sum(1 for r in lk['runs'] if not r['found'])} of "
                 f"unallocated ips) and {len(q['by_country'])} country counts equal the ground truth from the "
                 f"range table: {'yes' if not q['problems'] else 'NO'}")
    for name, r in (ref.get("layouts") or {}).items():
        lines.append(f"- {name}: answers equal the ground truth of the prefix: {'yes' if not r['problems'] else 'NO'}")
    lines += [f"- **problem**: {p}" for p in report.get("problems", [])]
    if ref.get("layouts"):
        lines += ["", "## Reference settings", ""]
        lines += [f"- {k}: {v}" for k, v in ref["settings"].items()]
        lines.append("- processes, rows/s on the calibration table: " + ", ".join(
            f"{p}: {r:,.0f}" for p, r in ref["calibration_rows_per_s"].items()) + f" → **{ref['processes']}** used")
        lines.append(f"- Cassandra {ref.get('cassandra')} at {ref.get('contact')} (one node, sharing the machine)")
    lines += ["", "## Ratios", ""]
    lines += [f"- {k.replace('_', ' ')}: {v:,.0f}x" for k, v in ratios(report).items()] or ["- none (no reference)"]
    lines += ["", "## Targets", "", "| target | measured | met |", "|---|---|---|"]
    for t in report["targets"]:
        lines.append(f"| {t['target']} | {_shown(t)} | {_met(t['met'])} |")
    notes = report.get("notes") or []
    if notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    lines += ["", "## Machine and versions", "",
              f"{m.get('cpus')} CPUs ({m.get('cpu')}), {(m.get('memory_bytes') or 0) / 2**30:.0f} GiB; Python "
              f"{m.get('python')}; pyarrow {m.get('pyarrow')}, numpy {m.get('numpy')}, DuckDB {m.get('duckdb')}, "
              f"cassandra-driver {m.get('cassandra_driver', '-')}; Cassandra {ref.get('cassandra') or '-'}; "
              f"colonnade {m.get('colonnade')}. Dataset: partitioned by `{report['dataset']['partition_by']}`, "
              f"{report['dataset']['segment_rows']:,} rows per segment, {report['dataset']['compression']} chunks."]
    return "\n".join(lines) + "\n"
