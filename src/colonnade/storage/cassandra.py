"""The Cassandra store: chunks, segment rows and the commit log in one keyspace.

The chunks of one bucket of one partition value (the segments one append wrote there, up to a
few) are one Cassandra partition, each column of them one contiguous slice of it: reading every
column of a slice is one partition read, and reading one column of many slices is one query
for several of them (``partition IN ?``, only those with the same replicas, sent to those
replicas). Cassandra's cost of a read is mostly per partition: reading all 57 columns of 4M
GDELT rows took one node 145-175 ms of CPU this way, 205-305 ms with one partition per column.
Chunk cells are at most 1 MiB (larger chunks are split into parts and put back together
on read); the commit record is the only write that needs agreement and is a lightweight
transaction (``INSERT ... IF NOT EXISTS``) on ``(dataset, version)``. Everything
else is an idempotent upsert written with prepared statements, token-aware routing and a bound
on the bytes in flight, and may be retried. Small index tables make listing and dropping a
dataset a handful of single-partition queries instead of full-table scans. Tables::

    datasets    (name PRIMARY KEY, spec, created)                  create/update/drop are LWTs
    dataset_names (folded PRIMARY KEY, name)                       claims a name whatever its
                                                                   case (LWT, before datasets)
    commits     ((dataset), version, payload, at)                  INSERT ... IF NOT EXISTS; an
                                                                   expired record keeps its key
                                                                   (payload removed), so its
                                                                   version stays taken
    log_bounds  (dataset PRIMARY KEY, oldest)                      oldest version kept (raised
                                                                   by compare-and-set LWTs)
    checkpoints ((dataset), version, part, parts, payload)         the live state every N
                                                                   commits, in ≤ 1 MiB parts
    partitions  ((dataset), partition)                             partition values in use
    segments    ((dataset, partition), segment, commit, rows, bucket, stats)
    slice_chunks ((dataset, partition, bucket), column, segment, part, parts, data)
                                                                   SSTable compression off
                                                                   (keyspaces written before it
                                                                   keep their ``chunks`` table,
                                                                   keyed ((dataset, partition,
                                                                   column, bucket), segment,
                                                                   part), and are used as such)
    chunk_index ((dataset, partition), column, bucket, segment, bytes)
                                                                   sizes; finds chunk slices
"""

from __future__ import annotations

import queue
import time
from collections import deque
from collections.abc import Collection, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from cassandra import (
    AuthenticationFailed,
    CoordinationFailure,
    DriverException,
    OperationTimedOut,
    ProtocolVersion,
    ReadTimeout,
    Unavailable,
    UnresolvableContactPoints,
    WriteTimeout,
)
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import (
    EXEC_PROFILE_DEFAULT,
    Cluster,
    ExecutionProfile,
    NoHostAvailable,
)
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy
from cassandra.query import BatchStatement, BatchType, tuple_factory

from colonnade.config import StoreURI
from colonnade.errors import (
    CommitConflictError,
    ConfigError,
    DatasetExistsError,
    DatasetNotFoundError,
    StoreError,
    UnavailableError,
)
from colonnade.storage.base import ChunkRef, ChunkStore, SegmentRow
from colonnade.storage.cassandra_driver import (
    NO_DELAY,
    ChunkQuery,
    IdempotentRetryPolicy,
    RequestWindow,
    RoutedStatement,
    StoreConnection,
    chunk_routing_key,
    commit_mark,
    is_busy,
    level_name,
    one_line,
    shut_at_exit,
)
from colonnade.storage.cassandra_queries import IN_PARTITIONS, column_queries, slice_queries
from colonnade.storage.cassandra_schema import LEGACY_CHUNKS, SLICE_CHUNKS, STATEMENTS, TABLES
from colonnade.storage.cassandra_settings import PASSWORD_ENV, CassandraSettings, _password

PART_BYTES = 1 << 20  # largest chunk cell; bigger chunks are split into parts
_READ_GROUPS = 8  # chunk queries in flight in get_chunks
_PAGE_ROWS = (4, 32, 500)  # rows per page of a chunk query: least, before sizes are known, most
_INDEX_BATCH = 32  # chunk_index rows per batch: stays under Cassandra's 5 KiB batch warning

# -- the store ------------------------------------------------------------------------------
class CassandraStore(ChunkStore):
    """A ChunkStore in one Cassandra keyspace (see the module docstring for the layout)."""

    def __init__(self, uri: StoreURI) -> None:
        self.uri = uri.display
        self.settings = s = CassandraSettings.from_options(uri.options)
        self.keyspace = uri.keyspace
        self._user = uri.user
        self._where = ",".join(f"{h}:{uri.port}" for h in uri.hosts)
        self._secret = _password(uri) if uri.user else None
        self._uncertain: set[str] = set()  # datasets whose last commit has an unknown outcome

        def profile(level: int, serial: int | None = None, timeout: float = s.request_timeout) -> Any:
            return ExecutionProfile(
                load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy(local_dc=s.local_dc)),
                retry_policy=IdempotentRetryPolicy(), consistency_level=level,
                serial_consistency_level=serial, request_timeout=timeout, row_factory=tuple_factory)

        try:
            self._cluster = Cluster(
                contact_points=list(uri.hosts), port=uri.port, compression=s.compression, connection_class=StoreConnection,
                sockopts=NO_DELAY,
                auth_provider=PlainTextAuthProvider(uri.user, self._secret) if uri.user else None,
                ssl_context=s.ssl_context, connect_timeout=s.connect_timeout,
                control_connection_timeout=s.connect_timeout,
                max_schema_agreement_wait=max(10, int(s.request_timeout)),
                execution_profiles={  # the default one runs schema changes
                    EXEC_PROFILE_DEFAULT: profile(s.write_consistency, None, max(60.0, s.request_timeout)),
                    "read": profile(s.read_consistency),
                    "write": profile(s.write_consistency),
                    "commit": profile(s.write_consistency, s.serial_consistency),
                    "serial_read": profile(s.serial_consistency),
                })
        except UnresolvableContactPoints as exc:
            raise self._error(exc, "connect") from None
        except ValueError as exc:  # e.g. a wire compression whose module is missing
            raise ConfigError(f"cassandra store options: {exc}") from None
        # Protocol v4, negotiated down if need be (not pinned). Not v5: the driver (3.29-3.30)
        # re-copies its whole receive buffer for every 128 KiB v5 segment, which made reading
        # 390 MiB of chunks take 96 s instead of 2.8 s at 16 queries in flight (measured).
        self._cluster.protocol_version = ProtocolVersion.V4
        shut_at_exit(self._cluster)
        try:
            self._session = self._cluster.connect()
            self.chunk_table = self._create_schema()
            self._q = {}
            for name, cql in STATEMENTS.items():
                self._q[name] = self._session.prepare(cql.format(ks=self.keyspace, chunks=self.chunk_table))
                self._q[name].is_idempotent = " IF " not in cql
        except BaseException as exc:
            self._cluster.shutdown()
            if isinstance(exc, DriverException | NoHostAvailable):
                raise self._error(exc, "connect") from None
            raise

    def _create_schema(self) -> str:
        """Create what is missing of the keyspace; the name of its chunks table."""
        ks = self._cluster.metadata.keyspaces.get(self.keyspace)
        if ks is None:
            options = ", ".join(f"'{k}': '{v}'" for k, v in self.settings.replication.items())
            self._session.execute(f"CREATE KEYSPACE IF NOT EXISTS {self.keyspace} "
                                  f"WITH replication = {{{options}}}")
            ks = self._cluster.metadata.keyspaces.get(self.keyspace)
        tables = dict(TABLES)
        legacy, legacy_cql = LEGACY_CHUNKS
        if ks is not None and legacy in ks.tables:
            del tables[SLICE_CHUNKS]
            tables[legacy] = legacy_cql
        missing = [t for t in tables if ks is None or t not in ks.tables]
        for table in missing:
            self._session.execute(f"CREATE TABLE IF NOT EXISTS {self.keyspace}.{table} {tables[table]}")
        if missing and not self._cluster.control_connection.wait_for_schema_agreement():
            raise StoreError(f"{self.uri}: nodes did not agree on the schema; check that all "
                             f"nodes are up and retry")
        return legacy if legacy in tables else SLICE_CHUNKS

    @property
    def _by_slice(self) -> bool:
        """Whether a Cassandra partition holds every column of a slice (else one column)."""
        return self.chunk_table == SLICE_CHUNKS

    def _chunk_key(self, dataset: str, partition: str, column: str, bucket: int) -> bytes:
        """The routing key of the Cassandra partition that holds a chunk of ``column``."""
        return chunk_routing_key(dataset, partition, None if self._by_slice else column, bucket)

    # -- errors -----------------------------------------------------------------------------
    def _reason(self, exc: BaseException) -> str:
        """Why one host could not be used, in a few words."""
        if isinstance(exc, OperationTimedOut):
            text = exc.errors if isinstance(exc.errors, str) else "timed out"
        else:
            text = str(exc.args[1] if isinstance(exc, OSError) and len(exc.args) > 1 else exc)
        if "does not support protocol version" in text:  # something answered, but not in CQL
            return "the server does not speak the CQL native protocol (wrong port?)"
        return one_line(text.rsplit("Last error: ", 1)[-1])

    def _error(self, exc: BaseException, action: str) -> StoreError:
        """One readable line for a driver exception; never the password."""
        error = self._describe(exc, action, f"Cassandra at {self._where}")
        if self._secret and self._secret in str(error):
            error.args = (str(error).replace(self._secret, "***"),)
        return error

    def _describe(self, exc: BaseException, action: str, where: str) -> StoreError:
        if isinstance(exc, NoHostAvailable):
            causes = list((exc.errors or {}).values())
            inner = next((e for e in causes if isinstance(
                e, AuthenticationFailed | Unavailable | ReadTimeout | WriteTimeout)), None)
            if inner is not None:
                return self._describe(inner, action, where)
            return StoreError(f"cannot reach {where}: "
                              f"{self._reason(causes[0]) if causes else 'no host is up'}")
        if isinstance(exc, AuthenticationFailed):
            return StoreError(f"authentication failed for user {self._user!r} at {where}: check the "
                              f"user name and the password ({PASSWORD_ENV} or password_file)")
        if isinstance(exc, UnresolvableContactPoints):
            return StoreError(f"cannot reach {where}: no host name resolves")
        if isinstance(exc, Unavailable):
            level = level_name(exc.consistency)
            return UnavailableError(
                f"{action} failed on {where}: not enough replicas for {level}: "
                f"{exc.required_replicas} required, {exc.alive_replicas} alive",
                consistency=level, required=exc.required_replicas, alive=exc.alive_replicas)
        if isinstance(exc, WriteTimeout | ReadTimeout):
            kind = "write" if isinstance(exc, WriteTimeout) else "read"
            return StoreError(f"{action} failed on {where}: {kind} timed out at "
                              f"{level_name(exc.consistency)} ({exc.received_responses} of "
                              f"{exc.required_responses} replicas answered)")
        if isinstance(exc, OperationTimedOut):
            return StoreError(f"{action} failed on {where}: no answer within "
                              f"{self.settings.request_timeout:g} s (client timeout)")
        if isinstance(exc, CoordinationFailure):
            return StoreError(f"{action} failed on {where}: {exc.failures} replica(s) failed at "
                              f"{level_name(exc.consistency)}")
        message = getattr(exc, "summary", None) or getattr(exc, "message", None) or exc
        return StoreError(f"{action} failed on {where}: {one_line(str(message))}")

    # -- running statements -----------------------------------------------------------------
    def _call(self, call: Any, action: str) -> Any:
        """``call()``, again while the driver refuses it as busy; driver errors mapped."""
        since = time.monotonic()
        while True:
            try:
                return call()
            except (DriverException, NoHostAvailable) as exc:
                if not is_busy(exc) or time.monotonic() - since > self.settings.request_timeout:
                    raise self._error(exc, action) from None
            time.sleep(0.002)

    def _rows(self, key: str, params: Sequence[Any], action: str, profile: str = "read") -> list[Any]:
        """All rows of one statement (further pages are fetched while iterating)."""
        statement = self._q[key].bind(params)
        statement.fetch_size = 1000
        return self._call(lambda: list(self._session.execute(statement, execution_profile=profile)),
                          action)

    def _rows_at_once(self, queries: Sequence[tuple[str, Sequence[Any]]], action: str,
                      profile: str = "read") -> list[list[Any]]:
        """All rows of each statement, the statements sent at once."""
        def run() -> list[list[Any]]:
            futures = []
            for key, params in queries:
                statement = self._q[key].bind(params)
                statement.fetch_size = 1000
                futures.append(self._session.execute_async(statement, execution_profile=profile))
            return [list(future.result()) for future in futures]
        return self._call(run, action)  # type: ignore[no-any-return]

    def _applied(self, key: str, params: Sequence[Any], action: str) -> bool:
        """Run a lightweight transaction; whether it was applied."""
        return bool(self._rows(key, params, action, "commit")[0][0])

    def _many(self, key: str, params: Sequence[Sequence[Any]], action: str) -> list[list[Any]]:
        """Run one read for many parameter tuples concurrently; all rows of each, in order."""
        def run() -> list[list[Any]]:
            results = execute_concurrent_with_args(self._session, self._q[key], params,
                                                   concurrency=32, execution_profile="read")
            return [list(result) for _ok, result in results]
        return self._call(run, action) if params else []

    def _write_all(self, statements: Iterable[tuple[str, Sequence[Any], int]], action: str) -> None:
        """Idempotent writes, concurrently, with at most ``max_inflight_bytes`` in flight."""
        window = RequestWindow(self._session, self.settings.max_inflight_bytes, self.settings.request_timeout)
        try:
            for key, params, size in statements:
                if key == "index":  # rows of one partition
                    statement: Any = BatchStatement(BatchType.UNLOGGED)
                    statement.is_idempotent = True
                    for row in params:
                        statement.add(self._q[key], row)
                else:
                    statement = self._q[key].bind(params)
                window.submit(statement, size)
                if window.error is not None:
                    break
        finally:
            error = window.wait()
        if error is not None:
            raise self._error(error, action) from None

    def _partitions(self, dataset: str, action: str) -> list[str]:
        return [row[0] for row in self._rows("partitions", (dataset,), action)]

    # -- datasets ---------------------------------------------------------------------------
    def create_dataset(self, name: str, spec: str) -> None:
        action = f"create dataset {name!r}"
        # Datasets created before names were claimed have no claim: look for them first.
        for other in self.list_datasets():
            if other != name and other.lower() == name.lower():
                raise DatasetExistsError(name, other)
        # 1. claim the case-folded name: one LWT decides between `Trips` and `trips`. A claim
        #    of our own exact name may be left by a create that died before step 2: ours again.
        claim = self._rows("claim", (name.lower(), name), action, "commit")[0]
        if not claim[0] and claim[-1] != name:  # not applied: [applied, folded, name]
            raise DatasetExistsError(name, claim[-1])
        # 2. the dataset itself: one LWT decides between two creators of the same name
        if not self._applied("create", (name, spec, datetime.now(UTC)), action):
            raise DatasetExistsError(name)

    def get_dataset(self, name: str) -> str:
        rows = self._rows("get", (name,), f"read dataset {name!r}")
        if not rows:
            raise DatasetNotFoundError(name)
        return str(rows[0][0])

    def update_dataset(self, name: str, spec: str) -> None:
        if not self._applied("update", (spec, name), f"update dataset {name!r}"):
            raise DatasetNotFoundError(name)

    def list_datasets(self) -> list[str]:
        return sorted(row[0] for row in self._rows("names", (), "list datasets"))

    def drop_dataset(self, name: str) -> None:
        action = f"drop dataset {name!r}"
        try:
            self.get_dataset(name)
        except DatasetNotFoundError:
            # a create or drop of this name that died half-way may have left its claim
            self._applied("unclaim", (name.lower(), name), action)
            raise
        partitions = self._partitions(name, action)
        indexes = self._many("indexes", [(name, p) for p in partitions], action)
        slices = {(p, column, bucket) for p, rows in zip(partitions, indexes, strict=True)
                  for column, bucket, _size in rows}
        # Data first, the dataset row last: a drop cut short can be run again, and the name is
        # never free while anything of the old dataset could still be read under it.
        self._write_all([*(("unchunks", (name, *key), 0) for key in slices),
                         *(("unindexes", (name, p), 0) for p in partitions),
                         *(("unsegments", (name, p), 0) for p in partitions),
                         ("unpartitions", (name,), 0), ("uncheckpoints", (name,), 0),
                         ("uncommits", (name,), 0), ("unbounds", (name,), 0)], action)
        if not self._applied("undataset", (name,), action):
            raise DatasetNotFoundError(name)
        self._applied("unclaim", (name.lower(), name), action)  # the name is free again

    # -- data -------------------------------------------------------------------------------
    def put_chunks(self, dataset: str, chunks: Sequence[tuple[ChunkRef, bytes]]) -> None:
        def writes() -> Iterator[tuple[str, Sequence[Any], int]]:
            index: dict[str, list[tuple[Any, ...]]] = {}
            for ref, data in chunks:
                index.setdefault(ref.partition, []).append(
                    (dataset, ref.partition, ref.column, ref.bucket, ref.segment, len(data)))
            for partition, rows in index.items():
                yield "partition", (dataset, partition), 0
                for i in range(0, len(rows), _INDEX_BATCH):  # one partition: unlogged batches
                    yield "index", rows[i:i + _INDEX_BATCH], 0
            for ref, data in chunks:
                key = (dataset, ref.partition, ref.column, ref.bucket, ref.segment)
                count = max(1, -(-len(data) // PART_BYTES))
                if count == 1:  # the common case: bind the caller's bytes, no copy
                    yield "chunk", (*key, 0, 1, data), len(data)
                    continue
                view = memoryview(data)
                for part in range(count):
                    piece = view[part * PART_BYTES:(part + 1) * PART_BYTES]
                    yield "chunk", (*key, part, count, piece), len(piece)

        self._write_all(writes(), f"write chunks of dataset {dataset!r}")

    def get_chunks(self, dataset: str, refs: Sequence[ChunkRef]) -> Iterator[tuple[ChunkRef, bytes]]:
        if len(self._cluster.metadata.all_hosts()) > 1:  # a query names slices of the same replicas
            def replicas(partition: str, column: str, bucket: int) -> tuple[str, ...]:
                return self._replicas(self._chunk_key(dataset, partition, column, bucket))
        else:
            def replicas(partition: str, column: str, bucket: int) -> tuple[str, ...]:
                return ()
        plan = slice_queries if self._by_slice else column_queries
        return self._fetch(dataset, plan(refs, replicas))

    def _replicas(self, routing_key: bytes) -> tuple[str, ...]:
        return tuple(sorted(str(h.address) for h in self._cluster.metadata.get_replicas(self.keyspace, routing_key)))

    def chunk_hosts(self, dataset: str, ref: ChunkRef) -> tuple[str, ...]:
        """Addresses of the nodes that hold the chunk ``ref`` (where a reader of it is local)."""
        return self._replicas(self._chunk_key(dataset, ref.partition, ref.column, ref.bucket))

    def _fetch(self, dataset: str, tasks: deque[ChunkQuery]) -> Iterator[tuple[ChunkRef, bytes]]:
        action = f"read chunks of dataset {dataset!r}"
        patience = self.settings.request_timeout
        arrived: queue.Queue[tuple[ChunkQuery, Any, bool, BaseException | None]] = queue.Queue()
        running, received = 0, False
        # Pages hold about max_inflight_bytes / _READ_GROUPS, sized from the largest cell seen
        # so far in the column (or in any); one query runs alone until the first page arrives.
        budget = self.settings.max_inflight_bytes // _READ_GROUPS
        largest: dict[str, int] = {}

        def start(task: ChunkQuery) -> None:
            partitions, columns, bucket = task.key
            statement = RoutedStatement(self._q["chunks"]).bind(
                (dataset, list(partitions), list(columns), bucket, task.segments))
            statement._routing_key = self._chunk_key(dataset, partitions[0], columns[0], bucket)
            cell = max((largest.get(c, 0) for c in columns), default=0) or max(largest.values(), default=0)
            least, first, most = _PAGE_ROWS
            statement.fetch_size = max(least, min(most, budget // cell)) if cell else first
            task.future = future = self._session.execute_async(statement, execution_profile="read")
            future.add_callbacks(lambda rows: arrived.put((task, rows, future.has_more_pages, None)),
                                 errback=lambda exc: arrived.put((task, None, False, exc)))

        try:
            while tasks or running:
                while tasks and running < (_READ_GROUPS if received else 1):
                    start(tasks.popleft())
                    running += 1
                try:
                    task, rows, more, exc = arrived.get(timeout=3 * patience)
                except queue.Empty:
                    raise StoreError(f"{action} failed on Cassandra at {self._where}: no progress "
                                     f"for {3 * patience:g} s") from None
                if exc is not None:
                    if not is_busy(exc) or time.monotonic() - task.since > patience:
                        raise self._error(exc, action) from None
                    time.sleep(0.002)  # the driver refused to send: nothing reached the server
                    task.future.start_fetching_next_page() if task.pages else start(task)
                    continue
                task.pages, task.since, received = task.pages + 1, time.monotonic(), True
                for r in rows or ():
                    largest[r[0]] = max(largest.get(r[0], 1), len(r[4] or b""))
                if more:  # ask for the next page before handing this one out
                    task.future.start_fetching_next_page()
                else:
                    running -= 1
                yield from task.feed(rows, last=not more)
        except (DriverException, NoHostAvailable) as exc:
            raise self._error(exc, action) from None

    def put_segments(self, dataset: str, segments: Sequence[SegmentRow]) -> None:
        self._write_all([
            *(("partition", (dataset, p), 0) for p in {s.partition for s in segments}),
            *(("segment", (dataset, s.partition, s.segment, s.commit, s.rows, s.bucket, s.stats),
               len(s.stats)) for s in segments),
        ], f"write segments of dataset {dataset!r}")

    def get_segments(self, dataset: str, partitions: Collection[str] | None = None) -> list[SegmentRow]:
        action = f"read segments of dataset {dataset!r}"
        if partitions is None:
            partitions = self._partitions(dataset, action)
        unique = list(dict.fromkeys(partitions))
        # a few multi-partition queries rather than one per partition
        groups = [(dataset, unique[i:i + IN_PARTITIONS]) for i in range(0, len(unique), IN_PARTITIONS)]
        results = self._many("segments", groups, action)
        return [SegmentRow(p, segment, commit, rows, bucket, stats or b"")
                for result in results for p, segment, commit, rows, bucket, stats in result]

    def delete_segments(self, dataset: str, segments: Sequence[SegmentRow], columns: Sequence[str]) -> None:
        action = f"delete segments of dataset {dataset!r}"
        # Chunks before segment rows: if this is cut short, vacuum finds the segment again.
        self._write_all([(key, (dataset, s.partition, c, s.bucket, s.segment), 0)
                         for s in segments for c in columns for key in ("unchunk", "unindex")], action)
        self._write_all([("unsegment", (dataset, s.partition, s.segment), 0) for s in segments], action)

    # -- commit log -------------------------------------------------------------------------
    def commit(self, dataset: str, version: int, payload: bytes) -> None:
        action = f"commit version {version} of dataset {dataset!r}"
        try:
            applied = self._applied("commit", (dataset, version, payload, datetime.now(UTC)), action)
        except UnavailableError:
            raise  # refused before any replica was asked: nothing was written
        except StoreError as exc:
            self._uncertain.add(dataset)  # Paxos may have started: the outcome is unknown
            raise StoreError(f"{exc} (the commit may or may not have been applied)") from None
        if not applied:
            raise CommitConflictError(dataset, version)

    def list_commits(self, dataset: str, after: int = 0, upto: int | None = None) -> list[tuple[int, bytes]]:
        # After a commit of unknown outcome, a SERIAL read finishes (or discards) any Paxos
        # round still in progress, so what it returns is final.
        profile = "serial_read" if dataset in self._uncertain else "read"
        rows = self._rows("commits", (dataset, after, 2**63 - 1 if upto is None else upto),
                          f"read the commit log of dataset {dataset!r}", profile)
        self._uncertain.discard(dataset)
        return [(int(version), bytes(payload)) for version, payload in rows if payload is not None]

    def list_commits_marked(self, dataset: str, after: int = 0, upto: int | None = None
                            ) -> list[tuple[int, bytes, bytes]]:
        # a commit's mark is its payload's write time: a commit written again under its
        # version (the dataset dropped and created again) was written at another time
        profile = "serial_read" if dataset in self._uncertain else "read"
        rows = self._rows("commits_marked", (dataset, after, 2**63 - 1 if upto is None else upto),
                          f"read the commit log of dataset {dataset!r}", profile)
        self._uncertain.discard(dataset)
        return [(int(v), bytes(p), commit_mark(t)) for v, p, t in rows if p is not None]

    def follow_commits(self, dataset: str, version: int, upto: int | None = None
                       ) -> tuple[bytes | None, list[tuple[int, bytes, bytes]]]:
        # the mark of commit `version` and the commits after it, read at once: one round trip
        # for a reader following the log, without reading that commit's payload again
        profile = "serial_read" if dataset in self._uncertain else "read"
        marked, rows = self._rows_at_once(
            [("commit_mark", (dataset, version)),
             ("commits_marked", (dataset, version, 2**63 - 1 if upto is None else upto))],
            f"read the commit log of dataset {dataset!r}", profile)
        self._uncertain.discard(dataset)
        mark = commit_mark(marked[0][0]) if marked and marked[0][0] is not None else None
        return mark, [(int(v), bytes(p), commit_mark(t)) for v, p, t in rows if p is not None]

    def latest_version(self, dataset: str) -> int:
        profile = "serial_read" if dataset in self._uncertain else "read"
        rows = self._rows("latest", (dataset,), f"read the latest version of dataset {dataset!r}", profile)
        self._uncertain.discard(dataset)
        return int(rows[0][0]) if rows else 0

    def put_checkpoint(self, dataset: str, version: int, payload: bytes) -> None:
        parts = [payload[i:i + PART_BYTES] for i in range(0, len(payload), PART_BYTES)] or [b""]
        # parts beyond the new count, left by an older checkpoint of this version, would make it
        # read as incomplete
        self._write_all([("checkpoint_trim", (dataset, version, len(parts)), 0),
                         *(("checkpoint", (dataset, version, i, len(parts), part), len(part))
                           for i, part in enumerate(parts))],
                        f"write a checkpoint of dataset {dataset!r}")

    def list_checkpoints(self, dataset: str) -> list[int]:
        seen: dict[int, tuple[set[int], int]] = {}
        for version, part, parts in self._rows("checkpoints", (dataset,),
                                               f"list the checkpoints of dataset {dataset!r}"):
            got, _ = seen.setdefault(int(version), (set(), int(parts)))
            got.add(int(part))
        return sorted(v for v, (got, parts) in seen.items() if len(got) == parts)  # complete ones

    def get_checkpoint(self, dataset: str, version: int) -> bytes | None:
        rows = self._rows("checkpoint_parts", (dataset, version),
                          f"read the checkpoint of version {version} of dataset {dataset!r}")
        if not rows or len(rows) != rows[0][1]:
            return None
        return b"".join(bytes(payload) for _part, _parts, payload in sorted(rows, key=lambda r: r[0]))

    def delete_checkpoints(self, dataset: str, versions: Collection[int]) -> None:
        self._write_all([("uncheckpoint", (dataset, v), 0) for v in versions],
                        f"remove checkpoints of dataset {dataset!r}")

    # -- expiry -----------------------------------------------------------------------------
    def oldest_version(self, dataset: str) -> int:
        rows = self._rows("oldest", (dataset,), f"read the oldest version of dataset {dataset!r}")
        return int(rows[0][0]) if rows and rows[0][0] is not None else 0

    def set_oldest_version(self, dataset: str, version: int) -> None:
        action = f"set the oldest version of dataset {dataset!r}"
        latest = self.latest_version(dataset)
        if version > latest:
            raise ValueError(f"dataset {dataset!r}: cannot keep versions from {version} on, the latest "
                             f"is {latest}")
        while True:  # compare-and-set: the mark only goes up, whoever runs at the same time
            rows = self._rows("oldest", (dataset,), action, "serial_read")
            if not rows:
                if self._applied("oldest_first", (dataset, version), action):
                    return
            elif int(rows[0][0]) >= version:
                return
            elif self._applied("oldest_raise", (version, dataset, rows[0][0]), action):
                return

    def delete_commits(self, dataset: str, upto: int) -> int:
        oldest = self.oldest_version(dataset)
        if upto >= oldest:
            raise ValueError(f"dataset {dataset!r}: commits from version {oldest} on are kept; cannot "
                             f"remove those up to {upto}")
        versions = [v for v, _payload in self.list_commits(dataset, 0, upto)]
        self._write_all([("expire_commit", (dataset, v), 0) for v in versions],
                        f"remove commits of dataset {dataset!r}")
        return len(versions)

    def stored_bytes(self, dataset: str) -> dict[str, int] | None:
        action = f"read chunk sizes of dataset {dataset!r}"
        partitions = self._partitions(dataset, action)
        totals: dict[str, int] = {}
        for rows in self._many("indexes", [(dataset, p) for p in partitions], action):
            for column, _bucket, size in rows:
                totals[column] = totals.get(column, 0) + (size or 0)
        return totals

    def close(self) -> None:
        self._cluster.shutdown()
