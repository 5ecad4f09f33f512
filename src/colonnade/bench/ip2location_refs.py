"""The seed's row layouts on Cassandra, measured in the same run as Colonnade's load
(``colonnade bench ip2location``).

One Cassandra row per address, on the first ``rows`` addresses (in ip order) of the same table,
in the two layouts of the seed::

    CREATE TABLE ... (country text, ip bigint, region text, city text, lati double, longi double,
                      izp text, timezone text, PRIMARY KEY ((country), ip))            -- "country"
    ... PRIMARY KEY ((country, region, city), ip)                                     -- "country_region_city"

(the seed's columns; ip, latitude and longitude typed rather than the seed's varchar).

Settings of a competent user: replication factor 1 (as the seed), the DataStax driver
(protocol v4, token-aware routing, its Cython build with libev), one prepared INSERT,
consistency ONE, 64 requests in flight in all (``execute_concurrent_with_args``), no batches;
each process connects once and inserts its own contiguous slice. How many processes: the run
first tries 1, 2 and 4 on a scratch table (:func:`calibrate`, :data:`CALIBRATION_ROWS` rows each)
and loads both layouts with the fastest. Rows are built before the clock starts (Python tuples
from the same vectorised generator); the rate is rows / (last insert acknowledged − first sent).

Queries, with the driver (request timeout :data:`QUERY_TIMEOUT_S`):

* ``SELECT COUNT(*)`` of the table (the seed: it times out; whatever happens is recorded);
* point lookups ``WHERE ip = ?``: ip is not a partition key in either layout, so CQL needs
  ``ALLOW FILTERING`` (a scan of the table). Also measured, as the layout's best case, the same
  lookup with its partition key given (which someone looking an ip up does not know);
* counts by country: ``WHERE country = ?`` (one partition of the first layout; the second needs
  ``ALLOW FILTERING``).

Every answer is checked against the table's ground truth for the same prefix.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from colonnade.bench import ip2location_data as data
from colonnade.bench.ip2location_load import latency, pick_countries, pick_lookups

KEYSPACE = "colonnade_bench_refs"
IN_FLIGHT = 64
PROCESS_CHOICES = (1, 2, 4)
CALIBRATION_ROWS = 12_000
CHUNK_ROWS = 5_000
QUERY_TIMEOUT_S = 60.0
READY_TIMEOUT_S = 300.0
INSERT_TIMEOUT_S = 3600.0
LOOKUPS = 50
GAP_LOOKUPS = 5
LAYOUTS = {
    "country": "PRIMARY KEY ((country), ip)",
    "country_region_city": "PRIMARY KEY ((country, region, city), ip)",
}
COLUMNS = ("country", "ip", "region", "city", "lati", "longi", "izp", "timezone")
_TABLE = ("CREATE TABLE {ks}.{table} (country text, ip bigint, region text, city text, lati double, "
          "longi double, izp text, timezone text, {key})")
SETTINGS = {
    "replication": "SimpleStrategy, replication factor 1",
    "driver": "DataStax cassandra-driver (Cython build, libev), protocol v4, TokenAwarePolicy(DCAwareRoundRobinPolicy), "
              "TCP_NODELAY",
    "writes": f"one prepared INSERT per row, consistency ONE, {IN_FLIGHT} requests in flight in all "
              f"(execute_concurrent_with_args, {CHUNK_ROWS:,} rows a call), no batches",
    "processes": f"tried {', '.join(map(str, PROCESS_CHOICES))} on the first (up to) {CALIBRATION_ROWS:,} rows; "
                 "the fastest loads both layouts, each process its own contiguous slice",
    "timing": "rows built before the clock starts; rows / (last acknowledged - first sent)",
    "queries": f"driver request timeout {QUERY_TIMEOUT_S:g} s; the node's own timeouts as configured",
    "table options": "Cassandra's defaults (LZ4 SSTable compression); bytes on disk = the table's SSTable "
                     "files after nodetool flush + compact (a node run by LocalCluster on this machine only)",
}


def _cluster(contact: str) -> Any:
    from cassandra import ProtocolVersion
    from cassandra.cluster import Cluster
    from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy

    from colonnade.storage.cassandra_driver import NO_DELAY

    host, _, port = contact.rpartition(":")
    return Cluster([host or contact], port=int(port or 9042), protocol_version=ProtocolVersion.V4,
                   load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy()), sockopts=NO_DELAY)


def _rows(table: data.RangeTable, lo: int, hi: int) -> list[tuple[Any, ...]]:
    """Rows ``lo..hi`` as the INSERT's parameters (COLUMNS order)."""
    b = data.expand(table, lo, hi)
    cols = [b.column(n).to_pylist() for n in ("country_code", "ip", "region", "city", "latitude",
                                               "longitude", "zip_code", "time_zone")]
    return list(zip(*cols, strict=True))


def _insert_worker(contact: str, table_name: str, addresses: int, ranges: int, seed: int, lo: int, hi: int,
                   concurrency: int, index: int, ready: Any, go: Any, out: Any) -> None:
    """One inserting process: builds its rows, connects, waits for ``go``, inserts, reports."""
    try:
        from cassandra import ConsistencyLevel
        from cassandra.concurrent import execute_concurrent_with_args

        table = data.range_table(addresses, ranges, seed)
        rows = _rows(table, lo, hi)
        cluster = _cluster(contact)
        try:
            session = cluster.connect()
            insert = session.prepare(f"INSERT INTO {KEYSPACE}.{table_name} ({', '.join(COLUMNS)}) "
                                     f"VALUES ({', '.join('?' * len(COLUMNS))})")
            insert.consistency_level = ConsistencyLevel.ONE
            ready.release()
            go.wait()
            start = time.time()
            for at in range(0, len(rows), CHUNK_ROWS):
                execute_concurrent_with_args(session, insert, rows[at:at + CHUNK_ROWS], concurrency=concurrency,
                                             raise_on_first_error=True)
                out.put(("progress", index, time.time(), min(len(rows), at + CHUNK_ROWS)))
            out.put(("done", index, start, time.time(), len(rows)))
        finally:
            cluster.shutdown()
    except BaseException as exc:  # reported to the parent, which fails the run
        out.put(("error", index, f"{type(exc).__name__}: {exc}"))


@dataclass
class Loaded:
    rows: int
    seconds: float
    processes: int
    timeline: list[tuple[float, int]] = field(default_factory=list)

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0


def insert_rows(contact: str, table_name: str, table: data.RangeTable, rows: int, processes: int,
                echo: Callable[[str], None]) -> Loaded:
    """Insert the first ``rows`` rows into ``table_name`` from ``processes`` processes."""
    from colonnade.bench.ip2location_load import slices

    ctx = mp.get_context("spawn")
    out, ready, go = ctx.Queue(), ctx.Semaphore(0), ctx.Event()
    parts = slices(rows, processes)
    per = max(1, IN_FLIGHT // len(parts))
    procs = [ctx.Process(target=_insert_worker, args=(contact, table_name, table.addresses, table.ranges,
                                                      table.seed, lo, hi, per, i, ready, go, out),
                         daemon=True) for i, (lo, hi) in enumerate(parts)]
    for p in procs:
        p.start()
    try:
        deadline = time.time() + READY_TIMEOUT_S
        for _ in procs:
            while not ready.acquire(timeout=1.0):
                _check_workers(procs, out)
                if time.time() > deadline:
                    raise RuntimeError(f"inserting processes not ready after {READY_TIMEOUT_S:.0f} s")
        go.set()
        t0 = time.time()
        progress = [0] * len(procs)
        spans: dict[int, tuple[float, float]] = {}
        timeline: list[tuple[float, int]] = [(0.0, 0)]
        last_echo = t0
        while len(spans) < len(procs):
            try:
                msg = out.get(timeout=1.0)
            except queue.Empty:
                _check_workers(procs, None, spans)
                if time.time() - t0 > INSERT_TIMEOUT_S:
                    raise RuntimeError(f"inserting {rows:,} rows took longer than {INSERT_TIMEOUT_S:.0f} s") from None
                continue
            if msg[0] == "progress":
                progress[msg[1]] = msg[3]
                timeline.append((msg[2] - t0, sum(progress)))
                if msg[2] - last_echo >= 5:
                    echo(f"    {table_name}: {sum(progress):,} of {rows:,} rows, "
                         f"{sum(progress) / max(msg[2] - t0, 1e-9):,.0f}/s")
                    last_echo = msg[2]
            elif msg[0] == "done":
                spans[msg[1]] = (msg[2], msg[3])
            else:
                raise RuntimeError(f"inserting process {msg[1]} failed: {msg[2]}")
    finally:
        for p in procs:
            if p.is_alive():
                p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()
    first = min(s for s, _ in spans.values())
    last = max(e for _, e in spans.values())
    return Loaded(rows, last - first, len(procs), [(t - (first - t0), n) for t, n in timeline])


def _check_workers(procs: list[Any], out: Any, done: dict[int, Any] | None = None) -> None:
    if out is not None:
        try:
            msg = out.get_nowait()
        except queue.Empty:
            msg = None
        if msg is not None and msg[0] == "error":
            raise RuntimeError(f"inserting process {msg[1]} failed: {msg[2]}")
    for i, p in enumerate(procs):
        if not p.is_alive() and (done is None or i not in done) and p.exitcode not in (0, None):
            raise RuntimeError(f"inserting process {i} died (exit status {p.exitcode})")


def _timed(session: Any, statement: Any, params: Any = None) -> tuple[float, Any, str | None]:
    t = time.perf_counter()
    try:
        rows = list(session.execute(statement, params, timeout=QUERY_TIMEOUT_S))
        return time.perf_counter() - t, rows, None
    except Exception as exc:  # a timeout is a result here, as in the seed
        text = " ".join(str(exc).split())
        return time.perf_counter() - t, None, f"{type(exc).__name__}: {text[:300]}"


def calibrate(contact: str, table: data.RangeTable, rows: int, tag: str,
              echo: Callable[[str], None]) -> dict[int, float]:
    """Rows/s of the first layout with 1, 2 and 4 processes (a scratch table each)."""
    rates: dict[int, float] = {}
    cluster = _cluster(contact)
    try:
        session = cluster.connect()
        for p in PROCESS_CHOICES:
            name = f"ip2l_calibrate_{tag}_{p}"
            session.execute(f"DROP TABLE IF EXISTS {KEYSPACE}.{name}", timeout=120)
            session.execute(_TABLE.format(ks=KEYSPACE, table=name, key=LAYOUTS["country"]), timeout=120)
            try:
                loaded = insert_rows(contact, name, table, min(rows, CALIBRATION_ROWS), p, lambda _: None)
            finally:
                session.execute(f"DROP TABLE IF EXISTS {KEYSPACE}.{name}", timeout=120)
            rates[p] = loaded.rows_per_s
            echo(f"    {p} process{'es' if p > 1 else ''}: {loaded.rows_per_s:,.0f} rows/s")
    finally:
        cluster.shutdown()
    return rates


def run_layout(contact: str, layout: str, table: data.RangeTable, rows: int, processes: int, tag: str,
               seed: int, echo: Callable[[str], None], local: Any = None) -> dict[str, Any]:
    """Load one layout, run its queries, check the answers, measure its SSTables (with
    ``local``, the node's LocalCluster); the table is dropped after."""
    from cassandra import ConsistencyLevel
    from cassandra.query import SimpleStatement

    name = f"ip2l_{layout}_{tag}"
    problems: list[str] = []
    cluster = _cluster(contact)
    try:
        session = cluster.connect()
        session.execute(f"DROP TABLE IF EXISTS {KEYSPACE}.{name}", timeout=120)
        session.execute(_TABLE.format(ks=KEYSPACE, table=name, key=LAYOUTS[layout]), timeout=120)
        try:
            echo(f"  {layout}: inserting {rows:,} rows from {processes} process{'es' if processes > 1 else ''}")
            loaded = insert_rows(contact, name, table, rows, processes, echo)
            echo(f"  {layout}: {loaded.rows_per_s:,.0f} rows/s ({loaded.seconds:.1f} s)")
            one = ConsistencyLevel.ONE
            seconds, got, error = _timed(session, SimpleStatement(f"SELECT COUNT(*) FROM {KEYSPACE}.{name}",
                                                                  consistency_level=one))
            count = got[0][0] if got else None
            if error is None and count != rows:
                problems.append(f"{layout} COUNT(*) = {count}, expected {rows:,}")
            counted = {"answer": count, "expected": rows, "seconds": seconds, "error": error}
            echo(f"  {layout}: COUNT(*) " + (f"{count:,} in {seconds:.2f} s" if error is None else
                                             f"failed after {seconds:.1f} s: {error}"))
            key = ("country = ?" if layout == "country" else "country = ? AND region = ? AND city = ?")
            scan = session.prepare(f"SELECT {', '.join(COLUMNS)} FROM {KEYSPACE}.{name} WHERE ip = ? ALLOW FILTERING")
            keyed = session.prepare(f"SELECT {', '.join(COLUMNS)} FROM {KEYSPACE}.{name} WHERE {key} AND ip = ?")
            scan.consistency_level = keyed.consistency_level = one
            ips = pick_lookups(table, rows, LOOKUPS, GAP_LOOKUPS, seed + 7)
            lookups: dict[str, list[dict[str, Any]]] = {"ip_only": [], "partition_key_known": []}
            for ip in ips:
                want = data.location_of(table, ip, rows)
                seconds, got, error = _timed(session, scan, (ip,))
                ok = error is None and _matches(got, want)
                if error is None and not ok:
                    problems.append(f"{layout} lookup of ip {ip}: {got}, expected {want}")
                lookups["ip_only"].append({"ip": ip, "seconds": seconds, "ok": ok, "error": error})
                if want is not None:
                    params = ((want["country_code"], ip) if layout == "country" else
                              (want["country_code"], want["region"], want["city"], ip))
                    seconds, got, error = _timed(session, keyed, params)
                    ok = error is None and _matches(got, want)
                    if error is None and not ok:
                        problems.append(f"{layout} keyed lookup of ip {ip}: {got}, expected {want}")
                    lookups["partition_key_known"].append({"ip": ip, "seconds": seconds, "ok": ok, "error": error})
            summary = {k: {**latency([r["seconds"] for r in v if r["error"] is None]),
                           "errors": sum(1 for r in v if r["error"]), "runs": v} for k, v in lookups.items()}
            echo(f"  {layout}: lookups WHERE ip = ? ALLOW FILTERING p50 "
                 f"{(summary['ip_only']['p50_s'] or 0) * 1000:,.1f} ms; with the partition key p50 "
                 f"{(summary['partition_key_known']['p50_s'] or 0) * 1000:,.1f} ms")
            truth = data.country_counts(table, rows)
            by_country = []
            filtering = "" if layout == "country" else " ALLOW FILTERING"
            counter = session.prepare(f"SELECT COUNT(*) FROM {KEYSPACE}.{name} WHERE country = ?{filtering}")
            counter.consistency_level = one
            for code in pick_countries(truth):
                seconds, got, error = _timed(session, counter, (code,))
                n = got[0][0] if got else None
                if error is None and n != truth[code]:
                    problems.append(f"{layout} count for {code}: {n}, expected {truth[code]:,}")
                by_country.append({"country": code, "answer": n, "expected": truth[code], "seconds": seconds,
                                   "error": error, "ok": error is None and n == truth[code]})
            disk = _disk(local, name)
        finally:
            session.execute(f"DROP TABLE IF EXISTS {KEYSPACE}.{name}", timeout=120)
    finally:
        cluster.shutdown()
    return {"layout": layout, "primary_key": LAYOUTS[layout], "rows": rows, "seconds": loaded.seconds,
            "rows_per_s": loaded.rows_per_s, "processes": processes,
            "timeline": [(round(t, 3), n) for t, n in loaded.timeline], "count": counted, "lookups": summary,
            "by_country": by_country, "disk_bytes": disk, "problems": problems}


def _disk(local: Any, name: str) -> int | None:
    """Bytes of the table's SSTables after ``nodetool flush`` and ``compact`` (None without a
    LocalCluster node, or if nodetool fails)."""
    if local is None:
        return None
    from colonnade.bench.layouts import sstable_bytes

    try:
        return sstable_bytes(local, KEYSPACE, name)
    except Exception:  # the figure is optional
        return None


def _matches(got: list[Any] | None, want: dict[str, Any] | None) -> bool:
    if want is None:
        return not got
    if not got or len(got) != 1:
        return False
    row = dict(zip(COLUMNS, got[0], strict=True))
    return (row["country"], row["ip"], row["region"], row["city"], row["lati"], row["longi"], row["izp"],
            row["timezone"]) == (want["country_code"], want["ip"], want["region"], want["city"],
                                 want["latitude"], want["longitude"], want["zip_code"], want["time_zone"])


def run(contact: str, table: data.RangeTable, rows: int, seed: int, tag: str,
        echo: Callable[[str], None]) -> dict[str, Any]:
    """Both layouts on the first ``rows`` rows, with the process count calibration picks."""
    cluster = _cluster(contact)
    try:
        session = cluster.connect()
        session.execute(f"CREATE KEYSPACE IF NOT EXISTS {KEYSPACE} WITH replication = "
                        "{'class': 'SimpleStrategy', 'replication_factor': 1}", timeout=120)
        version = session.execute("SELECT release_version FROM system.local").one()[0]
        from colonnade.bench.layouts import local_cluster_for

        local = local_cluster_for(session)
    finally:
        cluster.shutdown()
    echo(f"reference: one Cassandra row per address on {contact}, first {rows:,} addresses; "
         f"processes {'/'.join(map(str, PROCESS_CHOICES))} tried on {min(rows, CALIBRATION_ROWS):,} rows")
    rates = calibrate(contact, table, rows, tag, echo)
    processes = max(rates, key=lambda p: rates[p])
    layouts = {layout: run_layout(contact, layout, table, rows, processes, tag, seed, echo, local)
               for layout in LAYOUTS}
    return {"contact": contact, "cassandra": version, "rows": rows, "tag": tag, "settings": SETTINGS,
            "calibration_rows_per_s": {str(p): r for p, r in rates.items()}, "processes": processes,
            "layouts": layouts}
