"""The keys of the rows a sample sees (see :mod:`colonnade.table.strata`): uniform in [0, 1),
given or drawn, only as far as the admission needs them.

Every key is a single-precision value (held as a double): a sample stores its rows' keys as
``float32``, half the bytes of a double's random mantissa, and what a sample reads back must be
the key its strata compared. A key drawn on one side of the floor F stays on that side.
Keys given (tests) are used as they are."""

from __future__ import annotations

import numpy as np

#: The largest single-precision value below 1: no key reaches 1.
BELOW_ONE = float(np.nextafter(np.float32(1), np.float32(0)))


def single(keys: np.ndarray, floor: float, low: np.ndarray | bool) -> np.ndarray:
    """``keys`` rounded to the nearest single-precision values below 1 (as doubles), those
    drawn at most at ``floor`` (``low``) staying at most at it, the others above it."""
    r = np.minimum(np.asarray(keys, dtype=np.float64).astype(np.float32), np.float32(BELOW_ONE))
    wide = r.astype(np.float64)
    down = low & (wide > floor)
    up = ~np.asarray(low, dtype=bool) & (wide <= floor)
    if np.any(down):
        r = np.where(down, np.nextafter(r, np.float32(0)), r)
    if np.any(up):
        r = np.where(up, np.nextafter(r, np.float32(2)), r)
    return r.astype(np.float64)


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

    def for_kernel(self) -> tuple[np.ndarray | None, int]:
        """(the given keys, or None and a seed to draw them from): for the compiled admission,
        which draws a key for every row (a few nanoseconds each)."""
        if self._given is not None:
            return np.ascontiguousarray(self._given, dtype=np.float64), 0
        assert self._rng is not None
        return None, int(self._rng.integers(0, 1 << 63))

    def of(self, positions: np.ndarray, low: np.ndarray | bool) -> np.ndarray:
        """The keys of rows ``positions``, given whether each is at most the floor."""
        if self._given is not None:
            return self._given[positions]
        assert self._rng is not None
        u = self._rng.random(len(positions))
        if isinstance(low, bool):
            return single(u * self._floor if low else self._floor + u * (1.0 - self._floor), self._floor, low)
        out = u * (1.0 - self._floor)  # in place: most rows are above the floor
        out += self._floor
        out[low] = u[low] * self._floor
        return single(out, self._floor, low)
