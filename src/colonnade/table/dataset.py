"""Dataset: the commit protocol, snapshots, appends, scans, verify and vacuum of one dataset."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from colonnade.config import WriteSettings
from colonnade.encoding.chunk import ChunkFormatError, ChunkStats, decode_chunk
from colonnade.errors import (
    CommitConflictError,
    CorruptCheckpointError,
    CorruptChunkError,
    DatasetExistsError,
    SchemaError,
    StoreError,
)
from colonnade.faults import fault_point
from colonnade.schema.spec import DatasetSpec
from colonnade.schema.types import logical_schema, schema_from_json, schema_to_json, type_name
from colonnade.storage.base import ChunkRef, ChunkStore
from colonnade.table import log
from colonnade.table.commits import (
    AddSegments,
    Commit,
    RemoveSegments,
    SegmentEntry,
    SetSchema,
    Snapshot,
)
from colonnade.table.expiry import ExpireResult, expire_versions
from colonnade.table.scan import Scan
from colonnade.table.vacuum import VacuumReport, vacuum_segments
from colonnade.table.writer import SegmentWriter, segment_stats_from_json

#: How many times a commit retries on the next version after losing one to another writer.
MAX_COMMIT_ATTEMPTS = 1000


@dataclass(frozen=True)
class AppendResult:
    version: int | None  # None when nothing was committed (duplicate source, no rows)
    rows: int
    segments: int
    bytes: int
    skipped: bool = False
    reason: str = ""


def schema_diff(expected: pa.Schema, got: pa.Schema) -> str:
    """A readable diff of two schemas, one line per difference."""
    lines = []
    exp = {f.name: f.type for f in expected}
    new = {f.name: f.type for f in logical_schema(got)}
    for name, t in exp.items():
        if name not in new:
            lines.append(f"  - {name}: {type_name(t)} (missing from the data)")
        elif new[name] != t:
            lines.append(f"  ~ {name}: {type_name(t)} in the dataset, {type_name(new[name])} in the data")
    for name, t in new.items():
        if name not in exp:
            lines.append(f"  + {name}: {type_name(t)} (not in the dataset)")
    return "\n".join(lines)


class Dataset:
    """One dataset of a store. ``recorded=False`` makes a dataset that is recorded in the store
    by its first commit (an ingest into a new dataset that fails leaves nothing behind)."""

    def __init__(self, store: ChunkStore, spec: DatasetSpec, recorded: bool = True) -> None:
        self.store = store
        self.spec = spec
        self.recorded = recorded
        self._latest: Snapshot | None = None  # the newest state read, extended on demand
        self.recorded_here = False  # this object's first commit recorded the dataset

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def schema(self) -> pa.Schema:
        return self.spec.schema

    def __repr__(self) -> str:
        return f"Dataset({self.name!r}, store={self.store.uri})"

    def _repr_html_(self) -> str:
        from colonnade.notebook import dataset_html

        return dataset_html(self)

    # -- the commit log
    def history(self, after: int = 0, upto: int | None = None) -> list[Commit]:
        """Commit records with ``after < version ≤ upto``, in version order (the whole kept log
        by default: for describing and maintenance; reading goes through :meth:`snapshot`).
        Expired versions are not listed."""
        return log.history(self.store, self.name, max(after, self.store.oldest_version(self.name) - 1), upto)

    def snapshot(self, version: int | None = None) -> Snapshot:
        """The dataset as of ``version`` (default: the latest), from the newest checkpoint at or
        below it plus the commits after it; VersionNotFoundError if there is no such version.

        The latest state is kept: asking again reads only the commits made since (commits never
        change once written), so a long-lived writer pays per new commit, not per live segment."""
        latest = self._latest
        if version is not None and latest is not None:
            log.check_kept(self.store, self.name, version)  # an expired version is never served
        if latest is not None and (version is None or version > latest.version):
            extended = log.extend(self.store, latest, version)  # None: expired past it
            if extended is not None:
                latest = self._latest = extended
                if version is None or version == latest.version:
                    return latest
        elif latest is not None and version == latest.version:
            return latest
        snapshot = log.load_snapshot(self.store, self.name, version)
        if version is None:
            self._latest = snapshot
        return snapshot

    @property
    def version(self) -> int:
        return self.store.latest_version(self.name)

    def schema_at(self, snapshot: Snapshot) -> pa.Schema:
        """The schema as of ``snapshot``: the last one its commits recorded (datasets written
        before commits recorded their schema read with today's)."""
        return self.spec.schema if snapshot.schema is None else schema_from_json(snapshot.schema)

    def _record(self) -> None:
        """Record a dataset made with ``recorded=False`` just before its first commit. If a
        concurrent writer recorded it first, carry on only if it asked for the same spec."""
        try:
            self.store.create_dataset(self.name, self.spec.to_json())
            self.recorded_here = True
        except DatasetExistsError as exc:
            if exc.existing != self.name:
                raise
            existing = DatasetSpec.from_json(self.store.get_dataset(self.name))
            differences = existing.differences(self.spec)
            if differences:
                raise SchemaError(f"dataset {self.name!r} was created meanwhile by another writer "
                                  f"with {'; '.join(differences)}: nothing committed") from None
            self.spec = existing
        self.recorded = True

    def segment_stats(self, snapshot: Snapshot, partitions: Iterable[str] | None = None
                      ) -> dict[str, dict[str, ChunkStats]]:
        """Per-column statistics (rows, nulls, min, max, bytes) of the live segments of
        ``snapshot`` in ``partitions`` (all by default), by segment id. A live segment whose
        index row is missing is absent from the answer (callers name it as corrupt)."""
        wanted = None if partitions is None else set(partitions)
        live = {s.segment for s in snapshot.segments if wanted is None or s.partition in wanted}
        if not live:
            return {}
        keys = sorted({s.partition for s in snapshot.segments if s.segment in live})
        return {r.segment: segment_stats_from_json(r.stats)
                for r in self.store.get_segments(self.name, keys) if r.segment in live}

    def find_source(self, source: str) -> int | None:
        """The version of the commit that recorded source identity ``source``, if any (one
        lookup in the live state's transaction markers)."""
        found = self.snapshot().txns.get(source)
        return None if found is None else found[1]

    def commit(self, commit: Commit, force: bool = False) -> int:
        """Write a commit record on the next free version; returns the version it took.

        On a version conflict the new commits are read and the next version tried; chunks are
        never rewritten. A commit carrying a source identity stops if that source was committed
        by someone else meanwhile (returns -1), unless ``force``. Any other store error is
        resolved by reading the log back: if our commit id is there, it took effect. The writer
        of every ``checkpoint_interval``-th version also writes its checkpoint.
        """
        if not self.recorded:
            self._record()
        state = self.snapshot()
        if commit.source is not None and not force and commit.source in state.txns:
            return -1  # committed by another writer since our caller checked
        version = state.version
        if commit.schema is None and state.schema != schema_to_json(self.spec.schema):
            commit = commit.with_actions(SetSchema(schema_to_json(self.spec.schema)))  # first, or changed
        for _ in range(MAX_COMMIT_ATTEMPTS):
            version += 1
            record = commit.at_version(version, read_version=state.version)
            try:
                fault_point("before_commit")
                self.store.commit(self.name, version, record.to_payload())
                fault_point("after_commit")
                if version % log.checkpoint_interval() == 0:
                    log.write_checkpoint(self.store, self.snapshot(version))
                return version
            except CommitConflictError:
                newer = self.history(after=version - 1)
                for c in newer:
                    if c.id == commit.id:
                        return c.version
                    if commit.source is not None and not force and c.source == commit.source:
                        return -1
                    if set(commit.removed) & set(c.removed):
                        # an overwrite or compaction lost to one that removed the same segments
                        raise CommitConflictError(self.name, c.version) from None
                if newer:
                    version = newer[-1].version
                continue
            except StoreError:
                # outcome unknown (e.g. a timeout): the log says whether it happened
                for c in self.history(after=version - 1):
                    if c.id == commit.id:
                        return c.version
                raise
        raise CommitConflictError(self.name, version)

    # -- writing
    def conform(self, batch: pa.RecordBatch, schema: pa.Schema | None = None,
                allow_missing: bool = False) -> pa.RecordBatch:
        """Reorder and safely cast a batch to the dataset schema, or raise SchemaError with a diff.

        Columns missing from the batch are filled with nulls only when ``allow_missing``
        (schema mode ``merge``)."""
        schema = schema or self.spec.schema
        names = batch.schema.names
        if set(names) != set(schema.names):
            missing_only = set(names) < set(schema.names)
            if not (missing_only and allow_missing):
                raise SchemaError(f"schema of the data differs from dataset {self.name!r}:\n"
                                  + schema_diff(schema, batch.schema))
        arrays = []
        for f in schema:
            if f.name not in names:
                arrays.append(pa.nulls(batch.num_rows, f.type))
                continue
            col = batch.column(f.name)
            if pa.types.is_dictionary(col.type) and not pa.types.is_dictionary(f.type):
                col = col.dictionary_decode()
            if col.type != f.type:
                try:
                    col = col.cast(f.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    raise SchemaError(
                        f"column {f.name!r}: cannot store {type_name(col.type)} values in a "
                        f"{type_name(f.type)} column of dataset {self.name!r} ({exc})") from None
            arrays.append(col)
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    def merge_schema(self, data_schema: pa.Schema) -> None:
        """Add the data's new columns (nullable) to the dataset; existing types must match."""
        current = self.spec.schema
        fields = list(current)
        for f in logical_schema(data_schema):
            if f.name in current.names:
                if current.field(f.name).type != f.type:
                    try:
                        pa.array([], f.type).cast(current.field(f.name).type)
                    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                        raise SchemaError(f"column {f.name!r} changes type: "
                                          + schema_diff(current, data_schema)) from None
                continue
            fields.append(pa.field(f.name, f.type, nullable=True))
        if len(fields) != len(current):
            if not self.recorded:  # recorded with its first commit, merged schema and all
                self.spec = self.spec.with_schema(pa.schema(fields))
                return
            latest = DatasetSpec.from_json(self.store.get_dataset(self.name))
            merged = pa.schema(list(latest.schema) + [f for f in fields if f.name not in latest.schema.names])
            self.spec = latest.with_schema(merged)
            self.store.update_dataset(self.name, self.spec.to_json())

    def append(self, data: Any, source: str | None = None, force: bool = False,
               schema_mode: str = "strict", settings: WriteSettings | None = None,
               on_batch: Callable[[pa.RecordBatch], None] | None = None, kind: str = "append",
               info: dict[str, Any] | None = None) -> AppendResult:
        """Append a table, batch, reader, iterable of batches, or a file path.

        ``source`` is the identity of the input: if a commit with it exists, nothing is appended
        (unless ``force``). Nothing is visible until the final commit record is written.
        """
        if isinstance(data, str | Path):
            from colonnade.ingest.pipeline import ingest_files

            done = ingest_files(self, [Path(data)], force=force, schema_mode=schema_mode)
            return AppendResult(done.version, done.rows, done.segments, done.bytes,
                                skipped=done.skipped, reason=done.reason)
        if source is not None and not force and self.find_source(source) is not None:
            return AppendResult(None, 0, 0, 0, skipped=True, reason=f"source {source} was already ingested")
        batches = _as_batches(data)
        first = next(batches, None)
        if first is None:
            return AppendResult(None, 0, 0, 0, skipped=True, reason="no rows")
        if schema_mode == "merge":
            self.merge_schema(first.schema)
        elif schema_mode != "strict":
            raise SchemaError(f"schema mode must be strict or merge, not {schema_mode!r}")
        commit = Commit.new(kind, source=source, info=info)
        writer = SegmentWriter(self.store, self.spec, commit.id, settings)
        try:
            for batch in _chain(first, batches):
                conformed = self.conform(batch, allow_missing=schema_mode == "merge")
                writer.write(conformed)
                if on_batch is not None:
                    on_batch(batch)
            entries = writer.finish()
        except BaseException:
            writer.abort()
            raise
        return self._commit_entries(commit, entries, writer.bytes_written, force=force)

    def _commit_entries(self, commit: Commit, entries: list[SegmentEntry], nbytes: int,
                        removed: Iterable[str] = (), force: bool = False) -> AppendResult:
        rows = sum(e.rows for e in entries)
        if not entries and not removed:
            return AppendResult(None, 0, 0, 0, skipped=True, reason="no rows")
        actions: list[Any] = []
        if removed:
            actions.append(RemoveSegments(tuple(removed)))
        if entries:
            actions.append(AddSegments(tuple(entries)))
        version = self.commit(commit.with_actions(*actions), force=force)
        if version < 0:
            return AppendResult(None, 0, 0, 0, skipped=True,
                                reason=f"source {commit.source} was ingested concurrently by another writer")
        return AppendResult(version, rows, len(entries), nbytes)

    def overwrite(self, data: Any, source: str | None = None) -> AppendResult:
        """Replace every row with ``data`` in one commit."""
        current = self.snapshot()
        commit = Commit.new("overwrite", source=source)
        writer = SegmentWriter(self.store, self.spec, commit.id)
        try:
            for batch in _as_batches(data):
                writer.write(self.conform(batch))
            entries = writer.finish()
        except BaseException:
            writer.abort()
            raise
        return self._commit_entries(commit, entries, writer.bytes_written,
                                    removed=[s.segment for s in current.segments])

    # -- reading
    def scan(self, columns: Iterable[str] | None = None, filter: pc.Expression | None = None,
             version: int | None = None) -> Scan:
        return Scan(self, tuple(columns) if columns is not None else None, filter, version)

    def to_arrow(self, **kwargs: Any) -> pa.Table:
        return self.scan(**kwargs).to_arrow()

    # -- maintenance
    def verify(self, version: int | None = None) -> tuple[int, list[CorruptChunkError]]:
        """Check every chunk of every live segment; returns (chunks checked, problems)."""
        snapshot = self.snapshot(version)
        problems: list[CorruptChunkError] = []
        checked = 0
        partitions = sorted({s.partition for s in snapshot.segments})
        rows = {r.segment: r for r in self.store.get_segments(self.name, partitions)} if partitions else {}
        for seg in snapshot.segments:
            row = rows.get(seg.segment)
            if row is None:
                problems.append(CorruptChunkError(self.name, "*", seg.segment, "segment index row is missing"))
                continue
            stats = segment_stats_from_json(row.stats)
            refs = [ChunkRef(seg.partition, c, seg.segment, seg.bucket) for c in stats]
            seen = set()
            for ref, data in self.store.get_chunks(self.name, refs):
                seen.add(ref.column)
                checked += 1
                try:
                    if not data:
                        raise ChunkFormatError("chunk is missing from the store")
                    array = decode_chunk(data)
                    if len(array) != stats[ref.column].rows:
                        raise ChunkFormatError(f"{len(array)} rows, the index says {stats[ref.column].rows}")
                except ChunkFormatError as exc:
                    problems.append(CorruptChunkError(self.name, ref.column, ref.segment, str(exc)))
            for c in stats:
                if c not in seen:
                    problems.append(CorruptChunkError(self.name, c, seg.segment, "chunk is missing from the store"))
        return checked, problems

    def verify_checkpoints(self) -> tuple[int, list[CorruptCheckpointError]]:
        """Decode every checkpoint (checksums); returns (checkpoints checked, damaged ones).
        Readers skip a damaged checkpoint for an older one or the log; after ``expire`` a
        damaged or missing one that nothing can stand in for is listed as ``fatal``."""
        return log.verify_checkpoints(self.store, self.name)

    def expire(self, older_than: float | str | dt.timedelta | None = None, retain_last: int | None = None,
               now: float | None = None, dry_run: bool = False) -> ExpireResult:
        """Remove old versions from time travel, never the latest: those superseded more than
        ``older_than`` ago (seconds, ``"7d"`` or a timedelta; 7 days when neither option is
        given) and/or all but the ``retain_last`` newest. Their commits and checkpoints go;
        their data stays until :meth:`vacuum`. See :mod:`colonnade.table.expiry`."""
        return expire_versions(self, older_than, retain_last, now, dry_run)

    def vacuum(self, grace_seconds: float = 3600.0, dry_run: bool = False) -> VacuumReport:
        """Remove segments (and their chunks) that no kept version names: orphans of failed
        writes older than the grace period (which protects a concurrent writer's not yet
        committed segments), and segments only expired versions needed. See
        :mod:`colonnade.table.vacuum`."""
        return vacuum_segments(self, grace_seconds, dry_run)

    def describe(self) -> dict[str, Any]:
        snapshot = self.snapshot()
        partitions = sorted({s.partition for s in snapshot.segments})
        rows_by_id = {r.segment: r for r in self.store.get_segments(self.name, partitions)} if partitions else {}
        col_bytes: dict[str, int] = dict.fromkeys(self.schema.names, 0)
        part_bytes: dict[str, int] = {}
        for seg in snapshot.segments:
            row = rows_by_id.get(seg.segment)
            if row is None:
                continue
            for c, st in segment_stats_from_json(row.stats).items():
                col_bytes[c] = col_bytes.get(c, 0) + st.nbytes
                part_bytes[seg.partition] = part_bytes.get(seg.partition, 0) + st.nbytes
        return {
            "name": self.name,
            "store": self.store.uri,
            "rows": snapshot.rows,
            "segments": len(snapshot.segments),
            "partitions": len(partitions),
            "bytes": sum(col_bytes.values()),
            "version": snapshot.version,
            "partition_by": [str(t) for t in self.spec.partition_by],
            "sort_by": list(self.spec.sort_by),
            "segment_rows": self.spec.segment_rows,
            "columns": [{"name": f.name, "type": type_name(f.type), "bytes": col_bytes.get(f.name, 0)}
                        for f in self.schema],
            "partition_bytes": part_bytes,
            "versions": [{"version": c.version, "kind": c.kind, "at": c.at, "rows_added": c.rows_added,
                          "segments_added": len(c.added), "segments_removed": len(c.removed),
                          "source": c.source} for c in self.history(upto=snapshot.version)],
        }


def _as_batches(data: Any) -> Iterator[pa.RecordBatch]:
    if isinstance(data, pa.Table):
        yield from data.to_batches()
    elif isinstance(data, pa.RecordBatch):
        yield data
    elif isinstance(data, pa.RecordBatchReader):
        yield from data
    elif hasattr(data, "__arrow_c_stream__") and not isinstance(data, Iterable):
        yield from pa.RecordBatchReader.from_stream(data)
    elif type(data).__name__ == "DataFrame":
        yield from pa.Table.from_pandas(data, preserve_index=False).to_batches()
    elif isinstance(data, Iterable):
        for item in data:
            if isinstance(item, pa.RecordBatch):
                yield item
            elif isinstance(item, pa.Table):
                yield from item.to_batches()
            else:
                raise SchemaError(f"cannot append {type(item).__name__}: expected Arrow record batches")
    else:
        raise SchemaError(f"cannot append {type(data).__name__}: pass an Arrow table, batches, a reader or a path")


def _chain(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield first
    yield from rest


def file_identity(path: Path, chunk: int = 8 * 1024 * 1024,
                  on_read: Callable[[int], None] | None = None) -> str:
    """Source identity of a file: resolved path, size and SHA-256 of its content;
    ``on_read`` is told the bytes read so far (digesting a large file takes a while)."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
            size += len(block)
            if on_read is not None:
                on_read(size)
    return f"file:{path.resolve()}:{size}:sha256:{h.hexdigest()}"
