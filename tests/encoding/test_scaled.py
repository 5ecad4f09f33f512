"""Decimal-scaled floats (chunk format version 4): every float comes back bit for bit whichever
way its chunk stores it; short decimals are stored as integers, smaller; anything the integers
can't give back (-0.0, NaN, infinities, long fractions) keeps the column plain; a damaged header
or metadata is an error, never a wrong value."""

from __future__ import annotations

import math
import struct
import zlib

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from colonnade.encoding import decode_chunk, encode_chunk
from colonnade.encoding.chunk import FLAG_SCALED, ChunkFormatError

pytestmark = pytest.mark.unit


def _bits(array: pa.Array) -> tuple[bytes, list[bool]]:
    """Values as bytes (nulls as 0) and validity: what "bit for bit" compares."""
    values = np.array([0.0 if v is None else v for v in array.to_pylist()], dtype=array.type.to_pandas_dtype())
    return values.tobytes(), array.is_valid().to_pylist()


def _round_trip(array: pa.Array, compression: str = "zstd") -> bytes:
    data, stats = encode_chunk(array, compression)
    back = decode_chunk(data)
    assert back.type == array.type
    assert _bits(back) == _bits(array)
    assert stats.rows == len(array) and stats.nulls == array.null_count
    return data


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True),
                          st.integers(-10**9, 10**9).map(lambda i: i / 1000),
                          st.integers(-10**12, 10**12).map(lambda i: i / 10**6)), min_size=1, max_size=300),
       st.sampled_from([pa.float64(), pa.float32()]), st.sampled_from(["zstd", "lz4", "none"]))
def test_every_float_comes_back_bit_for_bit(values: list[float | None], t: pa.DataType, compression: str) -> None:
    with np.errstate(over="ignore"):
        _round_trip(pa.array(values, pa.float64()).cast(t, safe=False), compression)


def test_short_decimals_are_stored_as_integers_and_smaller() -> None:
    rng = np.random.default_rng(7)
    tone = np.round(rng.normal(0, 4, 42_000), 6)  # GDELT's tone: six decimals
    with_nulls = pa.array(tone, mask=rng.random(len(tone)) < 0.1)
    for array in (pa.array(tone), with_nulls, with_nulls.slice(1234, 20_000)):
        data = _round_trip(array)
        assert data[4] == 4 and data[5] == FLAG_SCALED
        schema = pa.ipc.open_stream(pa.py_buffer(data[16:])).schema
        assert schema.field(0).type == pa.int32()
        assert schema.field(0).metadata == {b"colonnade.scaled_of": b"double:6"}
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, pa.schema([pa.field("v", pa.float64())]),
                           options=pa.ipc.IpcWriteOptions(compression=pa.Codec("zstd", 3))) as writer:
        writer.write_batch(pa.record_batch([pa.array(tone)], names=["v"]))
    plain = len(sink.getvalue())
    assert len(encode_chunk(pa.array(tone))[0]) < 0.75 * plain


@pytest.mark.parametrize(("values", "scaled"), [
    ([1.0, 2.0, 3.0], True),  # scale 0
    ([0.1, 0.2, 0.3], True),
    ([-0.0, 1.5], False),  # -0.0 would come back as 0.0
    ([0.1, math.nan], False),
    ([0.1, math.inf], False),
    ([1 / 3, 0.5], False),  # no short decimal
    ([1e-13, 1.0], False),  # beyond the largest scale
    ([1e17, 1.0], False),  # integers beyond 2**53
    ([None, None], False),
])
def test_which_columns_are_scaled(values: list[float | None], scaled: bool) -> None:
    data = _round_trip(pa.array(values, pa.float64()))
    assert bool(data[5] & FLAG_SCALED) == scaled


def test_a_column_whose_first_values_are_decimals_and_later_ones_not_stays_plain() -> None:
    values = [i / 100 for i in range(1000)] + [math.pi]
    data = _round_trip(pa.array(values))
    assert not data[5] & FLAG_SCALED


def test_integers_beyond_int32_are_stored_as_int64() -> None:
    data = _round_trip(pa.array([30_000_000.25, -1.5, None]))
    schema = pa.ipc.open_stream(pa.py_buffer(data[16:])).schema
    assert schema.field(0).type == pa.int64() and schema.field(0).metadata == {b"colonnade.scaled_of": b"double:2"}


def _rewritten(data: bytes, flags: int | None = None, metadata: bytes | None = None) -> bytes:
    """``data`` with other header flags or scaled_of metadata, its checksum made right again."""
    out = bytearray(data)
    if metadata is not None:
        table = pa.ipc.open_stream(pa.py_buffer(data[16:])).read_all()
        field = table.schema.field(0).with_metadata({b"colonnade.scaled_of": metadata})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, pa.schema([field])) as writer:
            writer.write_table(table.cast(pa.schema([field])))
        payload = sink.getvalue().to_pybytes()
        out = out[:16] + bytearray(payload)
        out[12:16] = struct.pack("<I", len(payload))
    if flags is not None:
        out[5] = flags
    out[8:12] = struct.pack("<I", zlib.crc32(bytes(out[16:]), zlib.crc32(bytes(out[4:8]))))
    return bytes(out)


def test_damage_the_checksum_cant_see_is_an_error() -> None:
    data = encode_chunk(pa.array([0.25, 1.5, None]))[0]
    assert data[5] == FLAG_SCALED
    with pytest.raises(ChunkFormatError, match="scaled flag"):
        decode_chunk(_rewritten(data, flags=0))  # would read the integers as the values
    with pytest.raises(ChunkFormatError, match="scaled flag"):
        decode_chunk(_rewritten(data, flags=FLAG_SCALED | 1))
    for bad in (b"double:99", b"double:", b"decimal:2", b"double:-1"):
        with pytest.raises(ChunkFormatError, match="invalid decimal-scaled column"):
            decode_chunk(_rewritten(data, metadata=bad))
    plain = encode_chunk(pa.array([math.pi * i for i in range(10)]))[0]
    assert plain[5] == 0
    with pytest.raises(ChunkFormatError, match="scaled flag"):
        decode_chunk(_rewritten(plain, flags=FLAG_SCALED))
    version_3 = bytearray(data)
    version_3[4] = 3
    with pytest.raises(ChunkFormatError, match="unknown header flags"):
        decode_chunk(_rewritten(bytes(version_3)))
