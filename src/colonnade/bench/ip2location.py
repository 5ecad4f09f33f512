"""``colonnade bench ip2location``: the IP2Location bulk-load study, reproduced and beaten.

The seed expanded a few million IP2Location DB11 ranges to one Cassandra row per address (over
2 billion) and inserted them at 8–9k rows/s with ``PRIMARY KEY ((country), ip)``, 16k/s with
``((country, region, city), ip)`` and 30k/s at best from 64 client processes; ``COUNT(*)`` timed
out. Here, in one run:

1. a DB11-like range table is generated from a seed (:mod:`colonnade.bench.ip2location_data`)
   and expanded, vectorised, to ``addresses`` rows in ip order;
2. ``workers`` processes each expand and write their own slice of the address space into one
   Colonnade dataset, committed once (:mod:`colonnade.bench.ip2location_load`);
3. ``SELECT count(*)``, point lookups ``WHERE ip = X`` and counts by country run through SQL, and
   every answer is checked against the range table;
4. the seed's two row layouts are loaded with the first ``reference_rows`` addresses on the same
   Cassandra node with the DataStax driver, and asked the same questions
   (:mod:`colonnade.bench.ip2location_refs`);
5. JSON, Markdown and a PNG go to ``out`` as ``ip2location-<store kind>.*``, with the targets
   met or not (:mod:`colonnade.bench.ip2location_report`).

**Layout choices** (the dataset's spec). Rows are written in ip order and the dataset is
partitioned by ``truncate(16777216, ip)`` (one partition per /8 block), no sort key:

* ``WHERE ip = X`` is pruned to one partition by the transform, then to one segment by the
  segments' ip min/max, which the commit log carries: each worker writes a contiguous ip slice
  in order, so segments hold disjoint ip intervals and exactly one can hold X. A lookup reads
  one segment's chunks. A declared sort key would only make the writer sort segments that are
  already sorted.
* ``count(*)`` is the sum of the segments' row counts in the commit log: no chunk is read.
* counting by country reads the ``country_code`` column alone: ranges of one city are long runs,
  so the dictionary-encoded chunks are tiny and a scan of all of them reads ~0.005 byte per
  address. It is the schema's first column because DuckDB reads the first column to count the
  rows of a query that needs none: with ip first, ``count(*) ... WHERE country_code = 'US'``
  read the ip column too (20 MB instead of 0.1 MB over 20M rows, 0.83 s instead of 0.26 s). Partitioning by country instead would answer that count from
  the log too, but every country's ranges are spread over the whole address space, so each
  country's segments would span most of it and a lookup would have to read about one segment
  per country (~250) instead of one.
* ip is ``int64``, stored as runs of differences between consecutive addresses (a few hundred
  bytes per chunk, whatever the integer width).
* 131,072 rows per segment: a lookup reads one request for a segment's 9 chunks and decodes and
  filters them whole, which costs per row; the chunks' fixed framing (~300 bytes each) costs per
  segment. On Cassandra here (100M addresses, p50 of 140 lookups, three runs each):
  262,144-row segments took ~2 ms more per lookup; 65,536-row ones were no faster than 131,072
  and (one load each) loaded at 2.6M addresses/s instead of 4.1M, in 0.17 byte per address
  instead of 0.12.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from colonnade.bench import ip2location_data as data
from colonnade.bench import ip2location_load as colonnade_side
from colonnade.bench.common import cassandra_contact, write_report
from colonnade.bench.ip2location_report import markdown, ratios, targets, versions
from colonnade.errors import ColonnadeError

ADDRESSES = 100_000_000
REFERENCE_ROWS = 100_000


class BenchError(ColonnadeError):
    """The benchmark could not run, or a check of its answers failed."""


def _scratch(out_dir: Path) -> str:
    """A fresh scratch SQLite store in ``out_dir`` (an old one is removed: its file size is reported)."""
    work = out_dir / "work"
    work.mkdir(parents=True, exist_ok=True)
    path = work / "ip2location.db"
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    return f"sqlite:///{path}"


def _notes(report: dict[str, Any]) -> list[str]:
    """What the measurements say about each missed target."""
    notes = []
    load, q = report["load"], report["queries"]
    by_target = {t["target"]: t for t in report["targets"]}
    for name, t in by_target.items():
        if t["met"] is not False:
            continue
        if "byte stored" in name:
            ip = load["column_bytes"].get("ip", 0) / max(1, load["rows"])
            notes.append(f"bytes: the ip column alone takes {ip:.3f} B per address "
                         f"({ip / max(load['bytes_per_address'], 1e-9):.0%} of the total); the other eight "
                         f"columns take {load['bytes_per_address'] - ip:.3f} B together.")
        elif "lookup" in name:
            d = q.get("lookup_profile") or {}
            e = q["lookups"]["explain"]
            notes.append(f"lookups: each reads one segment ({e.get('segments_read')} of {e.get('segments_total')}) "
                         f"and its {e.get('chunks_read')} chunks in one store request. Profile, same run, "
                         f"{d.get('n')} of the same ips (p50): all columns through SQL "
                         f"{_ms(q['lookups']['p50_s'])}; the ip column only through SQL "
                         f"{_ms(d.get('sql_ip_only_p50_s'))}; all columns through the scan API (no SQL layer, "
                         f"no DuckDB) {_ms(d.get('scan_api_p50_s'))}; the ip column only through the scan API "
                         f"{_ms(d.get('scan_api_ip_only_p50_s'))}; one store round trip (latest version) "
                         f"{_ms(d.get('store_round_trip_p50_s'))}. Before any chunk, the SQL path asks the store "
                         "for the catalog entry and for the commits since its cached snapshot (two round trips), "
                         "then DuckDB plans the query and calls the scan.")
        elif "addresses/s" in name:
            cpu = sum(load["worker_cpu_s"])
            notes.append(f"load: the workers used {cpu:,.1f} CPU-s for {load['rows']:,} addresses "
                         f"({cpu / max(1, load['rows']) * 1e9:,.0f} ns each) on {report['machine'].get('cpus')} "
                         "cores shared with the store; conforming the batches (dictionary strings decoded) and "
                         "encoding the chunks (dictionary encoding again, zstd) are the writer's cost.")
    for name, r in ((report.get("reference") or {}).get("layouts") or {}).items():
        c = r["count"]
        if c["error"] is None and c["seconds"] > 0:
            rate = r["rows"] / c["seconds"]
            notes.append(f"{name}: COUNT(*) read {rate:,.0f} rows/s over its {r['rows']:,} rows; at that rate "
                         f"the {load['rows']:,} rows loaded here would take ~{load['rows'] / rate:,.0f} s "
                         "(an extrapolation): past the driver's default request timeout of 10 s")
    return notes


def _cassandra_disk(uri: str) -> tuple[int | None, str]:
    """Bytes of the store's SSTables after flush and compaction (a node run by LocalCluster on
    this machine only), with how they were measured."""
    from colonnade.bench.layouts import store_disk_bytes

    try:
        return store_disk_bytes(uri)
    except Exception as exc:  # the figure is optional; the reason is reported
        return None, f"bytes on disk not measured: {exc}"


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1000:,.1f} ms"


def main(addresses: int = ADDRESSES, ranges: int | None = None, store: str | None = None,
         out: str | Path = "bench-results", workers: int | None = None, reference_rows: int = REFERENCE_ROWS,
         seed: int = 42, cassandra: str | None = None, echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the benchmark; returns the report (also written to ``out``)."""
    from colonnade.bench.common import cassandra_reachable as reachable
    from colonnade.config import parse_store_uri

    ranges = data.default_ranges(addresses) if ranges is None else ranges
    if not 1 <= ranges <= addresses:
        raise BenchError(f"the table needs between 1 and {addresses:,} ranges for {addresses:,} addresses, "
                         f"not {ranges:,}")
    if addresses > data.LAST_IP - data.FIRST_IP + 1:
        raise BenchError(f"{addresses:,} addresses do not fit in IPv4 above 1.0.0.0")
    workers = workers or os.cpu_count() or 1
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    uri = store or _scratch(out_dir)
    parsed = parse_store_uri(uri)
    kind = parsed.scheme
    echo(f"generating a DB11-like table: {ranges:,} ranges, {addresses:,} addresses (seed {seed})")
    table = data.range_table(addresses, ranges, seed)
    report: dict[str, Any] = {
        "benchmark": "ip2location", "addresses": addresses, "ranges": ranges, "seed": seed,
        "store": parsed.display, "store_kind": kind, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "dataset": {"name": colonnade_side.DATASET, "partition_by": colonnade_side.PARTITION_BY,
                    "segment_rows": colonnade_side.SEGMENT_ROWS, "compression": "zstd", "sort_by": None},
        "table": {"largest_range": int(table.length.max()), "median_range": float(np.median(table.length)),
                  "countries": len(data.country_counts(table)), "cities": len(table.places.city_name),
                  "last_ip": int(table.ip_to[-1])},
    }
    echo(f"load: {addresses:,} addresses into {parsed.display} with {workers} worker processes")
    loaded = colonnade_side.load(uri, addresses, ranges, seed, workers, echo)
    report["load"] = loaded.to_dict()
    if kind == "cassandra":
        report["load"]["disk_bytes"], report["load"]["disk_note"] = _cassandra_disk(uri)
    echo(f"  colonnade: {loaded.rows:,} addresses in {loaded.seconds:.1f} s = {loaded.rows_per_s:,.0f}/s, "
         f"{report['load']['bytes_per_address']:.3f} bytes per address")
    echo("queries (colonnade)")
    report["queries"] = colonnade_side.run_queries(uri, table, seed, echo)
    problems = list(report["queries"]["problems"])
    contact = cassandra_contact(uri, cassandra)
    rows = min(reference_rows, addresses)
    if rows <= 0:
        report["reference"] = {"skipped": "no reference rows asked for"}
    elif reachable(contact):
        from colonnade.bench.ip2location_refs import run as run_reference

        try:
            report["reference"] = run_reference(contact, table, rows, seed, uuid.uuid4().hex[:8], echo)
        except Exception as exc:
            raise BenchError(f"the row reference on {contact} failed: {exc}") from exc
        for layout in report["reference"]["layouts"].values():
            problems += layout["problems"]
    else:
        reason = f"no Cassandra answers at {contact}"
        echo(f"reference: skipped ({reason})")
        report["reference"] = {"skipped": reason}
    report["machine"] = versions(contact if "layouts" in report["reference"] else None)
    report["ratios"] = ratios(report)
    report["targets"] = targets(report)
    report["notes"] = _notes(report)
    report["problems"] = problems
    from colonnade.bench.ip2location_chart import write_chart

    echo(write_report(out_dir / f"ip2location-{kind}", report, markdown, write_chart))
    if problems:
        raise BenchError("answers differ from the ground truth: " + "; ".join(problems[:3]))
    return report
