"""The report of ``colonnade bench aqp``: Markdown, and one PNG of two panels (the seed queries'
latency exactly and from the sample, log scale; coverage per aggregate kind against the 0.93–0.97
band). Matplotlib's Agg backend: no display needed."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def markdown(r: dict[str, Any]) -> str:
    s, ingest, build = r["sample"], r["ingest"], r["build"]
    median = (f"; the median of the commits' pairs: {ingest['cost_share_median_commit']:.1%}; the "
              "ground truth is built after the timed appends" if "cost_share_median_commit" in ingest else "")
    rounds = ingest.get("rounds", [])
    each = (f"the median of {len(rounds)} rounds from empty datasets: "
            + ", ".join(f"{r['cost_share']:.1%}" for r in rounds) + "; ") if len(rounds) > 1 else ""
    lines = [
        f"# Approximate answers: {r['events']:,} ad impressions ({r['store']})", "",
        f"Sample `{s['name']}` on ({', '.join(r['on'])}), fraction {r['fraction']}, at least "
        f"{r['min_per_stratum']} rows per stratum: {s['rows']:,} rows ({s['share']:.2%} of the "
        f"events) in {s['strata']:,} strata, kept current by every append.", "",
        "## Keeping the sample current", "",
        "| | rows/s | seconds" + (f" (all {len(rounds)} rounds)" if len(rounds) > 1 else "") + " |",
        "|---|---|---|",
        f"| append without a sample | {ingest['plain_rows_per_s']:,} | {ingest['plain_seconds']} |",
        f"| append with the sample maintained | {ingest['sampled_rows_per_s']:,} | {ingest['sampled_seconds']} |",
        "",
        f"Commits of {ingest['commit_events']:,} events (in-memory Arrow tables, the fastest "
        f"appends there are), the two datasets alternately, each first every other commit (ABBA). Keeping the sample current takes "
        f"**{ingest['cost_share']:.1%}** of ingest throughput "
        f"({each}{ingest['maintenance_us_per_row']} µs per appended row{median}). A build from scratch takes "
        f"{build['seconds']} s ({build['rows_per_s']:,} rows/s).", "",
        f"## Seed queries (median of {r['repeats']})", "",
        "| query | exact | WITH ERROR (do_nothing) | speedup | default behavior | groups | "
        "largest actual rel. error | median | exact answer |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for q in r["seed_queries"]:
        lines.append(f"| {q['query']} | {q['exact_ms']} ms | {q['approx_ms']} ms | **{q['speedup']}x** | "
                     f"{q['default_behavior_ms']} ms | {q['groups']} | {q['max_actual_relative_error']} | "
                     f"{q['median_actual_relative_error']} | "
                     f"{'correct' if q['exact_correct'] else 'WRONG'} |")
    lines += ["", "Queries:", ""] + [f"- {q['query']}: `{q['sql']} WITH ERROR {r['error']}`"
                                     for q in r["seed_queries"]]
    rnd = r["random"]
    lines += ["", f"## Coverage: {rnd['queries']} random queries at confidence {r['confidence']}", "",
              "Group columns from the sample's and others, filters on both, 1–3 aggregates each; "
              "a group counts when its relative error is known (at least 10 sample rows).", "",
              "| aggregate | groups | within bounds | coverage | error unknown | actual / stated rel. error (median) |",
              "|---|---|---|---|---|---|"]
    for kind, v in rnd["kinds"].items():
        lines.append(f"| {kind} | {v['groups']:,} | {v['covered']:,} | **{v['coverage']}** | "
                     f"{v['error_unknown']:,} | {v['median_actual_over_stated']} |")
    lines += ["", f"Groups of the true answer missing from the sample's: {rnd['groups_missing_from_sample']:,}. "
              f"Approximate queries took {rnd['approx_seconds']} s in all.", ""]
    return "\n".join(lines)


def chart(r: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.6), constrained_layout=True)
    names = [q["query"] for q in r["seed_queries"]]
    xs = range(len(names))
    left.bar([x - 0.2 for x in xs], [q["exact_ms"] for q in r["seed_queries"]], 0.4, label="exact")
    left.bar([x + 0.2 for x in xs], [q["approx_ms"] for q in r["seed_queries"]], 0.4,
             label=f"WITH ERROR {r['error']}")
    for x, q in zip(xs, r["seed_queries"], strict=True):
        left.annotate(f"{q['speedup']}x", (x + 0.2, q["approx_ms"]), ha="center", va="bottom")
    left.set_xticks(list(xs), names)
    left.set_yscale("log")
    left.set_ylabel("ms (median)")
    left.set_title(f"seed queries, {r['events']:,} events ({r['store']})")
    left.legend()
    kinds = list(r["random"]["kinds"])
    coverage = [r["random"]["kinds"][k]["coverage"] or 0 for k in kinds]
    right.axhspan(0.93, 0.97, color="#cccccc", alpha=0.5, label="0.93–0.97")
    right.bar(kinds, coverage, color="#1f77b4")
    for k, c in zip(kinds, coverage, strict=True):
        right.annotate(f"{c:.3f}", (k, c), ha="center", va="bottom")
    right.set_ylim(0.85, 1.0)
    right.set_title(f"coverage at {r['confidence']}, {r['random']['queries']} random queries")
    right.legend(loc="lower right")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
