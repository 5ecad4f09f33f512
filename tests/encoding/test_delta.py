"""Delta runs (:mod:`colonnade.encoding.runs`): integer columns whose consecutive differences run
long — addresses, ids, counters — are stored as run-end encoded differences and come back
exactly, whatever the integer type and however the arithmetic wraps."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from colonnade.encoding.chunk import (
    FLAG_DELTA,
    FLAG_DICTIONARY,
    FLAG_RUN_END,
    HEADER_SIZE,
    ChunkFormatError,
    decode_chunk,
    encode_chunk,
)
from colonnade.store import Store

N = 65_536
INT_TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]


def addresses(n: int = N, start: int = 3_000_000_000, gaps: int = 40, seed: int = 1) -> np.ndarray:
    """Consecutive integers with ``gaps`` jumps (IPv4 addresses of a few ranges)."""
    rng = np.random.default_rng(seed)
    steps = np.ones(n, dtype=np.int64)
    steps[0] = start
    steps[rng.choice(np.arange(1, n), gaps, replace=False)] = rng.integers(2, 5000, gaps)
    return np.cumsum(steps)


@pytest.mark.parametrize("t", INT_TYPES, ids=str)
def test_every_integer_type_round_trips_as_delta_runs(t: pa.DataType) -> None:
    dtype = np.dtype(str(t))
    # a step of 1 wrapping past the type's largest value (array arithmetic wraps), then down
    values = np.arange(N).astype(dtype) + dtype.type(np.iinfo(dtype).max - 100)
    values[N // 2:] = values[N // 2] - np.arange(N - N // 2).astype(dtype)
    array = pa.array(values, type=t)
    chunk, stats = encode_chunk(array)
    assert chunk[5] == FLAG_DELTA | FLAG_RUN_END
    back = decode_chunk(chunk)
    assert back.type == t and back.equals(array)
    plain = encode_chunk(array, run_end=False)[1]  # the statistics don't depend on the encoding
    assert (stats.rows, stats.nulls, stats.min, stats.max) == (plain.rows, plain.nulls, plain.min, plain.max)
    assert (stats.min, stats.max, stats.nbytes) == (int(np.min(array)), int(np.max(array)), len(chunk))


def test_the_extremes_of_int64_wrap_and_come_back() -> None:
    values = np.array([2**63 - 3, 2**63 - 2, 2**63 - 1, -(2**63), -(2**63) + 1] + list(range(-500, 500)),
                      dtype=np.int64)
    array = pa.array(np.tile(values, 64))
    chunk, _ = encode_chunk(array, compression="lz4")
    assert chunk[5] == FLAG_DELTA | FLAG_RUN_END  # the same 1,005 steps over and over, in runs
    assert decode_chunk(chunk).equals(array)


def test_consecutive_addresses_take_a_few_hundred_bytes_instead_of_a_byte_each() -> None:
    array = pa.array(addresses())
    for compression in ("zstd", "lz4", "none"):
        delta, _ = encode_chunk(array, compression=compression)
        plain, _ = encode_chunk(array, compression=compression, run_end=False)
        assert delta[5] == FLAG_DELTA | FLAG_RUN_END and plain[5] == 0
        assert len(delta) < 2_000 and len(plain) > 30 * len(delta), (compression, len(delta), len(plain))
        assert decode_chunk(delta).equals(array)


def test_what_is_not_delta_encoded() -> None:
    rng = np.random.default_rng(5)
    cases = {
        "random": pa.array(rng.integers(0, 1 << 40, N)),
        "uneven steps": pa.array(np.cumsum(rng.integers(1, 9, N))),
        "runs of values": pa.array(np.repeat(np.arange(64), N // 64)),  # plain run ends do it
        "with a null": pa.array(list(addresses()[:-1]) + [None], pa.int64()),
        "floats": pa.array(addresses().astype(np.float64)),
        "too short": pa.array(np.arange(100)),
    }
    for name, array in cases.items():
        chunk, _ = encode_chunk(array)
        assert not chunk[5] & FLAG_DELTA, name
        assert decode_chunk(chunk).equals(array), name
    assert encode_chunk(cases["runs of values"])[0][5] == FLAG_RUN_END
    # forced either way, the caller decides
    ids = pa.array(addresses())
    assert encode_chunk(ids, run_end=False)[0][5] == 0
    assert encode_chunk(ids, run_end=True)[0][5] == FLAG_RUN_END


def _with_flags(chunk: bytes, flags: int) -> bytes:
    """The chunk with other header flags and its checksum made to match (a writer's bug, not
    damage: the checksum can't catch it, the payload check must)."""
    import struct
    import zlib

    head = bytearray(chunk[:HEADER_SIZE])
    head[5] = flags
    payload = chunk[HEADER_SIZE:]
    crc = zlib.crc32(payload, zlib.crc32(bytes(head[4:8])))
    struct.pack_into("<I", head, 8, crc)
    return bytes(head) + payload


def test_a_delta_flag_that_does_not_match_the_payload_is_refused() -> None:
    delta, _ = encode_chunk(pa.array(addresses()))
    runs, _ = encode_chunk(pa.array(np.repeat(np.arange(64), N // 64)))
    with pytest.raises(ChunkFormatError, match="delta flag does not match"):
        decode_chunk(_with_flags(delta, FLAG_RUN_END))  # would read the differences as values
    with pytest.raises(ChunkFormatError, match="delta flag does not match"):
        decode_chunk(_with_flags(runs, FLAG_RUN_END | FLAG_DELTA))
    with pytest.raises(ChunkFormatError, match="delta flag does not match"):
        decode_chunk(_with_flags(delta, FLAG_DELTA | FLAG_RUN_END | FLAG_DICTIONARY))
    damaged = bytearray(delta)
    damaged[-9] ^= 0x10
    with pytest.raises(ChunkFormatError, match="checksum mismatch"):
        decode_chunk(bytes(damaged))


def test_sorted_addresses_answer_sql_as_duckdb_does(store: Store) -> None:
    ip = addresses(200_000, gaps=300)
    rng = np.random.default_rng(2)
    table = pa.table({"ip": pa.array(ip), "n": pa.array(np.arange(len(ip), dtype=np.int32)),
                      "v": pa.array(rng.random(len(ip)))})
    ds = store.create_dataset("ips", table.schema, segment_rows=65_536)
    ds.append(table)
    reference = duckdb.connect()
    reference.register("ips", table)
    probe = int(ip[123_456])
    for query in ("SELECT count(*), min(ip), max(ip), sum(ip), sum(n) FROM ips",
                  f"SELECT ip, n, v FROM ips WHERE ip = {probe}",
                  f"SELECT count(*) FROM ips WHERE ip BETWEEN {probe - 1000} AND {probe + 1000}",
                  "SELECT n % 7 AS k, count(*), max(ip) FROM ips GROUP BY k ORDER BY k"):
        assert store.sql(query).to_pylist() == reference.sql(query).to_arrow_table().to_pylist(), query
    assert ds.verify()[1] == []
    # the index stored the columns as delta runs, and that is what made them small
    per_row = {c: sum(s.stats[c].nbytes for s in ds.scan().plan().segments) / len(ip) for c in ("ip", "n", "v")}
    assert per_row["ip"] < 0.05 and per_row["n"] < 0.05 and per_row["v"] > 4, per_row
