"""The cassandra-gdelt baselines on real Cassandra: GDELT stored the row-oriented ways.

The published experiment (Cassandra 2.1) stored GDELT three ways before trying a columnar
layout; this module stores the first ``baseline_rows`` records of the benchmark's TSV those
three ways on Cassandra 5, each in its own table of the keyspace ``<store keyspace>_baselines``
(dropped and recreated by every run), and measures them as ``colonnade.bench.gdelt`` measures
Colonnade::

    row   (globaleventid bigint PRIMARY KEY, 56 more typed columns)  one CQL row per record
    wide  PRIMARY KEY ((monthyear), globaleventid)                   one partition per month
    blob  (globaleventid bigint PRIMARY KEY, data blob)             the record's TSV line;
          Cassandra 5 has no COMPACT STORAGE, so this is a regular table

They are used the way a competent user of the Python driver would use them: prepared INSERTs
sent with ``execute_concurrent_with_args`` (``WRITE_CONCURRENCY`` in flight, token-aware) — for
the wide layout grouped into UNLOGGED batches of rows of one partition, which Cassandra applies
as one mutation — empty fields left unset rather than bound as nulls (a null is a tombstone),
Cassandra's default LZ4 SSTable compression. Full scans are split into token ranges read concurrently, each paged
``FETCH_SIZE`` rows at a time, and every value is materialised into an Arrow table with the
GDELT schema (the blob layout parses its lines with pyarrow). Reading one column selects only
``monthyear``; each of Q1–Q3 is a full read of every column followed by DuckDB over the Arrow
table (as a user without Spark would compute it), timed together.

Bytes on disk are the SSTable files of a table after ``nodetool flush`` and ``nodetool
compact``, summed over the nodes; this needs the nodes to be run by
:class:`~colonnade.cluster.cassandra.LocalCluster` on this machine (found through the node's
``system_views.system_properties``), otherwise bytes are left out with a note.

Every run checks itself: each layout reads back exactly the records it was given, and its
answers to Q1–Q3 equal DuckDB's over the same prefix read straight from the TSV, or
:class:`~colonnade.bench.gdelt.BenchError` is raised.
"""

from __future__ import annotations

import contextlib
import functools
import io
import itertools
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from colonnade.bench import gdelt_data
from colonnade.bench.gdelt import (
    QUERIES,
    WARMUP_S,
    BenchError,
    LayoutResult,
    answers_agree,
    median_time,
    normalise,
    warm_up,
)
from colonnade.config import StoreURI, parse_store_uri

BASELINES = ("row", "wide", "blob")
FETCH_SIZE = 5_000  # rows per page of a scan (the driver's default)
SCAN_SPLITS = 8  # token ranges of a full scan read concurrently
WRITE_CONCURRENCY = 128  # INSERTs in flight
PARTITION_BATCH_ROWS = 50  # rows of one wide-row partition sent as one UNLOGGED batch
BATCH_CONCURRENCY = 16  # batches in flight
INGEST_BATCH_ROWS = 50_000  # rows parsed and sent at a time, so memory stays bounded
NODETOOL_TIMEOUT = 3600.0
# Colonnade's tables in a store keyspace (see colonnade.storage.cassandra); chunks are in
# slice_chunks, or in the chunks table of a keyspace written before it.
STORE_TABLES = ("datasets", "commits", "partitions", "segments", "chunk_index")
CHUNK_TABLES = ("slice_chunks", "chunks")

_MIN_TOKEN, _MAX_TOKEN = -(2**63), 2**63 - 1  # Murmur3Partitioner
_CQL_TYPES = {pa.int64(): "bigint", pa.int32(): "int", pa.int16(): "smallint", pa.int8(): "tinyint",
              pa.float64(): "double", pa.string(): "text"}
_Q3_MONTH = 198012


def _cql(name: str) -> str:
    """The CQL name of a GDELT column (unquoted identifiers are case-folded to lower case)."""
    return name.lower()


@dataclass(frozen=True)
class Layout:
    name: str
    table: str
    key: str  # PRIMARY KEY clause
    partition_key: str
    typed: bool  # one CQL column per GDELT column (else one blob per record)

    def create(self, keyspace: str) -> str:
        if self.typed:
            cols = ", ".join(f"{_cql(f.name)} {_CQL_TYPES[f.type]}" for f in gdelt_data.GDELT_SCHEMA)
        else:
            cols = "globaleventid bigint, data blob"
        return f"CREATE TABLE {keyspace}.{self.table} ({cols}, PRIMARY KEY {self.key})"


LAYOUTS = {
    "row": Layout("row", "gdelt_row", "(globaleventid)", "globaleventid", typed=True),
    "wide": Layout("wide", "gdelt_wide", "((monthyear), globaleventid)", "monthyear", typed=True),
    "blob": Layout("blob", "gdelt_blob", "(globaleventid)", "globaleventid", typed=False),
}


# -- reading the TSV prefix ----------------------------------------------------------------------
def read_prefix(path: Path, rows: int) -> bytes:
    """The first ``rows`` lines of ``path`` (each ending in a newline)."""
    out = bytearray()
    with open(path, "rb") as f:
        for i, line in enumerate(f):
            if i == rows:
                break
            out += line if line.endswith(b"\n") else line + b"\n"
    return bytes(out)


def parse_tsv(data: bytes, columns: Sequence[str] | None = None) -> pa.Table:
    """GDELT TSV bytes as an Arrow table with the GDELT schema (or only ``columns``)."""
    options = gdelt_data.convert_options()
    if columns is not None:
        options.include_columns = list(columns)
    if not data:
        schema = gdelt_data.GDELT_SCHEMA
        fields = [schema.field(c) for c in columns] if columns is not None else list(schema)
        return pa.schema(fields).empty_table()
    return pacsv.read_csv(io.BytesIO(data), read_options=gdelt_data.read_options(),
                          parse_options=gdelt_data.parse_options(), convert_options=options)


def duckdb_answers(table: pa.Table, queries: Iterable[str] = QUERIES) -> dict[str, Any]:
    """DuckDB's answers to the named queries over an Arrow table registered as ``gdelt``."""
    con = duckdb.connect()
    try:
        con.register("gdelt", table)
        return {q: normalise(con.sql(QUERIES[q]).to_arrow_table()) for q in queries}
    finally:
        con.close()


# -- the driver -------------------------------------------------------------------------------
#: The native protocol the baselines use: v4, as the store does. On 30,000 rows per layout,
#: three alternating runs of each, v4 and v5 were within the runs' spread for every layout
#: (read-all medians: row 0.59 / 0.69 s, wide 0.68 / 0.61 s, blob 0.21 / 0.17 s); the store's
#: reads of large chunks are what v5 slows down (the driver re-copies its buffer per segment).
PROTOCOL_VERSION = 4


def connect(uri: StoreURI, protocol_version: int | None = None) -> tuple[Any, Any]:
    """A (cluster, session) for ``uri`` set up as the store's: token-aware, tuple rows, the
    store's consistency levels (profile ``read`` for reads, the default one for writes), its
    driver connection (128 KiB socket reads, TCP_NODELAY) and protocol (:data:`PROTOCOL_VERSION` unless
    given)."""
    from cassandra.auth import PlainTextAuthProvider
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy
    from cassandra.query import tuple_factory

    from colonnade.storage.cassandra import CassandraSettings, _password
    from colonnade.storage.cassandra_driver import NO_DELAY, StoreConnection

    s = CassandraSettings.from_options(uri.options)

    def profile(level: int) -> ExecutionProfile:
        return ExecutionProfile(
            load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy(local_dc=s.local_dc)),
            consistency_level=level, request_timeout=max(60.0, s.request_timeout), row_factory=tuple_factory)

    cluster = Cluster(contact_points=list(uri.hosts), port=uri.port,
                      protocol_version=protocol_version or PROTOCOL_VERSION, connection_class=StoreConnection,
                      sockopts=NO_DELAY,
                      auth_provider=PlainTextAuthProvider(uri.user, _password(uri)) if uri.user else None,
                      ssl_context=s.ssl_context, connect_timeout=s.connect_timeout,
                      execution_profiles={EXEC_PROFILE_DEFAULT: profile(s.write_consistency),
                                          "read": profile(s.read_consistency)})
    try:
        return cluster, cluster.connect()
    except BaseException:
        cluster.shutdown()
        raise


def prepare(session: Any, cql: str, attempts: int = 5) -> Any:
    """``session.prepare(cql)``, retried a few times on a server error: just after a table is
    created, Cassandra 5 can briefly fail a PREPARE on it with "Unknown CF <table id>"."""
    from cassandra.protocol import ServerError

    for attempt in range(attempts):
        try:
            return session.prepare(cql)
        except ServerError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")


def scan(session: Any, statement: Any, params: Sequence[Sequence[Any]],
         fetch_size: int = FETCH_SIZE) -> list[tuple[Any, ...]]:
    """All rows of a prepared query run once per parameter tuple, concurrently, each paged.

    Pages arrive on the driver's event loop; the callback only keeps them and asks for the next
    page, so the decoding (done by the driver's Cython row parser) is the only work there.
    """
    pages: list[list[tuple[Any, ...]]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    done = threading.Event()
    pending = [len(params)]

    def finish() -> None:
        with lock:
            pending[0] -= 1
            if pending[0] == 0:
                done.set()

    def on_page(rows: list[tuple[Any, ...]], future: Any) -> None:
        pages.append(rows)
        try:
            if future.has_more_pages:
                future.start_fetching_next_page()
                return
        except Exception as exc:  # raised on the event loop, it would be lost and the scan hang
            errors.append(exc)
        finish()

    def on_error(exc: BaseException, future: Any) -> None:
        errors.append(exc)
        finish()

    if not params:
        return []
    for p in params:
        bound = statement.bind(p)
        bound.fetch_size = fetch_size
        future = session.execute_async(bound, execution_profile="read")
        future.add_callbacks(on_page, on_error, callback_args=(future,), errback_args=(future,))
    done.wait()
    if errors:
        raise BenchError(f"scan failed: {errors[0]}") from errors[0]
    return [row for page in pages for row in page]


def token_ranges(splits: int) -> list[tuple[int, int]]:
    """``splits`` contiguous (start, end] token ranges covering the whole Murmur3 ring."""
    step = (_MAX_TOKEN - _MIN_TOKEN) // splits
    bounds = [_MIN_TOKEN + i * step for i in range(splits)] + [_MAX_TOKEN]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def rows_to_table(rows: list[tuple[Any, ...]], columns: Sequence[str]) -> pa.Table:
    """Typed rows (CQL order = ``columns``) as an Arrow table with the GDELT types."""
    schema = gdelt_data.GDELT_SCHEMA
    values = list(zip(*rows, strict=True)) if rows else [()] * len(columns)
    return pa.table([pa.array(v, type=schema.field(c).type) for v, c in zip(values, columns, strict=True)],
                    names=list(columns))


# -- one layout --------------------------------------------------------------------------------
class BaselineTable:
    """One layout's table: ingest the prefix, read it back, answer the queries."""

    def __init__(self, session: Any, keyspace: str, layout: Layout, splits: int = SCAN_SPLITS) -> None:
        self.session = session
        self.keyspace = keyspace
        self.layout = layout
        self.splits = splits
        self._statements: dict[str, Any] = {}

    @property
    def qualified(self) -> str:
        return f"{self.keyspace}.{self.layout.table}"

    def _prepared(self, cql: str) -> Any:
        if cql not in self._statements:
            self._statements[cql] = prepare(self.session, cql)
        return self._statements[cql]

    def create(self) -> None:
        self.session.execute(self.layout.create(self.keyspace), timeout=120)

    def ingest(self, data: bytes) -> int:
        """Write every record of the TSV bytes; returns the number written."""
        from cassandra.concurrent import execute_concurrent_with_args

        if self.layout.typed:
            names = [_cql(n) for n in gdelt_data.GDELT_COLUMNS]
            insert = self._prepared(f"INSERT INTO {self.qualified} ({', '.join(names)}) "
                                    f"VALUES ({', '.join('?' * len(names))})")
            batches = self._typed_rows(data)
        else:
            insert = self._prepared(f"INSERT INTO {self.qualified} (globaleventid, data) VALUES (?, ?)")
            batches = self._blob_rows(data)
        written = 0
        for batch in batches:
            if self.layout.name == "wide":
                written += self._write_partition_batches(insert, batch)
                continue
            results = execute_concurrent_with_args(self.session, insert, batch,
                                                   concurrency=WRITE_CONCURRENCY, raise_on_first_error=True)
            written += len(results)
        return written

    def _write_partition_batches(self, insert: Any, rows: list[tuple[Any, ...]]) -> int:
        """Rows grouped by partition (MonthYear) into UNLOGGED batches: a batch within one
        partition is one mutation, the way wide rows are meant to be loaded."""
        from cassandra.concurrent import execute_concurrent
        from cassandra.query import BatchStatement, BatchType

        month = gdelt_data.GDELT_COLUMNS.index("MonthYear")

        def batches() -> Iterable[tuple[Any, tuple[()]]]:
            for _, group in itertools.groupby(rows, key=lambda r: r[month]):
                part = list(group)
                for start in range(0, len(part), PARTITION_BATCH_ROWS):
                    batch = BatchStatement(batch_type=BatchType.UNLOGGED)
                    for row in part[start:start + PARTITION_BATCH_ROWS]:
                        batch.add(insert, row)
                    yield batch, ()

        execute_concurrent(self.session, batches(), concurrency=BATCH_CONCURRENCY, raise_on_first_error=True)
        return len(rows)

    @staticmethod
    def _typed_rows(data: bytes) -> Iterable[list[tuple[Any, ...]]]:
        from cassandra.query import UNSET_VALUE

        reader = pacsv.open_csv(io.BytesIO(data), read_options=gdelt_data.read_options(block_size=8 << 20),
                                parse_options=gdelt_data.parse_options(),
                                convert_options=gdelt_data.convert_options())
        for batch in reader:
            # An empty field is left unset: binding None would write a tombstone per empty cell.
            columns = [[UNSET_VALUE if v is None else v for v in col.to_pylist()] for col in batch.columns]
            yield list(zip(*columns, strict=True))

    @staticmethod
    def _blob_rows(data: bytes) -> Iterable[list[tuple[int, bytes]]]:
        lines = data.split(b"\n")
        if lines and not lines[-1]:
            lines.pop()
        for start in range(0, len(lines), INGEST_BATCH_ROWS):
            yield [(int(line[:line.index(b"\t")]), line) for line in lines[start:start + INGEST_BATCH_ROWS]]

    def read(self, columns: Sequence[str] | None = None, month: int | None = None) -> pa.Table:
        """Every record (or those of one MonthYear, for the wide layout) as an Arrow table of
        ``columns`` (default: all 57)."""
        columns = list(columns or gdelt_data.GDELT_COLUMNS)
        if self.layout.typed:
            select = f"SELECT {', '.join(_cql(c) for c in columns)} FROM {self.qualified}"
        else:
            select = f"SELECT data FROM {self.qualified}"
        if month is not None and self.layout.name == "wide":
            rows = scan(self.session, self._prepared(f"{select} WHERE monthyear = ?"), [(month,)])
        else:
            key = self.layout.partition_key
            where = f" WHERE token({key}) > ? AND token({key}) <= ?"
            rows = scan(self.session, self._prepared(select + where), token_ranges(self.splits))
        if self.layout.typed:
            return rows_to_table(rows, columns)
        return parse_tsv(b"\n".join(r[0] for r in rows), columns)

    def query(self, q: str) -> list[tuple[Any, ...]]:
        # as a user without Spark would: read the whole table, then compute the answer locally
        return duckdb_answers(self.read(), [q])[q]


# -- bytes on disk -----------------------------------------------------------------------------
def local_cluster_for(session: Any) -> Any | None:
    """The :class:`LocalCluster` running the node ``session`` talks to, or None when that node
    was not started by one on this machine."""
    from colonnade.cluster.cassandra import LocalCluster

    try:
        props = dict(session.execute(
            "SELECT name, value FROM system_views.system_properties WHERE name IN "
            "('cassandra.storagedir', 'cassandra.jmx.local.port')"))
        address = session.execute("SELECT rpc_address FROM system.local").one()[0]
    except Exception:
        return None
    node_dir = Path(props.get("cassandra.storagedir") or "/nonexistent")
    match = re.fullmatch(r"node(\d+)", node_dir.name)
    last = str(address).rsplit(".", 1)[-1]
    if (match is None or node_dir.parent.name != "nodes" or not (node_dir / "conf" / "cassandra.yaml").is_file()
            or not str(address).startswith("127.") or not last.isdigit()):
        return None
    node = int(match.group(1))
    nodes = max(int(m.group(1)) for p in node_dir.parent.iterdir()
                if (m := re.fullmatch(r"node(\d+)", p.name)))
    try:
        cluster = LocalCluster(directory=node_dir.parent.parent, nodes=nodes, address_offset=int(last) - node)
    except Exception:
        return None
    if str(cluster.jmx_port(node)) != props.get("cassandra.jmx.local.port"):
        return None
    return cluster


def table_sizes(cluster_or_dir: Any, keyspace: str, tables: Sequence[str]) -> dict[str, int]:
    """Bytes of each table's SSTable files; with a LocalCluster, flushed and compacted first.

    ``cluster_or_dir`` is a :class:`LocalCluster` (every running node is flushed, compacted and
    counted) or a Cassandra data directory (``data_file_directories``), measured as it is.
    Only the files of the table's live directory count, not snapshots or backups.
    """
    from colonnade.cluster.cassandra import LocalCluster

    if isinstance(cluster_or_dir, LocalCluster):
        running = [s.node for s in cluster_or_dir.status() if s.state == "up"]
        if not running:
            raise BenchError(f"no node of the cluster in {cluster_or_dir.directory} is up")
        for node in running:
            cluster_or_dir.nodetool(node, "flush", keyspace, *tables, timeout=NODETOOL_TIMEOUT)
        for node in running:
            cluster_or_dir.nodetool(node, "compact", keyspace, *tables, timeout=NODETOOL_TIMEOUT)
        data_dirs = [cluster_or_dir.node_dir(n) / "data" for n in running]
    else:
        data_dirs = [Path(cluster_or_dir)]
    # A dropped table's directory (an older table id) may linger, emptied: count them all.
    return {table: sum(_sstable_files_bytes(t) for d in data_dirs for t in (d / keyspace).glob(f"{table}-*"))
            for table in tables}


def _sstable_files_bytes(directory: Path, settle: float = 30.0) -> int:
    """Bytes of the complete SSTables in one table directory (all their component files).

    The SSTables a compaction replaced are deleted once its transaction log is done with them,
    which may be a moment after ``nodetool compact`` returns: wait for the logs to go away.
    """
    deadline = time.monotonic() + settle
    while any(directory.glob("*_txn_*.log")) and time.monotonic() < deadline:
        time.sleep(0.2)
    total = 0
    for toc in directory.glob("*-TOC.txt"):
        stem = toc.name[: -len("TOC.txt")]
        for f in directory.glob(f"{stem}*"):
            with contextlib.suppress(FileNotFoundError):  # removed since listed: not live
                total += f.stat().st_size
    return total


def sstable_bytes(cluster_or_dir: Any, keyspace: str, table: str | Sequence[str]) -> int:
    """Bytes on disk of one table (or the sum of several); see :func:`table_sizes`."""
    tables = [table] if isinstance(table, str) else list(table)
    return sum(table_sizes(cluster_or_dir, keyspace, tables).values())


def store_disk_bytes(store_uri: str) -> tuple[int | None, str]:
    """Bytes on disk of a Cassandra store's tables after flush and compaction, with a note."""
    uri = parse_store_uri(store_uri)
    cluster, session = connect(uri)
    try:
        local = local_cluster_for(session)
        keyspace = cluster.metadata.keyspaces.get(uri.keyspace)
        chunks = [t for t in CHUNK_TABLES if keyspace is not None and t in keyspace.tables]
    finally:
        cluster.shutdown()
    if local is None:
        return None, "bytes on disk not measured: the node is not a LocalCluster node on this machine"
    sizes = table_sizes(local, uri.keyspace, (*STORE_TABLES, *chunks))
    parts = ", ".join(f"{t} {b:,}" for t, b in sizes.items() if b)
    return sum(sizes.values()), (f"bytes = SSTable files of keyspace {uri.keyspace} after nodetool flush "
                                 f"+ compact ({parts})")


# -- the run -----------------------------------------------------------------------------------
def _check_table(name: str, got: pa.Table, expected: pa.Table) -> None:
    if got.num_rows != expected.num_rows:
        raise BenchError(f"{name}: read {got.num_rows:,} records back, wrote {expected.num_rows:,}")
    got = got.sort_by("GLOBALEVENTID")
    for column in expected.column_names:
        if not got[column].equals(expected[column]):
            raise BenchError(f"{name}: column {column} reads back different values than were written")


def run_baselines(path: Path, rows: int, store_uri: str, baseline_rows: int, layouts: Sequence[str],
                  repeats: int, echo: Callable[[str], None] = print,
                  warmup_s: float = WARMUP_S) -> list[LayoutResult]:
    """Measure the named layouts (of :data:`BASELINES`) on the first ``baseline_rows`` rows of
    ``path`` in the keyspace ``<store keyspace>_baselines``; ``rows`` is the file's row count."""
    unknown = set(layouts) - set(BASELINES)
    if unknown:
        raise BenchError(f"unknown baseline layout(s) {', '.join(sorted(unknown))}: choose from "
                         f"{', '.join(BASELINES)}")
    chosen = [n for n in BASELINES if n in layouts]
    uri = parse_store_uri(store_uri)
    keyspace = f"{uri.keyspace}_baselines"
    data = read_prefix(path, baseline_rows)
    prefix = parse_tsv(data)
    n = prefix.num_rows
    expected = duckdb_answers(prefix)
    q3_rows = pc.sum(pc.equal(prefix["MonthYear"], _Q3_MONTH)).as_py() or 0
    if q3_rows == 0:
        echo(f"note: the first {n:,} rows hold no MonthYear {_Q3_MONTH}: Q3 is empty for the baselines")
    cluster, session = connect(uri)
    try:
        from colonnade.storage.cassandra import CassandraSettings

        replication = CassandraSettings.from_options(uri.options).replication
        options = ", ".join(f"'{k}': '{v}'" for k, v in replication.items())
        session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=300)
        session.execute(f"CREATE KEYSPACE {keyspace} WITH replication = {{{options}}}", timeout=120)
        tables = {name: BaselineTable(session, keyspace, LAYOUTS[name]) for name in chosen}
        results = {name: LayoutResult(name, n) for name in chosen}
        for table in tables.values():
            table.create()
        cluster.control_connection.wait_for_schema_agreement()
        for name, table in tables.items():
            echo(f"baseline {name}: ingesting {n:,} rows into {table.qualified} ...")
            start = time.perf_counter()
            written = table.ingest(data)
            results[name].ingest_s = time.perf_counter() - start
            if written != n:
                raise BenchError(f"{name}: wrote {written:,} records, expected {n:,}")
        local = local_cluster_for(session)
        sizes = table_sizes(local, keyspace, [LAYOUTS[c].table for c in chosen]) if local is not None else None
        for name, table in tables.items():
            result = results[name]
            echo(f"baseline {name}: reading ...")
            _check_table(name, table.read(), prefix)
            read_one = functools.partial(table.read, ["MonthYear"])
            queries = {q: functools.partial(table.query, q) for q in QUERIES}
            result.warmup_rounds = warm_up([table.read, read_one, *queries.values()], warmup_s)
            result.read_all_s, _ = median_time(table.read, repeats)
            result.read_one_s, t = median_time(read_one, repeats)
            if t.num_rows != n:
                raise BenchError(f"{name}: read {t.num_rows:,} MonthYear values, expected {n:,}")
            for q, run in queries.items():
                result.queries_s[q], result.answers[q] = median_time(run, repeats)
                if not answers_agree(result.answers[q], expected[q], rel=1e-6):
                    raise BenchError(f"baseline {name} answers {q} differently from DuckDB over the same "
                                     f"{n:,} rows: {result.answers[q][:3]} vs {expected[q][:3]}")
            if sizes is not None:
                result.bytes = sizes[LAYOUTS[name].table]
            result.notes += _notes(name, n, rows, q3_rows, sizes is not None)
        for a, b in itertools.pairwise(chosen):
            for q in QUERIES:
                if not answers_agree(results[a].answers[q], results[b].answers[q], rel=1e-6):
                    raise BenchError(f"baselines {a} and {b} answer {q} differently")
        session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=300)
        return [results[name] for name in chosen]
    finally:
        cluster.shutdown()


def _notes(name: str, n: int, rows: int, q3_rows: int, measured: bool) -> list[str]:
    notes = [f"first {n:,} of {rows:,} rows (rates comparable, totals are not)"]
    if name == "blob":
        notes.append("one blob per record holding its TSV line (no COMPACT STORAGE in Cassandra 5); "
                     "reads parse the lines with pyarrow")
    writes = (f"UNLOGGED batches of {PARTITION_BATCH_ROWS} rows of one partition, {BATCH_CONCURRENCY} in flight"
              if name == "wide" else f"{WRITE_CONCURRENCY} in flight")
    notes.append(f"reads: {SCAN_SPLITS} token ranges scanned concurrently, fetch_size {FETCH_SIZE:,}; "
                 f"writes: prepared, {writes}, empty fields unset; driver as the store's: protocol "
                 f"v{PROTOCOL_VERSION}, token-aware, 128 KiB socket reads, TCP_NODELAY")
    q3 = "one partition read" if name == "wide" else "full scan, filtered client-side"
    notes.append(f"Q1-Q3 = full read of every column + DuckDB over Arrow; Q3 ({q3_rows:,} rows): {q3}")
    notes.append("bytes = SSTable files after nodetool flush + compact (default LZ4)" if measured
                 else "bytes on disk not measured: the node is not a LocalCluster node on this machine")
    return notes
