"""The compiled decoder of packed dictionary payloads (``_packed.c``) against the Python code it
reproduces: the same arrays for every payload, the same refusals for damaged ones."""

from __future__ import annotations

import ctypes.util
import struct

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from colonnade.encoding import packed
from colonnade.encoding.chunk import HEADER_SIZE, encode_chunk
from colonnade.encoding.packed import PackedFormatError, unpack


def test_the_compiled_decoder_is_built_and_reads_zstd() -> None:
    assert packed._compiled is not None, "make setup did not build colonnade.encoding._packed"
    if ctypes.util.find_library("zstd"):
        assert packed._compiled.ZSTD == 1


def test_checksums_by_libdeflate_are_zlibs_and_still_catch_damage() -> None:
    import os
    import zlib

    from colonnade.encoding import chunk
    from colonnade.encoding.chunk import ChunkFormatError, verify_chunk

    assert packed._compiled is not None
    if ctypes.util.find_library("deflate"):
        assert packed._compiled.CRC32 == 1 and chunk._crc32 is packed._compiled.crc32
    if not packed._compiled.CRC32:
        with pytest.raises(RuntimeError, match="libdeflate"):
            packed._compiled.crc32(b"x", 0)
        return
    rng = np.random.default_rng(7)
    for n in (0, 1, 3, 64, 4095, 4096, 4097, 100_003, 1 << 20):
        data = os.urandom(n)
        for start in (0, 1, 0xDEADBEEF, 0xFFFFFFFF):
            assert packed._compiled.crc32(data, start) == zlib.crc32(data, start), (n, start)
        if n > 8:
            view = memoryview(data)[int(rng.integers(1, 8)):]  # not aligned
            assert packed._compiled.crc32(view, 5) == zlib.crc32(view, 5)
    data, _ = encode_chunk(pa.array(np.arange(50_000, dtype=np.int64)), "zstd")
    verify_chunk(data)
    for at in (HEADER_SIZE, len(data) // 2, len(data) - 1):
        damaged = bytearray(data)
        damaged[at] ^= 0x10
        with pytest.raises(ChunkFormatError, match="checksum"):
            verify_chunk(bytes(damaged))


def _payload(array: pa.Array, compression: str) -> pa.Buffer:
    data, stats = encode_chunk(array, compression, dictionary=True)
    assert data[5] == 9, "not stored as a packed dictionary"
    return pa.py_buffer(data).slice(HEADER_SIZE)


def _bits_equal(a: pa.Array, b: pa.Array) -> bool:
    """Same values, fixed-width ones bit for bit (NaN and -0.0 included), and the same nulls."""
    if not a.is_valid().equals(b.is_valid()):
        return False
    if not (pa.types.is_integer(a.type) or pa.types.is_floating(a.type) or pa.types.is_temporal(a.type)):
        return a.equals(b)
    valid = np.asarray(a.is_valid())
    bits = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.type.bit_width // 8]
    got, want = (np.frombuffer(x.buffers()[1], bits)[x.offset:x.offset + len(x)] for x in (a, b))
    return bool(np.array_equal(got[valid], want[valid]))


def _same(a: pa.Array, b: pa.Array) -> None:
    assert a.type == b.type and a.null_count == b.null_count and len(a) == len(b)
    if pa.types.is_dictionary(a.type):
        assert a.indices.equals(b.indices) and _bits_equal(a.dictionary, b.dictionary)
    else:
        assert _bits_equal(a, b)


def _both(payload: pa.Buffer, index_type: pa.DataType | None, decode_fixed: bool) -> pa.Array:
    compiled = unpack(payload, index_type, decode_fixed)
    _same(compiled, unpack(payload, index_type, decode_fixed, compiled=False))
    return compiled


@pytest.mark.parametrize("compression", ["zstd", "none", "lz4"])
@pytest.mark.parametrize("distinct", [3, 200, 40_000, 70_000])  # index widths 1, 1, 2 and 4 bytes
@pytest.mark.parametrize("nulls", [0.0, 0.35, 0.97])
@pytest.mark.parametrize("large", [False, True])
def test_strings_decode_the_same(compression: str, distinct: int, nulls: float, large: bool) -> None:
    rng = np.random.default_rng(distinct)
    rows = max(2 * distinct + 1, 5000)
    names = np.array([f"name {i} " + "x" * (i % 300) for i in range(distinct)], dtype=object)
    picks = names[rng.integers(0, distinct, rows)]
    picks[rng.random(rows) < nulls] = None
    array = pa.array(picks.tolist(), pa.large_string() if large else pa.string())
    payload = _payload(array, compression)
    for index_type in (None, pa.int32()):
        got = _both(payload, index_type, decode_fixed=False)
        assert got.to_pylist() == array.to_pylist()


@pytest.mark.parametrize("type_", [pa.int8(), pa.uint16(), pa.int32(), pa.int64(), pa.float32(), pa.float64(),
                                   pa.date32(), pa.timestamp("us", tz="UTC"), pa.binary()], ids=str)
@pytest.mark.parametrize("nulls", [False, True])
@pytest.mark.parametrize("compression", ["zstd", "none"])
def test_numbers_and_binaries_decode_the_same(type_: pa.DataType, nulls: bool, compression: str) -> None:
    rng = np.random.default_rng(7)
    rows, distinct = 6000, 300
    if pa.types.is_binary(type_):
        base = pa.array([bytes([i % 256]) * (i % 7) + b"\x00" for i in range(distinct)], type_)
    elif pa.types.is_floating(type_):
        base = pa.concat_arrays([pa.array(rng.standard_normal(distinct - 3)).cast(type_),
                                 pa.array([-0.0, float("inf"), float("nan")]).cast(type_)])
    else:
        base = pa.array(rng.integers(0, 100, distinct), pa.int64()).cast(
            pa.int32() if type_.bit_width == 32 else pa.int64()).cast(type_)
    mask = rng.random(rows) < 0.3 if nulls else None
    array = pa.DictionaryArray.from_arrays(pa.array(rng.integers(0, distinct, rows), pa.int32(), mask=mask), base)
    payload = _payload(array, compression)
    for index_type, decode_fixed in ((None, False), (pa.int32(), False), (pa.int32(), True)):
        _both(payload, index_type, decode_fixed)


def _outcome(payload: pa.Buffer, compiled: bool) -> pa.Array | str:
    try:
        return unpack(payload, pa.int32(), False, compiled=compiled)
    except PackedFormatError as exc:
        return str(exc)


def _compressed_bodies(payload: bytes) -> set[int]:
    """Offsets of the bytes of a payload's compressed section bodies."""
    at, inside = 16, set()
    for _ in range(5):
        raw, stored = struct.unpack_from("<II", payload, at)
        if stored != raw:
            inside.update(range(at + 8, at + 8 + stored))
        at += 8 + stored
    return inside


@pytest.mark.parametrize("compression", ["zstd", "none"])
def test_damaged_payloads_are_refused_the_same(compression: str) -> None:
    """Every byte of a payload changed in turn (and the payload cut at every length): both
    decoders refuse it, or both give the same array; neither crashes. (The chunk's checksum
    catches such damage first; this is about bytes a bug wrote wrong.)

    Damaged ZSTD bytes are the exception: Arrow's bundled libzstd and the system's may refuse
    different damage, and decompress the same damage to different bytes; then either decoder
    refuses it or gives an array whose indices and offsets are valid."""
    rng = np.random.default_rng(11)
    values = pa.array([None if i % 3 == 0 else f"v{i % 300}" for i in range(2000)])
    good = _payload(values, compression).to_pybytes()
    fuzzy = _compressed_bodies(good)
    assert bool(fuzzy) == (compression == "zstd")
    damaged = []
    for at in range(len(good)):
        for value in {good[at] ^ 0xFF, good[at] ^ 1, int(rng.integers(0, 256))} - {good[at]}:
            damaged.append((at in fuzzy, good[:at] + bytes([value]) + good[at + 1:]))
    damaged += [(False, good[:cut]) for cut in range(0, len(good), max(1, len(good) // 200))]
    refused = 0
    for in_zstd, data in damaged:
        compiled, python = _outcome(pa.py_buffer(data), True), _outcome(pa.py_buffer(data), False)
        if in_zstd:
            for outcome in (compiled, python):
                if not isinstance(outcome, str):  # indices in range, offsets in order
                    outcome.validate()
                    outcome.dictionary.cast(pa.binary()).validate(full=True)
                    assert pc.max(outcome.indices).as_py() < len(outcome.dictionary)
        elif isinstance(python, str) or isinstance(compiled, str):
            assert isinstance(compiled, str) and isinstance(python, str)
            refused += 1
        else:
            _same(compiled, python)
    assert refused > len(damaged) // 10


def test_many_threads_decode_at_once() -> None:
    """More threads than decompression contexts kept (16): each decodes what it decodes alone."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(2)
    arrays = [pa.array([None if x % 5 == 0 else f"s{x}" for x in rng.integers(0, 500, 20_000)]) for _ in range(4)]
    payloads = [_payload(a, "zstd") for a in arrays]
    alone = [unpack(p, pa.int32()) for p in payloads]
    assert [a.to_pylist() for a in alone] == [a.to_pylist() for a in arrays]
    with ThreadPoolExecutor(24) as pool:
        decoded = list(pool.map(lambda i: unpack(payloads[i % 4], pa.int32()), range(240)))
    for i, got in enumerate(decoded):
        _same(got, alone[i % 4])
