"""Decimal-scaled floats (chunk format versions 4 and 5): every float comes back bit for bit whichever
way its chunk stores it; short decimals are stored as integers, smaller; anything the integers
can't give back (-0.0, NaN, infinities, long fractions) keeps the column plain; a damaged header
or metadata is an error, never a wrong value."""

from __future__ import annotations

import math
import struct
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from colonnade.encoding import decode_chunk, encode_chunk
from colonnade.encoding.chunk import FLAG_PACKED, FLAG_SCALED, ChunkFormatError
from colonnade.encoding.packed import PackedFormatError
from colonnade.encoding.scaled import unpack_scaled

GOLDEN = Path(__file__).parent / "golden"

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


def _head(data: bytes) -> tuple[int, ...]:
    """A version 5 scaled chunk's payload header: codec, width, scale, type, rows, rows with a
    value, reserved."""
    assert data[4] == 5 and data[5] == FLAG_SCALED | FLAG_PACKED
    return struct.unpack_from("<BBBBIII", data, 16)


def test_short_decimals_are_stored_as_integers_and_smaller() -> None:
    rng = np.random.default_rng(7)
    tone = np.round(rng.normal(0, 4, 42_000), 6)  # GDELT's tone: six decimals
    with_nulls = pa.array(tone, mask=rng.random(len(tone)) < 0.1)
    for array in (pa.array(tone), with_nulls, with_nulls.slice(1234, 20_000)):
        data = _round_trip(array)
        assert _head(data) == (2, 4, 6, 0, len(array), len(array) - array.null_count, 0)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, pa.schema([pa.field("v", pa.float64())]),
                           options=pa.ipc.IpcWriteOptions(compression=pa.Codec("zstd", 3))) as writer:
        writer.write_batch(pa.record_batch([pa.array(tone)], names=["v"]))
    plain = len(sink.getvalue())
    assert len(encode_chunk(pa.array(tone))[0]) < 0.75 * plain


def test_zigzag_planes_are_smaller_than_the_int32_ipc_stream_of_version_4() -> None:
    rng = np.random.default_rng(8)
    tone = pa.array(np.round(rng.normal(0, 4, 42_000), 6))
    sink = pa.BufferOutputStream()
    integers = pa.array(np.round(tone.to_numpy() * 1e6).astype(np.int32))
    with pa.ipc.new_stream(sink, pa.schema([pa.field("v", pa.int32())]),
                           options=pa.ipc.IpcWriteOptions(compression=pa.Codec("zstd", 3))) as writer:
        writer.write_batch(pa.record_batch([integers], names=["v"]))
    assert len(encode_chunk(tone)[0]) < 0.98 * len(sink.getvalue())


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
    assert _head(data) == (2, 8, 2, 0, 3, 2, 0)  # the chunk's codec, whether or not a section is compressed


def _rewritten(data: bytes, flags: int | None = None, metadata: bytes | None = None, version: int | None = None,
               payload: bytes | None = None) -> bytes:
    """``data`` with other header flags, version, payload or (version 4) scaled_of metadata, its
    checksum made right again."""
    out = bytearray(data)
    if metadata is not None:
        table = pa.ipc.open_stream(pa.py_buffer(data[16:])).read_all()
        field = table.schema.field(0).with_metadata({b"colonnade.scaled_of": metadata})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, pa.schema([field])) as writer:
            writer.write_table(table.cast(pa.schema([field])))
        payload = sink.getvalue().to_pybytes()
    if payload is not None:
        out = out[:16] + bytearray(payload)
        out[12:16] = struct.pack("<I", len(payload))
    if flags is not None:
        out[5] = flags
    if version is not None:
        out[4] = version
    out[8:12] = struct.pack("<I", zlib.crc32(bytes(out[16:]), zlib.crc32(bytes(out[4:8]))))
    return bytes(out)


def test_damage_the_checksum_cant_see_is_an_error() -> None:
    # version 4: the integers in an IPC stream, type and scale in its metadata
    data = (GOLDEN / "v4" / "float64_scaled_nulls_zstd.chunk").read_bytes()
    assert data[4] == 4 and data[5] == FLAG_SCALED
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
    with pytest.raises(ChunkFormatError, match="unknown header flags"):
        decode_chunk(_rewritten(data, version=3))
    # version 5: sections
    data = encode_chunk(pa.array([0.25, 1.5, None]))[0]
    assert _head(data)[:4] == (2, 4, 2, 0)
    for flags in (0, FLAG_SCALED, FLAG_PACKED, FLAG_PACKED | FLAG_SCALED | 1):
        with pytest.raises(ChunkFormatError):
            decode_chunk(_rewritten(data, flags=flags))
    with pytest.raises(ChunkFormatError):  # version 4 has no scaled sections
        decode_chunk(_rewritten(data, version=4))
    payload = data[16:]
    for at, value in ((1, 3), (1, 2), (2, 13), (3, 2), (12, 1), (8, 9)):  # width, scale, type, reserved, v > n
        with pytest.raises(ChunkFormatError):
            decode_chunk(_rewritten(data, payload=payload[:at] + bytes([value]) + payload[at + 1:]))


def _outcome(payload: bytes, compiled: bool) -> tuple[bytes, list[bool]] | str:
    try:
        return _bits(unpack_scaled(pa.py_buffer(payload), compiled=compiled))
    except PackedFormatError as exc:
        return str(exc)


@pytest.mark.parametrize("compression", ["zstd", "none", "lz4"])
@pytest.mark.parametrize("type_", [pa.float64(), pa.float32()], ids=str)
@pytest.mark.parametrize("case", ["narrow", "wide", "nulls", "mostly null", "slice"])
def test_the_compiled_decoder_gives_what_the_python_one_does(compression: str, type_: pa.DataType,
                                                             case: str) -> None:
    rng = np.random.default_rng(3)
    rows = 5003
    values = np.round(rng.normal(0, 40, rows), 3 if type_ == pa.float32() else 6)
    if case == "wide":  # int64 integers (float32: integers, scale 0)
        values = values * 1e5 + 2.0**33 if type_ == pa.float64() else np.round(values * 1e4)
    mask = {"nulls": rng.random(rows) < 0.3, "mostly null": rng.random(rows) < 0.95}.get(case)
    array = pa.array(values, mask=mask).cast(type_)
    if case == "slice":
        array = pa.array(values, mask=rng.random(rows) < 0.2).cast(type_).slice(333, 4000)
    data = encode_chunk(array, compression, dictionary=False)[0]  # few distinct values when mostly null
    assert data[5] == FLAG_SCALED | FLAG_PACKED
    assert _outcome(data[16:], True) == _outcome(data[16:], False) == _bits(array)


@pytest.mark.parametrize("compression", ["zstd", "none"])
def test_damaged_scaled_payloads_are_refused_the_same(compression: str) -> None:
    """Every byte of the payload changed in turn, and the payload cut: both decoders refuse it or
    give the same values (damage inside ZSTD bytes: either refuses or gives some values, as
    two builds of libzstd may differ there)."""
    rng = np.random.default_rng(5)
    array = pa.array(np.round(rng.normal(0, 4, 700), 6), mask=rng.random(700) < 0.3)
    good = encode_chunk(array, compression)[0][16:]
    raw, stored = struct.unpack_from("<II", good, 16 + 8 + struct.unpack_from("<I", good, 20)[0])
    body = 16 + 8 + struct.unpack_from("<I", good, 20)[0] + 8
    fuzzy = set(range(body, body + stored)) if stored != raw else set()
    assert bool(fuzzy) == (compression == "zstd")
    refused = 0
    for at in range(len(good)):
        for value in {good[at] ^ 0xFF, good[at] ^ 1, int(rng.integers(0, 256))} - {good[at]}:
            damaged = good[:at] + bytes([value]) + good[at + 1:]
            compiled, python = _outcome(damaged, True), _outcome(damaged, False)
            if at in fuzzy:
                continue  # no crash is the check
            assert isinstance(compiled, str) == isinstance(python, str), at
            refused += isinstance(compiled, str)
            if not isinstance(compiled, str):
                assert compiled == python
    for cut in range(len(good)):
        assert isinstance(_outcome(good[:cut], True), str) and isinstance(_outcome(good[:cut], False), str)
    assert refused > 10
