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
its keys' order, and it holds at most K live rows: their keys are kept with its state.

A deletion removes rows by predicate, independently of the keys: the kept rows of a stratum stay
a uniform subset of its remaining rows, and the threshold stays.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from colonnade.table.commits import value_from_json, value_to_json

#: The property prefix under which a sample's commits record each stratum's state.
STRATUM_PREFIX = "stratum:"


@dataclass
class Stratum:
    """One stratum's state: its key values, base rows ``population``, live sample rows
    ``kept``, threshold, and (while the threshold is above the floor) the live rows' keys."""

    id: int
    values: tuple[Any, ...]
    population: int = 0
    kept: int = 0
    threshold: float = 1.0
    keys: list[float] | None = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps([[value_to_json(v) for v in self.values], self.population, self.kept,
                           self.threshold, self.keys])

    @classmethod
    def from_json(cls, id_: int, text: str) -> Stratum:
        values, population, kept, threshold, keys = json.loads(text)
        return cls(id_, tuple(value_from_json(v) for v in values), int(population), int(kept),
                   float(threshold), None if keys is None else [float(k) for k in keys])


class Keys:
    """The keys of a batch of rows: given (:meth:`given`, for tests and replays) or drawn from
    a random generator as they are asked for, each row's at most once (:meth:`drawn`): which
    rows fall at most at F is drawn as the gaps between them (a Bernoulli(F) process), without
    a key for every row."""

    def __init__(self, rows: int, given: np.ndarray | None = None,
                 rng: np.random.Generator | None = None) -> None:
        self.rows = rows
        self._given = given
        self._rng = rng
        self._floor = 0.0

    @classmethod
    def given(cls, keys: np.ndarray) -> Keys:
        return cls(len(keys), given=keys)

    @classmethod
    def drawn(cls, rows: int, rng: np.random.Generator) -> Keys:
        return cls(rows, rng=rng)

    def at_most(self, floor: float) -> np.ndarray:
        """The (sorted) positions of the rows whose key is at most ``floor``; asked once."""
        self._floor = floor
        if self._given is not None:
            return np.flatnonzero(self._given <= floor)
        assert self._rng is not None
        if floor >= 1.0:
            return np.arange(self.rows)
        gaps = self._rng.geometric(floor, size=int(self.rows * floor * 1.2) + 64)
        positions = np.cumsum(gaps) - 1
        while positions[-1] < self.rows:  # rare: more hits than expected
            more = self._rng.geometric(floor, size=len(gaps))
            positions = np.concatenate([positions, positions[-1] + np.cumsum(more)])
        return positions[positions < self.rows]

    def of(self, positions: np.ndarray, low: np.ndarray | bool) -> np.ndarray:
        """The keys of rows ``positions``, given whether each is at most the floor."""
        if self._given is not None:
            return self._given[positions]
        assert self._rng is not None
        u = self._rng.random(len(positions))
        return np.where(low, u * self._floor, self._floor + u * (1.0 - self._floor))


class Strata:
    """Every stratum of a sample by id and by key values, and which ones changed since loaded."""

    def __init__(self, fraction: float, min_rows: int, strata: Iterable[Stratum] = ()) -> None:
        self.fraction = fraction
        self.min_rows = min_rows
        self.by_id: dict[int, Stratum] = {s.id: s for s in strata}
        self.by_values: dict[tuple[Any, ...], Stratum] = {s.values: s for s in self.by_id.values()}
        self.changed: set[int] = set()

    @classmethod
    def from_properties(cls, properties: dict[str, Any], fraction: float, min_rows: int) -> Strata:
        return cls(fraction, min_rows, (Stratum.from_json(int(k[len(STRATUM_PREFIX):]), v)
                                        for k, v in properties.items() if k.startswith(STRATUM_PREFIX)))

    def changed_properties(self) -> dict[str, str]:
        return {f"{STRATUM_PREFIX}{i}": self.by_id[i].to_json() for i in sorted(self.changed)}

    def stratum(self, values: tuple[Any, ...]) -> Stratum:
        found = self.by_values.get(values)
        if found is None:
            found = Stratum(max(self.by_id, default=-1) + 1, values)
            self.by_id[found.id] = found
            self.by_values[values] = found
            self.changed.add(found.id)
        return found

    def ids(self, batch: pa.RecordBatch | pa.Table, columns: Sequence[str]) -> np.ndarray:
        """The stratum id of every row of ``batch`` (new strata are added), computed on the
        distinct combinations of the key columns, not row by row."""
        if batch.num_rows == 0:
            return np.zeros(0, dtype=np.int64)
        codes = np.zeros(batch.num_rows, dtype=np.int64)
        dictionaries = []
        for name in columns:
            encoded = pc.dictionary_encode(batch.column(name), null_encoding="encode")
            if isinstance(encoded, pa.ChunkedArray):
                encoded = encoded.combine_chunks() if encoded.num_chunks != 1 else encoded.chunk(0)
            size = len(encoded.dictionary)
            indices = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
            codes = codes * max(size, 1) + indices
            dictionaries.append(encoded.dictionary.to_pylist())
        unique, inverse = _dense_unique(codes)
        mapped = np.empty(len(unique), dtype=np.int64)
        for i, code in enumerate(unique.tolist()):
            values = []
            for d in reversed(dictionaries):
                code, index = divmod(code, max(len(d), 1))
                values.append(d[index])
            mapped[i] = self.stratum(tuple(reversed(values))).id
        return mapped[inverse]

    def admit(self, ids: np.ndarray, keys: Keys) -> tuple[np.ndarray, np.ndarray]:
        """Add rows (their stratum ids, in arrival order) to the strata; the positions of those
        the sample keeps, and their keys. Only the keys that matter are looked at: those of
        rows of strata above the floor, and which rows of the others fall at most at F."""
        if len(ids) == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        touched, inverse = _dense_unique(ids)
        counts = np.bincount(inverse, minlength=len(touched))
        strata = [self.by_id[h] for h in touched.tolist()]
        above = np.array([s.threshold > self.fraction for s in strata])
        hits = keys.at_most(self.fraction)
        at_floor = hits[~above[inverse[hits]]]  # a Bernoulli(F) sample of the floor strata
        rows, found = [at_floor], [keys.of(at_floor, True)]
        added = np.bincount(inverse[at_floor], minlength=len(touched))
        if above.any():  # strata above the floor: their threshold falls to the K-th smallest key
            rows_above = np.flatnonzero(above[inverse])
            order = rows_above[np.argsort(inverse[rows_above], kind="stable")]
            order_keys = keys.of(order, np.isin(order, hits, assume_unique=True))
            ends = np.cumsum(np.where(above, counts, 0))
            for i in np.flatnonzero(above).tolist():
                start = ends[i] - counts[i]
                mine = order_keys[start:ends[i]]
                old = strata[i].threshold
                threshold = self._lower(strata[i], int(counts[i]), mine[mine <= old])
                kept = mine <= threshold
                rows.append(order[start:ends[i]][kept])
                found.append(mine[kept])
        for i, s in enumerate(strata):
            if not above[i]:
                s.kept += int(added[i])
            s.population += int(counts[i])
            self.changed.add(s.id)
        positions = np.concatenate(rows)
        order_ = np.argsort(positions, kind="stable")
        return positions[order_], np.concatenate(found)[order_]

    def _lower(self, s: Stratum, arrived: int, candidates: np.ndarray) -> float:
        """Stratum ``s`` (above the floor) receives ``arrived`` rows, of which ``candidates``
        (keys) are at most its threshold: its new threshold, kept keys and count."""
        keys = sorted((s.keys or []) + candidates.tolist())
        total = s.population + arrived  # population is added by the caller
        if total > self.min_rows and len(keys) >= self.min_rows:
            threshold = max(self.fraction, keys[self.min_rows - 1])
        else:
            threshold = s.threshold
        live = [k for k in keys if k <= threshold]
        s.threshold = threshold
        s.kept = len(live)
        s.keys = live if threshold > self.fraction else None
        return threshold

    def remove(self, ids: np.ndarray) -> None:
        """Base rows deleted: the stratum id of each."""
        touched, counts = np.unique(ids, return_counts=True)
        for h, count in zip(touched.tolist(), counts.tolist(), strict=True):
            self.by_id[h].population -= count
            self.changed.add(h)

    def restore(self, ids: np.ndarray) -> None:
        """Base rows written again (a delete's rewritten segments): the stratum id of each."""
        touched, counts = np.unique(ids, return_counts=True)
        for h, count in zip(touched.tolist(), counts.tolist(), strict=True):
            self.by_id[h].population += count
            self.changed.add(h)

    def unkeep(self, ids: np.ndarray, keys: np.ndarray) -> None:
        """Live sample rows deleted with their base rows: the stratum id and key of each."""
        for h, key in zip(ids.tolist(), keys.tolist(), strict=True):
            s = self.by_id[h]
            s.kept -= 1
            if s.keys is not None and key in s.keys:
                s.keys.remove(key)
            self.changed.add(h)

    def table(self) -> pa.Table:
        """``(__stratum, __pop_n, __samp_n, __t)`` of every stratum with rows."""
        live = [s for s in self.by_id.values() if s.population > 0]
        return pa.table({
            "__stratum": pa.array([s.id for s in live], pa.int64()),
            "__pop_n": pa.array([s.population for s in live], pa.int64()),
            "__samp_n": pa.array([s.kept for s in live], pa.int64()),
            "__t": pa.array([s.threshold for s in live], pa.float64()),
        })


def _dense_unique(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` for small non-negative integers, without
    sorting (a lookup table over their range); sorted as numpy's when the range is large."""
    top = int(values.max()) + 1 if len(values) else 0
    if top > max(1 << 20, 4 * len(values)):
        unique, inverse = np.unique(values, return_inverse=True)
        return unique, inverse.reshape(-1)
    present = np.zeros(top, dtype=bool)
    present[values] = True
    unique = np.flatnonzero(present)
    lookup = np.empty(top, dtype=np.int64)
    lookup[unique] = np.arange(len(unique))
    return unique, lookup[values]
