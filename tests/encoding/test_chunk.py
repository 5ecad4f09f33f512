"""The chunk byte format: round trips of every type, statistics, checksums, versions and the
golden files that pin format versions 1 to 5 (run-end encoding: see also test_run_end.py).

The golden chunks under ``golden/v<version>`` were written once by :func:`write_golden` with
the encoder of that version and are checked in; a decoder that can't read them any more breaks
every store written before it. Write them only for a new format version, into a new folder,
keeping the old ones::

    python tests/encoding/test_chunk.py golden/v5 5
"""

from __future__ import annotations

import datetime as dt
import math
import struct
import sys
import zlib
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from chunk_helpers import COMPRESSIONS, TYPES, check_round_trip, comparable, plain
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from colonnade.encoding import (
    CHUNK_FORMAT_VERSION,
    decode_chunk,
    encode_chunk,
    verify_chunk,
)
from colonnade.encoding.chunk import HEADER_SIZE, MAX_STAT_STRING, ChunkFormatError

pytestmark = pytest.mark.unit

GOLDEN = Path(__file__).parent / "golden"
# -- round trips -----------------------------------------------------------------------------------
@pytest.mark.parametrize("type_name", list(TYPES))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip_every_type(type_name: str, data: st.DataObject) -> None:
    strategy = TYPES[type_name][1]
    values = data.draw(st.lists(st.one_of(st.none(), strategy), max_size=60), label="values")
    compression = data.draw(st.sampled_from(COMPRESSIONS), label="compression")
    check_round_trip(type_name, values, compression)


@pytest.mark.parametrize("type_name", list(TYPES))
@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_empty_and_all_null(type_name: str, compression: str) -> None:
    _, stats = check_round_trip(type_name, [], compression)
    assert (stats.rows, stats.nulls, stats.min, stats.max) == (0, 0, None, None)
    _, stats = check_round_trip(type_name, [None] * 7, compression)
    assert (stats.rows, stats.nulls, stats.min, stats.max) == (7, 7, None, None)


@pytest.mark.parametrize("type_name", ["float32", "float64"])
def test_float_specials(type_name: str) -> None:
    _, stats = check_round_trip(type_name, [1.0, math.nan, 2.0, None], "zstd")
    assert (stats.min, stats.max) == (None, None), "NaN orders differently in SQL and Arrow"
    _, stats = check_round_trip(type_name, [1.0, math.inf, -math.inf, -0.0, None], "lz4")
    assert (stats.min, stats.max) == (None, None)
    _, stats = check_round_trip(type_name, [-0.0, 0.5, -2.5], "none")
    assert (stats.min, stats.max) == (-2.5, 0.5)


def test_strings_unicode_long_and_empty() -> None:
    values = ["", "ascii", "ünïcödé", "日本語のテキスト", "🎉 emoji 🎉", "x" * 100_000, None, ""]
    check_round_trip("string", values, "zstd")
    _, stats = check_round_trip("string", ["", "b", "ä"], "zstd")
    assert (stats.min, stats.max) == ("", "ä")  # code point (= UTF-8 byte) order


def test_long_strings_have_no_stats_and_short_ones_do() -> None:
    _, stats = check_round_trip("string", ["a", "z" * (MAX_STAT_STRING + 1)], "zstd")
    assert (stats.min, stats.max) == (None, None)
    _, stats = check_round_trip("string", ["a", "z" * MAX_STAT_STRING], "zstd")
    assert (stats.min, stats.max) == ("a", "z" * MAX_STAT_STRING)


def test_sliced_and_chunked_input() -> None:
    base = pa.array([None, 1, 2, 3, None, 5, 6, 7, 8, 9], pa.int64())
    data, stats = encode_chunk(base.slice(3, 5))
    assert decode_chunk(data).to_pylist() == [3, None, 5, 6, 7]
    assert (stats.rows, stats.nulls, stats.min, stats.max) == (5, 1, 3, 7)
    chunked = pa.chunked_array([pa.array(["a", "b"]), pa.array(["c", None])])
    data, stats = encode_chunk(chunked)
    assert plain(decode_chunk(data)).to_pylist() == ["a", "b", "c", None]
    assert (stats.rows, stats.nulls, stats.min, stats.max) == (4, 1, "a", "c")


# -- dictionary encoding ------------------------------------------------------------------------
@pytest.mark.parametrize("run_end", [None, True, False])
def test_a_slice_of_a_dictionary_array_stores_only_the_values_it_uses(run_end: bool | None) -> None:
    whole = pa.array(["k", "b", "b", None, "c", "z", "a"] * 40).dictionary_encode()
    part = whole.slice(100, 150).slice(0, 3)  # rows 100-102: "b", None, "c"
    assert part.to_pylist() == ["b", None, "c"]
    data, stats = encode_chunk(part, run_end=run_end)
    decoded = decode_chunk(data)
    assert decoded.to_pylist() == ["b", None, "c"]
    assert sorted(decoded.dictionary.to_pylist()) == ["b", "c"]
    assert (stats.rows, stats.nulls, stats.min, stats.max, stats.dictionary) == (3, 1, "b", "c", True)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(["red", "green", "blue", None]), min_size=20, max_size=300))
def test_low_cardinality_strings_are_dictionary_encoded(values: list[str | None]) -> None:
    data, stats = check_round_trip("string", values, "zstd")
    assert stats.dictionary
    assert pa.types.is_dictionary(decode_chunk(data).type)
    assert data[5] & 1, "the dictionary flag of the header is set"


@settings(max_examples=30, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=20), min_size=4, max_size=300, unique=True))
def test_high_cardinality_strings_areplain(values: list[str]) -> None:
    data, stats = check_round_trip("string", values, "lz4")
    assert not stats.dictionary
    assert decode_chunk(data).type == pa.string()
    assert not data[5] & 1


@pytest.mark.parametrize(("type_name", "few"), [
    ("int64", [1, 2, 3]), ("date32", [dt.date(2020, 1, 1), dt.date(2021, 1, 1)]),
    ("binary", [b"a", b"b"]), ("bool", [True, False])])
def test_other_types_read_back_as_plain_arrays(type_name: str, few: list[Any]) -> None:
    values = few * 30  # low cardinality: may be stored as a dictionary, never read as one
    data, stats = check_round_trip(type_name, values, "zstd")
    assert not stats.dictionary
    assert not pa.types.is_dictionary(decode_chunk(data).type)


@settings(max_examples=40, deadline=None)
@given(type_name=st.sampled_from(sorted(TYPES)), data=st.data())
def test_low_cardinality_columns_of_every_type_round_trip(type_name: str, data: st.DataObject) -> None:
    few = data.draw(st.lists(st.one_of(st.none(), TYPES[type_name][1]), min_size=1, max_size=4), label="few")
    values = data.draw(st.lists(st.sampled_from(few), min_size=10, max_size=100), label="values")
    check_round_trip(type_name, values, data.draw(st.sampled_from(COMPRESSIONS), label="compression"))


def test_low_cardinality_float_specials_round_trip_exactly() -> None:
    values = [0.0, -0.0, math.nan, math.inf, None] * 20
    for type_name in ("float32", "float64"):
        _, stats = check_round_trip(type_name, values, "zstd")
        assert (stats.min, stats.max) == (None, None)


def test_dictionary_can_be_forced_either_way() -> None:
    values = pa.array(["a", "b", "c", "d"])
    data, stats = encode_chunk(values, dictionary=True)
    assert stats.dictionary and pa.types.is_dictionary(decode_chunk(data).type)
    data, stats = encode_chunk(pa.array(["a"] * 50), dictionary=False)
    assert not stats.dictionary and decode_chunk(data).type == pa.string()


def test_dictionary_chunks_are_smaller_for_repetitive_text() -> None:
    values = pa.array([f"category-{i % 4}" for i in range(5000)])
    dict_size = len(encode_chunk(values, "none")[0])
    plain_size = len(encode_chunk(values, "none", dictionary=False)[0])
    assert dict_size < plain_size / 3


# -- header, checksum and versions ---------------------------------------------------------------
def _sample_chunks() -> list[bytes]:
    return [
        encode_chunk(pa.array([1, 2, None, 4] * 10, pa.int32()), "zstd")[0],
        encode_chunk(pa.array(["x", "y", None, "x"] * 10), "lz4")[0],  # dictionary
        encode_chunk(pa.array([1.5, None, -2.0]), "none")[0],
        encode_chunk(pa.array([3] * 300 + [None] * 100 + [-1] * 200, pa.int64()), "zstd")[0],  # run-end
        encode_chunk(pa.array(["ab"] * 500 + [None] * 300 + ["c"] * 500), "none")[0],  # run-end, dictionary
        # a type the packed payload doesn't hold: an Arrow IPC dictionary
        encode_chunk(pa.array([Decimal("1.25"), None, Decimal("1.25")] * 10, pa.decimal128(10, 2)), "zstd",
                     dictionary=True)[0],
        encode_chunk(pa.array(list(range(1000)), pa.int64()), "zstd")[0],  # delta runs
        encode_chunk(pa.array([1.5, math.inf, -2.0]), "none")[0],  # infinity is no decimal: plain
    ]


def test_the_sample_chunks_cover_every_flag() -> None:
    # packed dictionaries (1 | 8) for strings and numbers alike; short decimals scaled (16)
    assert [c[5] for c in _sample_chunks()] == [9, 9, 24, 2, 3, 1, 6, 0]


def test_documented_worked_example() -> None:
    data, _ = encode_chunk(pa.array([1, 2, 2], pa.int32()), "zstd")
    assert data[:8] == bytes.fromhex("434f4c4305000000")
    crc, length = struct.unpack_from("<II", data, 8)
    assert length == len(data) - HEADER_SIZE == len(data) - 16
    assert crc == zlib.crc32(data[4:8] + data[16:])  # version, flags, reserved, then the payload
    schema = pa.ipc.open_stream(pa.py_buffer(data[16:])).schema
    assert schema == pa.schema([pa.field("v", pa.int32())])


def test_documented_run_end_example() -> None:
    values = [7] * 300 + [None] * 200 + [9] * 500
    data, stats = encode_chunk(pa.array(values, pa.int32()), "zstd")
    assert data[:8] == bytes.fromhex("434f4c4305020000")
    payload = pa.ipc.open_stream(pa.py_buffer(data[16:])).read_all().column("v").chunk(0)
    assert payload.type == pa.run_end_encoded(pa.int32(), pa.int32())
    assert payload.run_ends.to_pylist() == [300, 500, 1000]
    assert payload.values.to_pylist() == [7, None, 9]
    assert decode_chunk(data).to_pylist() == values
    assert (stats.rows, stats.nulls, stats.min, stats.max) == (1000, 200, 7, 9)

    cities = ["Zürich"] * 600 + ["Bern"] * 400
    data, stats = encode_chunk(pa.array(cities), "none")
    assert data[5] == 0x03 and stats.dictionary  # run ends; read as a dictionary
    payload = pa.ipc.open_stream(pa.py_buffer(data[16:])).read_all().column("v").chunk(0)
    assert payload.type == pa.run_end_encoded(pa.int32(), pa.string())
    assert payload.values.to_pylist() == ["Zürich", "Bern"]
    decoded = decode_chunk(data)
    assert decoded.type == pa.dictionary(pa.int32(), pa.string())
    assert decoded.dictionary.to_pylist() == ["Zürich", "Bern"] and decoded.to_pylist() == cities


@pytest.mark.parametrize("index", range(7))
def test_flipping_any_byte_is_detected(index: int) -> None:
    data = _sample_chunks()[index]
    for position in range(len(data)):
        for mask in (0x01, 0x02, 0x80, 0xFF):
            damaged = bytearray(data)
            damaged[position] ^= mask
            with pytest.raises(ChunkFormatError):
                decode_chunk(bytes(damaged))
            with pytest.raises(ChunkFormatError):  # the checksum covers the flags too
                verify_chunk(bytes(damaged))
    flags = bytearray(data)
    flags[5] ^= 0x01
    with pytest.raises(ChunkFormatError, match="checksum mismatch"):
        decode_chunk(bytes(flags))


def test_a_version_1_chunk_may_not_claim_run_ends() -> None:
    data = bytearray((GOLDEN / "v1" / "int32_zstd.chunk").read_bytes())
    data[5] |= 0x02
    with pytest.raises(ChunkFormatError, match="unknown header flags 0x02"):
        decode_chunk(bytes(data))


def test_a_version_1_chunk_with_a_flipped_dictionary_flag_fails_decoding() -> None:
    """Version 1's CRC leaves the flags out: decoding checks the flag against the payload."""
    for name in ("int32_zstd", "string_dict_lz4"):
        data = bytearray((GOLDEN / "v1" / f"{name}.chunk").read_bytes())
        data[5] ^= 0x01
        verify_chunk(bytes(data))
        with pytest.raises(ChunkFormatError, match="dictionary flag"):
            decode_chunk(bytes(data))


@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.one_of(st.none(), st.text(max_size=8)), min_size=1, max_size=80),
       compression=st.sampled_from(COMPRESSIONS), data=st.data())
def test_flipping_a_random_byte_of_a_random_chunk_is_detected(values: list[str | None], compression: str,
                                                               data: st.DataObject) -> None:
    chunk = bytearray(encode_chunk(pa.array(values, pa.string()), compression)[0])
    position = data.draw(st.integers(0, len(chunk) - 1), label="position")
    chunk[position] ^= data.draw(st.integers(1, 255), label="mask")
    with pytest.raises(ChunkFormatError):
        decode_chunk(bytes(chunk))


@pytest.mark.parametrize("damage", ["truncate", "extend", "empty", "header-only", "short"])
def test_wrong_length_is_detected(damage: str) -> None:
    data = _sample_chunks()[0]
    damaged = {"truncate": data[:-1], "extend": data + b"\0", "empty": b"",
               "header-only": data[:HEADER_SIZE], "short": data[:5]}[damage]
    with pytest.raises(ChunkFormatError):
        decode_chunk(damaged)


def test_not_a_chunk() -> None:
    with pytest.raises(ChunkFormatError, match="magic"):
        decode_chunk(b"PAR1" + bytes(40))


@pytest.mark.parametrize("version", [CHUNK_FORMAT_VERSION + 1, 200, 255, 0])
def test_unknown_format_version_is_an_explicit_error(version: int) -> None:
    data = bytearray(_sample_chunks()[0])
    data[4] = version
    with pytest.raises(ChunkFormatError, match=f"format version {version} is not supported"):
        decode_chunk(bytes(data))


def test_valid_chunk_passes_verify() -> None:
    for data in _sample_chunks():
        verify_chunk(data)
        verify_chunk(memoryview(data))
        assert decode_chunk(memoryview(data)).to_pylist() == decode_chunk(data).to_pylist()


# -- packed dictionaries (format version 3) ----------------------------------------------------------
def _with_crc(data: bytes) -> bytes:
    """``data`` with its header's checksum made right again (damage a checksum can't see)."""
    out = bytearray(data)
    out[8:12] = struct.pack("<I", zlib.crc32(bytes(out[16:]), zlib.crc32(bytes(out[4:8]))))
    out[12:16] = struct.pack("<I", len(out) - HEADER_SIZE)
    return bytes(out)


@pytest.mark.parametrize("distinct", [3, 200, 40_000, 70_000])
@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_packed_dictionaries_round_trip_at_every_index_width(distinct: int, compression: str) -> None:
    rows = max(2 * distinct + 1, 1000)
    values = [None if i % 11 == 3 else f"v{(i * 7) % distinct}" for i in range(rows)]
    data, stats = encode_chunk(pa.array(values), compression, dictionary=True)
    assert data[5] == 9 and stats.dictionary and stats.nulls == values.count(None)
    decoded = decode_chunk(data)
    assert decoded.type == pa.dictionary(pa.int32(), pa.string()) and decoded.to_pylist() == values
    stored = decode_chunk(data, as_stored=True)  # indices as narrow as the dictionary allows
    size = len(stored.dictionary)
    assert stored.type.index_type == (pa.int8() if size <= 127 else pa.int16() if size <= 32767 else pa.int32())
    # most frequent value first
    counts = pa.array(values).value_counts().to_pylist()
    top = max(c["counts"] for c in counts if c["values"] is not None)
    assert values.count(stored.dictionary[0].as_py()) == top


NUMBER_TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint32(), pa.uint64(), pa.float16(),
                pa.float32(), pa.float64(), pa.date32(), pa.timestamp("us", tz="UTC"), pa.time64("ns"),
                pa.duration("ms")]


@pytest.mark.parametrize("type_", NUMBER_TYPES, ids=str)
@pytest.mark.parametrize("nulls", [False, True])
@pytest.mark.parametrize("distinct", [5, 300])  # index widths 1 and 2
def test_packed_number_dictionaries_decode_to_their_values(type_: pa.DataType, nulls: bool, distinct: int) -> None:
    """A dictionary-stored column of numbers, dates or times reads back as plain values (looked
    up row by row from the packed indices), equal to what was written, bit for bit."""
    rng = np.random.default_rng(distinct)
    rows = 5000
    base = pa.array(rng.integers(0, 120 if type_.bit_width == 8 else 1 << 14, distinct), pa.int64())
    if pa.types.is_floating(type_):
        base = pa.array(rng.standard_normal(distinct)).cast(type_, safe=False)
        base = pa.concat_arrays([base.slice(0, distinct - 3), pa.array([-0.0, float("inf"), float("nan")]).cast(type_)])
    else:
        base = base.cast(pa.int32() if type_.bit_width == 32 else pa.int64(), safe=False).cast(type_)
    picks = rng.integers(0, distinct, rows)
    mask = (rng.random(rows) < 0.3) if nulls else None
    values = pa.DictionaryArray.from_arrays(pa.array(picks, pa.int32(), mask=mask), base)
    data, stats = encode_chunk(values, "zstd", dictionary=True)
    assert data[5] == 9 and stats.nulls == (int(mask.sum()) if nulls else 0)
    decoded = decode_chunk(data)
    expected = base.take(pa.array(picks, mask=mask))
    assert decoded.type == type_ and decoded.null_count == expected.null_count
    width = type_.bit_width // 8
    bits = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[width]
    valid = np.asarray(expected.is_valid())
    got = np.frombuffer(decoded.buffers()[1], bits)[decoded.offset:decoded.offset + rows]
    want = np.frombuffer(expected.buffers()[1], bits)[expected.offset:expected.offset + rows]
    assert np.array_equal(got[valid], want[valid])  # NaN and -0.0 included
    assert decode_chunk(data, as_stored=True).dictionary.type == type_  # as stored: still a dictionary


def test_a_packed_number_index_out_of_range_is_an_error() -> None:
    values = pa.DictionaryArray.from_arrays(pa.array([0, 1, 2, None, 1] * 40, pa.int32()), pa.array([1.5, 2.5, 3.5]))
    data, _ = encode_chunk(values, "none", dictionary=True)
    planes_at = _packed_sections(data)[2][0]
    for lie in (b"\x03", b"\xff"):
        with pytest.raises(ChunkFormatError, match="out of range"):
            decode_chunk(_with_crc(data[:planes_at] + lie + data[planes_at + 1:]))


def test_packed_dictionaries_are_smaller_than_arrow_ipc_ones() -> None:
    rng = np.random.default_rng(5)
    names = np.array([f"Some Place, Region {i}" for i in range(3000)])
    picks = names[np.minimum(rng.zipf(1.3, 50_000), 3000) - 1]
    values = pa.array(np.where(rng.random(50_000) < 0.4, None, picks).tolist(), pa.string())
    packed, _ = encode_chunk(values, "zstd")
    ipc = pa.BufferOutputStream()
    array = pc.dictionary_encode(values)
    array = pa.DictionaryArray.from_arrays(array.indices.cast(pa.int16()), array.dictionary)
    batch = pa.record_batch([array], names=["v"])
    with pa.ipc.new_stream(ipc, batch.schema, options=pa.ipc.IpcWriteOptions(compression="zstd")) as w:
        w.write_batch(batch)
    assert packed[5] == 9 and len(packed) < 0.85 * ipc.getvalue().size


def _packed_sections(data: bytes) -> list[tuple[int, int, int]]:
    """(offset of the section's body, raw length, stored length) of each section."""
    at, out = HEADER_SIZE + 16, []
    for _ in range(5):
        raw, stored = struct.unpack_from("<II", data, at)
        out.append((at + 8, raw, stored))
        at += 8 + stored
    return out


def test_a_packed_payload_that_lies_is_an_error_not_a_crash() -> None:
    """Bytes whose checksum holds but which a bug wrote wrong are a ChunkFormatError."""
    values = pa.array([None if i % 4 == 0 else f"x{i % 9}" for i in range(400)])
    data, _ = encode_chunk(values, "none", dictionary=True)
    assert data[5] == 9
    head = HEADER_SIZE
    sections = _packed_sections(data)
    planes_at = sections[2][0]
    lies = {
        "index out of range": data[:planes_at] + b"\xff" + data[planes_at + 1:],
        "more valid rows than rows": data[:head + 8] + struct.pack("<I", 401) + data[head + 12:],
        "a dictionary value too many": data[:head + 12] + struct.pack("<I", 10) + data[head + 16:],
        "unknown codec": data[:head] + b"\x07" + data[head + 1:],
        "truncated": data[:-3],
        "trailing bytes": data + b"\x00",
        "bad value type": data[:sections[0][0]] + b"\x00" * sections[0][1] + data[sections[0][0] + sections[0][1]:],
    }
    for name, lie in lies.items():
        with pytest.raises(ChunkFormatError):
            decode_chunk(_with_crc(lie))
            pytest.fail(name)
    bad_flags = bytearray(data)
    bad_flags[5] = 8 | 2  # packed, but run-end instead of dictionary
    with pytest.raises(ChunkFormatError, match="packed"):
        decode_chunk(_with_crc(bytes(bad_flags)))


# -- golden files: every format version stays readable --------------------------------------------
def _runs(values: list[Any], lengths: list[int]) -> list[Any]:
    """``values[i]`` repeated ``lengths[i]`` times, in order."""
    return [v for v, n in zip(values, lengths, strict=True) for _ in range(n)]


GOLDEN_COLUMNS: dict[str, tuple[pa.DataType, str, list[Any]]] = {
    "int32_zstd": (pa.int32(), "zstd", [1, 2, 2, None, -7, 2147483647]),
    "uint64_lz4": (pa.uint64(), "lz4", [0, 18446744073709551615, None]),
    "bool_none": (pa.bool_(), "none", [True, False, None, True]),
    "float64_zstd": (pa.float64(), "zstd", [1.5, math.nan, -math.inf, None, -0.0]),
    "float32_none": (pa.float32(), "none", [0.25, None, 3.0]),
    "string_dict_lz4": (pa.string(), "lz4", ["red", "green", "red", None, "red", "green", "red", "red"]),
    "string_plain_zstd": (pa.string(), "zstd", ["", "ünïcödé", "日本語", "🎉", None]),
    "binary_zstd": (pa.binary(), "zstd", [b"\x00\x01", b"", None, b"\xff" * 3]),
    "date32_zstd": (pa.date32(), "zstd", [dt.date(1970, 1, 1), dt.date(1969, 12, 31), None, dt.date(2024, 2, 29)]),
    "timestamp_us_lz4": (pa.timestamp("us"), "lz4",
                         [dt.datetime(2020, 1, 1, 12, 30, 0, 123456), None, dt.datetime(1900, 1, 1)]),
    "decimal_10_2_zstd": (pa.decimal128(10, 2), "zstd", [Decimal("12.34"), Decimal("-0.01"), None,
                                                        Decimal("99999999.99")]),
    # long runs: written run-end encoded from version 2 on (forced: some are shorter than
    # RUN_END_MIN_ROWS); version 1 stored them plain or as dictionaries
    "int64_runs_zstd": (pa.int64(), "zstd", _runs([3, None, 3, -9, 2**62], [40, 25, 30, 60, 45])),
    "float64_runs_lz4": (pa.float64(), "lz4", _runs([0.0, -0.0, math.nan, None, 51.5, -math.inf],
                                                    [30, 30, 40, 20, 50, 30])),
    "string_runs_dict_zstd": (pa.string(), "zstd", _runs(["US", "Germany", None, "US", "日本"],
                                                         [50, 40, 30, 60, 40])),
    "bool_runs_none": (pa.bool_(), "none", _runs([True, None, False, True], [64, 16, 80, 40])),
    "date32_runs_zstd": (pa.date32(), "zstd", _runs([dt.date(2024, 1, 1), None, dt.date(1969, 7, 20)],
                                                    [70, 10, 90])),
    "timestamp_us_runs_lz4": (pa.timestamp("us"), "lz4",
                              _runs([dt.datetime(2020, 1, 1), dt.datetime(2020, 1, 1, 0, 0, 0, 1), None],
                                    [55, 65, 30])),
    "decimal_10_2_runs_zstd": (pa.decimal128(10, 2), "zstd", _runs([Decimal("1.50"), None, Decimal("-3.25")],
                                                                   [45, 35, 70])),
}


#: Packed dictionaries (format version 3 on): index widths of 1 and 2 bytes, nulls, value
#: lengths, fixed-width values, a time zone kept in the value type.
GOLDEN_PACKED_COLUMNS: dict[str, tuple[pa.DataType, str, list[Any]]] = {
    "string_dict_nulls_zstd": (pa.string(), "zstd",
                               [None if i % 5 == 0 else f"place {i % 300} " + "é" * (i % 4) for i in range(2000)]),
    "float64_dict_none": (pa.float64(), "none", [None if i % 3 == 0 else (i % 40) / 8 - 2.0 for i in range(600)]),
    "timestamp_utc_dict_lz4": (pa.timestamp("ms", tz="UTC"), "lz4",
                               [dt.datetime(2024, 1, 1 + i % 20, tzinfo=dt.UTC) for i in range(300)]),
    "binary_dict_zstd": (pa.binary(), "zstd", [b"\x00" * (i % 3) + bytes([i % 7]) for i in range(400)]),
}
#: Decimal-scaled floats (format version 4 on): int32 and int64 integers, nulls, negatives, a
#: float32 column; ``float32_none`` above is scaled from version 4 on too.
GOLDEN_SCALED_COLUMNS: dict[str, tuple[pa.DataType, str, list[Any]]] = {
    "float64_scaled_nulls_zstd": (pa.float64(), "zstd",
                                  [None if i % 7 == 0 else round((i * 7919 % 20001 - 10000) / 1e6, 6)
                                   for i in range(3000)]),
    "float64_scaled_wide_lz4": (pa.float64(), "lz4", [123456789.125, -0.5, 900719925.474099, None, 0.0]),
    "float32_scaled_none": (pa.float32(), "none", [38.8951, -77.0364, None, 0.1, 1e-05]),
}
SCALED_FROM_4 = {"float32_none", *GOLDEN_SCALED_COLUMNS}
GOLDEN_VERSIONS = (1, 2, 3, 4, 5)


def _golden_columns(version: int) -> dict[str, tuple[pa.DataType, str, list[Any]]]:
    return GOLDEN_COLUMNS | (GOLDEN_PACKED_COLUMNS if version >= 3 else {}) | (
        GOLDEN_SCALED_COLUMNS if version >= 4 else {})


def write_golden(directory: Path, version: int) -> None:
    """Write the golden chunks (run by hand, once per format version; never overwrites)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, (type_, compression, values) in _golden_columns(version).items():
        path = directory / f"{name}.chunk"
        if path.exists():
            raise SystemExit(f"{path} exists: golden files are never rewritten")
        run_end = True if "_runs_" in name else None
        dictionary = True if name in GOLDEN_PACKED_COLUMNS else None
        path.write_bytes(encode_chunk(pa.array(values, type=type_), compression, dictionary=dictionary,
                                      run_end=run_end)[0])


@pytest.mark.parametrize(("name", "version"), [(n, v) for v in GOLDEN_VERSIONS for n in _golden_columns(v)])
def test_golden_chunk_is_readable(name: str, version: int) -> None:
    type_, _, values = _golden_columns(version)[name]
    data = (GOLDEN / f"v{version}" / f"{name}.chunk").read_bytes()
    assert data[:5] == b"COLC" + bytes([version])
    assert bool(data[5] & 2) == (version >= 2 and "_runs_" in name), "the run-end flag"
    packed = (version >= 3 and "_dict_" in name and "_runs_" not in name) or (version >= 5 and name in SCALED_FROM_4)
    assert bool(data[5] & 8) == packed, "the packed flag"
    assert bool(data[5] & 16) == (version >= 4 and name in SCALED_FROM_4), "the scaled flag"
    decoded = decode_chunk(data)
    assert plain(decoded).type == type_
    assert comparable(plain(decoded).to_pylist()) == comparable(pa.array(values, type_).to_pylist())
    # what scans get is the same from every version: string dictionaries stay dictionaries (as
    # the dictionary rule chose when writing), all else is plain
    assert pa.types.is_dictionary(decoded.type) == (name.startswith("string_") and "_dict_" in name)
    if pa.types.is_dictionary(decoded.type):
        assert decoded.type == pa.dictionary(pa.int32(), pa.string()) and data[5] & 1


@pytest.mark.parametrize("version", GOLDEN_VERSIONS)
def test_every_golden_file_is_checked(version: int) -> None:
    assert sorted(p.stem for p in (GOLDEN / f"v{version}").glob("*.chunk")) == sorted(_golden_columns(version))


def test_golden_version_1_run_columns_decode_as_version_2_writes_them() -> None:
    """The same column written by both versions reads back identically (type, dictionary)."""
    for name in (n for n in GOLDEN_COLUMNS if "_runs_" in n):
        v1 = decode_chunk((GOLDEN / "v1" / f"{name}.chunk").read_bytes())
        v2 = decode_chunk((GOLDEN / "v2" / f"{name}.chunk").read_bytes())
        assert v1.type == v2.type, name
        assert comparable(plain(v1).to_pylist()) == comparable(plain(v2).to_pylist()), name


if __name__ == "__main__":  # python test_chunk.py golden/v5 5
    write_golden(Path(__file__).parent / sys.argv[1], int(sys.argv[2]))
