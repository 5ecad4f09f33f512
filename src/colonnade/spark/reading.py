"""What a Spark read does on our side, without PySpark: plan a pinned, pruned scan and group its
segments into input partitions (on the driver), and read one group as Arrow batches of the
types Spark takes (in a task). Used by the Python data source and by the JVM reader's helper
process alike.

Spark's types: no unsigned integers (``uint8``/``uint16``/``uint32`` are read as the next wider
signed type, ``uint64`` as ``decimal(20,0)``), timestamps in microseconds (UTC when zoned),
strings and binaries with 32-bit offsets, no dictionaries.
"""

from __future__ import annotations

import base64
import os
import pickle
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from colonnade.config import parse_store_uri
from colonnade.errors import ColonnadeError, DatasetNotFoundError, SchemaError
from colonnade.schema.spec import DatasetSpec
from colonnade.schema.types import logical_schema
from colonnade.spark.filters import conjunction, to_expression
from colonnade.storage.base import ChunkRef
from colonnade.store import Store, connect
from colonnade.table.commits import SegmentEntry, Snapshot
from colonnade.table.dataset import Dataset
from colonnade.table.scan import (
    PlannedSegment,
    Scan,
    ScanMetrics,
    ScanPlan,
    _finisher,
    _read_segments,
    _referenced,
)
from colonnade.table.writer import column_stats_from_text

#: Compressed bytes of the columns read per input partition (option ``partitionBytes``).
PARTITION_BYTES = 64 * 1024 * 1024
#: Partitions are not made smaller than this to reach ``minPartitions`` (Spark's file sources
#: do the same with ``spark.sql.files.openCostInBytes``): a task has a fixed cost.
SPLIT_FLOOR = 4 * 1024 * 1024

_stores: dict[str, Store] = {}
_stores_lock = threading.Lock()


def open_store(uri: str) -> Store:
    """One open store per URI in a process: Spark reuses its workers across tasks, and a task
    should not pay for a new Cassandra session."""
    with _stores_lock:
        store = _stores.get(uri)
        if store is None:
            store = _stores[uri] = connect(uri)
        return store


def option(options: dict[str, str], name: str) -> str | None:
    """An option by name, whatever its case (Spark's options are case-insensitive)."""
    want = name.lower()
    return next((v for k, v in options.items() if k.lower() == want), None)


def dataset_name(options: dict[str, str]) -> str:
    """The dataset a read or write names (``load(NAME)``/``save(NAME)``, or option ``dataset``)."""
    name = option(options, "path") or option(options, "dataset")
    if not name:
        raise ColonnadeError('no dataset: pass its name to load()/save(), or .option("dataset", NAME)')
    return name


def asked_version(options: dict[str, str]) -> int | None:
    """Option ``version`` (None: the latest)."""
    asked = option(options, "version")
    try:
        return int(asked) if asked is not None else None
    except ValueError:
        raise ColonnadeError(f"version must be a whole number, not {asked!r}") from None


def split_options(options: dict[str, str]) -> tuple[int, int]:
    """Options ``partitionBytes`` (default PARTITION_BYTES) and ``minPartitions`` (default
    twice this machine's cores: the driver's, where reads are planned)."""
    size = option(options, "partitionBytes")
    least = option(options, "minPartitions")
    return (int(size) if size else PARTITION_BYTES, int(least) if least else 2 * (os.cpu_count() or 2))


def store_uri(uri: str | None) -> str:
    """The store option, a relative SQLite path made absolute (tasks may start elsewhere)."""
    if not uri:
        raise ColonnadeError('no store: pass .option("store", URI), e.g. sqlite:///path.db or '
                             "cassandra://host/keyspace")
    parsed = parse_store_uri(uri)
    if parsed.scheme == "sqlite":
        return "sqlite:///" + os.path.abspath(parsed.path)
    return uri


# -- types

_WIDER_SIGNED = {pa.uint8(): pa.int16(), pa.uint16(): pa.int32(), pa.uint32(): pa.int64()}


def spark_arrow_type(t: pa.DataType) -> pa.DataType:
    """The Arrow type Spark takes for a column stored as ``t``."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    if t in _WIDER_SIGNED:
        return _WIDER_SIGNED[t]
    if t == pa.uint64():
        return pa.decimal128(20, 0)
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", "UTC" if t.tz else None)
    return t


def spark_arrow_schema(schema: pa.Schema, columns: Sequence[str]) -> pa.Schema:
    return pa.schema([pa.field(c, spark_arrow_type(schema.field(c).type), nullable=True) for c in columns])


def to_spark_batch(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """``batch`` (the dataset's types, columns in ``target``'s order) as ``target``'s types."""
    if batch.schema.equals(target):
        return batch
    arrays = []
    for array, f in zip(batch.columns, target, strict=True):
        if pa.types.is_dictionary(array.type) and not pa.types.is_dictionary(f.type):
            array = array.dictionary_decode()
        if array.type != f.type:
            # timestamps in ns are truncated to Spark's microseconds; every other cast is exact
            array = array.cast(f.type, safe=not pa.types.is_timestamp(array.type))
        arrays.append(array)
    return pa.RecordBatch.from_arrays(arrays, schema=target)


# -- planning and reading

@dataclass(frozen=True)
class SegmentGroup:
    """The segments one task reads (entries carry their statistics as text)."""

    entries: tuple[SegmentEntry, ...]
    stats: dict[str, Any] | None  # statistics of entries whose commit carries none (older logs)
    nbytes: int
    hosts: tuple[str, ...] = ()  # nodes holding the group's chunks (Cassandra)

    def planned(self) -> tuple[PlannedSegment, ...]:
        return tuple(PlannedSegment(e, column_stats_from_text(e.stats) if e.stats is not None
                                    else (self.stats or {})[e.segment]) for e in self.entries)

    def to_text(self) -> str:
        return base64.b64encode(pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)).decode()

    @staticmethod
    def from_text(text: str) -> SegmentGroup:
        group = pickle.loads(base64.b64decode(text))
        assert isinstance(group, SegmentGroup)
        return group


#: (store, stored name) -> (the dataset's recorded spec, its Dataset)
_datasets: dict[tuple[str, str], tuple[str, Dataset]] = {}


def _cached(store: Store, name: str) -> Dataset:
    """One Dataset per store and dataset in a process, while it is the same dataset (one dropped
    and created again under its name records another spec): a task, a plan and the next query's
    requests reuse its snapshots (the latest, and the versions pinned last: see
    :meth:`Dataset.snapshot`) instead of reading the log again."""
    try:
        stored, spec = name, store.chunk_store.get_dataset(name)
    except DatasetNotFoundError:  # a name in another case
        stored = store.resolve(name)
        spec = store.chunk_store.get_dataset(stored)
    key = (store.uri, stored)
    with _stores_lock:
        entry = _datasets.get(key)
        if entry is None or entry[0] != spec:
            entry = _datasets[key] = (spec, Dataset(store.chunk_store, DatasetSpec.from_json(spec)))
    return entry[1]


def _snapshot(store: Store, name: str, version: int | None) -> tuple[Dataset, Snapshot]:
    ds = _cached(store, name)
    return ds, ds.snapshot(version)


def pinned(store: Store, name: str, version: int | None) -> tuple[str, Snapshot, pa.Schema]:
    """The dataset's stored name, its snapshot at ``version`` (default: the latest) and its
    schema then (DatasetNotFoundError, VersionNotFoundError: one line each)."""
    ds, snapshot = _snapshot(store, name, version)
    return ds.name, snapshot, ds.schema_at(snapshot)


def filter_of(filters: Sequence[dict[str, Any] | None], schema: pa.Schema
              ) -> tuple[pc.Expression | None, list[bool]]:
    """The AND of the filters a scan takes, and for each filter whether it was taken."""
    exprs = [to_expression(f, schema) for f in filters]
    return conjunction([e for e in exprs if e is not None]), [e is not None for e in exprs]


def plan_groups(store: Store, name: str, version: int, columns: Sequence[str], expr: pc.Expression | None,
                partition_bytes: int, min_partitions: int, snapshot: Snapshot | None = None
                ) -> list[SegmentGroup]:
    """The scan's segments after partition and min/max pruning, in commit order, grouped into
    groups of about ``partition_bytes`` bytes — smaller (down to SPLIT_FLOOR) when that makes
    fewer than ``min_partitions`` (as Spark splits files). ``snapshot``: the version's, when the
    caller has just pinned it (not looked up and checked again)."""
    if snapshot is None or snapshot.version != version:
        ds, snapshot = _snapshot(store, name, version)
    else:
        ds = _cached(store, name)
    plan = Scan(ds, tuple(columns), expr, version, snapshot).plan()
    sizes = [sum(s.stats[c].nbytes for c in plan.read_columns if c in s.stats) for s in plan.segments]
    split = min(max(1, partition_bytes),
                max(min(partition_bytes, SPLIT_FLOOR), -(-sum(sizes) // max(1, min_partitions))))
    hosts_of = getattr(ds.store, "chunk_hosts", None)
    groups: list[SegmentGroup] = []
    current: list[PlannedSegment] = []
    size = 0

    def close() -> None:
        older = {s.entry.segment: s.stats for s in current if s.entry.stats is None}
        first = current[0].entry
        hosts = () if hosts_of is None or not plan.read_columns else hosts_of(
            name, ChunkRef(first.partition, plan.read_columns[0], first.segment, first.bucket))
        groups.append(SegmentGroup(tuple(s.entry for s in current), older or None, size, hosts))

    for s, nbytes in zip(plan.segments, sizes, strict=True):
        if current and size + nbytes > split:
            close()
            current, size = [], 0
        current.append(s)
        size += nbytes
    if current:
        close()
    return groups


def read_group(store: Store, name: str, schema: pa.Schema, columns: Sequence[str], expr: pc.Expression | None,
               group: SegmentGroup, as_stored: bool = False) -> Iterator[pa.RecordBatch]:
    """The rows of ``group`` that match ``expr``: batches of ``columns`` in Spark's types
    (``schema``: the dataset's at the pinned version). With ``as_stored`` a column stored as a
    dictionary (of strings or numbers, with indices of any width) stays one, so each batch may
    have its own types: for a reader that looks values up itself."""
    segments = group.planned()
    missing = [c for c in columns if c not in schema.names]
    if missing:
        raise SchemaError(f"dataset {name!r} has no column(s) {', '.join(missing)}")
    logical = logical_schema(schema)
    read_columns = list(columns)
    filtered: set[str] = set()
    if expr is not None:
        filtered = _referenced(expr, logical)
        read_columns += [c for c in sorted(filtered) if c not in read_columns]
    if not segments:
        return
    read = pa.schema([logical.field(c) for c in read_columns])
    target = spark_arrow_schema(schema, columns)
    # a filtered batch is taken row by row, which Arrow can't do for every dictionary type
    stored = frozenset(columns) if as_stored and expr is None else frozenset()
    plan = ScanPlan(Snapshot.empty(name), tuple(columns), tuple(read_columns), segments, read, ScanMetrics(),
                    as_stored=stored)
    for batch in _read_segments(_cached(store, name), plan, _finisher(expr, plan), eager=True):
        yield _as_stored(batch, target) if stored else to_spark_batch(batch, target)


def _as_stored(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """A batch whose dictionaries of Spark's value types stay dictionaries, other columns in
    Spark's types."""
    if not batch.num_columns:  # rows without columns (a count): the batch is its length
        return batch
    arrays = []
    for array, f in zip(batch.columns, target, strict=True):
        if pa.types.is_dictionary(array.type) and array.type.value_type == f.type:
            arrays.append(array)
            continue
        if pa.types.is_dictionary(array.type):
            array = array.dictionary_decode()
        if array.type != f.type:
            array = array.cast(f.type, safe=not pa.types.is_timestamp(array.type))
        arrays.append(array)
    return pa.RecordBatch.from_arrays(arrays, names=target.names)
