"""The rows a sample takes from appended rows: batches admitted into its strata together
(:class:`Admitter`), the sample rows they give (:func:`sample_rows`), and those rows written
ahead of the commit that records them (:class:`SampleRows`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from colonnade.config import WriteSettings
from colonnade.encoding.chunk import DICTIONARY_RATIO
from colonnade.schema.spec import DatasetSpec
from colonnade.table.commits import Commit, SegmentEntry
from colonnade.table.row_keys import Keys
from colonnade.table.strata_compiled import string_indices
from colonnade.table.writer import SegmentWriter, write_segment

if TYPE_CHECKING:
    from colonnade.table.dataset import Dataset
    from colonnade.table.sample import SampleState
    from colonnade.table.strata import Strata

STRATUM_COLUMN = "__stratum"
KEY_COLUMN = "__u"
#: Rows admitted at a time (the strata above the floor are merged once per admission).
ADMIT_ROWS = 1 << 19
#: Columns of sample rows stored plain: a stratum id column is no smaller as a dictionary (the
#: ad impressions' samples: 36 KB plain, 42 KB as a dictionary per 20K rows), only slower to write.
STORED_PLAIN = (STRATUM_COLUMN,)
#: The zstd level of the sample rows an append admits (the base's compaction rewrites them).
APPENDED_ZSTD_LEVEL = 1
#: Sample rows an append holds until its last admission (beyond, it writes the live ones).
APPENDED_HOLD_ROWS = 1 << 20
#: Rows of an append's batches its sample rows may pin before they are copied out of them.
PICKED_INPUT_ROWS = 1 << 21
#: Rows taken from batches: the batches, the rows' strata ids, their positions and keys.
Pick = Callable[[list[pa.RecordBatch], np.ndarray, np.ndarray, np.ndarray], None]
#: Values a dictionary shared by an append's batches grows to before a batch starts another.
SHARED_DICTIONARY = 1 << 16


class Held:
    """Batches held until :data:`ADMIT_ROWS` rows or more are (admitted together, they merge
    the strata above the floor once)."""

    def __init__(self, rows: int = ADMIT_ROWS) -> None:
        self.batches: list[pa.RecordBatch] = []
        self.rows = 0
        self._enough = rows

    def add(self, batch: pa.RecordBatch) -> list[pa.RecordBatch] | None:
        """Hold ``batch``; every batch held, once there are enough."""
        self.batches.append(batch)
        self.rows += batch.num_rows
        return self.take() if self.rows >= self._enough else None

    def take(self) -> list[pa.RecordBatch]:
        out, self.batches, self.rows = self.batches, [], 0
        return out


class KeyEncoding:
    """The string key columns of an append's batches, dictionary-encoded once as they come: the
    strata read their ids off the dictionaries, and the writer stores the dictionaries (a
    segment keeps the values it uses) instead of hashing the same columns again. Decided on the
    first batch, for every batch of the append (its batches share a schema): a key column not
    used to partition or sort the dataset whose first batch has few distinct values.

    The batches of an append share one dictionary per column (looked up, not built again, per
    batch; grown when a batch brings new values, the earlier values keeping their indices), so
    the strata map it to their ids once and sample rows taken from several batches concatenate
    without unifying dictionaries."""

    def __init__(self, spec: DatasetSpec, keys: Iterable[str]) -> None:
        ordering = {s for t in spec.partition_by for s in t.sources}
        for key in spec.sort_keys():
            ordering.update([key] if isinstance(key, str) else key.sources)
        self._keys = [k for k in dict.fromkeys(keys) if k not in ordering]
        self._columns: list[int] | None = None
        self._dictionaries: dict[int, tuple[pa.Array, pc.SetLookupOptions]] = {}

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        first: dict[int, pa.Array] = {}
        if self._columns is None:
            for name in self._keys:
                at = batch.schema.get_field_index(name)
                if at >= 0 and (pa.types.is_string(batch.schema.field(at).type)
                                or pa.types.is_large_string(batch.schema.field(at).type)):
                    encoded = pc.dictionary_encode(batch.column(at))
                    if len(encoded.dictionary) <= DICTIONARY_RATIO * batch.num_rows:
                        first[at] = encoded
                        self._dictionaries[at] = (encoded.dictionary, pc.SetLookupOptions(encoded.dictionary))
            self._columns = list(first)
        for at in self._columns:
            column = batch.column(at)
            if not pa.types.is_dictionary(column.type):
                encoded = first[at] if at in first else self._encode(at, column)
                batch = batch.set_column(at, batch.schema.field(at).with_type(encoded.type), encoded)
        return batch

    def _encode(self, at: int, column: pa.Array) -> pa.DictionaryArray:
        dictionary, lookup = self._dictionaries[at]
        indices = string_indices(column, dictionary)  # None if a value is new (or not compiled)
        if indices is None:
            indices = pc.index_in(column, options=lookup)
        if indices.null_count > column.null_count:  # values not met before: the dictionary grows
            new = pc.unique(column.filter(pc.and_(pc.is_null(indices), pc.is_valid(column))))
            if len(dictionary) + len(new) > max(SHARED_DICTIONARY, len(column)):
                encoded = pc.dictionary_encode(column)  # many values: start a new one here
                self._dictionaries[at] = (encoded.dictionary, pc.SetLookupOptions(encoded.dictionary))
                return encoded
            dictionary = pa.concat_arrays([dictionary, new.cast(dictionary.type)])
            self._dictionaries[at] = (dictionary, pc.SetLookupOptions(dictionary))
            indices = pc.index_in(column, options=self._dictionaries[at][1])
        return pa.DictionaryArray.from_arrays(indices, dictionary)


class Admitter:
    """Rows admitted into one sample's strata, :data:`ADMIT_ROWS` or more at a time (each
    admission merges the strata above the floor once), and the sample rows they gave."""

    def __init__(self, state: SampleState, rng: np.random.Generator, columns: Sequence[str],
                 sink: Callable[[pa.Table], None] | None = None, pick: Pick | None = None) -> None:
        self.state = state
        self.rng = rng
        self.columns = list(columns)
        self.rows: list[pa.Table] = []  # unless given to ``sink`` as they come
        self._sink = sink if sink is not None else self.rows.append
        #: given the rows taken (batches, stratum ids, positions, keys) instead of ``sink``
        #: their copies, to copy later only those still live
        self._pick = pick
        self._held = Held()

    def add(self, batch: pa.RecordBatch) -> None:
        full = self._held.add(batch)
        if full:
            self.admit(full)

    def flush(self) -> None:
        self.admit(self._held.take())

    def admit(self, batches: list[pa.RecordBatch]) -> None:
        batches = [b for b in batches if b.num_rows]
        if not batches:
            return
        strata = self.state.strata
        ids = strata.ids(pa.Table.from_batches(batches), self.state.settings.on)
        positions, keys = strata.admit(ids, Keys.drawn(len(ids), self.rng))
        if not len(positions):
            return
        if self._pick is not None:
            self._pick(batches, ids[positions], positions, keys)
        else:
            self._sink(sample_rows(batches, ids[positions], positions, keys, self.columns))


def sample_rows(batches: list[pa.RecordBatch], ids: np.ndarray, positions: np.ndarray,
                 keys: np.ndarray, columns: Sequence[str]) -> pa.Table:
    """Rows ``positions`` (sorted) of ``batches`` taken as one, with their strata ``ids`` and
    ``keys``."""
    starts = np.cumsum([0, *(b.num_rows for b in batches)])
    cuts = np.searchsorted(positions, starts)
    parts = [batch.select(list(columns)).take(pa.array(positions[lo:hi] - start))
             for batch, start, lo, hi in zip(batches, starts, cuts, cuts[1:], strict=False) if hi > lo]
    picked = pa.Table.from_batches(parts)
    return picked.append_column(STRATUM_COLUMN, pa.array(ids, pa.int64())) \
        .append_column(KEY_COLUMN, pa.array(keys.astype(np.float32)))  # keys are single (row_keys)


class SampleRows:
    """The rows of one sample commit, written as they come (a writer's segments are stored
    under the id of the commit that will record them). Up to ``hold`` rows (default: a
    segment's) are held first, and only the live ones among them written (``live``, applied
    when they are written: thresholds only fall, so a row dead then stays dead); what is held
    at the end is stored as one segment on the calling thread when it fits in one. ``level``:
    the zstd level (default: the chunk format's)."""

    def __init__(self, sample: Dataset, schema: pa.Schema | None = None, hold: int | None = None,
                 live: Callable[[pa.Table], pa.Table] | None = None, level: int | None = None) -> None:
        self.id = Commit.new("sample").id
        self.store = sample.store
        self.spec = sample.spec if schema is None else sample.spec.with_schema(schema)
        self._settings = WriteSettings.from_env(segment_rows=self.spec.segment_rows,
                                                compression=self.spec.compression,
                                                compression_level=level if self.spec.compression == "zstd" else None)
        ordered = bool(self.spec.partition_by or self.spec.sort_by)
        self._hold = 0 if ordered else self._settings.segment_rows if hold is None else hold
        self._live = live
        self._key_field = self.spec.schema.field(KEY_COLUMN)  # float32, or double in older samples
        self._writer: SegmentWriter | None = None
        self._held: list[pa.Table] = []
        self._held_rows = 0
        self._entries: list[SegmentEntry] | None = None

    def write(self, table: pa.Table) -> None:
        at = table.schema.get_field_index(KEY_COLUMN)
        if table.schema.field(at).type != self._key_field.type:  # rows of a sample with double keys
            table = table.set_column(at, self._key_field, table.column(at).cast(self._key_field.type))
        self._held.append(table)
        self._held_rows += table.num_rows
        if self._writer is not None or self._held_rows >= max(self._hold, 1):
            self._spill(self._take())

    def _take(self) -> list[pa.Table]:
        held, self._held, self._held_rows = self._held, [], 0
        return [self._live(t) for t in held] if self._live is not None else held

    def _spill(self, tables: list[pa.Table]) -> None:
        """``tables`` written through a segment writer (started the first time)."""
        if self._writer is None:
            self._writer = SegmentWriter(self.store, self.spec, self.id, self._settings,
                                         plain=STORED_PLAIN)
        try:
            for table in tables:
                for batch in table.to_batches():
                    if batch.num_rows:
                        self._writer.write(batch)
        except BaseException:
            self._writer.abort()
            raise

    def finish(self) -> list[SegmentEntry]:
        """Every row written stored: their segments (once; later calls return the same)."""
        if self._entries is None:
            tables = [t for t in self._take() if t.num_rows]
            if self._writer is None and self._hold and sum(t.num_rows for t in tables) <= self._settings.segment_rows:
                self._entries = [write_segment(self.store, self.spec, self.id,
                                               pa.concat_tables(tables).combine_chunks(),
                                               self._settings, STORED_PLAIN)] if tables else []
                return self._entries
            self._spill(tables)
            assert self._writer is not None
            try:
                self._entries = self._writer.finish()
            except BaseException:
                self._writer.abort()
                raise
        return self._entries

    def abort(self) -> None:
        """Never committed: what was stored stays orphaned until vacuum."""
        self._held = []
        if self._writer is not None:
            self._writer.abort()


def live_rows(table: pa.Table, strata: Strata) -> pa.Table:
    """The rows of ``table`` (sample rows) still live in ``strata``."""
    if table.num_rows == 0:
        return table
    live = strata.live(table.column(STRATUM_COLUMN).to_numpy(), table.column(KEY_COLUMN).to_numpy())
    return table if live.all() else table.filter(pa.array(live))


class AppendedRows:
    """One sample's share of an append's :class:`~colonnade.table.sample.Admission`: its
    admitter and the rows it took, copied out of the append's batches once its last admission
    is done (only those still live: early in a stream, a later admission evicts many), or
    sooner if the batches they pin hold more than :data:`PICKED_INPUT_ROWS` rows."""

    def __init__(self, sample: Dataset, state: SampleState, rng: np.random.Generator,
                 columns: Sequence[str]) -> None:
        self.sample = sample
        self.columns = list(columns)
        self.admitter = Admitter(state, rng, columns, pick=self.pick)
        self.rows: SampleRows | None = None
        #: what its commit records of the strata, once the last rows are admitted
        self.properties: dict[str, str] | None = None
        self._picks: list[tuple[list[pa.RecordBatch], np.ndarray, np.ndarray, np.ndarray]] = []
        self._pinned = 0

    def pick(self, batches: list[pa.RecordBatch], ids: np.ndarray, positions: np.ndarray,
             keys: np.ndarray) -> None:
        self._picks.append((batches, ids, positions, keys))
        self._pinned += sum(b.num_rows for b in batches)
        if self._pinned > PICKED_INPUT_ROWS:
            self.take()

    def take(self) -> None:
        """The live rows picked so far copied and written."""
        picks, self._picks, self._pinned = self._picks, [], 0
        strata = self.admitter.state.strata
        for batches, ids, positions, keys in picks:
            live = strata.live(ids, keys)
            if not live.any():
                continue
            if not live.all():
                ids, positions, keys = ids[live], positions[live], keys[live]
            if self.rows is None:
                # held (up to APPENDED_HOLD_ROWS) until the append's last admission: rows
                # a later one evicted are not written
                self.rows = SampleRows(self.sample, hold=APPENDED_HOLD_ROWS, level=APPENDED_ZSTD_LEVEL,
                                       live=partial(live_rows, strata=strata))
            self.rows.write(sample_rows(batches, ids, positions, keys, self.columns))

    def drop(self) -> None:
        self._picks, self._pinned = [], 0
        if self.rows is not None:
            self.rows.abort()
