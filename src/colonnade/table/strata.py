"""The strata of a stratified sample and the rule that decides which rows it keeps.

Every row of the base dataset gets a key ``u`` drawn uniformly from [0, 1) when the sample sees
it. Stratum ``h`` (one value of the sample's query column set) keeps the rows whose key is at
most its threshold ``t_h = max(F, u_(K))``, where ``u_(K)`` is the K-th smallest key of the
stratum (``t_h = 1`` while the stratum has at most K rows): at least ``min(K, N_h)`` rows, and
a fraction F of a large stratum ("bottom-K ∪ Bernoulli(F)"). Given how many rows it keeps, the
kept rows are a uniform random subset of the stratum (which rows got which key does not decide
how many are kept), so the closed-form estimators of a stratified simple random sample apply.

Appending is exact and incremental: a new row is admitted when its key is at most the current
threshold, and the threshold only falls (to the K-th smallest key, never below F) as the stratum
grows. Rows whose key ends above the new threshold leave the sample logically (readers keep
``__u <= t``); compaction removes them physically. Only a stratum still above the floor F needs
its keys' order, and it holds at most K live rows: their keys are read from the sample's rows
when first needed, then kept in memory. The state is held as arrays indexed by stratum id, and
a batch is admitted with a constant number of passes over its rows (no per-row or per-stratum
Python work but for strata met for the first time).

A deletion removes rows by predicate, independently of the keys: the kept rows of a stratum stay
a uniform subset of its remaining rows, and the threshold stays.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from colonnade.table import strata_compiled as compiled
from colonnade.table.commits import value_from_json, value_to_json
from colonnade.table.live_keys import LiveKeys, ids_of, inserted, ordered, ranges
from colonnade.table.row_keys import Keys

#: The property prefixes under which a sample's commits record its strata: their states in
#: blocks of :data:`BLOCK` strata (``strata:<b>``: the populations, live rows and thresholds of
#: strata ``b·BLOCK`` on, packed, see :func:`_block_text`; earlier samples recorded them as
#: ``{"population": [...], "kept": [...], "threshold": [...]}``), whenever one of them changes
#: (a commit records tens of properties, not one per stratum), and each stratum's key values (once).
BLOCK_PREFIX = "strata:"
VALUES_PREFIX = "stratum-of:"
BLOCK = 256
#: One stratum's state ``[population, kept, threshold]``, as earlier samples recorded it (read;
#: a block recorded since holds the current state of every stratum in it).
STRATUM_PREFIX = "stratum:"


@dataclass
class Stratum:
    """One stratum's state: its key values, base rows ``population``, live sample rows
    ``kept``, threshold, and (while the threshold is above the floor) the live rows' keys,
    read from the sample's rows when first needed (None until then)."""

    id: int
    values: tuple[Any, ...]
    population: int = 0
    kept: int = 0
    threshold: float = 1.0
    keys: list[float] | None = field(default_factory=list, compare=False)


class Strata:
    """Every stratum of a sample (arrays indexed by stratum id), the map from key values to
    ids, and which strata changed (or were created) since loaded."""

    def __init__(self, fraction: float, min_rows: int, strata: Iterable[Stratum] = (),
                 live_keys: Callable[[], tuple[np.ndarray, np.ndarray]] | None = None) -> None:
        self.fraction = fraction
        self.min_rows = min_rows
        given = sorted(strata, key=lambda s: s.id)
        size = given[-1].id + 1 if given else 0
        self.values: list[tuple[Any, ...] | None] = [None] * size
        self.population = np.zeros(size, dtype=np.int64)
        self.kept = np.zeros(size, dtype=np.int64)
        self.threshold = np.ones(size)
        for st in given:
            self.values[st.id] = st.values
            self.population[st.id], self.kept[st.id], self.threshold[st.id] = \
                st.population, st.kept, st.threshold
        self.by_values: dict[tuple[Any, ...], int] = {v: i for i, v in enumerate(self.values) if v is not None}
        self.dirty = np.zeros(size, dtype=bool)
        self.created = np.zeros(size, dtype=bool)
        #: the live keys of the strata above the floor; None until first needed, then read
        #: from the sample's rows (``live_keys``)
        self._live: LiveKeys | None = None
        if not given or all(st.keys is not None for st in given):  # a new sample: no rows yet
            ids = np.array([st.id for st in given for _ in (st.keys or [])], dtype=np.int64)
            keys_ = np.array([k for st in given for k in (st.keys or [])], dtype=np.float64)
            self._live = LiveKeys.of(ids, keys_, size)
        self._live_keys = live_keys
        #: admit with the compiled passes (see :mod:`colonnade.table.strata_compiled`) if built
        self.compiled = compiled.AVAILABLE
        self._columns: list[dict[Any, int]] = []  # per key column: value -> index
        #: per key column: (type, the set of its known values in index order), to look values up
        self._lookups: list[tuple[pa.DataType, pc.SetLookupOptions] | None] = []
        self._sizes: tuple[int, ...] = ()
        self._codes = np.zeros(0, dtype=np.int64)  # combined value indices -> stratum id (-1)
        #: the dictionaries of the key columns last seen (see _dictionary_ids), whether each
        #: had nulls, their values' indices, and every combination's stratum id (-1: none yet)
        self._combos: tuple[list[pa.Array], list[bool], list[np.ndarray], np.ndarray] | None = None

    @classmethod
    def from_properties(cls, properties: dict[str, Any], fraction: float, min_rows: int,
                        live_keys: Callable[[], tuple[np.ndarray, np.ndarray]] | None = None) -> Strata:
        ids, values, singles, blocks = [], [], [], []
        for key, text in properties.items():
            if key.startswith(VALUES_PREFIX):
                ids.append(int(key[len(VALUES_PREFIX):]))
                values.append(text)
            elif key.startswith(BLOCK_PREFIX):
                blocks.append((int(key[len(BLOCK_PREFIX):]), text))
            elif key.startswith(STRATUM_PREFIX):
                singles.append((int(key[len(STRATUM_PREFIX):]), text))
        out = cls(fraction, min_rows, (), live_keys)
        out._live = None  # the live keys are the stored rows' (read when first needed)
        if not ids:
            return out
        # one JSON document per kind: thousands of strata parse in a few milliseconds
        parsed_values = json.loads("[" + ",".join(values) + "]")
        out._grow(max(ids) + 1)
        for id_, v in zip(ids, parsed_values, strict=True):
            found = tuple(value_from_json(x) for x in v)
            out.values[id_] = found
            out.by_values[found] = id_
        if singles:
            at = np.array([i for i, _ in singles], dtype=np.int64)
            states = np.array(json.loads("[" + ",".join(t for _, t in singles) + "]"), dtype=np.float64)
            out.population[at] = states[:, 0].astype(np.int64)
            out.kept[at] = states[:, 1].astype(np.int64)
            out.threshold[at] = states[:, 2]
        for b, text in blocks:
            population, kept, threshold = _block_states(text)
            lo = b * BLOCK
            hi = lo + len(population)
            out._grow(hi)
            out.population[lo:hi] = population
            out.kept[lo:hi] = kept
            out.threshold[lo:hi] = threshold
        return out

    def __len__(self) -> int:
        return len(self.values)

    @property
    def by_id(self) -> dict[int, Stratum]:
        """Every stratum as a :class:`Stratum` (a copy: for reports and tests)."""
        live = self._live_lists()
        return {i: Stratum(i, v, int(self.population[i]), int(self.kept[i]), float(self.threshold[i]),
                           live.get(i, []) if self.threshold[i] > self.fraction else None)
                for i, v in enumerate(self.values) if v is not None}

    def _live_lists(self) -> dict[int, list[float]]:
        if self._live is None:
            return {}
        out: dict[int, list[float]] = {}
        for i, k in zip(self._live.ids.tolist(), self._live.keys.tolist(), strict=True):
            out.setdefault(i, []).append(k)
        return {i: sorted(v) for i, v in out.items()}

    def changed_properties(self) -> dict[str, str]:
        out = {}
        texts: dict[tuple[type, Any], str] = {}  # each key value's JSON (a value is in many strata)
        for i in np.flatnonzero(self.created).tolist():
            parts = []
            for v in self.values[i] or ():
                text = texts.get((type(v), v))
                if text is None:
                    text = texts[(type(v), v)] = json.dumps(value_to_json(v))
                parts.append(text)
            out[f"{VALUES_PREFIX}{i}"] = "[" + ", ".join(parts) + "]"
        for b in np.unique(np.flatnonzero(self.dirty) // BLOCK).tolist():
            lo, hi = b * BLOCK, min((b + 1) * BLOCK, len(self.values))
            out[f"{BLOCK_PREFIX}{b}"] = _block_text(self.population[lo:hi], self.kept[lo:hi],
                                                    self.threshold[lo:hi])
        return out

    def committed(self) -> None:
        """The changes so far are committed."""
        self.dirty[:] = False
        self.created[:] = False

    def mark_all(self) -> None:
        """Record every stratum again (a rebuild)."""
        self.dirty[:] = self.created[:] = np.array([v is not None for v in self.values], dtype=bool)

    def _grow(self, size: int) -> None:
        more = size - len(self.values)
        if more <= 0:
            return
        self.values.extend([None] * more)
        self.population = np.concatenate([self.population, np.zeros(more, dtype=np.int64)])
        self.kept = np.concatenate([self.kept, np.zeros(more, dtype=np.int64)])
        self.threshold = np.concatenate([self.threshold, np.ones(more)])
        self.dirty = np.concatenate([self.dirty, np.zeros(more, dtype=bool)])
        self.created = np.concatenate([self.created, np.zeros(more, dtype=bool)])

    def stratum(self, values: tuple[Any, ...]) -> int:
        """The id of the stratum of ``values``, created (empty) if new."""
        return self.strata([values])[0]

    def strata(self, keys: Sequence[tuple[Any, ...]]) -> list[int]:
        """The id of the stratum of each of ``keys``, those new created (empty), the arrays
        grown once (a first append meets thousands of strata)."""
        out: list[int] = []
        new: list[tuple[Any, ...]] = []
        for values in keys:
            found = self.by_values.get(values)
            if found is None:
                found = self.by_values[values] = len(self.values) + len(new)
                new.append(values)
            out.append(found)
        if new:
            start = len(self.values)
            self._grow(start + len(new))
            self.values[start:] = new
            self.dirty[start:] = self.created[start:] = True
        return out

    def ids(self, batch: pa.RecordBatch | pa.Table, columns: Sequence[str]) -> np.ndarray:
        """The stratum id of every row of ``batch`` (new strata are added): each key column's
        values are indexed once per distinct value, and their combination is looked up in a
        table of every combination seen (no per-row Python work)."""
        if batch.num_rows == 0:
            return np.zeros(0, dtype=np.int64)
        if not self._columns:
            self._columns = [{} for _ in columns]
            for values in self.by_values:
                for known, v in zip(self._columns, values, strict=True):
                    known.setdefault(v, len(known))
        if len(self._lookups) != len(columns):
            self._lookups = [None] * len(columns)
        chunked = [batch.column(name) for name in columns]
        chunks = [c.chunks if isinstance(c, pa.ChunkedArray) else [c] for c in chunked]
        if all(pa.types.is_dictionary(c.type) for c in chunked) and \
                len({tuple(map(len, cs)) for cs in chunks}) == 1:
            out = np.empty(batch.num_rows, dtype=np.int64)  # each batch's ids written in place
            at = 0
            for row in zip(*chunks, strict=True):
                if not len(row[0]):
                    continue
                part = out[at:at + len(row[0])]
                found = self._dictionary_ids(list(row), part)
                if found is not part:
                    part[:] = found
                at += len(row[0])
            return out
        indices = []
        for at, column_chunks in enumerate(chunks):
            parts = [self._indices(at, chunk) for chunk in column_chunks if len(chunk)]
            indices.append(np.concatenate(parts) if len(parts) != 1 else parts[0])
        return self._ids_of(indices)

    def _ids_of(self, indices: list[np.ndarray], create: bool = True) -> np.ndarray:
        """The stratum ids of rows given each key column's value indices (new strata added;
        without ``create``, -1 for those)."""
        sizes = tuple(len(k) for k in self._columns)
        if sizes != self._sizes:
            self._index_codes(sizes)
        if self.compiled:
            found_ = compiled.combined_ids(indices, sizes, self._codes)
            if found_ is not None:
                return found_
        codes = indices[0]
        for size, more in zip(sizes[1:], indices[1:], strict=True):
            codes = codes * size + more
        found = self._codes[codes]
        missing = found < 0
        if create and missing.any():
            lists = [list(k) for k in self._columns]
            new = np.unique(codes[missing])
            digits = np.unravel_index(new, sizes)  # each new combination's value indices
            columns = [[known[i] for i in d.tolist()] for known, d in zip(lists, digits, strict=True)]
            keys = list(zip(*columns, strict=True))
            self._codes[new] = self.strata(keys)
            found = self._codes[codes]
        return found

    def _dictionary_ids(self, chunks: list[pa.DictionaryArray], out: np.ndarray | None = None) -> np.ndarray:
        """The stratum ids of rows whose key columns are dictionary arrays (see KeyEncoding):
        the ids of every combination of their dictionaries' values, then one look-up per row
        (compiled: written in ``out`` if given)."""
        dictionaries = [chunk.dictionary for chunk in chunks]
        nulls = [chunk.indices.null_count > 0 for chunk in chunks]
        cached = self._combos
        if cached is not None and cached[1] == nulls and all(
                len(a) == len(b) and a.equals(b) for a, b in zip(cached[0], dictionaries, strict=True)):
            lists, combos = cached[2], cached[3]  # the batches of an append share dictionaries
        else:
            lists, combos = [], None
            for at, (dictionary, null) in enumerate(zip(dictionaries, nulls, strict=True)):
                known = self._columns[at]
                listed = [known.setdefault(v, len(known)) for v in dictionary.to_pylist()]
                if null:
                    listed.append(known.setdefault(None, len(known)))
                lists.append(np.array(listed, dtype=np.int64))
        indices = []
        for chunk, listed_ in zip(chunks, lists, strict=True):
            index = chunk.indices
            if index.null_count:
                index = pc.fill_null(index, len(listed_) - 1)
            indices.append(index.to_numpy(zero_copy_only=False))
        widths = [len(v) for v in lists]
        if int(np.prod(widths, dtype=np.int64)) > max(1 << 16, len(chunks[0])):
            return self._ids_of([v[i] for v, i in zip(lists, indices, strict=True)])  # many values
        if combos is None:
            # every combination of the dictionaries' values (a few thousand): its stratum id, or
            # -1 for a stratum not met yet (created below if a row has it)
            combos = self._ids_of([g.ravel() for g in np.meshgrid(*lists, indexing="ij")], create=False)
            self._combos = (dictionaries, nulls, lists, combos)
        if self.compiled:
            found_ = compiled.combined_ids(indices, widths, combos, out)
            if found_ is not None:
                return found_
        local = indices[0].astype(np.intp)  # as an index, taken as is
        for width, more in zip(widths[1:], indices[1:], strict=True):
            local *= width
            local += more
        found = combos[local]
        if (found < 0).any():  # combinations met for the first time (a few of many rows)
            new = np.flatnonzero(np.bincount(local[found < 0], minlength=len(combos)))
            flat = np.unravel_index(new, widths)
            combos[new] = self._ids_of([v[i] for v, i in zip(lists, flat, strict=True)])
            found = combos[local]
        return found

    def _indices(self, at: int, chunk: pa.Array) -> np.ndarray:
        """The index of each value of ``chunk`` among the known values of key column ``at``
        (new values are added): looked up in the set of known values (no dictionary built per
        chunk), or, when some are new, dictionary-encoded and the set grown."""
        known = self._columns[at]
        if pa.types.is_dictionary(chunk.type):  # read off its dictionary (see KeyEncoding)
            listed = [known.setdefault(v, len(known)) for v in chunk.dictionary.to_pylist()]
            indices = chunk.indices
            if indices.null_count:
                listed.append(known.setdefault(None, len(known)))
                indices = pc.fill_null(indices, len(listed) - 1)
            return np.array(listed, dtype=np.int32)[indices.to_numpy(zero_copy_only=False)]
        lookup = self._lookups[at]
        if lookup is not None and lookup[0] == chunk.type:
            found = pc.index_in(chunk, options=lookup[1])
            if found.null_count == 0:
                return found.to_numpy(zero_copy_only=False)  # int32
        encoded = pc.dictionary_encode(chunk, null_encoding="encode")
        mapping = np.array([known.setdefault(v, len(known)) for v in encoded.dictionary.to_pylist()],
                           dtype=np.int32)
        if not pa.types.is_dictionary(chunk.type):
            try:  # in index order: ``known`` keeps the order values were added in
                values = pa.array(list(known), type=chunk.type)
                self._lookups[at] = (chunk.type, pc.SetLookupOptions(values, skip_nulls=False))
            except (pa.ArrowException, TypeError, ValueError):
                self._lookups[at] = None
        return mapping[encoded.indices.to_numpy(zero_copy_only=False)]

    def _code_of(self, values: tuple[Any, ...], sizes: tuple[int, ...]) -> int:
        code = 0
        for size, known, v in zip(sizes, self._columns, values, strict=True):
            code = code * size + known[v]
        return code

    def _index_codes(self, sizes: tuple[int, ...]) -> None:
        total = int(np.prod(sizes, dtype=np.int64))
        if total > 1 << 26:
            raise ValueError(f"a sample's strata are combinations of at most {1 << 26:,} values; "
                             f"these columns have {' × '.join(map(str, sizes))}")
        self._sizes = sizes
        self._codes = np.full(total, -1, dtype=np.int64)
        for values, id_ in self.by_values.items():
            self._codes[self._code_of(values, sizes)] = id_

    def set_live(self, live: LiveKeys) -> None:
        self._live = live

    def ensure_live(self) -> LiveKeys:
        """The live keys of the strata above the floor."""
        if self._live is None:
            ids, keys = self._live_keys() if self._live_keys is not None else (
                np.zeros(0, dtype=np.int64), np.zeros(0))
            ids = np.asarray(ids, dtype=np.int64)
            keys = np.asarray(keys, dtype=np.float64)
            keep = (keys <= self.threshold[ids]) & (self.threshold[ids] > self.fraction)
            self._live = LiveKeys.of(ids[keep], keys[keep], len(self.values))
        return self._live

    def admit(self, ids: np.ndarray, keys: Keys) -> tuple[np.ndarray, np.ndarray]:
        """Add rows (their stratum ids, in arrival order) to the strata; the positions of those
        the sample keeps (sorted), and their keys. Only the keys that matter are looked at:
        those of rows of strata above the floor, and which rows of the others fall at most at
        F. The candidates of the strata above the floor (key at most a bound: a few per cent
        of their rows) are merged into their live keys (see :meth:`_merge`)."""
        if len(ids) == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        if self.compiled:
            return compiled.admit(self, ids, keys)
        size = len(self.values)
        counts = np.bincount(ids, minlength=size)
        above = self.threshold > self.fraction
        hits = keys.at_most(self.fraction)
        hit_above = above[ids[hits]]
        at_floor = hits[~hit_above]  # a Bernoulli(F) sample of the floor strata
        floor_keys = keys.of(at_floor, True)
        self.kept += np.bincount(ids[at_floor], minlength=size)
        rows_above = np.flatnonzero(above[ids])
        if not len(rows_above):
            self.population += counts
            self.dirty |= counts > 0
            return at_floor, floor_keys
        low = np.zeros(len(rows_above), dtype=bool)  # which of them are hits
        low[np.searchsorted(rows_above, hits[hit_above])] = True
        row_keys = keys.of(rows_above, low)
        above_ids = ids[rows_above]
        bound = self.bound(counts)
        candidate = row_keys <= bound[above_ids]
        tight = bound < self.threshold
        if tight.any():  # a stratum short of K keys under its bound is taken whole
            got = np.bincount(above_ids[candidate], minlength=size)
            short = tight & (got < self.min_rows)
            if short.any():
                candidate |= short[above_ids] & (row_keys <= self.threshold[above_ids])
        picked = np.flatnonzero(candidate)
        c_rows, c_keys = self._merge(above_ids[picked], row_keys[picked], rows_above[picked], counts)
        self.population += counts
        self.dirty |= counts > 0
        # in row order: the rows of the strata above the floor merged into those at it (sorted)
        order = np.argsort(c_rows)
        c_rows, c_keys = c_rows[order], c_keys[order]
        into = np.searchsorted(at_floor, c_rows) + np.arange(len(c_rows))
        return inserted(at_floor, into, c_rows), inserted(floor_keys, into, c_keys)

    def _merge(self, c_ids: np.ndarray, c_keys: np.ndarray, c_rows: np.ndarray,
               counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Merge candidates (stratum ids, keys, rows) of strata above the floor into their
        live keys; each touched stratum's threshold falls to its K-th smallest key (never
        below F), its live keys above it are dropped (all of them if it reached F), and its
        kept rows counted. The live keys are passed over once to insert the candidates and
        once to drop those above their thresholds; the rest is per touched stratum. The rows
        and keys of the candidates kept."""
        c_order = ordered(c_ids, c_keys)
        order = np.argsort(c_order)  # one float sort: ties are checked for below
        c_ids, c_keys, c_rows, c_order = c_ids[order], c_keys[order], c_rows[order], c_order[order]
        live = self.ensure_live()
        size = len(self.values)
        at = np.searchsorted(live.order, c_order)
        into = at + np.arange(len(at))  # where each candidate lands
        all_keys = inserted(live.keys, into, c_keys)
        all_order = inserted(live.order, into, c_order)
        inside = at < len(live.order)
        if not (np.all(c_order[1:] > c_order[:-1]) and np.all(live.order[at[inside]] > c_order[inside])):
            # keys a rounding apart: the float order may not be theirs, merge exactly
            exact = np.lexsort((all_keys, ids_of(all_order)))
            all_keys, all_order = all_keys[exact], all_order[exact]
        added = np.bincount(c_ids, minlength=size)
        have_all = np.zeros(size, dtype=np.int64)
        have_all[:len(live.counts)] = live.counts
        have_all += added
        which = np.flatnonzero(added)
        have = have_all[which]
        starts = (np.cumsum(have_all) - have_all)[which]
        k = self.min_rows
        grown = self.population[which] + counts[which] > k
        last = len(all_keys) - 1
        kth = all_keys[np.minimum(starts + k - 1, last)]
        falls = grown & (have >= k)
        threshold = np.where(falls, np.maximum(self.fraction, kth), self.threshold[which])
        self.threshold[which] = threshold
        # kept: a stratum whose threshold stays keeps every key (each is at most it); one whose
        # threshold falls to its K-th key, the K smallest (and keys tied with the K-th); one at
        # F, its keys at most F (sorted: a prefix of its keys, counted one stratum at a time)
        kept = np.where(falls, k, have)
        after = all_keys[np.minimum(starts + k, last)]
        exact = falls & ((threshold <= self.fraction) | ((have > k) & (after <= threshold)))
        for at_ in np.flatnonzero(exact).tolist():
            lo = int(starts[at_])
            kept[at_] = int(np.count_nonzero(all_keys[lo:lo + int(have[at_])] <= threshold[at_]))
        self.kept[which] = kept
        stay = np.where(threshold > self.fraction, kept, 0)
        gone = ranges(starts + stay, have - stay)
        if len(gone):
            keep = np.ones(len(all_keys), dtype=bool)
            keep[gone] = False
            all_keys, all_order = all_keys[keep], all_order[keep]
        have_all[which] = stay
        self._live = LiveKeys(all_keys, all_order, have_all)
        new = c_keys <= self.threshold[c_ids]
        return c_rows[new], c_keys[new]

    def bound(self, counts: np.ndarray) -> np.ndarray:
        """Per stratum, a key bound at most its threshold above which none of ``counts`` new
        rows can stay: the threshold falls to the K-th smallest key (or F), which is at most
        the K-th smallest new key, and ``c`` uniform keys hold at least K under
        ``(K + 6 sqrt(K) + 6) / c`` but for a chance in millions (:meth:`admit` checks, and
        takes a stratum short of K whole). A stratum meeting many rows (a first append)
        then merges about that many candidates instead of all of them."""
        k = self.min_rows
        with np.errstate(divide="ignore"):
            q = (k + 6.0 * np.sqrt(k) + 6.0) / counts
        return np.minimum(self.threshold, np.maximum(self.fraction, q))

    def remove(self, ids: np.ndarray) -> None:
        """Base rows deleted: the stratum id of each."""
        counts = np.bincount(ids, minlength=len(self.values))
        self.population -= counts
        self.dirty |= counts > 0

    def restore(self, ids: np.ndarray) -> None:
        """Base rows written again (a delete's rewritten segments): the stratum id of each."""
        counts = np.bincount(ids, minlength=len(self.values))
        self.population += counts
        self.dirty |= counts > 0

    def live(self, ids: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """Which sample rows (stratum ids, keys) are live: key at most their threshold."""
        return keys <= self.threshold[ids]

    def unkeep(self, ids: np.ndarray, keys: np.ndarray) -> None:
        """Live sample rows deleted with their base rows: the stratum id and key of each."""
        counts = np.bincount(ids, minlength=len(self.values))
        self.kept -= counts
        self.dirty |= counts > 0
        if (self.threshold[ids] > self.fraction).any():
            live = self.ensure_live()
            live_ids = live.ids
            gone = set(zip(ids.tolist(), keys.tolist(), strict=True))
            stays = np.array([(i, k) not in gone for i, k in zip(live_ids.tolist(), live.keys.tolist(),
                                                                 strict=True)], dtype=bool)
            if len(stays):
                self._live = LiveKeys(live.keys[stays], live.order[stays],
                                   np.bincount(live_ids[stays], minlength=len(self.values)))

    def table(self) -> pa.Table:
        """``(__stratum, __pop_n, __samp_n, __t)`` of every stratum with rows."""
        present = np.flatnonzero(self.population > 0)
        return pa.table({
            "__stratum": pa.array(present, pa.int64()),
            "__pop_n": pa.array(self.population[present], pa.int64()),
            "__samp_n": pa.array(self.kept[present], pa.int64()),
            "__t": pa.array(self.threshold[present], pa.float64()),
        })


def _block_text(population: np.ndarray, kept: np.ndarray, threshold: np.ndarray) -> str:
    """A block's states packed: little-endian int64 populations and live rows, float64
    thresholds, deflated, in base64 (as JSON lists, a sample's thousands of strata took
    milliseconds to write at every commit and to read at every version)."""
    raw = b"".join([population.astype("<i8").tobytes(), kept.astype("<i8").tobytes(),
                    threshold.astype("<f8").tobytes()])
    return json.dumps({"n": len(population), "packed": base64.b64encode(zlib.compress(raw, 1)).decode()},
                      separators=(",", ":"))


def _block_states(text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(populations, live rows, thresholds) of a block, packed or (as recorded before) lists."""
    block = json.loads(text)
    if "packed" not in block:
        return (np.array(block["population"], dtype=np.int64), np.array(block["kept"], dtype=np.int64),
                np.array(block["threshold"], dtype=np.float64))
    n = int(block["n"])
    raw = zlib.decompress(base64.b64decode(block["packed"]))
    counts = np.frombuffer(raw, dtype="<i8", count=2 * n)
    return counts[:n], counts[n:], np.frombuffer(raw, dtype="<f8", count=n, offset=16 * n)
