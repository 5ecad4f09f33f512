"""The report of ``colonnade bench adimpressions``: figures from the recorded commits and
queries, ratios against the references, the targets, versions, and the Markdown text.

Percentiles are nearest-rank (p95 of 20 values is the 19th smallest). Query latencies are
grouped by the row count visible when each query started: the third of the main phase it falls
in, or the freshness phase after it.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from colonnade.bench.adimpressions_refs import QUERIES, QueryRun

#: Targets the product must reach (``store_kind`` → minimum sustained events/s).
MIN_INGEST = {"sqlite": 100_000, "cassandra": 60_000}
MIN_INGEST_VS_CEILING = 0.7
MAX_QUERY_P50_S = 1.0


def percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)]


def latency_summary(runs: list[QueryRun]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for q in QUERIES:
        s = [r.seconds for r in runs if r.query == q]
        per = [r.seconds / r.rows * 1e6 for r in runs if r.query == q and r.rows]
        out[q] = {"n": len(s), "p50_s": percentile(s, 0.5), "p95_s": percentile(s, 0.95),
                  "p50_s_per_million_events": percentile(per, 0.5)}
    return out


def _fresh(commits: list[dict[str, Any]]) -> dict[str, Any]:
    f = [c["freshness_s"] for c in commits if c.get("freshness_s") is not None]
    return {"commits": len(f), "p50_s": percentile(f, 0.5), "p95_s": percentile(f, 0.95),
            "max_s": max(f) if f else None}


def _label(n: float) -> str:
    for unit, div in (("M", 1e6), ("k", 1e3)):
        if n >= div:
            return f"{n / div:.3g}{unit}"
    return f"{n:g}"


def summarise(commits: list[dict[str, Any]], runs: list[QueryRun], events: int, start: float,
              segments_at: dict[int, int], commit_interval: float) -> dict[str, Any]:
    """Per third of the main phase (ending at the commit that made it visible): ingest rate over
    that third, query latencies of the queries started in it, freshness of its commits,
    segments; then the same for the freshness phase; and a per-second ingest timeline."""
    marks = [events // 3, 2 * events // 3, events]
    checkpoints = []
    prev_rows, prev_t = 0, start
    for mark in marks:
        c = next((c for c in commits if c["total"] >= mark), None)
        if c is None:
            continue
        span, rows = c["at"] - prev_t, c["total"] - prev_rows
        if span <= 0:  # one commit crossed two marks: the rate of that commit's interval
            i = commits.index(c)
            span, rows = c["at"] - (commits[i - 1]["at"] if i else start), c["rows"]
        inside = [r for r in runs if prev_rows < r.rows <= c["total"]]
        checkpoints.append({
            "label": _label(mark), "events": mark, "visible": c["total"], "at_s": c["at"],
            "version": c["version"], "ingest_events_per_s": rows / span if span > 0 else None,
            "queries": latency_summary(inside),
            "freshness": _fresh([x for x in commits if prev_rows < x["total"] <= c["total"]]),
            "segments": segments_at.get(c["version"])})
        prev_rows, prev_t = c["total"], c["at"]
    end = next((c for c in commits if c["total"] >= events), None)
    sustained = events / (end["at"] - start) if end and end["at"] > start else None
    after = [c for c in commits if c["total"] > events]
    timeline: dict[int, int] = {}
    for c in commits:
        timeline[int(c["at"])] = timeline.get(int(c["at"]), 0) + c["rows"]
    return {
        "start_s": start, "sustained_events_per_s": sustained, "checkpoints": checkpoints,
        "queries_main": latency_summary([r for r in runs if r.rows <= events]),
        "freshness_main": _fresh([c for c in commits if c["total"] <= events]),
        "freshness_phase": {"freshness": _fresh(after), "queries": latency_summary([r for r in runs if r.rows > events]),
                            "target_p95_s": commit_interval + 1.0},
        "ingest_timeline": sorted(timeline.items()),
    }


def ratios(report: dict[str, Any]) -> dict[str, Any]:
    """Colonnade against the references measured in the same run."""
    col = report["colonnade"]
    rate = col.get("sustained_events_per_s")
    refs = report.get("references", {})
    out: dict[str, Any] = {}
    for name in ("ceiling", "duckdb", "cassandra"):
        r = refs.get(name) or {}
        if rate and r.get("events_per_s"):
            out[f"ingest_vs_{name}"] = rate / r["events_per_s"]
    runs = [QueryRun(**q) for q in report.get("queries", [])]
    mine = latency_summary([r for r in runs if r.rows <= report["events"]])
    for name in ("cassandra", "duckdb"):
        r = refs.get(name) or {}
        theirs = latency_summary([QueryRun(**q) for q in r.get("queries", [])])
        for q in QUERIES:
            a, b = mine[q]["p50_s_per_million_events"], theirs[q]["p50_s_per_million_events"]
            if a and b:
                out[f"{q}_time_per_event_{name}_over_colonnade"] = b / a
    return out


def targets(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target with the measured figure and whether it is met."""
    col = report["colonnade"]
    rate = col.get("sustained_events_per_s")
    ceiling = (report.get("references", {}).get("ceiling") or {}).get("events_per_s")
    out = []
    floor = MIN_INGEST.get(report["store_kind"])
    if floor:
        out.append({"target": f"sustained ingest >= {floor:,} events/s with queries running",
                    "measured": rate, "met": bool(rate and rate >= floor)})
    if ceiling:
        out.append({"target": f"sustained ingest >= {MIN_INGEST_VS_CEILING}x the ceiling",
                    "measured": rate / ceiling if rate else None,
                    "met": bool(rate and rate / ceiling >= MIN_INGEST_VS_CEILING)})
    last = col["checkpoints"][-1]["queries"] if col["checkpoints"] else {}
    for q in QUERIES:
        p50 = (last.get(q) or {}).get("p50_s")
        out.append({"target": f"{q} p50 <= {MAX_QUERY_P50_S:g} s at {_label(report['events'])} events while "
                              "ingesting", "measured": p50, "met": p50 is not None and p50 <= MAX_QUERY_P50_S})
    fp = col["freshness_phase"]
    p95 = fp["freshness"]["p95_s"]
    out.append({"target": f"freshness p95 <= commit interval + 1 s = {fp['target_p95_s']:g} s",
                "measured": p95, "met": p95 is not None and p95 <= fp["target_p95_s"]})
    return out


def versions(bootstrap: str, cassandra: str | None) -> dict[str, Any]:
    """Hardware and the versions of everything measured."""
    import confluent_kafka
    import numpy

    import colonnade
    from colonnade.bench.gdelt import machine

    out = machine()
    out.update({"colonnade": colonnade.__version__, "numpy": numpy.__version__,
                "confluent_kafka": confluent_kafka.__version__, "librdkafka": confluent_kafka.libversion()[0],
                "kafka": _kafka_version(), "kafka_bootstrap": bootstrap})
    try:
        import cassandra as driver

        out["cassandra_driver"] = driver.__version__
    except ImportError:
        pass
    if cassandra:
        out["cassandra"] = _cassandra_version(cassandra)
    return out


def _kafka_version() -> str | None:
    """The version of a Kafka broker running on this machine, from its command line."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "kafka.Kafka" in text:
            m = re.search(r"dist-([0-9][0-9.]*)/lib", text) or re.search(r"kafka_2\.\d+-([0-9.]+)\.jar", text)
            if m:
                return m.group(1)
    return None


def _cassandra_version(contact: str) -> str | None:
    from colonnade.bench.common import cassandra_reachable

    if not cassandra_reachable(contact):
        return None
    from cassandra import ProtocolVersion
    from cassandra.cluster import Cluster

    host, _, port = contact.rpartition(":")
    cluster = Cluster([host], port=int(port), protocol_version=ProtocolVersion.V4)
    try:
        row = cluster.connect().execute("SELECT release_version FROM system.local").one()
        return str(row[0]) if row else None
    except Exception:
        return None
    finally:
        cluster.shutdown()


# -- Markdown --------------------------------------------------------------------------------------
def _s(v: float | None) -> str:
    return "-" if v is None else (f"{v * 1000:,.0f} ms" if v < 1 else f"{v:,.2f} s")


def _r(v: float | None) -> str:
    return "-" if not v else f"{v:,.0f}/s"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def markdown(report: dict[str, Any]) -> str:
    col = report["colonnade"]
    m = report.get("machine", {})
    lines = [f"# Ad impressions: streaming ingest with concurrent queries ({report['store_kind']})", "",
             f"{report['events']:,} events "
             + ("produced first (preloaded) into " if report.get("preload") else "at full speed into ")
             + f"a {report['partitions']}-partition Kafka topic, "
             f"ingested by `colonnade.stream` in a process of its own (commit interval "
             f"{report['commit_interval']:g} s) into `{report['store']}` while Q1–Q3 loop on Colonnade's "
             f"SQL in the bench process; then "
             f"{report['total_events'] - report['events']:,} more at {report.get('freshness_rate') or 0:,.0f}/s "
             f"for freshness. Mean Kafka payload: {report['mean_payload_bytes']:.1f} bytes (CSV line)."
             + (f" The dataset has a sample kept current by every commit (on "
                f"{', '.join(report['sample']['on'])}, fraction {report['sample']['fraction']:g}, at least "
                f"{report['sample']['min_per_stratum']} rows per stratum)." if report.get("sample") else ""), "",
             "| events | ingest over the third | Q1 p50 / p95 | Q2 p50 / p95 | Q3 p50 / p95 | freshness p50 / p95 "
             "| segments |", "|---|---|---|---|---|---|---|"]
    for c in col["checkpoints"]:
        q = c["queries"]
        cells = [f"{_s(q[k]['p50_s'])} / {_s(q[k]['p95_s'])} (n={q[k]['n']})" for k in QUERIES]
        f = c["freshness"]
        lines.append(f"| {c['label']} | {_r(c['ingest_events_per_s'])} | " + " | ".join(cells)
                     + f" | {_s(f['p50_s'])} / {_s(f['p95_s'])} | {c['segments'] if c['segments'] is not None else '-'} |")
    fp = col["freshness_phase"]
    cells = [f"{_s(fp['queries'][k]['p50_s'])} / {_s(fp['queries'][k]['p95_s'])} (n={fp['queries'][k]['n']})"
             for k in QUERIES]
    lines.append(f"| then at {report.get('freshness_rate') or 0:,.0f}/s | - | " + " | ".join(cells)
                 + f" | {_s(fp['freshness']['p50_s'])} / {_s(fp['freshness']['p95_s'])} "
                   f"| {report['final']['segments']} |")
    lines += ["", f"Sustained ingest over the main phase: **{_r(col['sustained_events_per_s'])}** ("
              + ("stream start" if report.get("preload") else "producer start")
              + " to the commit that made the last event visible). Producer: "
              + "; ".join(f"{p['phase']} {p['events']:,} events at {_r(p['events_per_s'])}" for p in report["produced"])
              + ".", "",
              "Freshness of a commit = the time it became visible minus the Kafka timestamp (CreateTime, set "
              "when the event was produced) of the oldest event in it; percentiles over commits. In the main "
              + ("phase it is the time since the event was preloaded (meaningless as freshness); the "
                 "rate-limited phase is the measure." if report.get("preload") else
                 "phase it includes the backlog whenever the producer is faster than the ingest."), ""]
    f = report["final"]
    lines += ["## Checks", "",
              f"- count {f['count']:,} (produced {f['expected_count']:,}), sum(id) {f['id_sum']} "
              f"(expected {f['expected_id_sum']}); Q1–Q3 equal DuckDB's over the generated events: "
              f"{'yes' if f['answers_match'] else 'NO'}"]
    for name, check in report.get("reference_checks", {}).items():
        lines.append(f"- {name}: {check['events']:,} events, {check['distinct_ids']:,} distinct ids"
                     + ("" if "answers_match" not in check else
                        f"; answers equal the ground truth of those events: {'yes' if check['answers_match'] else 'NO'}"))
    if report.get("problems"):
        lines += [f"- **problem**: {p}" for p in report["problems"]]
    lines += ["", "## References (same run, same topic)", "",
              "| system | events | ingest | Q1 p50 per M events | Q2 | Q3 | queries while ingesting |",
              "|---|---|---|---|---|---|---|"]
    mine = col["queries_main"]
    lines.append(f"| colonnade ({report['store_kind']}) | {report['events']:,} | {_r(col['sustained_events_per_s'])} | "
                 + " | ".join(_s(mine[q]["p50_s_per_million_events"]) for q in QUERIES)
                 + f" | {sum(mine[q]['n'] for q in QUERIES)} |")
    for key, r in report.get("references", {}).items():
        if "skipped" in r:
            lines.append(f"| {key} | skipped: {r['skipped']} | | | | | |")
            continue
        theirs = latency_summary([QueryRun(**q) for q in r.get("queries", [])])
        lines.append(f"| {r['name']} | {r['events']:,} | {_r(r['events_per_s'])} | "
                     + " | ".join(_s(theirs[q]["p50_s_per_million_events"]) for q in QUERIES)
                     + f" | {len(r.get('queries', []))} |")
    lines += ["", "Settings of the references:", ""]
    for key, r in report.get("references", {}).items():
        for k, v in (r.get("settings") or {}).items():
            if k != "consumer":
                lines.append(f"- {key} {k}: {v}")
    lines += [f"- consumer (every reference): {report['references'].get('ceiling', {}).get('settings', {}).get('consumer', '-')}"
              if report.get("references") else "- no references",
              f"- producer: {report['producer_settings']}",
              f"- the stream: commit interval {report['commit_interval']:g} s, on_error strict, no partitioning or "
              f"sort key, consumer settings added: {report.get('stream_consumer_settings')}",
              f"- Colonnade's queries: a store object of their own with a decoded-chunk cache of "
              f"{report.get('query_cache_mb', 0):,} MiB (`colonnade.connect(uri, cache_mb=...)`)",
              "", "## Ratios", ""]
    for k, v in ratios(report).items():
        lines.append(f"- {k.replace('_', ' ')}: {_x(v)}")
    lines += ["", "## Targets", "", "| target | measured | met |", "|---|---|---|"]
    for t in targets(report):
        v = t["measured"]
        shown = "-" if v is None else (f"{v:,.0f}/s" if "events/s" in t["target"] else
                                       _x(v) if "ceiling" in t["target"] else _s(v))
        lines.append(f"| {t['target']} | {shown} | {'yes' if t['met'] else '**no**'} |")
    lines += ["", "## Machine and versions", "",
              f"{m.get('cpus')} CPUs ({m.get('cpu')}), {(m.get('memory_bytes') or 0) / 2**30:.0f} GiB; "
              f"Python {m.get('python')}; Kafka {m.get('kafka') or '?'} (one broker), librdkafka "
              f"{m.get('librdkafka')}, confluent-kafka {m.get('confluent_kafka')}; Cassandra {m.get('cassandra') or '-'}, "
              f"driver {m.get('cassandra_driver')}; DuckDB {m.get('duckdb')}; pyarrow {m.get('pyarrow')}; "
              f"colonnade {m.get('colonnade')}. Broker, Cassandra, producer, stream process and bench "
              f"(queries, references) share the machine. CPU: stream process "
              f"{report.get('stream_process_cpu_s') or 0:,.0f} s, bench process "
              f"{report.get('bench_process_cpu_s', 0):,.0f} s, over a {report.get('main_phase_s', 0):,.0f} s "
              "main phase."]
    return "\n".join(lines) + "\n"
