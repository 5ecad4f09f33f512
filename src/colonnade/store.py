"""Store: the entry point of the Python API — datasets of one store, and SQL over them."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pyarrow as pa

from colonnade.config import default_store_uri, parse_store_uri
from colonnade.errors import DatasetNotFoundError, QueryError, SchemaError
from colonnade.query.adapter import ColonnadeArrowDataset, use_where
from colonnade.schema.spec import DatasetSpec
from colonnade.storage import open_store
from colonnade.storage.base import ChunkStore
from colonnade.table.dataset import Dataset


@dataclass
class Explain:
    """What a query read: per dataset scan metrics, DuckDB's plan, the answer's size, and
    warnings about filters that were not used for pruning (and why)."""

    query: str
    plan: str
    scans: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    rows: int = 0
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)

    def totals(self) -> dict[str, int]:
        keys = ("segments_total", "segments_scanned", "segments_read", "partitions_total",
                "partitions_scanned", "chunks_read", "bytes_read", "rows_scanned")
        out = dict.fromkeys(keys, 0)
        for scans in self.scans.values():
            for m in scans:
                for k in keys:
                    out[k] += int(m[k])
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"query": self.query, **self.totals(), "rows": self.rows, "seconds": self.seconds,
                "warnings": self.warnings, "scans": self.scans, "plan": self.plan}


class Store:
    """A Colonnade store: ``colonnade.connect(uri)`` returns one."""

    def __init__(self, chunk_store: ChunkStore) -> None:
        self.chunk_store = chunk_store
        # one DuckDB connection reused by sql()/explain() (a new one costs tens of ms)
        self._duck: duckdb.DuckDBPyConnection | None = None
        self._duck_names: set[str] = set()
        self._duck_lock = threading.Lock()

    @property
    def uri(self) -> str:
        return self.chunk_store.uri

    def __repr__(self) -> str:
        return f"Store({self.uri})"

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._duck_lock:
            if self._duck is not None:
                self._duck.close()
                self._duck = None
        self.chunk_store.close()

    # -- datasets
    def create_dataset(self, name: str, schema: pa.Schema, partition_by: str | list[str] | None = None,
                       sort_by: str | list[str] | None = None, segment_rows: int | None = None,
                       compression: str | None = None) -> Dataset:
        _check_name(name)
        spec = DatasetSpec.create(name, schema, partition_by, sort_by, segment_rows=segment_rows,
                                  compression=compression, created=time.time())
        self.chunk_store.create_dataset(name, spec.to_json())
        return Dataset(self.chunk_store, spec)

    def dataset(self, name: str) -> Dataset:
        return Dataset(self.chunk_store, DatasetSpec.from_json(self.chunk_store.get_dataset(name)))

    def datasets(self) -> list[str]:
        return self.chunk_store.list_datasets()

    def __contains__(self, name: str) -> bool:
        try:
            self.chunk_store.get_dataset(name)
            return True
        except DatasetNotFoundError:
            return False

    def drop_dataset(self, name: str) -> None:
        self.chunk_store.drop_dataset(name)

    # -- SQL
    def arrow_dataset(self, name: str, version: int | None = None) -> ColonnadeArrowDataset:
        ds = self.dataset(name)
        return ColonnadeArrowDataset(ds, ds.snapshot(version))

    def duckdb(self, versions: dict[str, int] | None = None,
               connection: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection with every dataset registered under its name (pinned snapshots)."""
        con = connection or duckdb.connect()
        for name in self.datasets():
            con.register(name, self.arrow_dataset(name, (versions or {}).get(name)))
        return con

    @contextmanager
    def _connection(self, versions: dict[str, int] | None) -> Iterator[tuple[duckdb.DuckDBPyConnection, dict[str, ColonnadeArrowDataset]]]:
        with self._duck_lock:
            if self._duck is None:
                self._duck = duckdb.connect()
            con = self._duck
            registered = {}
            names = self.datasets()
            for stale in self._duck_names - set(names):
                con.unregister(stale)
            for name in names:
                adapter = self.arrow_dataset(name, (versions or {}).get(name))
                con.register(name, adapter)  # a fresh snapshot for every statement
                registered[name] = adapter
            self._duck_names = set(names)
            yield con, registered

    def sql(self, query: str, version: int | None = None, versions: dict[str, int] | None = None) -> pa.Table:
        """Run a query through DuckDB; the answer as an Arrow table.

        ``version`` pins every dataset at that version (``versions`` per dataset)."""
        pins = _pins(self, version, versions)
        with self._connection(pins) as (con, registered):
            use_where(con, query, registered)
            try:
                return con.sql(query).to_arrow_table()
            except duckdb.Error as exc:
                _reraise_scan_error(registered)
                raise QueryError(_one_line(exc)) from None

    def explain(self, query: str, version: int | None = None) -> Explain:
        """Run a query and report what each dataset scan pruned and read."""
        pins = _pins(self, version, None)
        with self._connection(pins) as (con, registered):
            try:
                plan = "\n".join(str(r[1]) for r in con.sql("EXPLAIN " + query).fetchall())
                start = time.perf_counter()
                use_where(con, query, registered)
                table = con.sql(query).to_arrow_table()
                seconds = time.perf_counter() - start
            except duckdb.Error as exc:
                _reraise_scan_error(registered)
                raise QueryError(_one_line(exc)) from None
            scans = {name: [m.to_dict() for m in a.scans] for name, a in registered.items() if a.scans}
            warnings = [w for a in registered.values() for w in a.warnings(con)]
            return Explain(query, plan, scans, table.num_rows, seconds, list(dict.fromkeys(warnings)))


def _pins(store: Store, version: int | None, versions: dict[str, int] | None) -> dict[str, int] | None:
    if version is None:
        return versions
    pins = dict(versions or {})
    for name in store.datasets():
        pins.setdefault(name, version)
    return pins


def _reraise_scan_error(registered: dict[str, ColonnadeArrowDataset]) -> None:
    for adapter in registered.values():
        if adapter.errors:
            raise adapter.errors[0]


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return " ".join(line.strip() for line in text if line.strip())[:500]


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def _check_name(name: str) -> None:
    if not _NAME.match(name):
        raise SchemaError(f"invalid dataset name {name!r}: use letters, digits and _, starting with a letter")


def connect(uri: str | None = None) -> Store:
    """Open a store: ``sqlite:///path.db`` or a path (default ``$COLONNADE_STORE`` or
    ``./colonnade.db``), or ``cassandra://host[,host][:port]/keyspace?options``."""
    return Store(open_store(str(parse_store_uri(uri).display) if uri is None else uri))


__all__ = ["Explain", "Store", "connect", "default_store_uri"]
