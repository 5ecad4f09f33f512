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

from colonnade.errors import ColonnadeError, SchemaError
from colonnade.schema.spec import DatasetSpec
from colonnade.schema.types import schema_from_json, schema_to_json
from colonnade.spark import NAME
from colonnade.spark.filters import conjunction, from_pyspark, to_expression
from colonnade.spark.reading import (
    SegmentGroup,
    asked_version,
    dataset_name,
    open_store,
    option,
    pinned,
    plan_groups,
    read_group,
    split_options,
    store_uri,
    to_spark_batch,
)
from colonnade.spark.types import arrow_schema_of, arrow_target, check_write_schema, spark_schema
from colonnade.table.conform import conform
from colonnade.table.dataset import Dataset
from colonnade.table.operation import WriteOperation, WrittenPart, segment_rows


class ColonnadeDataSource(DataSource):
    """``spark.read.format("colonnade").option("store", URI).load(NAME)`` and
    ``df.write.format("colonnade").option("store", URI).mode("append").save(NAME)``.

    Read options: ``version`` (default: the latest when the schema is asked for),
    ``partitionBytes`` (default 64 MiB), ``minPartitions`` (default: twice the driver's cores).
    Write options: ``partitionBy``, ``sortBy`` (a new dataset), ``mergeSchema`` (add the
    DataFrame's new columns)."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.uri = store_uri(option(dict(options), "store"))
        self.dataset = dataset_name(dict(options))
        self.version: int | None = None
        self.stored_schema: list[list[str]] | None = None

    @classmethod
    def name(cls) -> str:  # type: ignore[override]
        return NAME

    def _pin(self) -> None:
        """The dataset's schema at the version every task will read (asked for once)."""
        if self.version is not None:
            return
        self.dataset, snapshot, schema = pinned(open_store(self.uri), self.dataset,
                                                asked_version(dict(self.options)))
        self.version = snapshot.version
        self.stored_schema = schema_to_json(schema)

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
        return ColonnadeReader(self.uri, self.dataset, self.version, self.stored_schema, schema,
                               *split_options(dict(self.options)))

    def writer(self, schema: StructType, overwrite: bool) -> ColonnadeWriter:
        return plan_write(self.uri, self.dataset, dict(self.options), schema, overwrite)


class GroupPartition(InputPartition):
    """An input partition: the segments one task reads."""

    def __init__(self, group: SegmentGroup) -> None:
        super().__init__(group)
        self.group = group


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
            expr = to_expression(from_pyspark(flt), stored)
            if expr is None:
                yield flt
            else:
                taken.append(expr)
        self.filter = conjunction(taken)

    def partitions(self) -> Sequence[GroupPartition]:  # type: ignore[override]
        """See :func:`colonnade.spark.reading.plan_groups`."""
        groups = plan_groups(open_store(self.uri), self.name, self.version, self.columns, self.filter,
                             self.partition_bytes, self.min_partitions)
        return [GroupPartition(g) for g in groups]

    def read(self, partition: GroupPartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        if not isinstance(partition, GroupPartition):  # Spark's one empty partition of a read
            return  # that planned no segment
        for batch in read_group(open_store(self.uri), self.name, schema_from_json(self.stored_schema),
                                self.columns, self.filter, partition.group):
            yield to_spark_batch(batch, self.target)


# -- writing

@dataclass(frozen=True)
class PartWritten(WriterCommitMessage):
    """What one task attempt wrote (a WrittenPart as JSON) and which partition it was."""

    partition: int
    attempt: int
    part: str


class ColonnadeWriter(DataSourceArrowWriter):
    def __init__(self, uri: str, spec: str, recorded: bool, operation: str) -> None:
        self.uri = uri
        self.spec = spec
        self.recorded = recorded
        self.operation = operation  # its kind says whether it appends or overwrites

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
    entries = [e for p in parts for e in p.entries]
    if entries:
        ds.store.delete_segments(ds.name, segment_rows(op, entries), ds.spec.schema.names)


def plan_write(uri: str, name: str, options: dict[str, str], schema: StructType,
               overwrite: bool) -> ColonnadeWriter:
    """On the driver, before any task: the dataset (created at the commit if new), the checked
    schema and the write operation every task writes for."""
    store = open_store(uri)
    merge = (option(options, "mergeSchema") or "false").lower() == "true"
    try:
        stored = store.resolve(name)
    except ColonnadeError:
        stored = None
    if stored is None:
        partition_by = option(options, "partitionBy")
        sort_by = option(options, "sortBy")
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
    return ColonnadeWriter(uri, spec.to_json(), ds.recorded, op.to_json())


__all__ = ["NAME", "ColonnadeDataSource", "ColonnadeReader", "ColonnadeWriter"]
