"""Dataset: the commit protocol, snapshots, appends, scans, verify and vacuum of one dataset."""

from __future__ import annotations

import datetime as dt
import hashlib
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from colonnade.config import WriteSettings
from colonnade.encoding.chunk import ChunkStats
from colonnade.errors import (
    ColonnadeError,
    CommitConflictError,
    CorruptCheckpointError,
    CorruptChunkError,
    DatasetExistsError,
    SchemaError,
    SpecError,
    StoreError,
)
from colonnade.faults import fault_point
from colonnade.schema.spec import DatasetSpec
from colonnade.schema.types import schema_from_json, schema_to_json
from colonnade.storage.base import ChunkStore
from colonnade.table import log
from colonnade.table.commits import (
    POSITION_PREFIX,
    SAMPLES_PROPERTY,
    AddSegments,
    Commit,
    RemoveSegments,
    SegmentEntry,
    SetSchema,
    Snapshot,
    listed_samples,
)
from colonnade.table.conflicts import ReadSet, check_conflicts, schema_key
from colonnade.table.conform import as_batches, conform, merged_schema
from colonnade.table.expiry import ExpireResult, expire_versions
from colonnade.table.operation import WriteOperation, WrittenPart
from colonnade.table.scan import Scan
from colonnade.table.vacuum import VacuumReport, vacuum_segments
from colonnade.table.versions import Versions, read_schema_of
from colonnade.table.writer import (
    SegmentWriter,
    column_stats_from_text,
    segment_stats_from_json,
    write_all,
)

if TYPE_CHECKING:
    from colonnade.table.compaction import CompactResult
    from colonnade.table.deletion import DeleteResult
    from colonnade.table.sample import Admission

#: The base property listing a dataset's samples (see :mod:`colonnade.table.sample`).


class SampleWarning(UserWarning):
    """A dataset's commit succeeded but its samples could not be brought up to date."""


#: How many times a commit retries on the next version after losing one to another writer.
MAX_COMMIT_ATTEMPTS = 1000


@dataclass(frozen=True)
class CommitResult:
    """What :meth:`Dataset.commit` did: the version it took, or why it committed nothing."""

    version: int | None  # None when nothing was committed (see ``reason``)
    reason: str = ""

    @property
    def committed(self) -> bool:
        return self.version is not None


def off_curve_rows(spec: DatasetSpec, entries: Iterable[SegmentEntry]) -> int:
    """Rows of ``entries`` in the NULL partition of a curve transform."""
    curves = [i for i, t in enumerate(spec.partition_by) if len(t.sources) > 1]
    return sum(e.rows for e in entries if any(e.values[i] is None for i in curves)) if curves else 0


@dataclass(frozen=True)
class AppendResult:
    version: int | None  # None when nothing was committed (duplicate source, no rows)
    rows: int
    segments: int
    bytes: int
    skipped: bool = False
    reason: str = ""
    off_curve: int = 0  # rows with no cell on a curve partition (NULL, NaN, out-of-range coordinates)


class Dataset:
    """One dataset of a store. ``recorded=False`` makes a dataset that is recorded in the store
    by its first commit (an ingest into a new dataset that fails leaves nothing behind)."""

    def __init__(self, store: ChunkStore, spec: DatasetSpec, recorded: bool = True) -> None:
        self.store = store
        self._spec = spec
        self._synced: list[list[str]] | None = None  # the log's schema that _spec holds
        self.recorded = recorded
        self._versions = Versions(store, spec.name)  # the versions read, and their schemas
        self.recorded_here = False  # this object's first commit recorded the dataset
        #: its samples as maintained by this object: name -> (stored spec, Dataset)
        self.sample_datasets: dict[str, tuple[Any, Dataset]] = {}

    @property
    def name(self) -> str:
        return self._spec.name

    @property
    def spec(self) -> DatasetSpec:
        """The dataset's spec, its schema the one its log recorded last (the catalog's schema
        only for logs that recorded none): schema changes are commits."""
        if self.recorded and self._versions.latest is None:
            self.snapshot()  # reads the log once; later calls extend it with new commits only
        return self._spec

    @spec.setter
    def spec(self, spec: DatasetSpec) -> None:
        self._spec = spec
        self._synced = None

    def spec_at(self, snapshot: Snapshot) -> DatasetSpec:
        """The spec as of ``snapshot``: its own schema (time travel), without reading the
        latest version (a reader pinned to an old version needs nothing newer)."""
        schema = self.schema_at(snapshot)
        if self._spec.schema.equals(schema):
            return self._spec
        return self._spec.with_schema(schema)

    @property
    def schema(self) -> pa.Schema:
        return self.spec.schema

    def _sync_schema(self, latest: Snapshot) -> None:
        if latest.schema is not None and latest.schema is not self._synced:
            if latest.schema != schema_to_json(self._spec.schema):
                try:
                    self._spec = self._spec.with_schema(schema_from_json(latest.schema))
                except SpecError as exc:  # its log is another dataset's, with another spec
                    raise SpecError(f"{exc}: dataset {self.name!r} was dropped and created again since "
                                    f"this object was opened; open it again") from None
            self._synced = latest.schema

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
        change once written), so a long-lived writer pays per new commit, not per live segment.
        So are the last :data:`~colonnade.table.versions.PINNED_KEPT` older versions asked for
        (time travel, a Spark read pinned to a version): asking again checks only that the
        version was not expired since (see :mod:`colonnade.table.versions`)."""
        snapshot = self._versions.snapshot(version)
        if self._versions.latest is not None:
            self._sync_schema(self._versions.latest)
        return snapshot

    def followed(self) -> Snapshot | None:
        """The latest snapshot if one was read before and the log, read on from its commit,
        shows the dataset is still the one read then (one read); None otherwise (then ask
        :meth:`snapshot`). SQL reads a dataset it read before this way, without the catalog."""
        snapshot = self._versions.followed()
        if snapshot is not None:
            self._sync_schema(snapshot)
        return snapshot

    @property
    def version(self) -> int:
        return self.store.latest_version(self.name)

    def schema_at(self, snapshot: Snapshot) -> pa.Schema:
        """The schema as of ``snapshot``: the last one its commits recorded (datasets written
        before commits recorded their schema read with today's)."""
        recorded = self._versions.recorded_schema(snapshot)
        return self._spec.schema if recorded is None else recorded

    def read_schema_at(self, snapshot: Snapshot) -> pa.Schema:
        """The types a scan of every column of ``snapshot`` yields (string columns every live
        segment stores as a dictionary stay dictionaries), worked out once per snapshot."""
        return read_schema_of(snapshot, self.schema_at(snapshot))

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
            differences = existing.differences(self._spec)
            if differences:
                raise SchemaError(f"dataset {self.name!r} was created meanwhile by another writer "
                                  f"with {'; '.join(differences)}: nothing committed") from None
            self._spec = existing
        self.recorded = True

    def segment_stats(self, snapshot: Snapshot, partitions: Iterable[str] | None = None
                      ) -> dict[str, dict[str, ChunkStats]]:
        """Per-column statistics (rows, nulls, min, max, bytes) of the live segments of
        ``snapshot`` in ``partitions`` (all by default), by segment id: from the commit log
        (no store request), or from the segment index for segments committed before the log
        carried them; such a segment whose index row is missing is absent from the answer
        (callers name it as corrupt)."""
        if partitions is None:
            segments: Iterable[SegmentEntry] = snapshot.segments
        else:
            by_partition = snapshot.by_partition()
            segments = [s for p in dict.fromkeys(partitions) for s in by_partition.get(p, ())]
        out: dict[str, dict[str, ChunkStats]] = {}
        unlogged: set[str] = set()  # added before the log carried statistics
        for s in segments:
            if s.stats is not None:
                out[s.segment] = column_stats_from_text(s.stats)
            else:
                unlogged.add(s.segment)
        if unlogged:
            keys = sorted({s.partition for s in snapshot.segments if s.segment in unlogged})
            out.update((r.segment, segment_stats_from_json(r.stats))
                       for r in self.store.get_segments(self.name, keys) if r.segment in unlogged)
        return out

    def positions(self, snapshot: Snapshot | None = None) -> dict[str, int]:
        """The stream positions recorded up to ``snapshot`` (default: the latest version): app
        id → next offset (see :func:`~colonnade.table.commits.position_id`)."""
        state = snapshot or self.snapshot()
        return {app: v for app, (v, _) in state.txns.items() if app.startswith(POSITION_PREFIX)}

    def find_source(self, source: str) -> int | None:
        """The version of the commit that recorded source identity ``source``, if any (one
        lookup in the live state's transaction markers)."""
        found = self.snapshot().txns.get(source)
        return None if found is None else found[1]

    def commit(self, commit: Commit, force: bool = False, reads: ReadSet | None = None,
               admitted: Admission | None = None, latest: Snapshot | None = None) -> CommitResult:
        """Write a commit record (see :meth:`_commit_record`; ``latest``: the latest snapshot as
        just read, not read again), then bring the dataset's samples up to date (see
        :mod:`colonnade.table.sample`; ``admitted``: the sample rows an append admitted as it
        wrote). A sample that can't be maintained now (e.g. its store is unavailable) stays at
        the version it records, never used for a newer one: the next commit or query catches it up."""
        done, listed = self._commit_record(commit, force, reads, latest)
        if done.version is not None and (listed is None or listed):
            from colonnade.table.sample import maintain

            try:
                maintain(self, admitted, done.version, listed)
            except (ColonnadeError, OSError) as exc:
                warnings.warn(f"the samples of {self.name!r} stay at an earlier version: {exc}",
                              SampleWarning, stacklevel=2)
        return done

    def _commit_record(self, commit: Commit, force: bool, reads: ReadSet | None,
                       latest: Snapshot | None = None) -> tuple[CommitResult, list[str] | None]:
        """Write a commit record on the next free version, if no commit made since the version
        the operation read (``reads``; default: a blind append of the latest version) conflicts
        with it (CommitConflictError, see :mod:`colonnade.table.conflicts`). A ``latest`` the
        caller read is taken as is: a commit since makes the put-if-absent fail (a conflict).

        On a version conflict the new commits are read, checked, and the next version tried;
        chunks are never rewritten. A commit carrying a source identity stops if that source was
        committed by someone else meanwhile (nothing committed, the result says why), unless
        ``force``. Any other store error is resolved by reading the log back: if our commit id
        is there, it took effect. The writer of every ``checkpoint_interval``-th version also
        writes its checkpoint."""
        if not self.recorded:
            self._record()
        state = self.snapshot() if latest is None else latest
        # the samples listed at the version committed if it follows ``state`` (None: read again)
        listed = listed_samples(state.properties, commit.actions)
        reads = reads or ReadSet.blind(state.version)
        if not set(commit.removed) <= reads.removes:
            reads = replace(reads, removes=reads.removes | frozenset(commit.removed))
        operation = commit.kind
        if commit.source is not None and not force and commit.source in state.txns:
            return _duplicate(commit.source, state.txns[commit.source][1]), []
        if reads.read_version < state.version:  # 1. what was committed since the operation read
            check_conflicts(self.name, reads, operation, self.history(reads.read_version, state.version))
        schema_recorded = state.schema is not None
        version = state.version
        for _ in range(MAX_COMMIT_ATTEMPTS):
            version += 1
            record = commit
            if commit.schema is None and not schema_recorded:  # the log records its first schema
                record = commit.with_actions(SetSchema(schema_to_json(self._spec.schema)))
            record = record.at_version(version, read_version=reads.read_version)
            try:
                fault_point("before_commit")
                self.store.commit(self.name, version, record.to_payload())  # 2. put-if-absent
                fault_point("after_commit")
                if log.checkpoint_due(version, record):
                    log.write_checkpoint(self.store, self.snapshot(version))
                return CommitResult(version), listed if version == state.version + 1 or not listed else None
            except CommitConflictError:
                # 3. lost the version: read what won it (and anything since), check it again
                newer = self.history(after=version - 1)
                for c in newer:
                    if c.id == commit.id:
                        return CommitResult(c.version), listed or None
                    if commit.source is not None and not force and c.source == commit.source:
                        return _duplicate(commit.source, c.version), []
                check_conflicts(self.name, reads, operation, newer)
                schema_recorded = schema_recorded or any(c.schema is not None for c in newer)
                if newer:
                    version = newer[-1].version
                continue
            except StoreError:
                # outcome unknown (e.g. a timeout): the log says whether it happened
                for c in self.history(after=version - 1):
                    if c.id == commit.id:
                        return CommitResult(c.version), listed or None
                raise
        raise CommitConflictError(self.name, version)

    def reads(self, snapshot: Snapshot, removes: Iterable[str] = (), partitions: Iterable[str] = (),
              whole_table: bool = False, changes_schema: bool = False) -> ReadSet:
        """What an operation that read ``snapshot`` declares to :meth:`commit`."""
        return ReadSet(snapshot.version, frozenset(removes), frozenset(partitions), whole_table,
                       changes_schema, schema_key(schema_to_json(self.schema_at(snapshot))))

    # -- writing
    def conform(self, batch: pa.RecordBatch, schema: pa.Schema | None = None,
                allow_missing: bool = False) -> pa.RecordBatch:
        """Reorder and safely cast a batch to the dataset schema, or raise SchemaError with a diff
        (see :func:`colonnade.table.conform.conform`)."""
        return conform(self.name, batch, schema or self.spec.schema, allow_missing)

    def append(self, data: Any, source: str | None = None, force: bool = False,
               schema_mode: str = "strict", settings: WriteSettings | None = None,
               on_batch: Callable[[pa.RecordBatch], None] | None = None, kind: str = "append",
               info: dict[str, Any] | None = None, positions: dict[str, int] | None = None,
               read_version: int | None = None) -> AppendResult:
        """Append a table, batch, reader or iterable of batches (files: ``Store.ingest``).

        ``source`` is the identity of the input: if a commit with it exists, nothing is appended
        (unless ``force``). Nothing is visible until the final commit record is written. With
        ``schema_mode="merge"`` the data's new columns are added (nullable) by the same commit:
        an append that fails changes nothing, and two concurrent schema changes conflict.

        ``positions`` (a stream's micro-batch) are recorded by the same commit: app id
        (:func:`~colonnade.table.commits.position_id`) → next offset. The caller read the
        positions it continues from at ``read_version`` (default: the latest version); a commit
        made since then that recorded one of the same positions makes the append fail with
        CommitConflictError (someone else consumed those offsets), nothing committed.
        """
        if isinstance(data, str | Path):
            raise SchemaError(f"append takes Arrow data, not a path ({str(data)!r}): files are read by "
                              f"store.ingest({self.name!r}, paths), which checks and locates bad rows")
        if source is not None and not force and self.find_source(source) is not None:
            return AppendResult(None, 0, 0, 0, skipped=True, reason=f"source {source} was already ingested")
        if schema_mode not in ("strict", "merge"):
            raise SchemaError(f"schema mode must be strict or merge, not {schema_mode!r}")
        batches = as_batches(data)
        first = next(batches, None)
        if first is None and positions:  # e.g. a micro-batch of bad messages only
            read = self.snapshot() if self.recorded else Snapshot.empty(self.name)
            reads = replace(ReadSet.blind(read.version), positions=frozenset(positions),
                            read_version=read.version if read_version is None else read_version)
            return self._commit_entries(Commit.new(kind, info=info, positions=positions), [], 0, reads=reads)
        if first is None:
            return AppendResult(None, 0, 0, 0, skipped=True, reason="no rows")
        spec = self.spec
        read = self.snapshot() if self.recorded else Snapshot.empty(self.name)
        merged = merged_schema(spec.schema, first.schema) if schema_mode == "merge" else None
        if merged is not None:
            spec = spec.with_schema(merged)
            if not self.recorded:  # recorded with its first commit, merged schema and all
                self._spec = spec
        commit = Commit.new(kind, source=source, info=info, positions=positions,
                            schema=schema_to_json(merged) if merged is not None else None)
        writer = SegmentWriter(self.store, spec, commit.id, settings)
        admission = self._admission(read) if merged is None else None

        def conformed(batch: pa.RecordBatch) -> pa.RecordBatch:
            batch = conform(self.name, batch, spec.schema, allow_missing=schema_mode == "merge")
            return batch if admission is None else admission.add(batch)

        try:
            rows = _chain(first, batches, None if admission is None else admission.input_done)
            entries = write_all(writer, rows, conformed, on_batch)
            reads = self.reads(read, changes_schema=merged is not None)
            if positions:
                reads = replace(reads, positions=frozenset(positions),
                                read_version=read.version if read_version is None else read_version)
            result = self._commit_entries(commit, entries, writer.bytes_written, force=force, reads=reads,
                                          admitted=admission)
        finally:
            if admission is not None:
                admission.release()  # rows no sample commit took (a failed or skipped append)
        if merged is not None and result.version is not None:
            self._schema_committed(spec)
        return result

    def _schema_committed(self, spec: DatasetSpec) -> None:
        """After a commit that changed the schema: the catalog's copy of the spec follows (a
        cache for readers of logs that record no schema; the log is the truth)."""
        self.spec = spec
        try:
            self.store.update_dataset(self.name, spec.to_json())
        except StoreError:
            pass

    def _admission(self, read: Snapshot) -> Admission | None:
        """Sampling of an append's rows as it writes them, when the dataset has samples."""
        if SAMPLES_PROPERTY not in read.properties:
            return None
        from colonnade.table.sample import Admission

        return Admission(self, read)

    def _commit_entries(self, commit: Commit, entries: list[SegmentEntry], nbytes: int,
                        removed: Iterable[str] = (), force: bool = False,
                        reads: ReadSet | None = None, admitted: Admission | None = None) -> AppendResult:
        rows = sum(e.rows for e in entries)
        removed = tuple(removed)
        if not entries and not removed and commit.schema is None and not commit.positions:
            return AppendResult(None, 0, 0, 0, skipped=True, reason="no rows")
        actions: list[Any] = []
        if removed:
            actions.append(RemoveSegments(removed))
        if entries:
            actions.append(AddSegments(tuple(entries)))
        done = self.commit(commit.with_actions(*actions), force=force, reads=reads, admitted=admitted)
        if done.version is None:
            return AppendResult(None, 0, 0, 0, skipped=True, reason=done.reason)
        return AppendResult(done.version, rows, len(entries), nbytes,
                            off_curve=off_curve_rows(self._spec, entries))

    def overwrite(self, data: Any, source: str | None = None) -> AppendResult:
        """Replace every row with ``data`` in one commit. It read the whole table: a commit that
        adds or removes rows meanwhile makes it fail (CommitConflictError), changing nothing."""
        current = self.snapshot()
        commit = Commit.new("overwrite", source=source)
        writer = SegmentWriter(self.store, self.spec, commit.id)
        entries = write_all(writer, as_batches(data), self.conform)
        removed = [s.segment for s in current.segments]
        return self._commit_entries(commit, entries, writer.bytes_written, removed=removed,
                                    reads=self.reads(current, removes=removed, whole_table=True))

    # -- one commit, many writers (see colonnade.table.operation)
    def prepare_write(self, source: str | None = None, kind: str = "append") -> WriteOperation:
        """A write that workers do in parts (:meth:`write_part`, in any process) and that
        :meth:`commit_write` makes visible in one commit; ``source``: the whole input's identity;
        ``kind`` "overwrite": the commit replaces every row of the version read now. The rows
        have this object's schema (a spec widened by new columns: the commit records it)."""
        if kind not in ("append", "overwrite"):
            raise SchemaError(f"a write operation appends or overwrites, not {kind!r}")
        read = self.snapshot() if self.recorded else Snapshot.empty(self.name)
        return WriteOperation.new(self.name, read.version, schema_to_json(self.spec.schema), source, kind)

    def write_part(self, op: WriteOperation, data: Any, settings: WriteSettings | None = None,
                   on_batch: Callable[[pa.RecordBatch], None] | None = None) -> WrittenPart:
        """Store rows (table, batch, reader or iterable of batches) for ``op``: nothing is
        visible until the coordinator commits the returned part with the others."""
        from colonnade.table.operation import write_part

        return write_part(self, op, data, settings, on_batch)

    def commit_write(self, op: WriteOperation, parts: Iterable[WrittenPart], force: bool = False,
                     info: dict[str, Any] | None = None) -> AppendResult:
        """Commit every part of ``op`` in one commit (skipped when ``op.source`` was committed
        meanwhile, unless ``force``; CommitConflictError when a commit since ``op.read_version``
        conflicts, e.g. a schema change: nothing committed either way)."""
        from colonnade.table.operation import commit_write

        return commit_write(self, op, parts, force, info)

    def abort_write(self, op: WriteOperation, parts: Iterable[WrittenPart] = ()) -> int:
        """Give ``op`` up: the segments of ``parts`` are removed now (those of parts never
        handed back are orphans for ``vacuum``); returns how many were removed."""
        from colonnade.table.operation import abort_write

        return abort_write(self, op, parts)

    # -- maintenance that commits (each in its own module)
    def compact(self, target_rows: int | None = None, partitions: Iterable[str] | None = None) -> CompactResult:
        """Merge each partition's small segments into segments of up to ``target_rows`` rows
        (default: ``segment_rows``), in one commit; runs the retention first, if set
        (see :mod:`colonnade.table.compaction`)."""
        from colonnade.table.compaction import compact

        return compact(self, target_rows, partitions)

    def delete(self, where: str) -> DeleteResult:
        """Delete the rows for which the SQL predicate ``where`` is TRUE, in one commit
        (see :mod:`colonnade.table.deletion`)."""
        from colonnade.table.deletion import delete

        return delete(self, where)

    def set_retention(self, retain: str | None, on: str | None = None) -> CommitResult:
        """Keep rows for ``retain`` (e.g. ``90d``) by time column ``on``; None or ``"none"``
        removes the limit (see :mod:`colonnade.table.retention`)."""
        from colonnade.table.retention import set_retention

        return set_retention(self, retain, on)

    # -- reading
    def scan(self, columns: Iterable[str] | None = None, filter: pc.Expression | None = None,
             version: int | None = None) -> Scan:
        return Scan(self, tuple(columns) if columns is not None else None, filter, version)

    def to_arrow(self, **kwargs: Any) -> pa.Table:
        return self.scan(**kwargs).to_arrow()

    # -- maintenance
    def verify(self, version: int | None = None) -> tuple[int, list[CorruptChunkError]]:
        """Check every chunk of every live segment; returns (chunks checked, problems)."""
        from colonnade.table.verify import verify_chunks

        return verify_chunks(self, version)

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
        their data stays until :meth:`vacuum`. A retention set with ``alter --retain`` runs
        first (rows older than it are deleted). See :mod:`colonnade.table.expiry`."""
        from colonnade.table.retention import apply_retention

        retention = None if dry_run else apply_retention(self, now=now)
        result = expire_versions(self, older_than, retain_last, now, dry_run)
        return replace(result, retention=retention)

    def vacuum(self, grace_seconds: float = 3600.0, dry_run: bool = False) -> VacuumReport:
        """Remove segments (and their chunks) that no kept version names: orphans of failed
        writes older than the grace period (which protects a concurrent writer's not yet
        committed segments), and segments only expired versions needed. See
        :mod:`colonnade.table.vacuum`."""
        return vacuum_segments(self, grace_seconds, dry_run)

    def describe(self, versions: int | None = 20) -> dict[str, Any]:
        """Size, layout, bytes per column and partition, and the newest ``versions`` commits
        (see :func:`colonnade.table.describe.describe`)."""
        from colonnade.table.describe import describe

        return describe(self, versions)


def _duplicate(source: str, version: int) -> CommitResult:
    return CommitResult(None, f"source {source} was ingested concurrently by another writer (version {version})")


def _chain(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch],
           done: Callable[[], None] | None = None) -> Iterator[pa.RecordBatch]:
    """``first``, then ``rest``; then ``done()``, once they are all taken."""
    yield first
    yield from rest
    if done is not None:
        done()


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
