"""Run-end encoding of a chunk's column: counting runs, and both directions.

A column is stored run-end encoded (Arrow's ``run_end_encoded<int32, T>``: one value per run
and the row where each run ends) when its runs of equal consecutive values are long: at most
:data:`RUN_END_RATIO` runs per row, counted in one vectorised comparison of the column with
itself shifted by a row (the whole rule, with its one exception, is in
:mod:`colonnade.encoding.chunk`). Runs always hold plain values, never dictionary indices; a
string column read as a dictionary gets its dictionary back from the run values (see
:func:`run_end_decode`), so the payload needs no dictionary message of its own.

Delta runs: an integer column without nulls whose differences between consecutive rows run
long (consecutive addresses, ids, a counter: runs of +1 broken at gaps) is stored as its first
value then those differences, int64, run-end encoded — a few runs for 65,536 rows, where the
values themselves would cost a byte or more each even under ZSTD. Differences and their sum
wrap around as int64 arithmetic does, so every value comes back exactly.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: A column is stored run-end encoded when its runs number at most this fraction of its rows
#: (runs average 32 rows or more; what that saves is in :mod:`colonnade.encoding.chunk`) ...
RUN_END_RATIO = 1 / 32
#: ... and it has at least this many rows (below, the layout's own bytes outweigh the runs).
RUN_END_MIN_ROWS = 256


def can_run_end(t: pa.DataType) -> bool:
    """Whether columns of this (plain) type can be stored run-end encoded."""
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
            or pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t) or pa.types.is_decimal(t)
            or pa.types.is_date(t) or pa.types.is_timestamp(t) or pa.types.is_time(t)
            or pa.types.is_duration(t))


def expands_fast(t: pa.DataType) -> bool:
    """Whether Arrow expands runs of this type about as fast as it copies: not bools (bit by
    bit) nor decimals and fixed-size binaries (no fast path): 65,536 rows in 270 µs against
    20 µs for a double (pyarrow 26)."""
    return not (pa.types.is_boolean(t) or pa.types.is_decimal(t) or pa.types.is_fixed_size_binary(t))


def count_runs(array: pa.Array) -> int:
    """Number of runs of equal consecutive values, counted vectorised: nulls equal each other,
    floats compare by their bits as run-end encoding does (NaN repeats, -0.0 differs from 0.0).
    A dictionary array's runs are those of its indices."""
    keys = array.indices if pa.types.is_dictionary(array.type) else array
    n = len(keys)
    if n < 2:
        return n
    if pa.types.is_floating(keys.type):
        keys = keys.view({2: pa.uint16(), 4: pa.uint32(), 8: pa.uint64()}[keys.type.byte_width])
    head, tail = keys.slice(0, n - 1), keys.slice(1)
    changes = pc.sum(pc.not_equal(head, tail)).as_py() or 0  # null where either side is null
    if keys.null_count:
        valid = pc.is_valid(keys)
        changes += pc.sum(pc.not_equal(valid.slice(0, n - 1), valid.slice(1))).as_py() or 0
    return int(changes) + 1


def run_end_encode(array: pa.Array) -> pa.RunEndEncodedArray:
    """``array`` run-end encoded with int32 run ends and plain run values (a dictionary array's
    indices are encoded, then one dictionary value is looked up per run)."""
    if pa.types.is_dictionary(array.type):
        runs = pc.run_end_encode(array.indices, run_end_type=pa.int32())
        return pa.RunEndEncodedArray.from_arrays(runs.run_ends, pc.take(array.dictionary, runs.values))
    return pc.run_end_encode(array, run_end_type=pa.int32())


def check_run_ends(array: pa.RunEndEncodedArray) -> None:
    """Raise ValueError unless a decoded payload column is run-end encoded as we write it.

    The checks are linear in runs, not rows: run ends that don't rise or don't end at the
    column's length would make decoding read out of bounds."""
    t = array.type
    if t.run_end_type != pa.int32() or pa.types.is_dictionary(t.value_type) or not can_run_end(t.value_type):
        raise ValueError(f"unexpected run-end encoded type {t}")
    array.validate(full=True)  # raises pa.ArrowInvalid, a ValueError
    run_ends = array.run_ends
    if array.offset or (len(run_ends) and run_ends[-1].as_py() != len(array)):
        raise ValueError("run ends don't cover the column")


def run_end_decode(array: pa.RunEndEncodedArray, as_dictionary: bool) -> pa.Array:
    """A checked run-end encoded column back to its plain array, or to a dictionary array
    (int32 indices; the dictionary in order of first appearance, as ``dictionary_encode``
    gives it) when ``as_dictionary``: the hashing touches one value per run, not per row."""
    if not as_dictionary:
        return pc.run_end_decode(array)
    encoded = pc.dictionary_encode(array.values)
    indices = pc.run_end_decode(pa.RunEndEncodedArray.from_arrays(array.run_ends, encoded.indices))
    return pa.DictionaryArray.from_arrays(indices, encoded.dictionary, safe=False)


#: Field metadata naming the logical type of a column stored as delta runs.
DELTA_OF = b"colonnade.delta_of"
_DELTA_TYPES = {str(t): t for t in (pa.int8(), pa.int16(), pa.int32(), pa.int64(),
                                    pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64())}


def deltas(array: pa.Array) -> pa.Array | None:
    """An integer column without nulls as int64 (first value, then each row minus the one
    before, wrapping), or None for any other column."""
    if str(array.type) not in _DELTA_TYPES or array.null_count or len(array) < RUN_END_MIN_ROWS:
        return None
    values = array.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    out = np.empty_like(values)
    out[0] = values[0]
    np.subtract(values[1:], values[:-1], out=out[1:])
    return pa.array(out)


def delta_decode(array: pa.RunEndEncodedArray, type_name: str) -> pa.Array:
    """Delta runs (checked) back to the integer column of type ``type_name``."""
    t = _DELTA_TYPES.get(type_name)
    if t is None or array.type.value_type != pa.int64() or array.null_count:
        raise ValueError(f"unexpected delta-encoded column {array.type} of {type_name!r}")
    values = np.cumsum(pc.run_end_decode(array).to_numpy(), dtype=np.int64)
    return pa.array(values.astype(np.dtype(type_name), copy=False), type=t)
