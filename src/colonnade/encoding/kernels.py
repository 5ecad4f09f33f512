"""Compiled passes of a scan (the extension ``colonnade.encoding._scan``), each with the NumPy
code it reproduces exactly, which runs when the extension was not built (no C compiler) or
``compiled=False`` asks for it:

- :func:`place`: a packed dictionary's indices put at the rows its validity bitmap marks (NumPy:
  unpack the bitmap, find the marked rows, fill a zeroed array at them: four passes and a
  row-sized temporary; compiled: one pass, about 3x faster on a 42,000-row segment with a third
  of its rows null);
- :func:`group_rows` and :func:`group_sums`: a segment's rows, rows with a value and sums per
  dictionary code, for grouped aggregates answered in the scan (NumPy: a code array with nulls
  replaced, widened to int64, and one ``bincount`` per figure; compiled: one pass per figure
  over the indices as decoded). Sums add each group's values in row order, as ``bincount``
  does, so both give the same doubles;
- :func:`partial`: a segment's rows per group of one dictionary key, its rows, and per
  aggregated column its rows with a value and sum, compacted to the groups present (what
  :func:`group_rows` and :func:`group_sums` give, with the compaction and the arrays around
  them, in one call: the NumPy code is :mod:`colonnade.query.grouped`'s own);
- :func:`unscale`: decimal-scaled integers back to the doubles they stand for (see
  :mod:`colonnade.encoding.scaled`; NumPy: a conversion then a division, as fast but with a
  second array of the same size).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

try:
    from colonnade.encoding import _scan as _kernel
except ImportError:  # built without a C compiler: the NumPy code runs
    _kernel = None  # type: ignore[assignment]

AVAILABLE = _kernel is not None
#: Aggregated columns :func:`partial` takes at most (``_scan.c``'s PARTIAL_COLUMNS).
PARTIAL_COLUMNS = 64


def place(present: np.ndarray, validity: pa.Buffer, n: int, dtype: np.dtype[Any],
          compiled: bool = True) -> tuple[np.ndarray, int, int]:
    """An array of ``n`` rows of ``dtype`` (unsigned or signed integers) holding ``present``'s
    values, in order, at the rows ``validity`` (a bitmap of at least ``n`` bits, least
    significant first) marks and 0 at the others; the rows marked; and the largest value
    placed (0 if none). Values beyond the marked rows are left out; marked rows beyond the
    values get 0 (the caller compares the rows marked with ``len(present)``)."""
    out = np.empty(n, dtype=dtype)
    if _kernel is not None and compiled and present.dtype.itemsize <= 4 and out.dtype.itemsize <= 4:
        marked, largest = _kernel.place(np.ascontiguousarray(present), validity, out.view(f"u{out.dtype.itemsize}"))
        return out, marked, largest
    rows = np.flatnonzero(np.unpackbits(np.frombuffer(validity, dtype=np.uint8), count=n,
                                        bitorder="little").view(bool))
    out[:] = 0
    taken = min(len(rows), len(present))
    out[rows[:taken]] = present[:taken]
    return out, len(rows), int(present[:taken].max(initial=0))


def values_of(array: pa.Array) -> np.ndarray:
    """The value buffer of a fixed-width numeric array (or a dictionary's indices) as a NumPy view
    of its rows, without a copy; rows that are null hold whatever the buffer has there."""
    return np.frombuffer(array.buffers()[1], dtype=array.type.to_pandas_dtype(),
                         count=array.offset + len(array))[array.offset:]


def _codes(indices: pa.Array) -> tuple[np.ndarray, pa.Buffer | None, int]:
    """A dictionary's indices as NumPy integers (nulls hold anything), its validity bitmap (None
    without nulls) and the bitmap's first bit."""
    codes = values_of(indices)
    validity = indices.buffers()[0] if indices.null_count else None
    return codes, validity, indices.offset


def valid(array: pa.Array) -> np.ndarray:
    """Which rows of ``array`` (with a validity bitmap) hold a value, as bools."""
    bits = np.frombuffer(array.buffers()[0], dtype=np.uint8)
    return np.unpackbits(bits, count=array.offset + len(array), bitorder="little")[array.offset:].view(bool)


def group_rows(indices: pa.Array | np.ndarray, m: int, compiled: bool = True) -> np.ndarray:
    """Rows per code of ``indices`` (a dictionary's integer indices, nulls counted as code
    ``m``; or int64 codes below ``m`` without nulls), as ``m + 1`` int64 counts. ValueError if
    a code is outside [0, m)."""
    counts = np.zeros(m + 1, dtype=np.int64)
    codes, validity, offset = (indices, None, 0) if isinstance(indices, np.ndarray) else _codes(indices)
    if _kernel is not None and compiled:
        bad = _kernel.group_rows(np.ascontiguousarray(codes), validity, offset, m, counts)
    else:
        full = _with_nulls(indices, codes, m)
        bad = int(np.count_nonzero((full < 0) | (full > m)))
        if not bad:
            counts += np.bincount(full, minlength=m + 1)
    if bad:
        raise ValueError(f"{bad} dictionary codes out of range")
    return counts


def group_sums(indices: pa.Array | np.ndarray, m: int, values: pa.Array,
               compiled: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Per code of ``indices`` (as for :func:`group_rows`), the rows where ``values`` (numbers,
    one per row) has a value and their sum as doubles, added in row order: ``m + 1`` int64
    counts and ``m + 1`` float64 sums. ValueError if a code is outside [0, m)."""
    counts = np.zeros(m + 1, dtype=np.int64)
    sums = np.zeros(m + 1, dtype=np.float64)
    codes, validity, offset = (indices, None, 0) if isinstance(indices, np.ndarray) else _codes(indices)
    t = values.type
    kind = _kind(t)
    if _kernel is not None and compiled and not pa.types.is_float16(t):
        data = values_of(values)
        value_validity = values.buffers()[0] if values.null_count else None
        bad = _kernel.group_sums(np.ascontiguousarray(codes), validity, offset, m, data, kind, value_validity,
                                 values.offset, counts, sums)
    else:
        full = _with_nulls(indices, codes, m)
        bad = int(np.count_nonzero((full < 0) | (full > m)))
        if not bad:
            numbers = (pc.fill_null(values, 0) if values.null_count else values).to_numpy(zero_copy_only=False)
            with_value = valid(values) if values.null_count else slice(None)
            counts += np.bincount(full[with_value], minlength=m + 1)
            sums += np.bincount(full, weights=numbers.astype(np.float64, copy=False), minlength=m + 1)
    if bad:
        raise ValueError(f"{bad} dictionary codes out of range")
    return counts, sums


def _kind(t: pa.DataType) -> str:
    return "f" if pa.types.is_floating(t) else "u" if pa.types.is_unsigned_integer(t) else "i"


def partial(key: pa.DictionaryArray, columns: list[tuple[pa.Array, bool]]) -> list[pa.Array] | None:
    """One segment's rows grouped by ``key``'s dictionary codes (nulls a group of their own,
    last), for the groups present: the key (int32 indices into its dictionary), their rows,
    and per column of ``columns`` (numbers, one per row; with whether its sum is wanted) its
    rows with a value and, when wanted, its sum (float64, or int64 for integers, summed as
    doubles in row order; null where no row has a value). None without the extension, or
    for more than PARTIAL_COLUMNS columns. ValueError if an index is outside the dictionary."""
    if _kernel is None or len(columns) > PARTIAL_COLUMNS or any(pa.types.is_float16(v.type) for v, _ in columns):
        return None
    codes, validity, offset = _codes(key.indices)
    found = _kernel.partial(np.ascontiguousarray(codes), validity, offset, len(key.dictionary), [
        (values_of(v), _kind(v.type), v.buffers()[0] if v.null_count else None, v.offset, wanted)
        for v, wanted in columns])
    groups, group_codes, group_valid, rows, figures = found
    indices = pa.Array.from_buffers(pa.int32(), groups, [
        None if group_valid is None else pa.py_buffer(group_valid), pa.py_buffer(group_codes)])
    arrays = [pa.DictionaryArray.from_arrays(indices, key.dictionary, safe=False),  # codes index it
              pa.Array.from_buffers(pa.int64(), groups, [None, pa.py_buffer(rows)])]
    for (counts, sums, sums_valid), (v, wanted) in zip(figures, columns, strict=True):
        arrays.append(pa.Array.from_buffers(pa.int64(), groups, [None, pa.py_buffer(counts)]))
        if wanted:
            arrays.append(pa.Array.from_buffers(pa.float64() if pa.types.is_floating(v.type) else pa.int64(), groups,
                                                [None if sums_valid is None else pa.py_buffer(sums_valid),
                                                 pa.py_buffer(sums)]))
    return arrays


def _with_nulls(indices: pa.Array | np.ndarray, codes: np.ndarray, m: int) -> np.ndarray:
    """int64 codes with null rows as ``m``."""
    if not isinstance(indices, np.ndarray) and indices.null_count:
        return np.where(valid(indices), codes, m).astype(np.int64)
    return codes.astype(np.int64)


def unscale(integers: np.ndarray, power: float, compiled: bool = True) -> np.ndarray:
    """``integers`` (int32 or int64) divided by ``power``, as float64: NumPy's true divide, in
    one pass instead of a conversion and a division (each a pass and an array)."""
    if _kernel is not None and compiled and integers.dtype in (np.int32, np.int64):
        out = np.empty(len(integers), dtype=np.float64)
        _kernel.unscale(np.ascontiguousarray(integers), power, out)
        return out
    return integers / power


__all__ = ["AVAILABLE", "group_rows", "group_sums", "partial", "place", "unscale", "valid"]
