"""References of ``colonnade bench adimpressions``, measured in the same run on the same topic.

* **ceiling** (:func:`run_ceiling`): consume and decode only. The same confluent-kafka consumer
  settings as the stream (:data:`CONSUMER_CONFIG`) and the same decode (one
  ``pyarrow.csv.read_csv`` of a micro-batch's concatenated payloads), the result discarded: no
  store can ingest faster in this process.
* **cassandra row per event** (:func:`run_cassandra`): the seed's "lambda" stack without Spark.
  One Cassandra row per event (``PRIMARY KEY (id)``: writes spread over the whole token ring, as
  the connector's writes do), a prepared INSERT, 64 requests in flight
  (``execute_concurrent_with_args``, per micro-batch), replication factor 1 (as in the seed).
  The queries are what the Spark connector does: a full read of ``geo, bid, publisher``
  (paged, 5,000 rows a page, tuple rows) into Arrow, then DuckDB answers it. Queries loop in a
  thread while the writes go on.
* **duckdb micro-batch** (:func:`run_duckdb`): DuckDB's own table (a database file) appended
  per 1-s micro-batch (``INSERT INTO ... SELECT * FROM`` the decoded Arrow batch), with the
  queries looping on a cursor of the same database meanwhile.

Each reference consumes the first ``count`` messages of the topic from offset 0 (all its
partitions) and collects the ids it saw, so its answers are checked against the ground truth
of exactly those events.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from colonnade.bench.adimpressions_data import decode

QUERIES = {
    "Q1": "SELECT count(*) AS adCount, geo FROM adImpressions GROUP BY geo ORDER BY adCount DESC LIMIT 20",
    "Q2": "SELECT sum(bid) AS max_bid, geo FROM adImpressions GROUP BY geo ORDER BY max_bid DESC LIMIT 20",
    "Q3": "SELECT sum(bid) AS max_bid, publisher FROM adImpressions GROUP BY publisher ORDER BY max_bid DESC LIMIT 20",
}
#: Consumer settings the bench gives the stream (``StreamOptions.consumer``): fetches of up to
#: 10 MiB per partition instead of librdkafka's 1 MiB (measured on one local broker: consuming
#: alone, 190k messages/s with the default, waiting on fetches; 490k/s with 10 MiB).
TUNED_CONSUMER: dict[str, Any] = {"max.partition.fetch.bytes": 10_485_760}
#: Consumer settings of every reference: the stream's (colonnade.stream.kafka_source with the
#: default memory limit: a 64 MiB prefetch queue, fetches waiting up to 100 ms, no offsets
#: committed automatically) plus TUNED_CONSUMER, polled 20,000 messages at a time as the stream
#: polls.
CONSUMER_CONFIG: dict[str, Any] = {
    "enable.auto.commit": False, "enable.auto.offset.store": False, "auto.offset.reset": "earliest",
    "enable.partition.eof": False, "queued.max.messages.kbytes": 65_536, "fetch.wait.max.ms": 100,
    **TUNED_CONSUMER,
}
POLL_MESSAGES = 20_000
MICRO_BATCH_S = 1.0
CASSANDRA_IN_FLIGHT = 64
CASSANDRA_PAGE = 5000


class ConsumeError(RuntimeError):
    """The topic ran dry (or errored) before the wanted number of events."""


@dataclass
class QueryRun:
    """One query execution: when it started (seconds into the phase), how long it took and
    how many events it read."""

    query: str
    started: float
    seconds: float
    rows: int

    def to_dict(self) -> dict[str, Any]:
        return {"query": self.query, "started": round(self.started, 3), "seconds": self.seconds,
                "rows": self.rows}


@dataclass
class RefResult:
    """What a reference measured."""

    name: str
    events: int = 0
    seconds: float = 0.0
    settings: dict[str, Any] = field(default_factory=dict)
    queries: list[QueryRun] = field(default_factory=list)
    answers: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)
    ids: np.ndarray | None = None
    timeline: list[tuple[float, int]] = field(default_factory=list)  # (seconds, events done)
    notes: list[str] = field(default_factory=list)

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds if self.seconds else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "events": self.events, "seconds": self.seconds,
                "events_per_s": self.events_per_s, "settings": self.settings,
                "queries": [q.to_dict() for q in self.queries],
                "timeline": [(round(t, 3), n) for t, n in self.timeline], "notes": self.notes}


def consume_batches(bootstrap: str, topic: str, count: int, interval: float = MICRO_BATCH_S,
                    idle_timeout: float = 60.0) -> Iterator[list[bytes]]:
    """The first ``count`` messages' payloads of ``topic`` (every partition from offset 0), in
    micro-batches of what arrived within ``interval`` seconds."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"colonnade-bench-{time.time_ns()}",
                         **CONSUMER_CONFIG})
    try:
        parts = sorted(consumer.list_topics(topic, timeout=30).topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        got, since = 0, time.monotonic()
        pending: list[bytes] = []
        last_message = since
        while got < count:
            messages = consumer.consume(POLL_MESSAGES, timeout=0.25)
            now = time.monotonic()
            if messages:
                last_message = now
                for m in messages:
                    if m.error() is not None:
                        raise ConsumeError(f"consuming {topic}: {m.error()}")
                pending.extend(m.value() or b"" for m in messages)
            elif now - last_message > idle_timeout:
                raise ConsumeError(f"{topic}: only {got + len(pending):,} of {count:,} events after "
                                   f"{idle_timeout:.0f} s without a message")
            if pending and (now - since >= interval or got + len(pending) >= count):
                take = pending[:count - got]
                got += len(take)
                pending, since = [], now
                yield take
    finally:
        consumer.close()


def run_ceiling(bootstrap: str, topic: str, count: int, echo: Callable[[str], None]) -> RefResult:
    """Consume + decode only, the result discarded."""
    result = RefResult("consume + decode (ceiling)", settings={
        "consumer": CONSUMER_CONFIG, "micro_batch_s": MICRO_BATCH_S,
        "decode": "pyarrow.csv.read_csv of the micro-batch's payloads joined by newlines"})
    ids: list[np.ndarray] = []
    start = None
    done = 0
    for payloads in consume_batches(bootstrap, topic, count):
        if start is None:
            start = time.perf_counter()
        table = decode(payloads)
        ids.append(table.column("id").to_numpy())
        done += table.num_rows
        result.timeline.append((time.perf_counter() - start, done))
    result.seconds = (time.perf_counter() - start) if start is not None else 0.0
    result.events = done
    result.ids = np.concatenate(ids) if ids else np.empty(0, np.int64)
    result.notes.append("time from the first micro-batch received to the last decoded")
    echo(f"  ceiling: {done:,} events in {result.seconds:.1f} s, {result.events_per_s:,.0f}/s")
    return result


class _QueryLoop:
    """Runs ``run_one(query) -> (answer, rows)`` for Q1, Q2, Q3, Q1, ... in a thread until stopped;
    each run's start is recorded in seconds since ``t0`` (a ``time.time()``)."""

    def __init__(self, run_one: Callable[[str], tuple[pa.Table, int]], t0: float) -> None:
        self.run_one, self.t0 = run_one, t0
        self.runs: list[QueryRun] = []
        self.error: BaseException | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="bench-queries", daemon=True)

    def _loop(self) -> None:
        try:
            while not self.stop.is_set():
                for name in QUERIES:
                    at, started = time.time(), time.perf_counter()
                    _, rows = self.run_one(name)
                    if rows:
                        self.runs.append(QueryRun(name, at - self.t0, time.perf_counter() - started, rows))
                    if self.stop.is_set():
                        return
                if not self.runs:
                    time.sleep(0.2)  # nothing to read yet
        except BaseException as exc:  # reported by the caller
            self.error = exc

    def __enter__(self) -> _QueryLoop:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def _answer(con: Any, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in con.execute(sql).fetchall()]


# -- Cassandra, one row per event --------------------------------------------------------------------
_CQL_TABLE = ("CREATE TABLE {ks}.{table} (id bigint PRIMARY KEY, timestamp bigint, publisher text, "
              "advertiser text, website text, geo text, bid double, cookie text)")


def _ingest_with_queries(result: RefResult, label: str, bootstrap: str, topic: str, count: int,
                         write: Callable[[pa.Table], None], run_one: Callable[[str], tuple[pa.Table, int]],
                         echo: Callable[[str], None]) -> None:
    """Consume and decode ``count`` events per micro-batch and ``write`` each, Q1–Q3 looping on
    ``run_one`` meanwhile; fills ``result``'s events, seconds, timeline, queries and ids."""
    ids: list[np.ndarray] = []
    start = time.perf_counter()
    done = 0
    last_echo = start
    with _QueryLoop(run_one, time.time()) as loop:
        for payloads in consume_batches(bootstrap, topic, count):
            batch = decode(payloads)
            ids.append(batch.column("id").to_numpy())
            write(batch)
            done += batch.num_rows
            now = time.perf_counter()
            result.timeline.append((now - start, done))
            if now - last_echo >= 5:
                echo(f"  {label}: {done:,} rows written, {done / (now - start):,.0f}/s, {len(loop.runs)} queries")
                last_echo = now
        result.seconds = time.perf_counter() - start
    if loop.error is not None:
        raise loop.error
    result.events = done
    result.queries = loop.runs
    result.ids = np.concatenate(ids) if ids else np.empty(0, np.int64)


def run_cassandra(bootstrap: str, topic: str, count: int, contact: str, keyspace: str, table: str,
                  echo: Callable[[str], None], keep: bool = False) -> RefResult:
    """Ingest ``count`` events one row each, the queries looping on full reads meanwhile, then
    the three queries once more over everything for the answers."""
    import duckdb
    from cassandra import ConsistencyLevel, ProtocolVersion
    from cassandra.cluster import Cluster
    from cassandra.concurrent import execute_concurrent_with_args
    from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy
    from cassandra.query import SimpleStatement, tuple_factory

    from colonnade.storage.cassandra_driver import NO_DELAY

    host, _, port = contact.rpartition(":")
    # protocol v4: the driver's v5 framing re-copies its receive buffer per segment (slow reads)
    cluster = Cluster([host or contact], port=int(port or 9042), protocol_version=ProtocolVersion.V4,
                      load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy()), sockopts=NO_DELAY)
    session = cluster.connect()
    session.row_factory = tuple_factory
    session.default_timeout = 120
    result = RefResult("cassandra row per event + duckdb", settings={
        "table": f"{keyspace}.{table}: PRIMARY KEY (id), replication factor 1",
        "writes": f"prepared INSERT, {CASSANDRA_IN_FLIGHT} in flight (execute_concurrent_with_args per "
                  "1-s micro-batch), consistency ONE, TCP_NODELAY",
        "queries": f"full read SELECT geo, bid, publisher (page {CASSANDRA_PAGE:,} rows, tuple rows) "
                   "-> Arrow -> DuckDB, per query",
        "consumer": CONSUMER_CONFIG})
    try:
        session.execute(f"CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = "
                        "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        session.execute(f"DROP TABLE IF EXISTS {keyspace}.{table}")
        session.execute(_CQL_TABLE.format(ks=keyspace, table=table))
        insert = session.prepare(f"INSERT INTO {keyspace}.{table} (id, timestamp, publisher, advertiser, "
                                 "website, geo, bid, cookie) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
        insert.consistency_level = ConsistencyLevel.ONE
        select = SimpleStatement(f"SELECT geo, bid, publisher FROM {keyspace}.{table}",
                                 fetch_size=CASSANDRA_PAGE, consistency_level=ConsistencyLevel.ONE)

        def read_all() -> pa.Table:
            geo: list[Any] = []
            bid: list[Any] = []
            pub: list[Any] = []
            rs = session.execute(select)
            while True:
                page = rs.current_rows
                if page:
                    g, b, p = zip(*page, strict=True)
                    geo += g
                    bid += b
                    pub += p
                if not rs.has_more_pages:
                    break
                rs.fetch_next_page()
            return pa.table({"geo": pa.array(geo, pa.string()), "bid": pa.array(bid, pa.float64()),
                             "publisher": pa.array(pub, pa.string())})

        def run_one(name: str) -> tuple[pa.Table, int]:
            data = read_all()
            con = duckdb.connect()
            try:
                con.register("adImpressions", data)
                return con.sql(QUERIES[name]).to_arrow_table(), data.num_rows
            finally:
                con.close()

        def write(batch: pa.Table) -> None:
            columns = [batch.column(n).to_pylist() for n in batch.column_names]
            for ok, res in execute_concurrent_with_args(session, insert, zip(*columns, strict=True),
                                                        concurrency=CASSANDRA_IN_FLIGHT,
                                                        raise_on_first_error=True):
                if not ok:
                    raise res

        _ingest_with_queries(result, "cassandra reference", bootstrap, topic, count, write, run_one, echo)
        done = result.events
        data = read_all()
        con = duckdb.connect()
        con.register("adImpressions", data)
        result.answers = {q: _answer(con, sql) for q, sql in QUERIES.items()}
        con.close()
        result.notes.append(f"final full read: {data.num_rows:,} rows")
        echo(f"  cassandra reference: {done:,} events in {result.seconds:.1f} s, "
             f"{result.events_per_s:,.0f}/s; {len(result.queries)} queries while writing")
    finally:
        if not keep:
            session.execute(f"DROP TABLE IF EXISTS {keyspace}.{table}", timeout=120)
        cluster.shutdown()
    return result


# -- DuckDB, appended per micro-batch ------------------------------------------------------------------
def run_duckdb(bootstrap: str, topic: str, count: int, path: Path, echo: Callable[[str], None]) -> RefResult:
    """Append ``count`` events to a DuckDB table per micro-batch, the queries looping meanwhile."""
    import duckdb

    from colonnade.bench.adimpressions_data import SCHEMA

    path.unlink(missing_ok=True)
    con = duckdb.connect(str(path))
    result = RefResult("duckdb micro-batch appends", settings={
        "table": f"DuckDB database file, table adImpressions ({', '.join(SCHEMA.names)})",
        "writes": "INSERT INTO adImpressions SELECT * FROM <decoded Arrow micro-batch>, one per 1-s micro-batch",
        "queries": "on a cursor of the same database (its own thread), count(*) and the query in one transaction",
        "consumer": CONSUMER_CONFIG})
    try:
        con.execute("CREATE TABLE adImpressions (id BIGINT, timestamp BIGINT, publisher VARCHAR, "
                    "advertiser VARCHAR, website VARCHAR, geo VARCHAR, bid DOUBLE, cookie VARCHAR)")
        reader = con.cursor()

        def run_one(name: str) -> tuple[pa.Table, int]:
            reader.execute("BEGIN TRANSACTION")
            try:
                rows = reader.execute("SELECT count(*) FROM adImpressions").fetchall()[0][0]
                return reader.sql(QUERIES[name]).to_arrow_table(), int(rows)
            finally:
                reader.execute("COMMIT")

        def write(batch: pa.Table) -> None:
            con.register("micro_batch", batch)
            con.execute("INSERT INTO adImpressions SELECT * FROM micro_batch")
            con.unregister("micro_batch")

        _ingest_with_queries(result, "duckdb reference", bootstrap, topic, count, write, run_one, echo)
        done = result.events
        reader.close()
        result.answers = {q: _answer(con, sql) for q, sql in QUERIES.items()}
        echo(f"  duckdb reference: {done:,} events in {result.seconds:.1f} s, {result.events_per_s:,.0f}/s; "
             f"{len(result.queries)} queries while appending")
    finally:
        con.close()
        path.unlink(missing_ok=True)
        Path(str(path) + ".wal").unlink(missing_ok=True)
    return result


# -- ground truth ------------------------------------------------------------------------------------
#: Each query's answer without LIMIT (every group), to check a top 20 whatever its ties.
_FULL = {
    "Q1": "SELECT geo, count(*) FROM adImpressions GROUP BY geo",
    "Q2": "SELECT geo, sum(bid) FROM adImpressions GROUP BY geo",
    "Q3": "SELECT publisher, sum(bid) FROM adImpressions GROUP BY publisher",
}


@dataclass
class Truth:
    """DuckDB's answers over the generated events (the ground truth): the queries as asked and
    every group's value, plus the count and the sum of ids."""

    events: int
    id_sum: int
    answers: dict[str, list[tuple[Any, ...]]]
    groups: dict[str, dict[str, float]]


def truth_of(table: pa.Table) -> Truth:
    """DuckDB's answers over ``table`` (id, publisher, geo, bid of the events)."""
    import duckdb

    con = duckdb.connect()
    try:
        con.register("adImpressions", table)
        count, id_sum = con.execute("SELECT count(*), sum(id) FROM adImpressions").fetchone()  # type: ignore[misc]
        answers = {q: _answer(con, sql) for q, sql in QUERIES.items()}
        groups = {q: {str(k): float(v) for k, v in con.execute(sql).fetchall()} for q, sql in _FULL.items()}
    finally:
        con.close()
    return Truth(int(count), int(id_sum or 0), answers, groups)


def answer_problems(query: str, answer: list[tuple[Any, ...]], truth: Truth, rel: float = 1e-9) -> list[str]:
    """How ``answer`` (rows of (value, key)) differs from the truth; empty when it is right.

    Right means: as many rows as the truth's top 20, each key's value equal to that key's value
    over all the events, and the values in the same order as the truth's (so a tie at the 20th
    place may be broken either way). Sums of doubles agree to ``rel`` (summation order differs)."""
    import math

    groups = truth.groups[query]
    expected = [row[0] for row in truth.answers[query]]
    problems = []
    if len(answer) != len(expected):
        problems.append(f"{query}: {len(answer)} rows, expected {len(expected)}")
    for value, key in answer:
        want = groups.get(str(key))
        if want is None:
            problems.append(f"{query}: unknown group {key!r}")
        elif not math.isclose(float(value), want, rel_tol=rel, abs_tol=1e-9):
            problems.append(f"{query}: {key} = {value}, expected {want}")
    for got, want in zip((row[0] for row in answer), expected, strict=False):
        if not math.isclose(float(got), float(want), rel_tol=rel, abs_tol=1e-9):
            problems.append(f"{query}: values {[r[0] for r in answer][:5]}... are not the top "
                            f"{len(expected)} {expected[:5]}...")
            break
    return problems[:5]
