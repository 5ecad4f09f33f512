"""The compiled scan passes (``colonnade.encoding._scan``) against the NumPy code they reproduce:
the same arrays and the same doubles, bit for bit, for every index and value width, with and
without nulls, on sliced arrays; and codes out of range or a bitmap that disagrees reported,
not read past."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from colonnade.encoding import kernels
from colonnade.encoding.packed import PackedFormatError, pack, unpack


def test_the_compiled_passes_are_built() -> None:
    # `make setup` compiles them; without a compiler the NumPy code runs, more slowly
    assert kernels.AVAILABLE


@pytest.mark.parametrize("seed", range(40))
def test_place_agrees_with_numpy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 200))
    marks = rng.random(n) < float(rng.choice([0.0, 0.3, 0.9, 1.0]))
    present_type = np.dtype(rng.choice(["u1", "u2", "u4"]))
    present = rng.integers(0, np.iinfo(present_type).max, int(marks.sum()), endpoint=True).astype(present_type)
    validity = pa.py_buffer(np.packbits(marks, bitorder="little").tobytes() + b"\xff")  # bits past n ignored
    out_type = np.dtype(rng.choice(["i1", "i2", "i4", "u4"]))
    compiled = kernels.place(present, validity, n, out_type)
    numpy = kernels.place(present, validity, n, out_type, compiled=False)
    assert compiled[0].dtype == out_type
    assert compiled[0].tobytes() == numpy[0].tobytes()
    assert compiled[1:] == numpy[1:] == (int(marks.sum()), int(present.max(initial=0)))


def test_place_reports_a_bitmap_that_marks_other_rows_than_values() -> None:
    validity = pa.py_buffer(np.packbits(np.ones(20, dtype=bool), bitorder="little"))
    for compiled in (True, False):
        out, marked, _ = kernels.place(np.arange(5, dtype=np.uint8), validity, 20, np.dtype("i4"), compiled)
        assert marked == 20 and out[:5].tolist() == [0, 1, 2, 3, 4] and not out[5:].any()
        out, marked, _ = kernels.place(np.arange(50, dtype=np.uint8), validity, 20, np.dtype("i4"), compiled)
        assert marked == 20 and out.tolist() == list(range(20))


def test_a_packed_chunk_whose_bitmap_disagrees_is_refused() -> None:
    array = pa.array(["a", None, "b", "a"] * 10).dictionary_encode()
    payload = bytearray(pack(array, "none", None))
    # the validity section follows the header and the schema section: mark every row
    at = 16 + 8 + int.from_bytes(payload[20:24], "little")
    raw = int.from_bytes(payload[at:at + 4], "little")
    payload[at + 8:at + 8 + raw] = b"\xff" * raw
    with pytest.raises(PackedFormatError, match="validity bitmap"):
        unpack(pa.py_buffer(bytes(payload)))


_VALUE_TYPES = [pa.float64(), pa.float32(), pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(),
                pa.uint32(), pa.uint64()]


@pytest.mark.parametrize("seed", range(60))
def test_group_rows_and_sums_agree_with_numpy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 3000))
    m = int(rng.integers(1, 400))
    index_type = pa.int8() if m <= 127 and rng.random() < 0.5 else pa.int16() if m < 32767 and rng.random() < 0.5 \
        else pa.int32()
    key_nulls = rng.random(n) < float(rng.choice([0.0, 0.35]))
    indices = pa.array(rng.integers(0, m, n), type=index_type, mask=key_nulls)
    value_type = _VALUE_TYPES[seed % len(_VALUE_TYPES)]
    if pa.types.is_floating(value_type):
        raw = rng.normal(0, 1e3, n) * rng.choice([1.0, 1e-300, 1e300], n)
    else:
        info = np.iinfo(value_type.to_pandas_dtype())
        raw = rng.integers(max(info.min, -(1 << 40)), min(info.max, 1 << 40), n, endpoint=True)
    values = pa.array(raw, mask=rng.random(n) < float(rng.choice([0.0, 0.2]))).cast(value_type)
    start = int(rng.integers(0, max(1, n // 3)))  # sliced: offsets into the buffers and bitmaps
    indices, values = indices.slice(start), values.slice(start)
    rows = kernels.group_rows(indices, m)
    assert rows.tobytes() == kernels.group_rows(indices, m, compiled=False).tobytes()
    assert rows.sum() == len(indices) and rows[m] == indices.null_count
    counts, sums = kernels.group_sums(indices, m, values)
    numpy_counts, numpy_sums = kernels.group_sums(indices, m, values, compiled=False)
    assert counts.tobytes() == numpy_counts.tobytes()
    assert sums.tobytes() == numpy_sums.tobytes()  # the same doubles, added in the same order
    assert counts.sum() == len(values) - values.null_count


def test_int64_codes_without_nulls() -> None:
    codes = np.array([3, 0, 3, 2, 3], dtype=np.int64)
    values = pa.array([1.5, 2.0, 0.25, None, 4.0])
    assert kernels.group_rows(codes, 4).tolist() == [1, 0, 1, 3, 0]
    counts, sums = kernels.group_sums(codes, 4, values)
    assert counts.tolist() == [1, 0, 0, 3, 0] and sums.tolist() == [2.0, 0.0, 0.0, 5.75, 0.0]


@pytest.mark.parametrize("compiled", [True, False])
def test_codes_out_of_range_are_refused(compiled: bool) -> None:
    indices = pa.array([0, 1, 7, None, 2], type=pa.int8())
    with pytest.raises(ValueError, match="1 dictionary codes out of range"):
        kernels.group_rows(indices, 3, compiled)
    with pytest.raises(ValueError, match="out of range"):
        kernels.group_sums(indices, 3, pa.array([1.0] * 5), compiled)
    with pytest.raises(ValueError, match="out of range"):
        kernels.group_rows(np.array([0, -1], dtype=np.int64), 3, compiled)
    # a null row's index is not read
    hidden = pa.Array.from_buffers(pa.int8(), 3, [pa.py_buffer(bytes([0b101])), pa.py_buffer(bytes([0, 99, 1]))], 1)
    assert kernels.group_rows(hidden, 3, compiled).tolist() == [1, 1, 0, 1]


@pytest.mark.parametrize("dtype", ["i4", "i8"])
def test_unscale_agrees_with_numpy(dtype: str) -> None:
    rng = np.random.default_rng(3)
    info = np.iinfo(dtype)
    integers = np.concatenate([rng.integers(info.min, info.max, 5000, dtype=dtype, endpoint=True),
                               np.array([0, 1, -1, info.min, info.max], dtype=dtype)])
    for power in (1.0, 10.0, 1e6, 1e12):
        assert kernels.unscale(integers, power).tobytes() == (integers / power).tobytes()
        assert kernels.unscale(integers, power, compiled=False).tobytes() == (integers / power).tobytes()


@pytest.mark.parametrize("t", [pa.int8(), pa.uint16(), pa.int32(), pa.int64(), pa.float32(), pa.float64()])
def test_values_of_is_a_view_of_the_rows_of_a_slice(t: pa.DataType) -> None:
    array = pa.array([1, None, 3, 4, None, 6, 7], type=t).slice(2, 4)
    view = kernels.values_of(array)
    assert view.dtype == t.to_pandas_dtype() and len(view) == 4
    assert view[np.asarray(array.is_valid())].tolist() == [3, 4, 6]
    assert np.shares_memory(view, np.frombuffer(array.buffers()[1], dtype=view.dtype))
