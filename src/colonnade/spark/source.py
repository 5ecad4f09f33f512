"""The ``colonnade`` Spark data source (PySpark's Python Data Source API, Arrow batches).

Reading: the dataset's version is pinned once, when Spark asks for the schema on the driver,
and every task reads that snapshot. ``partitions()`` plans the scan on the driver — partition
pruning by the transforms and segment pruning by chunk min/max, with the filters Spark pushed —
and groups the surviving segments into input partitions of about ``partitionBytes`` compressed
bytes (of the columns read). Each task fetches and checksums its segments' chunks, decodes them
(the same code as a DuckDB scan) and hands Spark Arrow batches. The pushed filters are applied
exactly by the task, so Spark does not evaluate them again.

Writing: the driver prepares one write operation (:mod:`colonnade.table.operation`); each task
stores its rows as segments nobody can see and returns what it wrote; the driver commits every
task's part in one commit, or removes them if the job is aborted. A task that fails, or an
attempt that loses to another (speculation, retries), leaves segments no commit names: orphans
that ``vacuum`` removes. Two attempts of one partition are never both committed.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from colonnade.config import parse_store_uri
from colonnade.errors import ColonnadeError, SchemaError
from colonnade.schema.spec import DatasetSpec
from colonnade.schema.types import schema_from_json, schema_to_json
from colonnade.spark import NAME
from colonnade.spark.filters import conjunction, to_expression
from colonnade.spark.types import (
    arrow_schema_of,
    arrow_target,
    check_write_schema,
    spark_schema,
    to_spark_batch,
)
from colonnade.store import Store, connect
from colonnade.table.commits import SegmentEntry, Snapshot
from colonnade.table.conform import conform
from colonnade.table.dataset import Dataset
from colonnade.table.operation import WriteOperation, WrittenPart
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

_stores: dict[str, Store] = {}
_stores_lock = threading.Lock()


def open_store(uri: str) -> Store:
    """One open store per URI in a process: Spark reuses its Python workers across tasks, and
    a task should not pay for a new Cassandra session."""
    with _stores_lock:
        store = _stores.get(uri)
        if store is None:
            store = _stores[uri] = connect(uri)
        return store


def _option(options: dict[str, str], name: str) -> str | None:
    """An option by name, whatever its case (Spark's options are case-insensitive)."""
    want = name.lower()
    return next((v for k, v in options.items() if k.lower() == want), None)


def _store_uri(options: dict[str, str]) -> str:
    """The store option, a relative SQLite path made absolute (tasks may start elsewhere)."""
    uri = _option(options, "store")
    if not uri:
        raise ColonnadeError('no store: pass .option("store", URI), e.g. sqlite:///path.db or '
                             "cassandra://host/keyspace")
    parsed = parse_store_uri(uri)
    if parsed.scheme == "sqlite":
        return "sqlite:///" + os.path.abspath(parsed.path)
    return uri


def _dataset_name(options: dict[str, str]) -> str:
    name = _option(options, "path") or _option(options, "dataset")
    if not name:
        raise ColonnadeError('no dataset: pass its name to load()/save(), or .option("dataset", NAME)')
    return name


class ColonnadeDataSource(DataSource):
    """``spark.read.format("colonnade").option("store", URI).load(NAME)`` and
    ``df.write.format("colonnade").option("store", URI).mode("append").save(NAME)``.

    Read options: ``version`` (default: the latest when the schema is asked for),
    ``partitionBytes`` (default 64 MiB), ``minPartitions`` (default: this machine's cores). Write options: ``partitionBy``, ``sortBy`` (a new dataset),
    ``mergeSchema`` (add the DataFrame's new columns)."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.uri = _store_uri(dict(options))
        self.dataset = _dataset_name(dict(options))
        self.version: int | None = None
        self.stored_schema: list[list[str]] | None = None

    @classmethod
    def name(cls) -> str:  # type: ignore[override]
        return NAME

    def _pin(self) -> None:
        """The dataset's schema at the version every task will read (asked for once)."""
        if self.version is not None:
            return
        store = open_store(self.uri)
        name = store.resolve(self.dataset)
        ds = store.dataset(name)
        asked = _option(dict(self.options), "version")
        try:
            snapshot = ds.snapshot(int(asked) if asked is not None else None)
        except ValueError:
            raise ColonnadeError(f"version must be a whole number, not {asked!r}") from None
        self.dataset = name
        self.version = snapshot.version
        self.stored_schema = schema_to_json(ds.schema_at(snapshot))

    def schema(self) -> StructType:  # type: ignore[override]
        self._pin()
        assert self.stored_schema is not None
        return spark_schema(schema_from_json(self.stored_schema))

    def reader(self, schema: StructType) -> ColonnadeReader:
        self._pin()
        assert self.version is not None and self.stored_schema is not None
        stored = schema_from_json(self.stored_schema)
        missing = [f.name for f in schema if f.name not in stored.names]
        if missing:
            raise SchemaError(f"dataset {self.dataset!r} has no column(s) {', '.join(missing)}")
        options = dict(self.options)
        size = _option(options, "partitionBytes")
        least = _option(options, "minPartitions")
        return ColonnadeReader(self.uri, self.dataset, self.version, self.stored_schema, schema,
                               int(size) if size else PARTITION_BYTES,
                               int(least) if least else os.cpu_count() or 2)

    def writer(self, schema: StructType, overwrite: bool) -> ColonnadeWriter:
        return plan_write(self.uri, self.dataset, dict(self.options), schema, overwrite)


@dataclass(frozen=True)
class SegmentGroup(InputPartition):
    """The segments one task reads (entries carry their statistics as text)."""

    entries: tuple[SegmentEntry, ...]
    stats: dict[str, Any] | None  # statistics of entries whose commit carries none (older logs)
    nbytes: int

    def planned(self) -> tuple[PlannedSegment, ...]:
        return tuple(PlannedSegment(e, column_stats_from_text(e.stats) if e.stats is not None
                                    else (self.stats or {})[e.segment]) for e in self.entries)


class ColonnadeReader(DataSourceReader):
    def __init__(self, uri: str, name: str, version: int, stored_schema: list[list[str]],
                 schema: StructType, partition_bytes: int, min_partitions: int) -> None:
        self.uri = uri
        self.name = name
        self.version = version
        self.stored_schema = stored_schema
        self.columns = [f.name for f in schema]
        self.target = arrow_target(schema)
        self.partition_bytes = max(1, partition_bytes)
        self.min_partitions = max(1, min_partitions)
        self.filter: pc.Expression | None = None

    def pushFilters(self, filters: list[Any]) -> Iterator[Any]:  # type: ignore[override]
        stored = schema_from_json(self.stored_schema)
        taken = []
        for flt in filters:
            expr = to_expression(flt, stored)
            if expr is None:
                yield flt
            else:
                taken.append(expr)
        self.filter = conjunction(taken)

    def _scan(self) -> Scan:
        ds = open_store(self.uri).dataset(self.name)
        return Scan(ds, tuple(self.columns), self.filter, self.version)

    def plan(self) -> ScanPlan:
        """The scan's plan on the driver (partition and min/max pruning, pushed filters)."""
        return self._scan().plan()

    def partitions(self) -> Sequence[SegmentGroup]:  # type: ignore[override]
        """Segments in commit order, grouped into partitions of about ``partitionBytes`` bytes,
        smaller when that makes fewer than ``minPartitions`` (as Spark splits files)."""
        plan = self.plan()
        sizes = [sum(s.stats[c].nbytes for c in plan.read_columns if c in s.stats) for s in plan.segments]
        split = min(self.partition_bytes, max(1, -(-sum(sizes) // self.min_partitions)))
        groups: list[SegmentGroup] = []
        current: list[PlannedSegment] = []
        size = 0

        def close() -> None:
            older = {s.entry.segment: s.stats for s in current if s.entry.stats is None}
            groups.append(SegmentGroup(tuple(s.entry for s in current), older or None, size))

        for s, nbytes in zip(plan.segments, sizes, strict=True):
            if current and size + nbytes > split:
                close()
                current, size = [], 0
            current.append(s)
            size += nbytes
        if current:
            close()
        return groups

    def read(self, partition: SegmentGroup) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        if not isinstance(partition, SegmentGroup):  # Spark's one empty partition of a read
            return  # that planned no segment
        store = open_store(self.uri)
        ds = store.dataset(self.name)
        segments = partition.planned()
        if not segments:
            return
        stored = schema_from_json(self.stored_schema)
        read_columns = list(self.columns)
        if self.filter is not None:
            read_columns += [c for c in sorted(_referenced(self.filter, stored)) if c not in read_columns]
        schema = pa.schema([_read_field(stored, c, segments) for c in read_columns])
        plan = ScanPlan(Snapshot.empty(self.name), tuple(self.columns), tuple(read_columns), segments,
                        schema, ScanMetrics())
        for batch in _read_segments(ds, plan, _finisher(self.filter, plan), eager=True):
            yield to_spark_batch(batch, self.target)


def _read_field(stored: pa.Schema, column: str, segments: Sequence[PlannedSegment]) -> pa.Field:
    """The type a column is decoded as: dictionary-encoded strings stay so when every segment
    stored them that way (the cast to Spark's type happens once per batch)."""
    f = stored.field(column)
    if (pa.types.is_string(f.type) or pa.types.is_large_string(f.type)) and all(
            column in s.entry.dictionary for s in segments):
        return pa.field(column, pa.dictionary(pa.int32(), f.type))
    return f


# -- writing

@dataclass(frozen=True)
class PartWritten(WriterCommitMessage):
    """What one task attempt wrote (a WrittenPart as JSON) and which partition it was."""

    partition: int
    attempt: int
    part: str


class ColonnadeWriter(DataSourceArrowWriter):
    def __init__(self, uri: str, spec: str, recorded: bool, operation: str, overwrite: bool) -> None:
        self.uri = uri
        self.spec = spec
        self.recorded = recorded
        self.operation = operation
        self.overwrite = overwrite

    def _dataset(self) -> Dataset:
        store = open_store(self.uri)
        return Dataset(store.chunk_store, DatasetSpec.from_json(self.spec), recorded=self.recorded)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PartWritten:  # type: ignore[override]
        from pyspark import TaskContext

        context = TaskContext.get()
        op = WriteOperation.from_json(self.operation)
        ds = self._dataset()
        # merging schemas: columns of the dataset the DataFrame lacks are stored as nulls
        schema = schema_from_json(op.schema)
        batches = (conform(ds.name, b, schema, allow_missing=True) for b in iterator)
        part = ds.write_part(op, batches)
        return PartWritten(context.partitionId() if context else 0,
                           context.attemptNumber() if context else 0, part.to_json())

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:  # type: ignore[override]
        op = WriteOperation.from_json(self.operation)
        ds = self._dataset()
        chosen: dict[int, PartWritten] = {}
        extra: list[WrittenPart] = []
        for m in messages:
            if not isinstance(m, PartWritten):
                continue
            if m.partition in chosen:  # a second attempt of one partition: keep one
                extra.append(WrittenPart.from_json(m.part))
                continue
            chosen[m.partition] = m
        parts = [WrittenPart.from_json(m.part) for m in chosen.values()]
        result = ds.commit_write(op, parts, info={"writer": "spark"})
        if result.version is None and result.reason and "no rows" not in result.reason:
            raise ColonnadeError(f"dataset {ds.name!r}: nothing committed ({result.reason})")
        if extra:
            _remove(ds, op, extra)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:  # type: ignore[override]
        op = WriteOperation.from_json(self.operation)
        parts = [WrittenPart.from_json(m.part) for m in messages if isinstance(m, PartWritten)]
        self._dataset().abort_write(op, parts)


def _remove(ds: Dataset, op: WriteOperation, parts: list[WrittenPart]) -> None:
    """Remove the segments of attempts that were not committed (after the commit)."""
    from colonnade.table.operation import segment_rows

    entries = [e for p in parts for e in p.entries]
    if entries:
        ds.store.delete_segments(ds.name, segment_rows(op, entries), ds.spec.schema.names)


def plan_write(uri: str, name: str, options: dict[str, str], schema: StructType,
               overwrite: bool) -> ColonnadeWriter:
    """On the driver, before any task: the dataset (created at the commit if new), the checked
    schema and the write operation every task writes for."""
    store = open_store(uri)
    merge = (_option(options, "mergeSchema") or "false").lower() == "true"
    try:
        stored = store.resolve(name)
    except ColonnadeError:
        stored = None
    if stored is None:
        partition_by = _option(options, "partitionBy")
        sort_by = _option(options, "sortBy")
        ds = store.new_dataset(name, arrow_schema_of(schema), partition_by or None, sort_by or None)
        op = ds.prepare_write(kind="overwrite" if overwrite else "append")
        spec = ds.spec
    else:
        ds = store.dataset(stored)
        op = ds.prepare_write(kind="overwrite" if overwrite else "append")
        spec = ds.spec_at(ds.snapshot(op.read_version))
        target = check_write_schema(stored, spec.schema, schema, merge)
        if target is not spec.schema:  # new columns: the commit records the wider schema
            spec = spec.with_schema(target)
            op = replace(op, schema=schema_to_json(target))
    return ColonnadeWriter(uri, spec.to_json(), ds.recorded, op.to_json(), overwrite)


__all__ = ["NAME", "ColonnadeDataSource", "ColonnadeReader", "ColonnadeWriter"]
