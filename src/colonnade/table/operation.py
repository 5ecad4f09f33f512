"""One commit, many writers: a write prepared once, written by any number of workers, committed
(or aborted) once.

A coordinator prepares a :class:`WriteOperation` (:meth:`Dataset.prepare_write`): the dataset, a
commit id, the version it read, the schema the rows must have, and the source identity of the
whole input if it has one. The operation is plain data (``to_json``/``from_json``), so it can be
handed to worker processes, other machines or Spark tasks. Each worker opens the same store and
dataset and writes its rows with :meth:`Dataset.write_part`: segments and chunks are stored, under
the operation's commit id, and a :class:`WrittenPart` (the segment entries: also plain data)
comes back. Nothing a worker writes is visible. The coordinator then commits every part in one
commit (:meth:`Dataset.commit_write`) — all rows become visible at one version, or none do — or
aborts (:meth:`Dataset.abort_write`), removing the segments of the parts it was handed.

Whatever fails, nothing is half-committed: a worker killed mid-write, a coordinator killed
before the commit, or an abort leave only segments no commit names (orphans), which ``vacuum``
removes once they are older than its grace period. Two coordinators committing operations with
the same source identity: one commits, the other's commit is skipped as a duplicate (its
segments are orphans). A commit checks what was committed since the operation's read version
like any append (a schema change meanwhile conflicts).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from colonnade.config import WriteSettings
from colonnade.errors import ColonnadeError
from colonnade.schema.types import schema_from_json, schema_to_json
from colonnade.storage.base import SegmentRow
from colonnade.table.commits import Commit, SegmentEntry, Snapshot
from colonnade.table.conform import as_batches, conform
from colonnade.table.writer import SegmentWriter, write_all

if TYPE_CHECKING:
    from colonnade.table.dataset import AppendResult, Dataset


class WriteOperationError(ColonnadeError):
    """A part that does not belong to the operation, or an operation of another dataset."""


@dataclass(frozen=True)
class WriteOperation:
    """A prepared write: what every worker needs to write rows that one commit will add."""

    dataset: str
    id: str  # the commit id the segments are written under, and the commit's id
    kind: str  # the commit's operation: "append", or "overwrite" (replaces every row it read)
    read_version: int
    schema: list[list[str]]  # the dataset schema as the log records it (name, type)
    source: str | None = None  # source identity of the whole input

    @classmethod
    def new(cls, dataset: str, read_version: int, schema: list[list[str]], source: str | None = None,
            kind: str = "append") -> WriteOperation:
        return cls(dataset, str(uuid.uuid4()), kind, read_version, schema, source)

    def to_json(self) -> str:
        return json.dumps({"dataset": self.dataset, "id": self.id, "kind": self.kind,
                           "read_version": self.read_version, "schema": self.schema,
                           "source": self.source})

    @classmethod
    def from_json(cls, text: str) -> WriteOperation:
        v = json.loads(text)
        return cls(v["dataset"], v["id"], v["kind"], int(v["read_version"]),
                   [list(f) for f in v["schema"]], v.get("source"))


@dataclass(frozen=True)
class WrittenPart:
    """What one worker wrote for an operation (stored, not visible until the commit)."""

    operation: str  # the operation's id
    entries: tuple[SegmentEntry, ...]
    rows: int
    bytes: int

    def to_json(self) -> str:
        return json.dumps({"operation": self.operation, "rows": self.rows, "bytes": self.bytes,
                           "entries": [e.to_dict() for e in self.entries]})

    @classmethod
    def from_json(cls, text: str) -> WrittenPart:
        v = json.loads(text)
        return cls(v["operation"], tuple(SegmentEntry.from_dict(e) for e in v["entries"]),
                   int(v["rows"]), int(v["bytes"]))


def check_parts(op: WriteOperation, dataset: str, parts: Iterable[WrittenPart]) -> list[WrittenPart]:
    """The parts, once each is known to belong to ``op`` and ``op`` to ``dataset``."""
    if op.dataset != dataset:
        raise WriteOperationError(f"the write operation {op.id} is for dataset {op.dataset!r}, not {dataset!r}")
    out = list(parts)
    for p in out:
        if p.operation != op.id:
            raise WriteOperationError(f"dataset {dataset!r}: a written part of operation {p.operation} "
                                      f"was handed to the commit of operation {op.id}")
    seen: set[str] = set()
    for e in (e for p in out for e in p.entries):
        if e.segment in seen:
            raise WriteOperationError(f"dataset {dataset!r}: segment {e.segment} is in two written parts")
        seen.add(e.segment)
    return out


def segment_rows(op: WriteOperation, entries: Sequence[SegmentEntry]) -> list[SegmentRow]:
    """Segment-index rows naming ``entries`` (what an abort removes, with their chunks)."""
    return [SegmentRow(e.partition, e.segment, op.id, e.rows, e.bucket, b"{}") for e in entries]


def part_summary(parts: Sequence[WrittenPart]) -> dict[str, Any]:
    return {"parts": len(parts), "rows": sum(p.rows for p in parts),
            "segments": sum(len(p.entries) for p in parts), "bytes": sum(p.bytes for p in parts)}


def write_part(ds: Dataset, op: WriteOperation, data: Any, settings: WriteSettings | None = None,
               on_batch: Callable[[pa.RecordBatch], None] | None = None) -> WrittenPart:
    """See :meth:`Dataset.write_part`."""
    check_parts(op, ds.name, ())
    spec = ds.spec.with_schema(schema_from_json(op.schema))
    writer = SegmentWriter(ds.store, spec, op.id, settings)
    entries = write_all(writer, as_batches(data), lambda b: conform(ds.name, b, spec.schema), on_batch)
    return WrittenPart(op.id, tuple(entries), writer.rows, writer.bytes_written)


def commit_write(ds: Dataset, op: WriteOperation, parts: Iterable[WrittenPart], force: bool = False,
                 info: dict[str, Any] | None = None) -> AppendResult:
    """See :meth:`Dataset.commit_write`."""
    done = check_parts(op, ds.name, parts)
    entries = [e for p in done for e in p.entries]
    read = ds.snapshot(op.read_version) if op.read_version else Snapshot.empty(ds.name)
    # an operation prepared with a wider schema (new columns) records it with its rows
    changes_schema = bool(op.read_version) and op.schema != schema_to_json(ds.schema_at(read))
    commit = Commit.new(op.kind, source=op.source, info={**part_summary(done), **(info or {})},
                        commit_id=op.id, schema=op.schema if changes_schema else None)
    removed = [s.segment for s in read.segments] if op.kind == "overwrite" else []
    reads = None
    if op.read_version:
        reads = ds.reads(read, removes=removed, whole_table=op.kind == "overwrite",
                         changes_schema=changes_schema)
    result = ds._commit_entries(commit, entries, sum(p.bytes for p in done), removed=removed,
                                force=force, reads=reads)
    if changes_schema and result.version is not None:
        ds._schema_committed(ds.spec.with_schema(schema_from_json(op.schema)))
    return result


def abort_write(ds: Dataset, op: WriteOperation, parts: Iterable[WrittenPart] = ()) -> int:
    """See :meth:`Dataset.abort_write`."""
    entries = [e for p in check_parts(op, ds.name, parts) for e in p.entries]
    if any(c.id == op.id for c in ds.history(after=op.read_version)):
        raise WriteOperationError(f"dataset {ds.name!r}: write operation {op.id} was committed; "
                                  "it can't be aborted")
    if entries:
        ds.store.delete_segments(ds.name, segment_rows(op, entries), ds.spec.schema.names)
    return len(entries)
