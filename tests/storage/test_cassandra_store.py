"""CassandraStore against a real node: the ChunkStore guarantees, the layout's extras (split
chunks, index tables) and how driver failures reach the user (one line, typed, no password).

The node comes from the ``cassandra_uri`` fixture of ``tests/conftest.py``
(``$COLONNADE_TEST_CASSANDRA=host:port``, else a local one-node cluster); the tests marked
``unit`` (option parsing, error mapping, unreachable hosts) need no node.
"""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Generator, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from cassandra import (
    AuthenticationFailed,
    ConsistencyLevel,
    InvalidRequest,
    OperationTimedOut,
    ReadTimeout,
    Unavailable,
    WriteTimeout,
)
from cassandra.cluster import NoHostAvailable
from cassandra.policies import WriteType

from colonnade.config import parse_store_uri
from colonnade.errors import (
    CommitConflictError,
    ConfigError,
    DatasetExistsError,
    DatasetNotFoundError,
    StoreError,
    UnavailableError,
)
from colonnade.storage.base import ChunkRef, SegmentRow
from colonnade.storage.cassandra import PART_BYTES, CassandraSettings, CassandraStore, _password
from colonnade.storage.cassandra_schema import LEGACY_CHUNKS

KEYSPACE = "colonnade_test_store"


def _uri(base: str, keyspace: str, **options: str) -> str:
    """``cassandra://host:port/keyspace?options`` from ``cassandra://host:port[/...]`` or ``host:port``."""
    netloc = urlsplit(base).netloc if "://" in base else base
    query = "&".join(f"{k}={v}" for k, v in options.items())
    return f"cassandra://{netloc}/{keyspace}" + (f"?{query}" if query else "")


@pytest.fixture(scope="module")
def cstore(cassandra_uri: str) -> Iterator[CassandraStore]:
    s = CassandraStore(parse_store_uri(_uri(cassandra_uri, KEYSPACE)))
    yield s
    s._session.execute(f"DROP KEYSPACE IF EXISTS {KEYSPACE}", timeout=120)
    s.close()


@pytest.fixture
def dataset(cstore: CassandraStore) -> str:
    name = f"ds_{uuid.uuid4().hex[:12]}"
    cstore.create_dataset(name, '{"columns": []}')
    return name


def _raw_count(cstore: CassandraStore, table: str, where: str, *params: object) -> int:
    rows = cstore._session.execute(f"SELECT COUNT(*) FROM {KEYSPACE}.{table} WHERE {where}", params)
    return int(rows.one()[0])



@pytest.mark.cassandra
def test_a_store_left_open_exits_quietly_though_the_driver_had_work_scheduled(cassandra_uri: str) -> None:
    """A program that never closes its Cassandra store exits with no traceback, even when the
    driver's scheduler runs a task while the interpreter shuts down (as a reconnection to a
    stopped node does; a thread still running keeps the interpreter in its shutdown): the
    store's cluster is shut down before the thread pools stop taking work."""
    script = (
        "import sys, threading, time\n"
        "from colonnade.config import parse_store_uri\n"
        "from colonnade.storage.cassandra import CassandraStore\n"
        "store = CassandraStore(parse_store_uri(sys.argv[1]))\n"
        "store._cluster.scheduler.schedule(0.4, lambda: None)\n"
        "threading.Thread(target=time.sleep, args=(1.0,)).start()\n")
    done = subprocess.run([sys.executable, "-c", script, _uri(cassandra_uri, KEYSPACE)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr


# -- datasets -------------------------------------------------------------------------------
@pytest.mark.cassandra
def test_datasets_round_trip(cstore: CassandraStore) -> None:
    name = f"ds_{uuid.uuid4().hex[:12]}"
    with pytest.raises(DatasetNotFoundError):
        cstore.get_dataset(name)
    cstore.create_dataset(name, '{"v": 1}')
    with pytest.raises(DatasetExistsError):
        cstore.create_dataset(name, '{"v": 2}')
    assert cstore.get_dataset(name) == '{"v": 1}'
    cstore.update_dataset(name, '{"v": 3}')
    assert cstore.get_dataset(name) == '{"v": 3}'
    assert name in cstore.list_datasets()
    assert cstore.list_datasets() == sorted(cstore.list_datasets())
    with pytest.raises(DatasetNotFoundError):
        cstore.update_dataset(name + "_missing", "{}")
    cstore.drop_dataset(name)
    assert name not in cstore.list_datasets()
    with pytest.raises(DatasetNotFoundError):
        cstore.drop_dataset(name)


@pytest.mark.cassandra
def test_create_dataset_exactly_once_across_threads(cstore: CassandraStore) -> None:
    name = f"ds_{uuid.uuid4().hex[:12]}"
    barrier = threading.Barrier(6)
    outcomes: list[str] = []

    def create(i: int) -> None:
        barrier.wait()
        try:
            cstore.create_dataset(name, f'{{"writer": {i}}}')
            outcomes.append("won")
        except DatasetExistsError:
            outcomes.append("exists")

    threads = [threading.Thread(target=create, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["exists"] * 5 + ["won"]


# -- chunks and segments --------------------------------------------------------------------
@pytest.mark.cassandra
def test_chunks_round_trip_with_split_chunk(cstore: CassandraStore, dataset: str) -> None:
    big = os.urandom(3 * PART_BYTES + 12345)  # 4 parts
    chunks = [(ChunkRef("p0", col, f"seg{i:03d}", bucket=i % 2), os.urandom(100 + i))
              for col in ("a", "b", "c") for i in range(40)]
    chunks.append((ChunkRef("p1", "a", "segbig"), big))
    cstore.put_chunks(dataset, chunks)

    parts = _raw_count(cstore, cstore.chunk_table, "dataset = %s AND partition = %s AND column = %s AND bucket = %s",
                       dataset, "p1", "a", 0)
    assert parts == 4
    expected = dict(chunks)
    wanted = [ref for ref, _ in chunks] + [ChunkRef("p0", "a", "nope"), ChunkRef("p9", "z", "nope")]
    got = list(cstore.get_chunks(dataset, wanted))
    assert len(got) == len(wanted)
    for ref, data in got:
        assert data == expected.get(ref, b""), ref

    # a subset of one slice, and the same ref twice
    subset = [ChunkRef("p0", "b", "seg004"), ChunkRef("p0", "b", "seg006"), ChunkRef("p0", "b", "seg006")]
    assert [(r, d) for r, d in cstore.get_chunks(dataset, subset)] == [(r, expected[r]) for r in subset]

    sizes = cstore.stored_bytes(dataset)
    assert sizes == {col: sum(len(d) for r, d in chunks if r.column == col) for col in ("a", "b", "c")}


@pytest.mark.cassandra
def test_the_columns_of_a_few_segments_are_read_in_one_request(cstore: CassandraStore, dataset: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The wanted columns of one slice come in one request (a point lookup's, a scan's), split
    chunks and missing ones included."""
    columns = [f"c{i}" for i in range(9)]
    chunks = [(ChunkRef("p0", c, "s1"), os.urandom(50 + i)) for i, c in enumerate(columns)]
    chunks += [(ChunkRef("p0", "c4", "s3"), os.urandom(2 * PART_BYTES + 7)), (ChunkRef("p0", "c5", "s3"), b"x")]
    chunks += [(ChunkRef("p1", c, f"m{i}"), os.urandom(30)) for c in columns[:2] for i in range(20)]
    cstore.put_chunks(dataset, chunks)
    expected = dict(chunks)
    requests = []
    sent = cstore._session.execute_async

    def counted(statement: Any, *args: Any, **kwargs: Any) -> Any:
        requests.append(statement)
        return sent(statement, *args, **kwargs)

    monkeypatch.setattr(cstore._session, "execute_async", counted)

    def read(wanted: list[ChunkRef]) -> int:
        requests.clear()
        got = list(cstore.get_chunks(dataset, wanted))
        assert sorted(got, key=repr) == sorted(((r, expected.get(r, b"")) for r in wanted), key=repr)
        return len(requests)

    assert read([ChunkRef("p0", c, "s1") for c in columns]) == 1
    assert read([ChunkRef("p0", c, "s1") for c in [*columns, "gone"]]) == 1  # a missing chunk: b""
    assert read([ChunkRef("p0", "c4", "s3"), ChunkRef("p0", "c5", "s3"), ChunkRef("p0", "c0", "s1")]) == 1
    assert read([ChunkRef("p1", c, f"m{i}") for c in columns[:2] for i in range(20)]) == 1
    assert read([ChunkRef(p, c, s) for p, c, s in (("p0", "c0", "s1"), ("p1", "c0", "m3"))]) == 1
    # a slice's cells beyond what Cassandra is let look up in one query: split by column
    assert read([ChunkRef("p1", c, f"m{i}") for c in columns for i in range(300)]) == 2


@pytest.fixture(scope="module")
def legacy_store(cassandra_uri: str) -> Iterator[CassandraStore]:
    """A store in a keyspace written before slice_chunks: its chunks table has one Cassandra
    partition per column of each slice."""
    keyspace = f"{KEYSPACE}_legacy"
    s = CassandraStore(parse_store_uri(_uri(cassandra_uri, keyspace)))
    table, cql = LEGACY_CHUNKS
    s._session.execute(f"DROP TABLE {keyspace}.slice_chunks", timeout=120)
    s._session.execute(f"CREATE TABLE {keyspace}.{table} {cql}", timeout=120)
    s.close()
    s = CassandraStore(parse_store_uri(_uri(cassandra_uri, keyspace)))
    yield s
    s._session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)
    s.close()


@pytest.mark.cassandra
def test_a_keyspace_with_the_legacy_chunks_table_is_read_and_written_as_it_is(
        legacy_store: CassandraStore, cstore: CassandraStore) -> None:
    assert cstore.chunk_table == "slice_chunks"
    tables = cstore._cluster.metadata.keyspaces[cstore.keyspace].tables
    assert "slice_chunks" in tables and "chunks" not in tables
    s = legacy_store
    assert s.chunk_table == "chunks"
    assert "slice_chunks" not in s._cluster.metadata.keyspaces[s.keyspace].tables
    name = f"ds_{uuid.uuid4().hex[:12]}"
    s.create_dataset(name, '{"columns": []}')
    chunks = [(ChunkRef(f"p{i % 3}", c, f"s{i}", bucket=i % 2), os.urandom(40 + i)) for c in "abc" for i in range(12)]
    chunks.append((ChunkRef("p0", "a", "big"), os.urandom(2 * PART_BYTES + 5)))
    s.put_chunks(name, chunks)
    rows = s._session.execute(f"SELECT COUNT(*) FROM {s.keyspace}.chunks WHERE dataset = %s AND partition = %s"
                              " AND column = %s AND bucket = %s", (name, "p0", "a", 0)).one()[0]
    assert rows == 2 + 3  # the split chunk's 3 parts, and s0, s6 of p0's bucket 0 (i % 3 == 0, i even)
    assert dict(s.get_chunks(name, [r for r, _ in chunks])) == dict(chunks)
    segment = SegmentRow("p0", "s0", "c1", 1, 0, b"")
    s.delete_segments(name, [segment], ["a", "b", "c"])
    got = dict(s.get_chunks(name, [r for r, _ in chunks]))
    assert {r for r, d in got.items() if d == b""} == {r for r, _ in chunks if r.segment == "s0"}
    s.drop_dataset(name)


@pytest.mark.cassandra
def test_chunk_queries_go_to_the_replicas_of_their_partitions(cstore: CassandraStore, dataset: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Every chunk query carries the token of the chunks it reads (the key the driver computes
    for a single-partition statement), and on a cluster of several nodes a query names only
    partitions with the same replicas."""
    chunks = [(ChunkRef(f"p{i}", "c", f"s{i}"), os.urandom(20)) for i in range(12)]
    cstore.put_chunks(dataset, chunks)
    key = cstore._chunk_key
    single = cstore._q["unchunk"].bind((dataset, "p3", "c", 0, "s3")).routing_key
    assert single == key(dataset, "p3", "c", 0)
    assert cstore._cluster.metadata.get_replicas(cstore.keyspace, single)  # the driver finds its node
    requests: list[Any] = []
    sent = cstore._session.execute_async
    monkeypatch.setattr(cstore._session, "execute_async", lambda st, *a, **k: requests.append(st) or sent(st, *a, **k))
    assert dict(cstore.get_chunks(dataset, [r for r, _ in chunks])) == dict(chunks)
    metadata = cstore._cluster.metadata

    def replicas(key: bytes) -> set[str]:
        return {str(h.address) for h in metadata.get_replicas(cstore.keyspace, key)}

    for st in requests:  # on the test cluster, whatever its size
        names = st.raw_values[1]  # partition IN ?
        assert st.routing_key == key(dataset, names[0], "c", 0)
        assert all(replicas(key(dataset, p, "c", 0)) == replicas(st.routing_key) for p in names)
    assert len(requests) == len({frozenset(replicas(key(dataset, f"p{i}", "c", 0))) for i in range(12)})
    # three nodes, each partition on the node its number gives modulo 3
    owner = {key(dataset, f"p{i}", "c", 0): i % 3 for i in range(12)}
    monkeypatch.setattr(metadata, "all_hosts", lambda: ["n0", "n1", "n2"])
    monkeypatch.setattr(cstore, "_replicas", lambda key: (f"n{owner[key]}",))
    requests.clear()
    assert dict(cstore.get_chunks(dataset, [r for r, _ in chunks])) == dict(chunks)
    assert sorted(owner[st.routing_key] for st in requests) == [0, 1, 2]  # one query per node


@pytest.mark.cassandra
def test_overwriting_a_split_chunk_with_a_small_one(cstore: CassandraStore, dataset: str) -> None:
    ref = ChunkRef("p", "c", "s")
    cstore.put_chunks(dataset, [(ref, os.urandom(2 * PART_BYTES + 1))])
    cstore.put_chunks(dataset, [(ref, b"small")])
    assert list(cstore.get_chunks(dataset, [ref])) == [(ref, b"small")]


@pytest.mark.cassandra
def test_closing_get_chunks_early_leaves_the_store_usable(cstore: CassandraStore, dataset: str) -> None:
    chunks = [(ChunkRef("p", f"c{i}", "s"), b"x" * 1000) for i in range(100)]
    cstore.put_chunks(dataset, chunks)
    reader = cstore.get_chunks(dataset, [r for r, _ in chunks])
    assert isinstance(reader, Generator)
    next(reader)
    reader.close()
    assert len(list(cstore.get_chunks(dataset, [r for r, _ in chunks]))) == 100


@pytest.mark.cassandra
def test_segments_round_trip_and_delete(cstore: CassandraStore, dataset: str) -> None:
    rows = [SegmentRow(f"p{i % 3}", f"s{i}", "c1", 1000 + i, i % 2, b'{"min": %d}' % i) for i in range(9)]
    cstore.put_segments(dataset, rows)
    cstore.put_chunks(dataset, [(ChunkRef(r.partition, col, r.segment, r.bucket), b"data")
                               for r in rows for col in ("x", "y")])
    assert sorted(cstore.get_segments(dataset), key=lambda r: r.segment) == rows
    assert sorted(cstore.get_segments(dataset, ["p1", "p2", "nope"]), key=lambda r: r.segment) == [
        r for r in rows if r.partition in ("p1", "p2")]
    assert cstore.get_segments(dataset, []) == []

    gone = rows[:2]
    cstore.delete_segments(dataset, gone, ["x", "y"])
    assert sorted(cstore.get_segments(dataset), key=lambda r: r.segment) == rows[2:]
    refs = [ChunkRef(r.partition, "x", r.segment, r.bucket) for r in rows]
    got = dict(cstore.get_chunks(dataset, refs))
    assert [got[ref] for ref in refs] == [b""] * 2 + [b"data"] * 7
    assert cstore.stored_bytes(dataset) == {"x": 28, "y": 28}


# -- commits --------------------------------------------------------------------------------
@pytest.mark.cassandra
def test_commits_in_version_order(cstore: CassandraStore, dataset: str) -> None:
    for version in (1, 2, 3, 10):
        cstore.commit(dataset, version, b"payload-%d" % version)
    with pytest.raises(CommitConflictError) as info:
        cstore.commit(dataset, 2, b"other")
    assert (info.value.dataset, info.value.version) == (dataset, 2)
    assert cstore.list_commits(dataset) == [(v, b"payload-%d" % v) for v in (1, 2, 3, 10)]
    assert [v for v, _ in cstore.list_commits(dataset, after=2)] == [3, 10]
    assert cstore.list_commits(dataset, after=10) == []


@pytest.mark.cassandra
def test_connections_send_requests_without_waiting_for_acks(cstore: CassandraStore, dataset: str) -> None:
    """Nagle's algorithm is off on every connection to the node: a commit record larger than a
    TCP segment would otherwise wait for the node's delayed ACK (~40 ms a request)."""
    cstore.commit(dataset, 1, b"x" * 20_000)
    assert cstore.list_commits(dataset) == [(1, b"x" * 20_000)]
    connections = [c for pool in cstore._session.get_pools() for c in pool.get_connections()]
    connections.append(cstore._cluster.control_connection._connection)
    assert connections and all(
        c._socket.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) for c in connections)


@pytest.mark.cassandra
def test_commit_conflict_between_threads(cstore: CassandraStore, dataset: str) -> None:
    writers, versions = 4, 5
    wins: dict[int, list[int]] = {v: [] for v in range(1, versions + 1)}
    conflicts: dict[int, list[int]] = {v: [] for v in range(1, versions + 1)}
    barrier = threading.Barrier(writers)

    def write(writer: int) -> None:
        for version in range(1, versions + 1):
            barrier.wait()
            try:
                cstore.commit(dataset, version, b"writer-%d" % writer)
                wins[version].append(writer)
            except CommitConflictError:
                conflicts[version].append(writer)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    log = dict(cstore.list_commits(dataset))
    for version in range(1, versions + 1):
        assert len(wins[version]) == 1, (version, wins, conflicts)
        assert len(conflicts[version]) == writers - 1
        assert log[version] == b"writer-%d" % wins[version][0]


@pytest.mark.cassandra
def test_commit_of_unknown_outcome_is_read_back_at_serial(cstore: CassandraStore, dataset: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    def timeout(*args: object, **kwargs: object) -> None:
        raise WriteTimeout("timed out", consistency=ConsistencyLevel.LOCAL_SERIAL,
                           required_responses=1, received_responses=0, write_type=WriteType.CAS)

    with monkeypatch.context() as patch:
        patch.setattr(cstore._session, "execute", timeout)
        with pytest.raises(StoreError, match="may or may not have been applied") as info:
            cstore.commit(dataset, 1, b"x")
    assert not isinstance(info.value, CommitConflictError)
    assert "write timed out at LOCAL_SERIAL (0 of 1 replicas answered)" in str(info.value)
    profiles: list[object] = []
    execute = cstore._session.execute

    def recording(statement: object, execution_profile: str) -> object:
        profiles.append(execution_profile)
        return execute(statement, execution_profile=execution_profile)

    monkeypatch.setattr(cstore._session, "execute", recording)
    assert cstore.list_commits(dataset) == []
    assert cstore.list_commits(dataset) == []
    assert profiles == ["serial_read", "read"]


# -- drop -----------------------------------------------------------------------------------
@pytest.mark.cassandra
def test_drop_removes_everything(cstore: CassandraStore) -> None:
    name = f"ds_{uuid.uuid4().hex[:12]}"
    cstore.create_dataset(name, "{}")
    rows = [SegmentRow(f"p{i}", f"s{i}", "c", 10, i, b"{}") for i in range(4)]
    cstore.put_segments(name, rows)
    cstore.put_chunks(name, [(ChunkRef(r.partition, col, r.segment, r.bucket), os.urandom(300))
                            for r in rows for col in ("a", "b")])
    cstore.put_chunks(name, [(ChunkRef("orphan", "a", "s9"), b"never named by a segment")])
    cstore.commit(name, 1, b"c")

    cstore.drop_dataset(name)
    with pytest.raises(DatasetNotFoundError):
        cstore.get_dataset(name)
    for table, key in (("commits", "dataset"), ("partitions", "dataset")):
        assert _raw_count(cstore, table, f"{key} = %s", name) == 0
    for p in ["orphan"] + [r.partition for r in rows]:
        assert _raw_count(cstore, "segments", "dataset = %s AND partition = %s", name, p) == 0
        assert _raw_count(cstore, "chunk_index", "dataset = %s AND partition = %s", name, p) == 0
        for col in ("a", "b"):
            for bucket in range(4):
                assert _raw_count(cstore, cstore.chunk_table, "dataset = %s AND partition = %s AND column = %s"
                                  " AND bucket = %s", name, p, col, bucket) == 0

    cstore.create_dataset(name, "{}")  # the name is free again, and starts empty
    assert cstore.list_commits(name) == []
    assert cstore.get_segments(name) == []
    assert cstore.stored_bytes(name) == {}
    cstore.drop_dataset(name)


# -- failures -------------------------------------------------------------------------------
@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts TCP connections and never answers (a hung or firewalled node)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield server.getsockname()[1]


@pytest.mark.unit
@pytest.mark.parametrize("where", ["refused", "silent"])
def test_unreachable_host_fails_within_the_timeout_with_one_line(
        where: str, silent_port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLONNADE_CASSANDRA_PASSWORD", "s3cret-pw")
    address = "127.0.0.1:1" if where == "refused" else f"127.0.0.1:{silent_port}"
    started = time.monotonic()
    with pytest.raises(StoreError) as info:
        CassandraStore(parse_store_uri(f"cassandra://alice@{address}/ks?connect_timeout=2"))
    elapsed = time.monotonic() - started
    message = str(info.value)
    assert elapsed < 5, elapsed
    assert message.startswith(f"cannot reach Cassandra at {address}: ")
    assert "\n" not in message and "s3cret-pw" not in message and len(message) < 200
    assert ("refused" if where == "refused" else "Timed out") in message


@pytest.mark.cassandra
def test_unavailable_maps_to_unavailable_error(cassandra_uri: str) -> None:
    keyspace = f"{KEYSPACE}_rf3"
    s = CassandraStore(parse_store_uri(_uri(cassandra_uri, keyspace, replication="3")))
    try:
        if len([h for h in s._cluster.metadata.all_hosts() if h.is_up]) >= 2:
            pytest.skip("needs a one-node cluster")
        with pytest.raises(UnavailableError) as info:
            s.put_chunks("d", [(ChunkRef("p", "c", "s"), b"x")])
        error = info.value
        assert (error.consistency, error.required, error.alive) == ("LOCAL_QUORUM", 2, 1)
        assert "not enough replicas for LOCAL_QUORUM: 2 required, 1 alive" in str(error)
        with pytest.raises(UnavailableError) as info:
            s.commit("d", 1, b"x")
        # Paxos v2 (Cassandra 5) reports the commit level, v1 the serial one
        assert info.value.consistency in ("LOCAL_SERIAL", "LOCAL_QUORUM")
        assert (info.value.required, info.value.alive) == (2, 1)
    finally:
        s._session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)
        s.close()


@pytest.mark.unit
def test_driver_errors_become_one_line_store_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    cstore = object.__new__(CassandraStore)  # only the error mapping, no connection
    cstore._where, cstore._user, cstore._secret = "db1:9042,db2:9042", "alice", "s3cret-pw"
    cstore.settings = CassandraSettings.from_options({"request_timeout": "5"})
    lq = ConsistencyLevel.LOCAL_QUORUM
    cases = [
        (NoHostAvailable("x", {"db1:9042": AuthenticationFailed("Bad credentials for s3cret-pw")}),
         StoreError, "authentication failed for user 'alice' at Cassandra at db1:9042,db2:9042"),
        (Unavailable("x", consistency=lq, required_replicas=2, alive_replicas=1), UnavailableError,
         "read failed on Cassandra at db1:9042,db2:9042: not enough replicas for LOCAL_QUORUM: "
         "2 required, 1 alive"),
        (ReadTimeout("x", consistency=lq, required_responses=2, received_responses=1), StoreError,
         "read timed out at LOCAL_QUORUM (1 of 2 replicas answered)"),
        (OperationTimedOut("x"), StoreError, "no answer within 5 s (client timeout)"),
        (InvalidRequest("Error from server: code=2200 [Invalid query]\nmessage=\"s3cret-pw\""),
         StoreError, "read failed on Cassandra at db1:9042,db2:9042: "),
    ]
    for exc, kind, text in cases:
        error = cstore._error(exc, "read")
        assert type(error) is kind and text in str(error), (exc, str(error))
        assert "\n" not in str(error) and "s3cret-pw" not in str(error)


# -- options (no server needed) -------------------------------------------------------------
@pytest.mark.unit
def test_settings_defaults_and_overrides() -> None:
    s = CassandraSettings.from_options({})
    assert (s.read_consistency, s.write_consistency, s.serial_consistency) == (6, 6, 9)  # LOCAL_*
    assert s.replication == {"class": "SimpleStrategy", "replication_factor": 1}
    assert (s.connect_timeout, s.request_timeout, s.max_inflight_bytes) == (10.0, 30.0, 64 * 2**20)
    assert s.ssl_context is None and s.compression is False
    s = CassandraSettings.from_options({"consistency": "quorum", "read_consistency": "one",
                                        "serial_consistency": "serial", "replication": "dc1:3,dc2:2",
                                        "max_inflight_mb": "8"})
    assert (s.read_consistency, s.write_consistency, s.serial_consistency) == (1, 4, 8)
    assert s.replication == {"class": "NetworkTopologyStrategy", "dc1": 3, "dc2": 2}
    assert s.max_inflight_bytes == 8 * 2**20


@pytest.mark.unit
@pytest.mark.parametrize("options", [{"consistency": "lots"}, {"serial_consistency": "quorum"},
                                     {"read_consistency": "serial"}, {"replication": "0"},
                                     {"replication": "dc1:"}, {"connect_timeout": "soon"},
                                     {"request_timeout": "-1"}, {"ssl": "maybe"},
                                     {"compression": "zip"}, {"ssl": "false", "ssl_ca": "/x"}])
def test_bad_options_are_config_errors(options: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        CassandraSettings.from_options(options)


@pytest.mark.unit
def test_tls_verifies_by_default(tmp_path) -> None:
    context = CassandraSettings.from_options({"ssl": "true"}).ssl_context
    assert context is not None
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    context = CassandraSettings.from_options({"ssl": "true", "ssl_verify": "false"}).ssl_context
    assert context is not None and context.verify_mode == ssl.CERT_NONE
    with pytest.raises(ConfigError, match="cannot load TLS files"):
        CassandraSettings.from_options({"ssl_ca": str(tmp_path / "missing.pem")})


@pytest.mark.unit
def test_password_sources(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    uri = parse_store_uri("cassandra://bob@h/ks")
    monkeypatch.setenv("COLONNADE_CASSANDRA_PASSWORD", "from-env")
    assert _password(uri) == "from-env"
    monkeypatch.delenv("COLONNADE_CASSANDRA_PASSWORD")
    secret = tmp_path / "pw"
    secret.write_text("from-file\n")
    assert _password(parse_store_uri(f"cassandra://bob@h/ks?password_file={secret}")) == "from-file"
    monkeypatch.setattr("sys.stdin", None)
    with pytest.raises(ConfigError, match="COLONNADE_CASSANDRA_PASSWORD"):
        _password(uri)
