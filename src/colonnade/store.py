"""Store: the entry point of the Python API — datasets of one store, and SQL over them."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Generator, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa
from duckdb import DuckDBPyConnection

from colonnade.config import default_store_uri, parse_store_uri
from colonnade.errors import (
    DatasetExistsError,
    DatasetNotFoundError,
    QueryError,
    SchemaError,
)
from colonnade.query.adapter import ColonnadeArrowDataset, use_where
from colonnade.query.answers import Answers
from colonnade.query.metadata import METADATA_TABLES, metadata_table
from colonnade.query.session import Sessions, query_names
from colonnade.query.where import statement_kinds
from colonnade.schema.spec import DatasetSpec
from colonnade.statements import EXTENDED, Statement, _one_line, split_statements
from colonnade.storage import open_store
from colonnade.storage.base import ChunkStore
from colonnade.table.dataset import Dataset

if TYPE_CHECKING:
    from colonnade.geo.tiles import TileLayer
    from colonnade.ingest.pipeline import IngestResult
    from colonnade.samples import SampleInfo
    from colonnade.table.commits import Snapshot

#: What one query read: {(dataset, version asked for): (its Dataset, its snapshot)}.
Reads = dict[tuple[str, "int | None"], "tuple[Dataset, Snapshot]"]

#: Rows per batch of a streamed answer (:meth:`Store.sql_reader`).
SQL_BATCH_ROWS = 65_536


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

    def _repr_html_(self) -> str:
        from colonnade.notebook import explain_html

        return explain_html(self)


class Store:
    """A Colonnade store: ``colonnade.connect(uri)`` returns one."""

    def __init__(self, chunk_store: ChunkStore) -> None:
        self.chunk_store = chunk_store
        # one DuckDB database for sql()/explain(), a cursor per thread (queries run at once)
        self._sessions = Sessions()
        # datasets as read by SQL, by stored name: (spec as stored, Dataset keeping its latest
        # snapshot, extended by the commits made since on each query)
        self._readers: dict[str, tuple[Any, Dataset]] = {}
        self._readers_lock = threading.Lock()
        self._answers = Answers(self)  # answers from statistics and partial aggregates
        # {lowercase: stored name} of the datasets SQL can name, as last listed: queries use it
        # while it names what they read (see ``_sql_datasets``)
        self._listed: dict[str, str] | None = None
        # samples (see colonnade.samples): each one's state as last read, by name, and its live
        # rows as DuckDB tables, by name: [(sample version, table tag)]
        self._sample_states: dict[str, tuple[Any, Any, pa.Table]] = {}
        self._live_lock = threading.Lock()
        self._live_tables: dict[str, list[tuple[int, str]]] = {}
        self._sample_values: dict[str, tuple[Any, pa.Table]] = {}  # strata values, by sample

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
        self._sessions.close()
        self.chunk_store.close()

    # -- datasets
    def create_dataset(self, name: str, schema: pa.Schema, partition_by: str | list[str] | None = None,
                       sort_by: str | list[str] | None = None, segment_rows: int | None = None,
                       compression: str | None = None, exist_ok: bool = False) -> Dataset:
        """Create a dataset (recorded at once, before any data).

        With ``exist_ok`` an existing dataset of that name is returned instead, provided it has
        the schema and every option given here; otherwise SchemaError names the differences.
        Names are one name whatever their case (as in SQL): ``Trips`` next to ``trips`` is
        refused with DatasetExistsError."""
        ds = self.new_dataset(name, schema, partition_by, sort_by, segment_rows, compression)
        try:
            self.chunk_store.create_dataset(name, ds.spec.to_json())
        except DatasetExistsError as exc:
            if not exist_ok or exc.existing != name:
                raise
            existing = self.dataset(name)
            asked = ("schema", "partition_by", "sort_by",
                     *(k for k, v in (("segment_rows", segment_rows), ("compression", compression))
                       if v is not None))
            differences = existing.spec.differences(ds.spec, asked)
            if differences:
                raise SchemaError(f"dataset {name!r} exists with {'; '.join(differences)}") from None
            return existing
        ds.recorded = True  # it is: its commits need not record it again
        return ds

    def new_dataset(self, name: str, schema: pa.Schema, partition_by: str | list[str] | None = None,
                    sort_by: str | list[str] | None = None, segment_rows: int | None = None,
                    compression: str | None = None) -> Dataset:
        """A dataset that is recorded in the store by its first commit: until then it does not
        exist for anyone else, so a first append that fails leaves nothing behind. A concurrent
        writer that recorded the same name first wins; ours then commits into it only if it
        has the same spec."""
        _check_name(name)
        spec = DatasetSpec.create(name, schema, partition_by, sort_by, segment_rows=segment_rows,
                                  compression=compression, created=time.time())
        return Dataset(self.chunk_store, spec, recorded=False)

    def tiles(self, layer: str, tile_size: int | None = None, dtype: str | None = None,
              curve: str | None = None, fill: float | None = None,
              tiles_per_segment: int | None = None, codec: str | None = None, create: bool = True) -> TileLayer:
        """Tile layer ``layer`` (see :mod:`colonnade.geo.tiles`), created when missing (unless
        ``create`` is false: TileError) with the settings given (defaults: 256-cell tiles of
        float32, Hilbert order, fill 0, 64 tiles a segment, each tile compressed alone with LZ4 HC). An existing layer must have every setting given here: TileError names the
        difference; a dataset of that name that is not a tile layer is refused too."""
        from colonnade.geo.tiles import (
            TILE_SCHEMA,
            LayerSettings,
            TileError,
            TileLayer,
            create_layer,
            layer_settings,
            layer_spec,
        )

        asked: dict[str, Any] = {k: v for k, v in (("tile_size", tile_size), ("dtype", dtype), ("curve", curve), ("fill", fill),
                                   ("tiles_per_segment", tiles_per_segment), ("codec", codec)) if v is not None}
        if layer in self:
            ds = self.dataset(layer)
            found = layer_settings(ds)
            if found is None:
                raise TileError(f"dataset {ds.name!r} is not a tile layer")
            differ = [f"{k} {getattr(found, k)!r} (asked for {v!r})" for k, v in asked.items()
                      if getattr(found, k) != v]
            if differ:
                raise TileError(f"tile layer {ds.name!r} exists with {'; '.join(differ)}")
            return TileLayer(ds, found)
        if not create:
            raise TileError(f"no tile layer {layer!r} in {self.uri}")
        settings = LayerSettings(**asked)
        settings.check()
        ds = self.new_dataset(layer, TILE_SCHEMA, **layer_spec(settings))
        create_layer(ds, settings)
        return TileLayer(ds, settings)

    def tile_layers(self) -> list[str]:
        """The datasets that are tile layers."""
        from colonnade.geo.tiles import layer_settings

        return [name for name in self.datasets() if layer_settings(self.dataset(name)) is not None]

    def ingest(self, name: str, paths: str | Path | Iterable[str | Path], workers: int = 1,
               **options: Any) -> IngestResult:
        """Ingest files (CSV, TSV, Parquet, Arrow IPC) into dataset ``name``, created from the
        first file's schema if absent; each file is one commit, and a file ingested before is
        skipped unless ``force=True``. With ``workers`` ≥ 2, that many processes read and write
        the files and the whole input set is one commit (re-running it adds nothing).
        ``options`` are those of :func:`colonnade.ingest.ingest` (``partition_by``, ``sort_by``,
        ``schema_mode``, ``on_error``, ``progress``, ...)."""
        from colonnade.ingest.pipeline import ingest

        return ingest(self, name, paths, workers=workers, **options)

    def resolve(self, name: str) -> str:
        """The stored name of dataset ``name``, matched as SQL matches names (ignoring case);
        DatasetNotFoundError if there is none."""
        try:
            self.chunk_store.get_dataset(name)
            return name
        except DatasetNotFoundError:
            pass
        matches = [n for n in self.datasets() if n.lower() == name.lower()]
        if len(matches) > 1:  # only in stores written before names were case-insensitive
            raise SchemaError(f"dataset name {name!r} is ambiguous: the store has "
                              f"{' and '.join(map(repr, matches))}; drop one of them")
        if not matches:
            raise DatasetNotFoundError(name)
        return matches[0]

    def dataset(self, name: str) -> Dataset:
        spec = DatasetSpec.from_json(self.chunk_store.get_dataset(self.resolve(name)))
        return Dataset(self.chunk_store, spec)

    def datasets(self) -> list[str]:
        return self.chunk_store.list_datasets()

    def __contains__(self, name: str) -> bool:
        try:
            self.resolve(name)
            return True
        except DatasetNotFoundError:
            return False

    def drop_dataset(self, name: str) -> None:
        """Drop dataset ``name`` and its samples."""
        from colonnade.table.sample import sample_names

        stored = self.resolve(name)
        try:
            samples = sample_names(self.dataset(stored).snapshot())
        except Exception:  # noqa: BLE001 - one that can't be read is dropped all the same
            samples = []
        self.chunk_store.drop_dataset(stored)
        for sample in samples:
            try:
                self.chunk_store.drop_dataset(sample)
            except DatasetNotFoundError:
                pass

    def reclaim_space(self) -> None:
        """Give the space of dropped and vacuumed data back to the file system now (the
        embedded store; Cassandra frees it when it compacts)."""
        self.chunk_store.reclaim()

    def disk_bytes(self) -> int | None:
        """Bytes the store takes on disk, when the store can tell (the embedded store's file)."""
        return self.chunk_store.disk_bytes()

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

    def _reader(self, stored: str) -> Dataset:
        """Dataset ``stored`` (its exact name) as SQL reads it: one object per dataset, so its
        latest snapshot is extended by new commits instead of read again; a new object when the
        stored spec changed (schema merged, dataset dropped and created again).
        DatasetNotFoundError when it is gone."""
        spec = self.chunk_store.get_dataset(stored)
        with self._readers_lock:
            cached = self._readers.get(stored)
        if cached is not None and cached[0] == spec:
            return cached[1]
        ds = Dataset(self.chunk_store, DatasetSpec.from_json(spec))
        with self._readers_lock:
            self._readers[stored] = (spec, ds)
        return ds

    def _known(self, stored: str) -> Dataset:
        """The Dataset object SQL reads ``stored`` through, as last read (no store read when
        there is one): for a snapshot of it read already in the same query."""
        with self._readers_lock:
            cached = self._readers.get(stored)
        return cached[1] if cached is not None else self._reader(stored)

    def _read(self, stored: str, version: int | None, reads: Reads | None = None) -> tuple[Dataset, Snapshot]:
        """Dataset ``stored`` as SQL reads it (:meth:`_reader`) and its snapshot at ``version``
        (default: the latest). The latest of a dataset read before costs one read of the log,
        not a catalog read as well: that read shows whether it is still the dataset read then
        (:meth:`Dataset.followed`). ``reads`` holds what one query read already (its answer
        from statistics is tried on the snapshot its scan then reads). DatasetNotFoundError
        when it is gone."""
        if reads is not None and (stored, version) in reads:
            return reads[stored, version]
        found = self._read_now(stored, version)
        if reads is not None:
            reads[stored, version] = found
        return found

    def _read_now(self, stored: str, version: int | None) -> tuple[Dataset, Snapshot]:
        if version is None:
            with self._readers_lock:
                cached = self._readers.get(stored)
            snapshot = None if cached is None else cached[1].followed()
            if cached is not None and snapshot is not None:
                return cached[1], snapshot
        ds = self._reader(stored)
        return ds, ds.snapshot(version)

    def _sql_datasets(self, fresh: bool) -> dict[str, str]:
        """{lowercase: stored name} of the datasets SQL can name: listed again when ``fresh``,
        else as last listed. A kept listing is safe for the names it holds: no dataset can be
        created beside one whose name differs only in case, and one dropped since is found gone
        when it is read (the caller then lists again); a name it lacks is listed again."""
        listed = None if fresh else self._listed
        if listed is None:
            listed = self._listed = {n.lower(): n for n in _sql_names(self.datasets())}
        return listed

    def _tables(self, names: set[str] | None, fresh: bool = False) -> dict[str, tuple[str, str | None]]:
        """What to register for the names a query reads: {name to register: (dataset, metadata
        table kind or None)}, names matched as SQL matches them (ignoring case); every dataset
        when the names are unknown. The datasets as last listed unless ``fresh`` or a name is
        not among them (a point lookup pays no listing)."""
        out: dict[str, tuple[str, str | None]] = {}
        by_lower = self._sql_datasets(fresh or names is None)
        if names is None:
            return {n: (n, None) for n in by_lower.values()}
        for name in names:
            stored = by_lower.get(name.lower())
            if stored is not None:
                out[stored] = (stored, None)
                continue
            base, sep, kind = name.rpartition("$")
            stored = by_lower.get(base.lower())
            if sep and stored is not None and kind.lower() in METADATA_TABLES:
                out[f"{stored}${kind.lower()}"] = (stored, kind.lower())
            elif not fresh:  # created since the listing, or not a dataset (a CTE, a DuckDB table)
                return self._tables(names, fresh=True)
        return out

    def _extended(self, query: str, version: int | None, versions: dict[str, int] | None
                  ) -> pa.Table | None:
        """The answer of a statement DuckDB doesn't know: a query ending in ``WITH ERROR``,
        ``CREATE SAMPLE TABLE`` or ``DROP SAMPLE TABLE`` (see :mod:`colonnade.samples`)."""
        if not EXTENDED.search(query):
            return None
        from colonnade.samples import answer, statement

        table = statement(self, query)
        if table is not None:
            return table
        found = answer(self, query, version, versions)
        return None if found is None else found.table

    # -- samples (see colonnade.samples)
    def create_sample(self, dataset: str, on: str | list[str], fraction: float,
                      name: str | None = None, min_per_stratum: int = 50,
                      seed: int | None = None) -> SampleInfo:
        """Build a sample of ``dataset`` stratified on columns ``on`` (a list or ``"a,b"``):
        every stratum keeps at least ``min_per_stratum`` rows (all, if it has fewer) and about
        ``fraction`` of them; the sample is then kept current by every commit of the dataset.
        Queries ending in ``WITH ERROR e`` use it (default name: ``<dataset>_by_<columns>``)."""
        from colonnade.samples import create

        return create(self, dataset, on, fraction, name, min_per_stratum, seed)

    def samples(self, dataset: str | None = None) -> list[SampleInfo]:
        """The samples of ``dataset`` (of every dataset by default)."""
        from colonnade.samples import samples

        return samples(self, dataset)

    def drop_sample(self, name: str) -> None:
        from colonnade.samples import drop

        drop(self, name)

    @contextmanager
    def _connection(self, query: str, version: int | None, versions: dict[str, int] | None,
                    reads: Reads | None = None) -> Iterator[tuple[DuckDBPyConnection, dict[str, ColonnadeArrowDataset]]]:
        """This thread's DuckDB cursor with the datasets (and metadata tables) ``query`` reads
        registered, each at its pinned version (``versions``, else ``version``, else latest)."""
        pins = {self.resolve(name): v for name, v in (versions or {}).items()}
        with self._sessions.cursor() as cursor:
            con = cursor.con
            names = query_names(con, query, self._sessions.may_hide_scans)
            tables = self._tables(names)
            try:
                read = {stored: self._read(stored, pins.get(stored, version), reads) for stored, _ in tables.values()}
            except DatasetNotFoundError:  # dropped since the listing kept
                tables = self._tables(names, fresh=True)
                read = {stored: self._read(stored, pins.get(stored, version), reads) for stored, _ in tables.values()}
            _note_statements(self._sessions, con, query)
            # names DuckDB folds like it (a dataset dropped and created again as `A`, once `a`)
            wanted = {n.lower() for n in tables}
            for stale in [n for n in cursor.registered if n.lower() not in wanted]:
                con.unregister(stale)
            registered: dict[str, ColonnadeArrowDataset] = {}
            kept = cursor.registered
            cursor.registered = {}
            for register_as, (stored, kind) in tables.items():
                ds, snapshot = read[stored]
                if kind is None:
                    adapter = kept.get(register_as)
                    if isinstance(adapter, ColonnadeArrowDataset) and adapter.reads(ds, snapshot):
                        adapter.reset()  # the same version as this cursor's last query: registered
                    else:
                        adapter = ColonnadeArrowDataset(ds, snapshot)
                        con.register(register_as, adapter)
                    registered[stored] = cursor.registered[register_as] = adapter
                else:
                    table = cursor.registered[register_as] = metadata_table(ds, snapshot, kind)
                    con.register(register_as, table)
            yield con, registered

    def sql(self, query: str, version: int | None = None, versions: dict[str, int] | None = None) -> pa.Table:
        """Run a query through DuckDB; the answer as an Arrow table.

        ``version`` pins every dataset the query reads at that version (``versions`` per
        dataset, by name; an unknown name is DatasetNotFoundError, a version the dataset does
        not have VersionNotFoundError). Queries from several threads run at once."""
        extended = self._extended(query, version, versions)
        if extended is not None:
            return extended
        reads: Reads = {}
        answered = self._answers.find(query, version, versions, reads)
        if answered is not None:
            return answered.table
        with self._connection(query, version, versions, reads) as (con, registered):
            use_where(con, query, registered, self._sessions.may_hide_scans)
            try:
                return con.sql(query).to_arrow_table()
            except duckdb.Error as exc:
                _reraise_scan_error(registered)
                raise QueryError(_one_line(exc)) from None

    @contextmanager
    def sql_reader(self, query: str, version: int | None = None, versions: dict[str, int] | None = None,
                   batch_rows: int = SQL_BATCH_ROWS) -> Iterator[pa.RecordBatchReader]:
        """Run a query through DuckDB and stream its answer, batch by batch, without holding it
        all in memory: ``with store.sql_reader(q) as reader: for batch in reader: ...``.

        The reader is valid inside the ``with`` block (which holds this thread's DuckDB cursor:
        a query of this thread inside it runs on a cursor of its own); leaving the block early
        stops the query. Errors while reading are raised as :meth:`sql` raises them."""
        table = self._extended(query, version, versions)
        reads: Reads = {}
        if table is None:
            answered = self._answers.find(query, version, versions, reads)
            table = answered.table if answered is not None else None
        if table is not None:
            yield pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=batch_rows))
            return
        with self._connection(query, version, versions, reads) as (con, registered):
            try:
                reader = con.sql(query).to_arrow_reader(batch_rows)
            except duckdb.Error as exc:
                _reraise_scan_error(registered)
                raise QueryError(_one_line(exc)) from None
            batches = _checked_batches(reader, registered)
            try:
                yield pa.RecordBatchReader.from_batches(reader.schema, batches)
            finally:
                batches.close()
                reader.close()

    def _repr_html_(self) -> str:
        from colonnade.notebook import store_html

        return store_html(self)

    def explain(self, query: str, version: int | None = None) -> Explain:
        """Run a query and report what each dataset scan pruned and read."""
        start = time.perf_counter()
        if EXTENDED.search(query):
            from colonnade.samples import answer, explain_text

            found = answer(self, query, version)
            if found is not None:
                return Explain(query, explain_text(found), {}, found.table.num_rows,
                               time.perf_counter() - start)
        reads: Reads = {}
        answered = self._answers.find(query, version, None, reads)
        if answered is not None:
            return Explain(query, f"{answered.how}: {answered.sql}", {answered.dataset: [answered.metrics]},
                           answered.table.num_rows, time.perf_counter() - start)
        with self._connection(query, version, None, reads) as (con, registered):
            try:
                plan = "\n".join(str(r[1]) for r in con.sql("EXPLAIN " + query).fetchall())
                start = time.perf_counter()
                use_where(con, query, registered, self._sessions.may_hide_scans)
                table = con.sql(query).to_arrow_table()
                seconds = time.perf_counter() - start
            except duckdb.Error as exc:
                _reraise_scan_error(registered)
                raise QueryError(_one_line(exc)) from None
            scans = {name: [m.to_dict() for m in a.scans] for name, a in registered.items() if a.scans}
            warnings = [w for a in registered.values() for w in a.warnings(con)]
            return Explain(query, plan, scans, table.num_rows, seconds, list(dict.fromkeys(warnings)))


def _note_statements(sessions: Sessions, con: DuckDBPyConnection, query: str) -> None:
    """Tell the sessions what kinds of statement ``query`` holds (views and macros it may
    define change how later queries are read)."""
    try:
        sessions.noted(statement_kinds(con, query))
    except duckdb.Error:
        pass  # a query DuckDB can't parse fails by itself


def _checked_batches(reader: pa.RecordBatchReader,
                     registered: dict[str, ColonnadeArrowDataset]) -> Generator[pa.RecordBatch, None, None]:
    """``reader``'s batches, with a failure of the running query raised as ``sql`` raises it
    (DuckDB reports the errors of a streamed answer as Arrow errors or plain ``OSError``)."""
    try:
        yield from reader
    except (duckdb.Error, pa.ArrowException, OSError) as exc:
        _reraise_scan_error(registered)
        raise QueryError(_one_line(exc)) from None


def _reraise_scan_error(registered: dict[str, ColonnadeArrowDataset]) -> None:
    for adapter in registered.values():
        if adapter.errors:
            raise adapter.errors[0]


def _sql_names(names: list[str]) -> list[str]:
    """The dataset names SQL can tell apart: names that differ only in case (stores written
    before such names were refused) are left out, so a query naming one fails instead of
    silently reading the other."""
    folded: dict[str, int] = {}
    for n in names:
        folded[n.lower()] = folded.get(n.lower(), 0) + 1
    return [n for n in names if folded[n.lower()] == 1]


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def _check_name(name: str) -> None:
    if not _NAME.match(name):
        raise SchemaError(f"invalid dataset name {name!r}: use letters, digits and _, starting with a letter")


def connect(uri: str | None = None, cache_mb: int | None = None) -> Store:
    """Open a store: ``sqlite:///path.db`` or a path (default ``$COLONNADE_STORE`` or
    ``./colonnade.db``), or ``cassandra://host[,host][:port]/keyspace?options``.

    ``cache_mb`` keeps up to that many MiB of decoded column chunks in memory for the scans
    of this store object (default ``$COLONNADE_CACHE_MB``, else an eighth of the machine's
    memory up to 8 GiB; 0: none; see :mod:`colonnade.table.cache`)."""
    chunk_store = open_store(str(parse_store_uri(uri).display) if uri is None else uri)
    if cache_mb is not None:
        chunk_store.cache_mb = cache_mb  # type: ignore[attr-defined]
    return Store(chunk_store)


__all__ = ["Explain", "Statement", "Store", "connect", "default_store_uri", "split_statements"]
