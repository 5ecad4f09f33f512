"""The compiled encoder of string columns as packed dictionaries (``_encode.c``) against the
Python code it reproduces (:func:`colonnade.encoding.packed.pack` of Arrow's dictionary): the
same sections for every column, the same chunks and statistics from ``encode_chunk``."""

from __future__ import annotations

import ctypes.util
import threading

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from colonnade.encoding import chunk, packed
from colonnade.encoding.chunk import HEADER_SIZE, _narrow, decode_chunk, encode_chunk
from colonnade.encoding.packed import CODECS, SECTIONS, pack, pack_strings, read_sections, unpack

pytestmark = pytest.mark.unit


def _sections(payload: bytes) -> list[bytes]:
    """A packed payload's header and its sections, decompressed."""
    buffer = pa.py_buffer(payload)
    codec = CODECS[payload[0]]
    return [payload[:16]] + [s.to_pybytes() for s in read_sections(buffer, 16, SECTIONS, codec)]


def _python_pack(array: pa.Array, compression: str) -> bytes:
    codec = None if compression == "none" else pa.Codec(compression, compression_level=3)
    return pack(_narrow(pc.dictionary_encode(array)), compression, codec)


def _column(rng: np.random.Generator, n: int, distinct: int, nulls: float, long: bool) -> list[str | None]:
    # long values share their first 16 bytes or more, so that they differ only past them
    prefix = "a shared prefix of 23 b" if long else ""
    values = [f"{prefix}{int(v)}é" if v % 7 else "" for v in rng.zipf(1.3, n) % distinct]
    return [None if rng.random() < nulls else v for v in values]


def test_the_compiled_encoder_is_built_and_compresses_zstd() -> None:
    assert packed._encoder is not None, "make setup did not build colonnade.encoding._encode"
    if ctypes.util.find_library("zstd"):
        assert packed._encoder.ZSTD == 1 and packed.packs_compiled(pa.string(), "zstd")
    assert not packed.packs_compiled(pa.string(), "lz4") and not packed.packs_compiled(pa.int64(), "zstd")


@pytest.mark.parametrize("large", [False, True])
@pytest.mark.parametrize("long", [False, True])
@pytest.mark.parametrize("nulls", [0.0, 0.45, 1.0])
@pytest.mark.parametrize("n,distinct", [(1, 1), (63, 5), (64, 70), (1000, 30), (65_536, 3000), (70_000, 1 << 20)])
def test_sections_are_the_python_codes(n: int, distinct: int, nulls: float, long: bool, large: bool) -> None:
    rng = np.random.default_rng(n + distinct)
    array = pa.array(_column(rng, n, distinct, nulls, long), pa.large_string() if large else pa.string())
    for compression in ("none", "zstd"):
        got = pack_strings(array, None, compression, 3)
        assert got is not None
        payload, m, lo, hi = got
        want = _python_pack(array, compression)
        if compression == "none":
            assert payload == want
        assert _sections(payload) == _sections(want)
        assert unpack(pa.py_buffer(payload)).equals(unpack(pa.py_buffer(want)))
        assert m == len(pc.unique(array.drop_null()))
        present = [v for v in array.to_pylist() if v is not None]
        if present:
            # bytewise order, as Arrow's min_max orders strings
            assert (lo, hi) == (min(v.encode() for v in present), max(v.encode() for v in present))
        else:
            assert (lo, hi) == (None, None)


def test_slices_at_any_offset() -> None:
    rng = np.random.default_rng(5)
    whole = pa.array(_column(rng, 5000, 40, 0.3, True))
    for start, length in ((1, 100), (3, 4000), (7, 64), (63, 65), (64, 4936), (4999, 1)):
        part = whole.slice(start, length)
        got = pack_strings(part, None, "zstd", 3)
        assert got is not None
        assert _sections(got[0]) == _sections(_python_pack(part, "zstd")), (start, length)


def test_no_payload_past_the_limit_of_distinct_values() -> None:
    array = pa.array(["a", "b", None, "c", "a", "d"])
    assert pack_strings(array, 3, "zstd", 3) is None
    found = pack_strings(array, 4, "zstd", 3)
    assert found is not None and found[1] == 4


def test_encode_chunk_makes_the_chunks_and_statistics_of_the_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    """encode_chunk's compiled path against its rules' path (the compiled one turned off):
    the same values, flags and statistics but for the chunk's size (another ZSTD build), for
    columns the rules store as dictionaries, as plain values (mostly distinct, or over half
    distinct past the sample), with the dictionary forced either way."""
    rng = np.random.default_rng(11)
    long_distinct = [f"k{v}" for v in rng.integers(0, 1 << 30, 20_000)]
    columns = {
        "names": pa.array(_column(rng, 40_000, 2000, 0.3, False)),
        "long": pa.array(_column(rng, 40_000, 500, 0.0, True)),
        "distinct": pa.array(long_distinct),
        # the sample (every 19th row) repeats, the column is mostly distinct
        "sample repeats": pa.array([("x" if i % 19 == 0 else f"u{i}") for i in range(20_000)]),
        "huge values": pa.array(["v" * 300, "w" * 300, None] * 2000),
        "all null": pa.array([None] * 5000, pa.string()),
        "short": pa.array(["b", "a", None, "b"]),
    }
    options = [{}, {"dictionary": True}, {"dictionary": False}, {"run_end": False}]
    compiled = {}
    for name, array in columns.items():
        for k, option in enumerate(options):
            compiled[name, k] = encode_chunk(array, "zstd", **option)
    monkeypatch.setattr(chunk, "packs_compiled", lambda t, c: False)
    for name, array in columns.items():
        for k, option in enumerate(options):
            data, stats = compiled[name, k]
            want_data, want_stats = encode_chunk(array, "zstd", **option)
            assert data[:6] == want_data[:6], (name, option)  # magic, version, flags
            assert stats == type(stats)(**{**vars(want_stats), "nbytes": len(data)}), (name, option)
            assert decode_chunk(data).equals(decode_chunk(want_data)), (name, option)
            if data[5] == 9:
                assert _sections(data[HEADER_SIZE:]) == _sections(want_data[HEADER_SIZE:]), (name, option)


def test_many_threads_encode_at_once() -> None:
    """Each thread keeps its own working buffers: columns of different sizes encoded at once
    give what each gives alone."""
    rng = np.random.default_rng(2)
    arrays = [pa.array(_column(rng, int(n), 200, 0.2, bool(n % 2))) for n in rng.integers(1, 60_000, 24)]
    alone = [pack_strings(a, None, "zstd", 3) for a in arrays]
    got: dict[int, object] = {}

    def work(k: int) -> None:
        for round_ in range(3):
            for i in range(k, len(arrays), 4):
                got[i, round_] = pack_strings(arrays[i], None, "zstd", 3)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for (i, _), found in got.items():
        assert found == alone[i]


def test_damaged_offsets_are_refused() -> None:
    assert packed._encoder is not None
    schema = pa.schema([pa.field("v", pa.string())]).serialize().to_pybytes()
    data = pa.py_buffer(b"abcdef")
    bad = pa.py_buffer(np.array([0, 2, 9], dtype=np.int32).tobytes())  # past the data
    with pytest.raises(ValueError, match="offsets out of range"):
        packed._encoder.pack_strings(None, bad, data, 0, 2, False, -1, schema, 2, 3)
    backwards = pa.py_buffer(np.array([0, 4, 2], dtype=np.int32).tobytes())
    with pytest.raises(ValueError, match="offsets out of range"):
        packed._encoder.pack_strings(None, backwards, data, 0, 2, False, -1, schema, 2, 3)
    with pytest.raises(ValueError, match="shorter than the column"):
        packed._encoder.pack_strings(None, bad, data, 0, 3, False, -1, schema, 2, 3)
