"""The Colonnade side of ``colonnade bench ip2location``: the parallel load and the queries.

**Load** (:func:`load`): the coordinator creates the dataset and prepares one write
(:meth:`~colonnade.table.dataset.Dataset.prepare_write`); ``workers`` processes (spawn context)
each regenerate the range table from the seed, expand their own contiguous slice of the rows
(in ip order, :data:`~colonnade.bench.ip2location_data.BATCH_ROWS` at a time) and store it with
:meth:`~colonnade.table.dataset.Dataset.write_part`; the coordinator commits all parts at once.
Workers report the rows they handed to the writer after each batch, which gives the load rate
over time. The wall time runs from before the first worker is started to the commit.

**Queries** (:func:`run_queries`): through Colonnade's SQL on a store object of their own, no
chunk cache: ``SELECT count(*)`` (answered from the commit log), point lookups ``WHERE ip = X``
and counts by country, each answer checked against the range table.
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing as mp
import queue
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from colonnade.bench import ip2location_data as data
from colonnade.errors import ColonnadeError

DATASET = "ip2location"
#: Rows per segment: a lookup decodes and filters one segment's chunks whole, and each chunk's
#: fixed overhead (~300 bytes of Arrow IPC framing) is ~0.02 byte per address (see the layout
#: choices in :mod:`colonnade.bench.ip2location`).
SEGMENT_ROWS = 1 << 17
#: One partition per /8 block of the address space: ``ip = X`` is pruned to one partition from
#: the commit log before segment statistics are looked at.
PARTITION_BY = f"truncate({1 << 24}, ip)"
COUNT_REPEATS = 20
LOOKUPS = 60
GAP_LOOKUPS = 10
PROFILE_LOOKUPS = 20
WORKER_TIMEOUT_S = 1800.0


class LoadError(ColonnadeError):
    """A worker failed, or died, while loading."""


@dataclass
class LoadResult:
    rows: int
    seconds: float  # wall: workers started → commit done
    workers: int
    version: int | None
    part_bytes: int  # chunk bytes the workers wrote
    stored_bytes: int  # the store's own figure for the committed dataset
    disk_bytes: int | None  # the embedded store's file, when it is one
    segments: int
    column_bytes: dict[str, int]
    worker_seconds: list[float]  # each worker: start → its part written
    worker_cpu_s: list[float]
    commit_s: float
    timeline: list[tuple[float, int]] = field(default_factory=list)  # (seconds, rows handed over)

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "seconds": self.seconds, "rows_per_s": self.rows_per_s,
                "workers": self.workers, "version": self.version, "part_bytes": self.part_bytes,
                "stored_bytes": self.stored_bytes, "bytes_per_address": self.stored_bytes / max(1, self.rows),
                "disk_bytes": self.disk_bytes, "segments": self.segments, "column_bytes": self.column_bytes,
                "worker_seconds": self.worker_seconds, "worker_cpu_s": self.worker_cpu_s,
                "commit_s": self.commit_s, "timeline": [(round(t, 3), n) for t, n in self.timeline]}


def slices(rows: int, workers: int) -> list[tuple[int, int]]:
    """``workers`` contiguous row slices covering ``0..rows`` (none empty)."""
    bounds = np.linspace(0, rows, min(workers, rows) + 1).astype(np.int64).tolist()
    return [(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]


def _worker(uri: str, op_json: str, addresses: int, ranges: int, seed: int, lo: int, hi: int,
            index: int, out: Any) -> None:
    """One load worker (a spawned process): its slice, one written part, reported on ``out``."""
    try:
        import colonnade
        from colonnade.table.operation import WriteOperation

        started = time.time()
        op = WriteOperation.from_json(op_json)
        table = data.range_table(addresses, ranges, seed)
        done = 0

        def handed(batch: Any) -> None:
            nonlocal done
            done += batch.num_rows
            out.put(("progress", index, time.time(), done))

        with colonnade.connect(uri) as store:
            part = store.dataset(op.dataset).write_part(op, data.batches(table, lo, hi), on_batch=handed)
        out.put(("done", index, part.to_json(), time.time() - started, time.process_time()))
    except BaseException as exc:  # reported to the coordinator, which fails the run
        out.put(("error", index, f"{type(exc).__name__}: {exc}"))


def create_dataset(store: Any) -> Any:
    if DATASET in store:
        store.drop_dataset(DATASET)
    return store.create_dataset(DATASET, data.SCHEMA, partition_by=PARTITION_BY, segment_rows=SEGMENT_ROWS)


def load(uri: str, addresses: int, ranges: int, seed: int, workers: int,
         echo: Callable[[str], None]) -> LoadResult:
    """Load every address of the table into a fresh dataset with ``workers`` processes and one
    commit."""
    import colonnade
    from colonnade.table.operation import WrittenPart

    with colonnade.connect(uri) as store:
        ds = create_dataset(store)
        op = ds.prepare_write(source=f"ip2location-db11-like:seed={seed}:ranges={ranges}:addresses={addresses}")
        ctx = mp.get_context("spawn")
        out = ctx.Queue()
        parts_of = slices(addresses, workers)
        t0 = time.time()
        procs = [ctx.Process(target=_worker, args=(uri, op.to_json(), addresses, ranges, seed, lo, hi, i, out),
                             name=f"ip2location-load-{i}", daemon=True)
                 for i, (lo, hi) in enumerate(parts_of)]
        for p in procs:
            p.start()
        parts: dict[int, WrittenPart] = {}
        took: dict[int, tuple[float, float]] = {}
        progress = [0] * len(procs)
        timeline: list[tuple[float, int]] = [(0.0, 0)]
        last_echo = t0
        try:
            while len(parts) < len(procs):
                try:
                    msg = out.get(timeout=1.0)
                except queue.Empty:
                    # a worker reports its own errors and exits 0: another exit status is a death
                    dead = [p for p in procs if p.exitcode not in (0, None)]
                    if dead:
                        raise LoadError(f"load worker {dead[0].name} died (exit status {dead[0].exitcode})") from None
                    if time.time() - t0 > WORKER_TIMEOUT_S:
                        raise LoadError(f"the load took longer than {WORKER_TIMEOUT_S:.0f} s") from None
                    continue
                if msg[0] == "progress":
                    _, i, at, done = msg
                    progress[i] = done
                    timeline.append((at - t0, sum(progress)))
                    if at - last_echo >= 5:
                        total = sum(progress)
                        echo(f"  colonnade load: {total:,} of {addresses:,} addresses, "
                             f"{total / max(at - t0, 1e-9):,.0f}/s")
                        last_echo = at
                elif msg[0] == "done":
                    _, i, text, seconds, cpu = msg
                    parts[i] = WrittenPart.from_json(text)
                    took[i] = (seconds, cpu)
                else:
                    raise LoadError(f"load worker {msg[1]} failed: {msg[2]}")
            c0 = time.time()
            result = ds.commit_write(op, [parts[i] for i in sorted(parts)])
            t1 = time.time()
        except BaseException:
            for p in procs:
                if p.is_alive():
                    p.kill()
            with contextlib.suppress(Exception):  # the load's own error is the one to report
                ds.abort_write(op, list(parts.values()))
            raise
        finally:
            for p in procs:
                p.join(timeout=30)
        if result.rows != addresses:
            raise LoadError(f"the commit added {result.rows:,} rows, {addresses:,} were generated")
        info = store.dataset(DATASET).describe(versions=1)
        return LoadResult(
            rows=result.rows, seconds=t1 - t0, workers=len(procs), version=result.version,
            part_bytes=sum(p.bytes for p in parts.values()), stored_bytes=int(info["bytes"]),
            disk_bytes=store.disk_bytes(), segments=int(info["segments"]),
            column_bytes={c["name"]: int(c["bytes"]) for c in info["columns"]},
            worker_seconds=[took[i][0] for i in sorted(took)], worker_cpu_s=[took[i][1] for i in sorted(took)],
            commit_s=t1 - c0, timeline=timeline)


# -- queries -----------------------------------------------------------------------------------------
def pick_lookups(table: data.RangeTable, rows: int, n: int, gaps: int, seed: int) -> list[int]:
    """``n`` random ips among the first ``rows`` rows, then up to ``gaps`` unallocated ips below
    the last of them (a lookup that must find nothing)."""
    rng = np.random.default_rng(seed + 1)
    ips = table.ip_of_row(rng.integers(0, rows, n)).tolist()
    limit = int(table.ip_of_row(np.array([rows - 1]))[0])
    holes = table.gaps()
    holes = holes[holes < limit]
    if len(holes) and gaps:
        ips += rng.choice(holes, size=min(gaps, len(holes)), replace=False).tolist()
    return [int(x) for x in ips]


def pick_countries(counts: dict[str, int]) -> list[str]:
    """The country with most addresses, the median one and the one with fewest."""
    ranked = sorted(counts, key=lambda c: (-counts[c], c))
    picked = [ranked[0], ranked[len(ranked) // 2], ranked[-1]]
    return list(dict.fromkeys(picked))


def percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, int(np.ceil(p * len(ordered))) - 1)]


def latency(values: list[float]) -> dict[str, Any]:
    return {"n": len(values), "p50_s": percentile(values, 0.5), "p95_s": percentile(values, 0.95),
            "max_s": max(values) if values else None}


def same_row(got: dict[str, Any], want: dict[str, Any]) -> bool:
    return all(got.get(k) == v for k, v in want.items())


def run_queries(uri: str, table: data.RangeTable, seed: int, echo: Callable[[str], None]) -> dict[str, Any]:
    """count(*), point lookups and counts by country through SQL, checked against the table."""
    import colonnade

    problems: list[str] = []
    out: dict[str, Any] = {}
    with colonnade.connect(uri) as store:
        q = f"SELECT count(*) AS n FROM {DATASET}"
        times = []
        for _ in range(COUNT_REPEATS + 1):
            t = time.perf_counter()
            n = store.sql(q).column(0)[0].as_py()
            times.append(time.perf_counter() - t)
            if n != table.addresses:
                problems.append(f"colonnade count(*) = {n:,}, expected {table.addresses:,}")
                break
        plan = store.explain(q)
        out["count"] = {"query": q, "answer": n, "expected": table.addresses, "first_s": times[0],
                        "median_s": statistics.median(times[1:]) if len(times) > 1 else times[0],
                        "runs_s": times, "answered_from": _answered_from(plan)}
        echo(f"  colonnade count(*): {n:,} in {out['count']['median_s'] * 1000:.1f} ms (median of "
             f"{len(times) - 1}, first {times[0] * 1000:.1f} ms)")
        ips = pick_lookups(table, table.addresses, LOOKUPS, GAP_LOOKUPS, seed)
        store.sql(f"SELECT * FROM {DATASET} WHERE ip = {ips[0] + 1}")  # warm-up: DuckDB, the log
        lookups = []
        for ip in ips:
            t = time.perf_counter()
            rows = store.sql(f"SELECT * FROM {DATASET} WHERE ip = {ip}").to_pylist()
            seconds = time.perf_counter() - t
            want = data.location_of(table, ip)
            ok = (len(rows) == 0) if want is None else (len(rows) == 1 and same_row(rows[0], want))
            if not ok:
                problems.append(f"colonnade lookup of ip {ip}: {rows[:2]}, expected {want}")
            lookups.append({"ip": ip, "seconds": seconds, "found": bool(rows), "ok": ok})
        out["lookups"] = {"query": f"SELECT * FROM {DATASET} WHERE ip = X", "runs": lookups,
                          **latency([r["seconds"] for r in lookups]),
                          "explain": _explain_metrics(store.explain(f"SELECT * FROM {DATASET} WHERE ip = {ips[0]}"))}
        echo(f"  colonnade lookups: p50 {out['lookups']['p50_s'] * 1000:.1f} ms, p95 "
             f"{out['lookups']['p95_s'] * 1000:.1f} ms over {len(lookups)}")
        out["lookup_profile"] = _lookup_profile(store, ips[:PROFILE_LOOKUPS])
        truth = data.country_counts(table)
        by_country = []
        for code in pick_countries(truth):
            sql = f"SELECT count(*) AS n FROM {DATASET} WHERE country_code = '{code}'"
            t = time.perf_counter()
            n = store.sql(sql).column(0)[0].as_py()
            seconds = time.perf_counter() - t
            if n != truth[code]:
                problems.append(f"colonnade count for {code}: {n:,}, expected {truth[code]:,}")
            by_country.append({"country": code, "answer": n, "expected": truth[code], "seconds": seconds,
                               "ok": n == truth[code], "explain": _explain_metrics(store.explain(sql))})
        out["by_country"] = by_country
        echo("  colonnade count by country: " + ", ".join(
            f"{r['country']} {r['answer']:,} in {r['seconds'] * 1000:.0f} ms" for r in by_country))
    out["problems"] = problems
    return out


def _lookup_profile(store: Any, ips: list[int]) -> dict[str, Any]:
    """Where a lookup's time goes, on the same ips: through SQL reading the ip column only;
    through the scan API (no SQL layer, no DuckDB) reading every column and the ip column only;
    and one request to the store (the latest version: what a snapshot check costs)."""
    import pyarrow.compute as pc

    ds = store.dataset(DATASET)
    runs: dict[str, list[float]] = {"sql_ip_only": [], "scan_api": [], "scan_api_ip_only": [], "store_round_trip": []}

    def timed(name: str, step: Callable[[], Any]) -> None:
        t = time.perf_counter()
        step()
        runs[name].append(time.perf_counter() - t)

    for ip in ips:
        where = pc.field("ip") == ip
        timed("sql_ip_only", functools.partial(store.sql, f"SELECT ip FROM {DATASET} WHERE ip = {ip}"))
        timed("scan_api", ds.scan(filter=where).to_arrow)
        timed("scan_api_ip_only", ds.scan(columns=["ip"], filter=where).to_arrow)
        timed("store_round_trip", lambda: ds.version)
    return {"n": len(ips), **{f"{k}_p50_s": percentile(v, 0.5) for k, v in runs.items()}}


def _answered_from(plan: Any) -> str | None:
    for scans in plan.scans.values():
        for m in scans:
            if m.get("answered_from"):
                return str(m["answered_from"])
    return "scan"


def _explain_metrics(plan: Any) -> dict[str, Any]:
    """What ``Store.explain`` says was pruned and read, summed over the scans."""
    out: dict[str, Any] = dict(plan.totals())
    out["answered_from"] = _answered_from(plan)
    return out
