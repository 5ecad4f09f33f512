"""Stratified samples of a dataset, kept current with it: built once, then maintained by every
commit of the base dataset (appends, stream micro-batches, deletes, compactions).

A sample is a dataset of its own: the base's columns plus ``__stratum`` (the row's stratum id)
and ``__u`` (its key; see :mod:`colonnade.table.strata` for which rows a stratum keeps). Its
commits record, atomically with the rows they add or remove:

* the property ``sample``: its settings (base dataset, query column set, fraction, minimum rows
  per stratum, seed);
* each new stratum's key values (``stratum-of:<id>``), and the states (base rows, live sample
  rows, threshold) of the strata that changed, in blocks (``strata:<block>``, see
  :mod:`colonnade.table.strata`);
* the transaction marker ``sample-of:<base>`` whose version is the base version the sample
  represents. A sample is never used for another base version than the one it records.

The base dataset lists its samples in its property ``samples``. After each of its commits,
:func:`maintain` brings every listed sample up to the new version, from the commits made since
the version the sample records (so a writer that crashed between its commit and the sample's,
or one that did not maintain samples, is caught up by the next one): rows of appended segments
are keyed and admitted; a delete's predicate removes the sample's rows and its segments'
rows are subtracted from the populations; a compaction rewrites the sample without the rows
that left it; any other change of rows or of the schema rebuilds the sample. A maintenance
commit conflicts with any sample commit made since it read the sample: it is then re-done.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa

from colonnade.errors import (
    CommitConflictError,
    CorruptChunkError,
    DatasetExistsError,
    DatasetNotFoundError,
    SchemaError,
    VersionNotFoundError,
)
from colonnade.schema.spec import DatasetSpec
from colonnade.table.commits import (
    SAMPLE_PREFIX,
    SAMPLES_PROPERTY,
    AddSegments,
    Commit,
    RemoveSegments,
    SetProperties,
    Snapshot,
    Txn,
    listed_samples,
)
from colonnade.table.conflicts import ReadSet
from colonnade.table.dataset import Dataset
from colonnade.table.sample_rows import (
    KEY_COLUMN,
    STRATUM_COLUMN,
    Admitter,
    AppendedRows,
    Held,
    KeyEncoding,
    SampleRows,
    live_rows,
)
from colonnade.table.scan import Scan
from colonnade.table.strata import Strata, Stratum

SAMPLE_PROPERTY = "sample"
#: The strata each sample object committed last, by the version its commit made (see
#: :func:`state_of`).
_COMMITTED: weakref.WeakKeyDictionary[Dataset, tuple[int, Strata]] = weakref.WeakKeyDictionary()
#: Per base dataset: the key columns of each sample one of its appends met (a sample's settings
#: never change; one dropped and made again under its name is read before its rows are admitted).
_KEY_COLUMNS: weakref.WeakKeyDictionary[Dataset, dict[str, tuple[str, ...]]] = weakref.WeakKeyDictionary()
#: Rows admitted at a time while an append writes them (what is left when it commits waits).
ADMIT_WHILE_WRITING = 1 << 19
#: Maintenance attempts when other processes keep committing to the sample meanwhile.
ATTEMPTS = 20
#: Sample rows a build or catch-up holds before writing them (the live ones) as it goes.
HOLD_ROWS = 1 << 20


@dataclass(frozen=True)
class SampleSettings:
    base: str
    on: tuple[str, ...]
    fraction: float
    min_per_stratum: int = 50
    seed: int = 0

    def to_json(self) -> str:
        return json.dumps({"base": self.base, "on": list(self.on), "fraction": self.fraction,
                           "min_per_stratum": self.min_per_stratum, "seed": self.seed})

    @classmethod
    def from_json(cls, text: str) -> SampleSettings:
        v = json.loads(text)
        return cls(v["base"], tuple(v["on"]), float(v["fraction"]), int(v["min_per_stratum"]),
                   int(v["seed"]))


@dataclass(frozen=True)
class SampleState:
    """A sample as of one of its versions: its settings, the base version it represents, its
    snapshot and its strata."""

    name: str
    settings: SampleSettings
    base_version: int
    snapshot: Snapshot
    strata: Strata

    @property
    def rows(self) -> int:
        return int(self.strata.kept.sum())

    def strata_table(self) -> pa.Table:
        return self.strata.table()


def txn_id(base: str) -> str:
    return f"{SAMPLE_PREFIX}{base}"


def sample_settings(snapshot: Snapshot) -> SampleSettings | None:
    text = snapshot.properties.get(SAMPLE_PROPERTY)
    return None if text is None else SampleSettings.from_json(text)


def sample_names(base: Snapshot) -> list[str]:
    return listed_samples(base.properties)


def state_of(sample: Dataset, snapshot: Snapshot, take: bool = False) -> SampleState:
    """The sample as of ``snapshot``. With ``take``, the caller may change its strata: the
    strata this process committed last are taken over instead of read again (a writer that
    maintains a sample on every commit reads its strata once), and given back by its commit."""
    settings = sample_settings(snapshot)
    if settings is None:
        raise SchemaError(f"dataset {sample.name!r} is not a sample")
    marker = snapshot.txns.get(txn_id(settings.base))
    base_version = -1 if marker is None else marker[0]
    kept = _COMMITTED.pop(sample, None) if take else None
    if kept is not None and kept[0] == snapshot.version:
        return SampleState(sample.name, settings, base_version, snapshot, kept[1])

    def live_keys() -> tuple[np.ndarray, np.ndarray]:
        table = Scan(sample, (STRATUM_COLUMN, KEY_COLUMN), snapshot=snapshot).to_arrow()
        return (table.column(STRATUM_COLUMN).to_numpy(), table.column(KEY_COLUMN).to_numpy())

    strata = Strata.from_properties(snapshot.properties, settings.fraction,
                                    settings.min_per_stratum, live_keys)
    return SampleState(sample.name, settings, base_version, snapshot, strata)


# -- creating and dropping ----------------------------------------------------------------------
def create_sample(base: Dataset, name: str, on: Sequence[str], fraction: float,
                  min_per_stratum: int = 50, seed: int | None = None) -> SampleState:
    """Build sample ``name`` of ``base`` from its latest version and list it on the base; the
    sample dataset is recorded by its first commit (a failed build leaves nothing)."""
    snapshot = base.snapshot()
    schema = base.schema_at(snapshot)
    on = tuple(on)
    missing = [c for c in on if c not in schema.names]
    if not on or missing:
        raise SchemaError(f"a sample of {base.name!r} needs columns of it to stratify on"
                          + (f": it has no column {', '.join(map(repr, missing))}" if missing else ""))
    if not 0.0 < fraction < 1.0:
        raise SchemaError(f"a sample's fraction must be between 0 and 1 (exclusive), got {fraction}")
    if min_per_stratum < 2:
        raise SchemaError(f"a sample keeps at least 2 rows per stratum, not {min_per_stratum}")
    if name in sample_names(snapshot):
        raise DatasetExistsError(name)
    settings = SampleSettings(base.name, on, float(fraction), int(min_per_stratum),
                              int(np.random.default_rng(seed).integers(0, 2**62)))
    spec = DatasetSpec.create(name, sample_schema(schema), segment_rows=base.spec.segment_rows,
                              compression=base.spec.compression)
    sample = Dataset(base.store, spec, recorded=False)
    try:
        base.store.get_dataset(name)
        raise DatasetExistsError(name)
    except DatasetNotFoundError:
        pass
    _rebuild(base, sample, settings, snapshot, None)
    _list_sample(base, name, add=True)
    return state_of(sample, sample.snapshot())


def drop_sample(base: Dataset, name: str) -> None:
    """Unlist sample ``name`` from ``base`` and drop its dataset."""
    if name not in sample_names(base.snapshot()):
        raise DatasetNotFoundError(name)
    _list_sample(base, name, add=False)
    try:
        base.store.drop_dataset(name)
    except DatasetNotFoundError:
        pass


def _list_sample(base: Dataset, name: str, add: bool) -> None:
    for _ in range(ATTEMPTS):
        snapshot = base.snapshot()
        names = [n for n in sample_names(snapshot) if n != name] + ([name] if add else [])
        value = json.dumps(names)
        commit = Commit.new("set_properties", info={SAMPLES_PROPERTY: names})
        try:
            base.commit(commit.with_actions(SetProperties({SAMPLES_PROPERTY: value})),
                        reads=replace(ReadSet.blind(snapshot.version), exclusive=True))
            return
        except CommitConflictError:
            continue
    raise CommitConflictError(base.name, base.version, reason="its samples kept changing")


def sample_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([*schema, pa.field(STRATUM_COLUMN, pa.int64(), nullable=False),
                      pa.field(KEY_COLUMN, pa.float32(), nullable=False)])


# -- maintenance --------------------------------------------------------------------------------
def _sample_dataset(base: Dataset, name: str) -> Dataset | None:
    """Sample ``name`` of ``base``, one object per sample (its snapshot is extended by new
    commits, not read again); None if it was dropped."""
    try:
        spec = base.store.get_dataset(name)
    except DatasetNotFoundError:
        return None
    kept = base.sample_datasets.get(name)
    if kept is None or kept[0] != spec:
        kept = base.sample_datasets[name] = (spec, Dataset(base.store, DatasetSpec.from_json(spec)))
    return kept[1]


def maintain(base: Dataset, admitted: Admission | None = None, version: int | None = None,
             names: Sequence[str] | None = None) -> None:
    """Bring the samples of ``base`` up to its latest version: first from the rows an append
    admitted as it wrote them (``admitted``, for its commit ``version``), then, for any sample
    still behind, from the commits since the version it records. ``names``: the samples listed
    at ``version``, if known (else the latest version is read)."""
    current = admitted.commit(version) if admitted is not None and version is not None else set()
    if names is None or not set(names) <= current:
        names = sample_names(base.snapshot())
    for name in names:
        if name in current:
            continue  # committed for ``version`` by the append: nothing to read back
        sample = _sample_dataset(base, name)
        if sample is not None:
            catch_up(base, sample)


class Admission:
    """The sample rows of an append, admitted while it writes its rows (so they are not read
    back after its commit), on a thread of their own (the append's encoding goes on meanwhile),
    and stored after its last admission while the append finishes: after the append's commit,
    its sample's commit only records them.
    Used only if the append's commit is the version right after the one it read and no one
    committed to the sample meanwhile; otherwise the sample catches up from the log, and what
    was admitted here is dropped."""

    def __init__(self, base: Dataset, read: Snapshot) -> None:
        self.read_version = read.version
        self.parts: list[AppendedRows] = []
        self._held = Held(ADMIT_WHILE_WRITING)
        self._pool: ThreadPoolExecutor | None = None
        self._pending: list[Future[None]] = []
        self._committed = False  # or dropped
        names = sample_names(read)
        self._sampled = bool(names)
        columns = [f.name for f in base.schema_at(read)]
        known = _KEY_COLUMNS.get(base, {})
        if names and all(name in known for name in names):
            # samples an earlier append met: their key columns are known, and they are read
            # on the sampling thread while this append starts writing (a round trip or two)
            keys = [k for name in names for k in known[name]]
            self._run(self._open, base, read, names, columns)
        else:
            self._open(base, read, names, columns)
            keys = [k for p in self.parts for k in p.admitter.state.settings.on]
        self._encoding = KeyEncoding(base.spec, keys)

    def _open(self, base: Dataset, read: Snapshot, names: list[str], columns: list[str]) -> None:
        """The samples this append maintains: those at the version it read."""
        for name in names:
            sample = _sample_dataset(base, name)
            if sample is None:
                continue
            state = state_of(sample, sample.snapshot(), take=True)
            _KEY_COLUMNS.setdefault(base, {})[name] = tuple(state.settings.on)
            if state.base_version != read.version:
                continue  # behind: it catches up from the log after the commit
            # the keys of the version it commits if it is used (the log's reading draws others)
            rng = np.random.default_rng([state.settings.seed, 1, read.version + 1])
            self.parts.append(AppendedRows(sample, state, rng, columns))

    def add(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Hold ``batch`` for admission; the batch the append writes (see :class:`KeyEncoding`)."""
        if not self._sampled:
            return batch
        batch = self._encoding(batch)
        full = self._held.add(batch)
        if full:
            self._submit(full)
        return batch

    def input_done(self) -> None:
        """The append has handed over all its rows: the last ones are admitted and the sample
        rows finished (encoded and stored) while the append finishes writing and commits, so
        that its sample's commit only records them."""
        if self._sampled and not self._committed:
            self._submit(self._held.take(), last=True)

    def _submit(self, held: list[pa.RecordBatch], last: bool = False) -> None:
        self._run(self._admit, held, last)

    def _run(self, task: Callable[..., None], *args: Any) -> None:
        """``task`` run on the admissions' thread, after those submitted before it."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="colonnade-sample")
        self._pending.append(self._pool.submit(task, *args))

    def _admit(self, batches: list[pa.RecordBatch], last: bool = False) -> None:
        """Admit ``batches`` (on the admissions' one thread, in turn); after the ``last``, the
        sample rows are stored and what the commit records of the strata is made, while the
        append finishes."""
        for part in self.parts:
            part.admitter.admit(batches)
            part.properties = None
        if last:
            for part in self.parts:
                part.take()
                if part.rows is not None:
                    part.rows.finish()
                part.properties = part.admitter.state.strata.changed_properties()

    def _finish(self, cancel: bool) -> None:
        """Wait for the admissions under way (or drop those not started, with ``cancel``);
        the first error of one is raised."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=cancel)
            self._pool = None
        pending, self._pending = self._pending, []
        for future in pending:
            if not future.cancelled():
                future.result()

    def release(self) -> None:
        """After the append: the rows no sample commit took are dropped."""
        if not self._committed:
            self.abort()

    def abort(self) -> None:
        """The append failed, or its commit can't use these rows: drop them."""
        self._committed = True
        try:
            self._finish(cancel=True)
        except Exception:  # noqa: BLE001 - dropping them all the same
            pass
        for part in self.parts:
            part.drop()

    def commit(self, version: int) -> set[str]:
        """The append committed ``version``: commit each sample's rows, if still valid; the
        names of the samples so brought to ``version``."""
        if version != self.read_version + 1:
            self.abort()
            return set()
        self._committed = True
        try:
            if self._held.batches:
                self._submit(self._held.take())
            self._finish(cancel=False)
        except BaseException:
            self.abort()
            raise
        current = set()
        for at, part in enumerate(self.parts):
            state = part.admitter.state
            rows: list[pa.Table] | SampleRows = part.rows if part.rows is not None else []
            try:
                # exclusive of any sample commit since it was read (e.g. another process
                # maintained it meanwhile: it then conflicts, and its rows stay orphaned)
                _commit(part.sample, state.settings, state.snapshot, state.strata, version, rows, (),
                        properties=part.properties)
                current.add(part.sample.name)
            except CommitConflictError:
                continue
            except BaseException:  # its rows and the other samples' are dropped (caught up later)
                for rest in self.parts[at:]:
                    rest.drop()
                raise
        return current


def catch_up(base: Dataset, sample: Dataset) -> SampleState:
    """Bring ``sample`` to the latest version of ``base`` (see the module docstring)."""
    for _ in range(ATTEMPTS):
        target = base.snapshot()
        current = sample.snapshot()
        state = state_of(sample, current, take=True)
        if state.base_version >= target.version:
            _COMMITTED[sample] = (current.version, state.strata)
            return state
        try:
            commits = base.history(state.base_version, target.version)
        except VersionNotFoundError:
            commits = []
        try:
            if len(commits) != target.version - state.base_version or any(
                    _needs_rebuild(c) for c in commits):
                _rebuild(base, sample, state.settings, target, current)
            else:
                _apply(base, sample, state, commits, target)
        except CommitConflictError:
            continue  # another process maintained it meanwhile: look again
        except (VersionNotFoundError, CorruptChunkError):
            # a version it needed was expired, or segments a delete removed were vacuumed
            try:
                _rebuild(base, sample, state.settings, target, current)
            except CommitConflictError:
                continue
    return state_of(sample, sample.snapshot())


def _needs_rebuild(commit: Commit) -> bool:
    if commit.schema is not None:
        return True
    if commit.kind in ("compact", "set_properties", "delete") or not commit.removed:
        return False
    return True  # an overwrite, or an unknown operation that removed rows


def _added_rows(base: Dataset, snapshot: Snapshot, commit: Commit, state: SampleState,
                columns: Sequence[str], sink: Callable[[pa.Table], None] | None = None) -> list[pa.Table]:
    """Admit the rows ``commit`` added (their keys drawn from a generator seeded by the
    sample's seed and the commit's version); the sample rows they give (or, with ``sink``,
    given to it as they come)."""
    if not commit.added:
        return []
    admitter = Admitter(state, np.random.default_rng([state.settings.seed, 0, commit.version]), columns, sink)
    scan = Scan(base, tuple(columns), snapshot=replace(snapshot, segments=commit.added))
    for batch in scan.to_batches():
        admitter.add(batch)
    admitter.flush()
    return admitter.rows


def _write_added(base: Dataset, snapshot: Snapshot, commits: list[Commit], state: SampleState,
                 columns: Sequence[str], written: SampleRows) -> None:
    """Admit the rows ``commits`` added, their sample rows written as they come (dropped if
    one fails)."""
    try:
        for commit in commits:
            _added_rows(base, snapshot, commit, state, columns, sink=written.write)
    except BaseException:
        written.abort()
        raise


def _apply(base: Dataset, sample: Dataset, state: SampleState, commits: list[Commit],
           target: Snapshot) -> None:
    """One sample commit for base ``commits`` (appends, deletes, compactions) up to ``target``."""
    from colonnade.table.predicate import Predicate

    columns = [f.name for f in base.schema_at(target)]
    if all(c.kind not in ("compact", "delete") for c in commits):  # rows added only: written as they come
        written = SampleRows(sample, hold=HOLD_ROWS, live=partial(live_rows, strata=state.strata))
        _write_added(base, target, commits, state, columns, written)
        _commit(sample, state.settings, state.snapshot, state.strata, target.version, written, ())
        return
    pending: list[pa.Table] = []  # sample rows added by this catch-up
    rewrite: dict[str, pa.Table] = {}  # stored sample segments rewritten: their remaining rows
    compacting = False
    sample_schema_ = sample.schema_at(state.snapshot)
    for commit in commits:
        if commit.kind == "compact":
            compacting = True
        elif commit.kind == "delete":
            before = base.snapshot(commit.version - 1)
            removed_ = set(commit.removed)
            gone = {s.segment: s for s in before.segments if s.segment in removed_}
            for segs, sign in ((tuple(gone.values()), 1), (commit.added, -1)):
                for batch in Scan(base, tuple(state.settings.on),
                                  snapshot=replace(before, segments=segs)).to_batches():
                    ids = state.strata.ids(batch, state.settings.on)
                    if sign > 0:
                        state.strata.remove(ids)
                    else:
                        state.strata.restore(ids)
            where = str(commit.info.get("where", "false"))
            with Predicate(sample.name, where, sample_schema_) as predicate:
                pending = [_without_matches(t, predicate, state) for t in pending]
                for entry, table in _stored(sample, state.snapshot, rewrite):
                    kept = _without_matches(table, predicate, state)
                    if kept.num_rows != table.num_rows:
                        rewrite[entry] = kept
        else:
            pending.extend(_added_rows(base, target, commit, state, columns))
    if compacting:  # rewrite the whole sample without the rows that left it
        for entry, table in _stored(sample, state.snapshot, rewrite):
            rewrite[entry] = table
    removed = tuple(rewrite)
    pending = [*rewrite.values(), *pending]
    if compacting:
        pending = [live_rows(t, state.strata) for t in pending]
    _commit(sample, state.settings, state.snapshot, state.strata, target.version, pending, removed)


def _stored(sample: Dataset, snapshot: Snapshot, rewritten: dict[str, pa.Table]
            ) -> Iterator[tuple[str, pa.Table]]:
    """Each stored sample segment's rows (as rewritten so far, if it was)."""
    todo = [s for s in snapshot.segments if s.segment not in rewritten]
    for segment, batch in zip(todo, Scan(sample, snapshot=replace(snapshot, segments=tuple(todo)))
                              .to_batches(), strict=True):
        yield segment.segment, pa.Table.from_batches([batch])
    yield from list(rewritten.items())


def _without_matches(table: pa.Table, predicate: Any, state: SampleState) -> pa.Table:
    """``table`` (sample rows) without those the delete predicate matches; the live ones among
    them leave their strata's counts."""
    if table.num_rows == 0:
        return table
    matched = predicate.matches(table)
    if not matched.any():
        return table
    ids = table.column(STRATUM_COLUMN).to_numpy()[matched]
    keys = table.column(KEY_COLUMN).to_numpy()[matched]
    live = state.strata.live(ids, keys)
    state.strata.unkeep(ids[live], keys[live])
    return table.filter(pa.array(~matched))


def _rebuild(base: Dataset, sample: Dataset, settings: SampleSettings, target: Snapshot,
             current: Snapshot | None) -> None:
    """Sample ``target`` afresh (new keys), replacing every row and stratum of ``current``."""
    old = Strata.from_properties(current.properties, settings.fraction, settings.min_per_stratum) \
        if current is not None else Strata(settings.fraction, settings.min_per_stratum)
    strata = Strata(settings.fraction, settings.min_per_stratum,
                    [Stratum(i, v) for i, v in enumerate(old.values) if v is not None])
    strata.mark_all()
    columns = [f.name for f in base.schema_at(target)]
    state = SampleState(sample.name, settings, target.version, target, strata)
    every = Commit.new("rebuild", added=target.segments)
    every = every.at_version(target.version)
    schema = sample_schema(base.schema_at(target))
    changed = current is None or schema != sample.schema_at(current)
    if current is not None and changed:
        sample.spec = sample.spec.with_schema(schema)
    # written as they come, beyond HOLD_ROWS: a large dataset's sample is not held whole
    written = SampleRows(sample, schema if changed else None, hold=HOLD_ROWS, live=partial(live_rows, strata=strata))
    _write_added(base, target, [every], state, columns, written)
    removed = tuple(s.segment for s in current.segments) if current is not None else ()
    _commit(sample, settings, current, strata, target.version, written, removed,
            schema=schema if changed else None)


def _commit(sample: Dataset, settings: SampleSettings, read: Snapshot | None, strata: Strata,
            base_version: int, rows: list[pa.Table] | SampleRows, removed: tuple[str, ...],
            schema: pa.Schema | None = None, properties: dict[str, str] | None = None) -> None:
    """Commit the sample's ``rows`` (or those written already), its strata's changes (as
    ``properties`` if made already) and the base version it represents; ``removed``: its
    segments the commit replaces."""
    from colonnade.schema.types import schema_to_json

    if isinstance(rows, SampleRows):
        written = rows
    else:
        written = SampleRows(sample, schema)
        for table in rows:
            written.write(table)
    entries = written.finish()
    commit = Commit.new("sample", info={"base_version": base_version}, commit_id=written.id,
                        schema=schema_to_json(schema) if schema is not None else None)
    properties = dict(strata.changed_properties() if properties is None else properties)
    if read is None or SAMPLE_PROPERTY not in read.properties:
        properties[SAMPLE_PROPERTY] = settings.to_json()
    actions: list[Any] = [Txn(txn_id(settings.base), base_version), SetProperties(properties)]
    if removed:
        actions.append(RemoveSegments(removed))
    if entries:
        actions.append(AddSegments(tuple(entries)))
    reads = replace(ReadSet.blind(0 if read is None else read.version), exclusive=True,
                    removes=frozenset(removed))
    # the sample as read (just now, or when its rows were admitted) is taken as its latest: a
    # commit to it since makes the record's put-if-absent fail, and this commit conflict
    done = sample.commit(commit.with_actions(*actions), reads=reads, latest=read)
    strata.committed()
    if done.version is not None:
        _COMMITTED[sample] = (done.version, strata)
    if schema is not None:
        sample._schema_committed(written.spec)
