"""The live keys of a sample's strata above the floor (see :mod:`colonnade.table.strata`):
sorted by (stratum, key) in flat arrays, so that a batch of candidates is merged into them with
a pass or two over the arrays, and array helpers for that merge."""

from __future__ import annotations

import numpy as np


class LiveKeys:
    """The live keys of the strata above the floor, sorted by (stratum, key): each key, its
    order (see :func:`ordered`, which also gives its stratum; made when first asked for if not
    given), and how many each stratum has."""

    __slots__ = ("keys", "_order", "counts")

    def __init__(self, keys: np.ndarray, order: np.ndarray | None, counts: np.ndarray) -> None:
        self.keys = keys
        self._order = order
        self.counts = counts

    @classmethod
    def of(cls, ids: np.ndarray, keys: np.ndarray, size: int) -> LiveKeys:
        order = np.lexsort((keys, ids))
        ids, keys = ids[order], keys[order]
        return cls(keys, ordered(ids, keys), np.bincount(ids, minlength=size))

    @property
    def order(self) -> np.ndarray:
        if self._order is None:
            self._order = ordered(self.ids, self.keys)
        return self._order

    @property
    def ids(self) -> np.ndarray:
        if self._order is None:
            return np.repeat(np.arange(len(self.counts), dtype=np.int64), self.counts)
        return ids_of(self._order)


def inserted(values: np.ndarray, at: np.ndarray, more: np.ndarray) -> np.ndarray:
    """``values`` with ``more`` put at positions ``at`` (sorted) of the result."""
    out = np.empty(len(values) + len(more), dtype=values.dtype)
    rest = np.ones(len(out), dtype=bool)
    rest[at] = False
    out[at] = more
    out[rest] = values
    return out


def ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions ``starts[i] .. starts[i] + lengths[i] - 1`` of every range, in order."""
    some = lengths > 0
    starts, lengths = starts[some], lengths[some]
    if not len(lengths):
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(lengths)
    return np.repeat(starts - (ends - lengths), lengths) + np.arange(int(ends[-1]))


def ordered(ids: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """One float per (stratum, key) in their order (``2 id + key``: strata never overlap; keys
    of one stratum less than a rounding apart may tie: :meth:`Strata._merge <colonnade.table.strata.Strata._merge>` checks)."""
    return ids * 2.0 + keys


def ids_of(order: np.ndarray) -> np.ndarray:
    """The stratum of each of ``order`` (``2 id + key`` rounds to at most ``2 id + 1``)."""
    return (order * 0.5).astype(np.int64)
