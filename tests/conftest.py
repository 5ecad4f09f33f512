"""Fixtures shared by the whole suite: one store fixture parametrized over every backend.

``store`` (one per test) and ``module_store`` (one per test module, for suites that build a
dataset once and query it many times) run each test against every backend in
``_STORE_FACTORIES``, in the style of pyiceberg's ``_CATALOG_FACTORIES``:

* ``sqlite``: a fresh SQLite file under the test's temporary directory;
* ``cassandra`` (marked ``cassandra``): an empty keyspace ``t_<uuid8>`` on a session-wide node,
  emptied afterwards for the next test (or dropped, see ``_Keyspaces``). The node is ``$COLONNADE_TEST_CASSANDRA`` (``host:port``) when set; else
  the suite starts a one-node :class:`~colonnade.cluster.cassandra.LocalCluster` under
  ``$COLONNADE_TEST_CASSANDRA_DIR`` (default ``~/.cache/colonnade/test-cluster``) on its own
  loopback slot (``$COLONNADE_TEST_CASSANDRA_SLOT``, default 20: 127.0.0.21), so it never
  collides with a development cluster on 127.0.0.1, and stops it at the end of the session
  (only if this session started it; sessions running side by side should share one node
  through ``$COLONNADE_TEST_CASSANDRA`` instead, so that none stops it under another).

``kafka_bootstrap`` (for tests marked ``kafka``) is ``host:port`` of a Kafka broker for the
session: ``$COLONNADE_TEST_KAFKA`` when set (``make test`` starts one with ``colonnade kafka
start``), else a :class:`~colonnade.cluster.kafka.LocalKafka` this session starts in a temporary
directory on free ports and stops at its end.

Choose backends with ``--stores sqlite`` or ``COLONNADE_TEST_STORES=sqlite`` (deselects the
others before anything starts), or with ``-m "not cassandra"``.

``raw_store`` gives tests a way around Colonnade to damage what a backend stored (a chunk's
bytes, a commit record), to prove that corruption is detected.

The decoded-chunk cache (on by default) is turned off here with ``COLONNADE_CACHE_MB=0`` unless
set: many tests measure what a scan reads from the store or damage stored bytes between two
reads. ``tests/table/test_chunk_cache.py`` and the cached differential test turn it on.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("COLONNADE_CACHE_MB", "0")  # see the module docstring

import colonnade
from colonnade.store import Store
from colonnade.table.commits import SegmentEntry

ALL_STORES = ("sqlite", "cassandra")
_STORES_ENV = "COLONNADE_TEST_STORES"
_NODE_ENV = "COLONNADE_TEST_CASSANDRA"
_DIR_ENV = "COLONNADE_TEST_CASSANDRA_DIR"
_SLOT_ENV = "COLONNADE_TEST_CASSANDRA_SLOT"
_LOCAL_ENV = "COLONNADE_TEST_CASSANDRA_LOCAL"
_KAFKA_ENV = "COLONNADE_TEST_KAFKA"
_STORE_FIXTURES = ("store", "module_store")


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C as a terminal delivers it, however the suite was started: a shell runs a
    background job (``make test &``, ``nohup``) with SIGINT ignored, and an ignored signal is
    inherited by every process the tests start, so the tests of what Ctrl-C does would see
    nothing happen. A Python handler, unlike SIG_IGN, is reset to the default by exec."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


# -- selecting backends ------------------------------------------------------------------------
def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--stores", default=None,
        help=f"comma-separated backends the store fixtures run on (default: ${_STORES_ENV} "
             f"or {','.join(ALL_STORES)})")


def _selected_stores(config: pytest.Config) -> set[str]:
    text = config.getoption("--stores") or os.environ.get(_STORES_ENV) or ",".join(ALL_STORES)
    chosen = {s.strip().lower() for s in text.split(",") if s.strip()}
    unknown = chosen - set(ALL_STORES)
    if unknown:
        raise pytest.UsageError(f"unknown store(s) {', '.join(sorted(unknown))}: "
                                f"choose from {', '.join(ALL_STORES)}")
    return chosen


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    chosen = _selected_stores(config)
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        kinds = {params[f] for f in _STORE_FIXTURES if f in params}
        (drop if kinds - chosen else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


# -- the Cassandra node --------------------------------------------------------------------------
@pytest.fixture(scope="session")
def cassandra_node() -> Iterator[str]:
    """``host:port`` of a Cassandra node for this session (see the module docstring)."""
    given = os.environ.get(_NODE_ENV)
    if given:
        yield given
        return
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip(f"no Cassandra: set {_NODE_ENV}=host:port or install a Java 17 JDK")
    from colonnade.cluster.cassandra import CQL_PORT, LocalCluster

    directory = Path(os.environ.get(_DIR_ENV) or Path.home() / ".cache" / "colonnade" / "test-cluster")
    cluster = LocalCluster(directory=directory.expanduser(), nodes=1,
                           address_offset=int(os.environ.get(_SLOT_ENV, "20")))
    already_up = cluster.status()[0].state == "up"
    if not already_up:
        cluster.start()
    try:
        yield f"{cluster.address(1)}:{CQL_PORT}"
    finally:
        if not already_up:
            cluster.stop()


@pytest.fixture(scope="session")
def cassandra_node_is_local(cassandra_node: str) -> bool:
    """Whether the node is a LocalCluster node on this machine: one this suite started, or one
    ``$COLONNADE_TEST_CASSANDRA_LOCAL=1`` says is (``make test`` starts it and says so)."""
    return not os.environ.get(_NODE_ENV) or os.environ.get(_LOCAL_ENV) == "1"


@pytest.fixture(scope="session")
def cassandra_uri(cassandra_node: str) -> str:
    """``cassandra://host:port`` of the test node (without a keyspace)."""
    return f"cassandra://{cassandra_node}"


@pytest.fixture(scope="session")
def cassandra_admin(cassandra_node: str) -> Iterator[Any]:
    """A driver session on the test node, for what Colonnade must not do itself (drop a
    keyspace, damage a stored chunk)."""
    from cassandra import ProtocolVersion
    from cassandra.cluster import Cluster

    host, _, port = cassandra_node.rpartition(":")
    cluster = Cluster([host], port=int(port))
    cluster.protocol_version = ProtocolVersion.V5  # as the store does: may still step down to v4
    session = cluster.connect()
    try:
        yield session
    finally:
        cluster.shutdown()


# -- the Kafka broker ----------------------------------------------------------------------------
@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``host:port`` of a Kafka broker for this session (see the module docstring)."""
    given = os.environ.get(_KAFKA_ENV)
    if given:
        yield given
        return
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip(f"no Kafka: set {_KAFKA_ENV}=host:port or install a Java 17 JDK")
    from colonnade.cluster.kafka import LocalKafka, free_port_pair

    broker = LocalKafka(tmp_path_factory.mktemp("kafka"), port=free_port_pair())
    broker.start()
    try:
        yield broker.bootstrap_servers
    finally:
        broker.stop()


# -- store factories -----------------------------------------------------------------------------
@contextmanager
def _sqlite_store(request: pytest.FixtureRequest, directory: Path) -> Iterator[Store]:
    store = colonnade.connect(str(directory / "s.db"))
    try:
        yield store
    finally:
        store.close()


class _Keyspaces:
    """Empty keyspaces for the Cassandra store fixtures. Making one (the keyspace and the store's
    tables: ten schema changes) takes about 1.5 s on the test node and dropping it 0.6 s, while
    emptying one (a TRUNCATE of each table, all at once) takes 0.2 s: so a keyspace a test is
    done with is emptied and handed to the next test, unless it holds more than the store's own
    tables (a test made one of its own) or emptying it failed (then it is dropped, as before)."""

    def __init__(self, admin: Any) -> None:
        self._admin = admin
        self._idle: list[str] = []

    def take(self) -> str:
        return self._idle.pop() if self._idle else f"t_{uuid.uuid4().hex[:8]}"

    def give_back(self, keyspace: str) -> None:
        from colonnade.storage.cassandra_schema import TABLES

        tables = {r[0] for r in self._admin.execute(
            "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (keyspace,))}
        others = list(self._admin.execute(
            "SELECT view_name FROM system_schema.views WHERE keyspace_name = %s", (keyspace,)))
        if tables == set(TABLES) and not others:
            try:  # the truncations run at once: one after another they took half as long again
                for pending in [self._admin.execute_async(f"TRUNCATE {keyspace}.{table}", timeout=120)
                                for table in TABLES]:
                    pending.result()
            except Exception:  # noqa: BLE001 - dropped instead, which reports its own failure
                pass
            else:
                self._idle.append(keyspace)
                return
        self._admin.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)

    def drop_idle(self) -> None:
        while self._idle:
            self._admin.execute(f"DROP KEYSPACE IF EXISTS {self._idle.pop()}", timeout=120)


@pytest.fixture(scope="session")
def cassandra_keyspaces(cassandra_admin: Any) -> Iterator[_Keyspaces]:
    keyspaces = _Keyspaces(cassandra_admin)
    try:
        yield keyspaces
    finally:
        keyspaces.drop_idle()


@contextmanager
def _cassandra_store(request: pytest.FixtureRequest, directory: Path) -> Iterator[Store]:
    node = request.getfixturevalue("cassandra_node")
    keyspaces = request.getfixturevalue("cassandra_keyspaces")
    keyspace = keyspaces.take()
    store = colonnade.connect(f"cassandra://{node}/{keyspace}")
    try:
        yield store
    finally:
        store.close()
        keyspaces.give_back(keyspace)


_STORE_FACTORIES: dict[str, Callable[[pytest.FixtureRequest, Path], AbstractContextManager[Store]]] = {
    "sqlite": _sqlite_store,
    "cassandra": _cassandra_store,
}

_STORE_PARAMS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("cassandra", id="cassandra", marks=pytest.mark.cassandra),
]


@pytest.fixture(params=_STORE_PARAMS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """An empty store of each backend, for one test."""
    with _STORE_FACTORIES[request.param](request, tmp_path) as s:
        yield s


@pytest.fixture(scope="module", params=_STORE_PARAMS)
def module_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """An empty store of each backend, shared by the tests of one module."""
    with _STORE_FACTORIES[request.param](request, tmp_path_factory.mktemp("store")) as s:
        yield s


def store_kind(store: Store) -> str:
    return store.uri.split("://", 1)[0]


# -- raw access to what a backend stored ---------------------------------------------------------
class RawStore:
    """Reads and overwrites stored records behind Colonnade's back."""

    def __init__(self, store: Store, admin: Any = None) -> None:
        self.store = store
        self.kind = store_kind(store)
        self.admin = admin

    @contextmanager
    def _sqlite(self) -> Iterator[sqlite3.Connection]:
        conn = sqlite3.connect(self.store.chunk_store.path, isolation_level=None)  # type: ignore[attr-defined]
        try:
            yield conn
        finally:
            conn.close()

    @property
    def _ks(self) -> str:
        return self.store.chunk_store.keyspace  # type: ignore[attr-defined,no-any-return]

    @property
    def _chunks(self) -> str:
        return self.store.chunk_store.chunk_table  # type: ignore[attr-defined,no-any-return]

    def read_chunk(self, dataset: str, segment: SegmentEntry, column: str) -> bytes:
        if self.kind == "sqlite":
            with self._sqlite() as conn:
                row = conn.execute("SELECT data FROM chunks WHERE dataset = ? AND segment = ? AND column_name = ?",
                                   (dataset, segment.segment, column)).fetchone()
            assert row is not None, f"no chunk {dataset}/{segment.segment}/{column}"
            return bytes(row[0])
        rows = list(self.admin.execute(
            f"SELECT part, parts, data FROM {self._ks}.{self._chunks} WHERE dataset = %s AND partition = %s "
            "AND column = %s AND bucket = %s AND segment = %s",
            (dataset, segment.partition, column, segment.bucket, segment.segment)))
        assert rows, f"no chunk {dataset}/{segment.segment}/{column}"
        assert rows[0][1] == 1, "test chunks are expected to fit one cell"
        return bytes(rows[0][2])

    def write_chunk(self, dataset: str, segment: SegmentEntry, column: str, data: bytes) -> None:
        if self.kind == "sqlite":
            with self._sqlite() as conn:
                cur = conn.execute("UPDATE chunks SET data = ? WHERE dataset = ? AND segment = ? AND column_name = ?",
                                   (data, dataset, segment.segment, column))
                assert cur.rowcount == 1
            return
        self.admin.execute(
            f"UPDATE {self._ks}.{self._chunks} SET data = %s WHERE dataset = %s AND partition = %s "
            "AND column = %s AND bucket = %s AND segment = %s AND part = 0",
            (data, dataset, segment.partition, column, segment.bucket, segment.segment))

    def flip_chunk_byte(self, dataset: str, segment: SegmentEntry, column: str, position: int = -1) -> None:
        data = bytearray(self.read_chunk(dataset, segment, column))
        data[position] ^= 0xFF
        self.write_chunk(dataset, segment, column, bytes(data))

    def delete_chunk(self, dataset: str, segment: SegmentEntry, column: str) -> None:
        if self.kind == "sqlite":
            with self._sqlite() as conn:
                cur = conn.execute("DELETE FROM chunks WHERE dataset = ? AND segment = ? AND column_name = ?",
                                   (dataset, segment.segment, column))
                assert cur.rowcount == 1
            return
        self.admin.execute(
            f"DELETE FROM {self._ks}.{self._chunks} WHERE dataset = %s AND partition = %s AND column = %s "
            "AND bucket = %s AND segment = %s",
            (dataset, segment.partition, column, segment.bucket, segment.segment))

    def write_commit(self, dataset: str, version: int, payload: bytes) -> None:
        if self.kind == "sqlite":
            with self._sqlite() as conn:
                cur = conn.execute("UPDATE commits SET payload = ? WHERE dataset = ? AND version = ?",
                                   (payload, dataset, version))
                assert cur.rowcount == 1
            return
        self.admin.execute(f"UPDATE {self._ks}.commits SET payload = %s WHERE dataset = %s AND version = %s",
                           (payload, dataset, version))


@pytest.fixture
def raw_store(request: pytest.FixtureRequest, store: Store) -> RawStore:
    admin = request.getfixturevalue("cassandra_admin") if store_kind(store) == "cassandra" else None
    return RawStore(store, admin)
