"""Run-end encoded chunks: exact round trips of every type with runs and nulls, the rule that
picks them, what they save, and damage to them; then a sorted range table end to end through
the public API on both stores, answering SQL as DuckDB does over the same Arrow table."""

from __future__ import annotations

import datetime as dt
import random
import struct
import zlib
from decimal import Decimal
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from chunk_helpers import COMPRESSIONS, TYPES, check_round_trip, comparable, plain
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from colonnade.encoding import decode_chunk, encode_chunk, verify_chunk
from colonnade.encoding.chunk import (
    FLAG_DICTIONARY,
    FLAG_PACKED,
    FLAG_RUN_END,
    HEADER_SIZE,
    ChunkFormatError,
)
from colonnade.encoding.packed import unpack
from colonnade.encoding.runs import RUN_END_MIN_ROWS, RUN_END_RATIO, count_runs
from colonnade.errors import CorruptChunkError
from colonnade.store import Store

SEGMENT_ROWS = 65_536  # the writer's default: chunks as a store keeps them


def _run_end(data: bytes) -> bool:
    return bool(data[5] & FLAG_RUN_END)


def _payload(data: bytes) -> pa.Array:
    if data[5] & FLAG_PACKED:  # a dictionary's packed sections
        return unpack(pa.py_buffer(data[HEADER_SIZE:]))
    return pa.ipc.open_stream(pa.py_buffer(data[HEADER_SIZE:])).read_all().column(0).chunk(0)


@st.composite
def runs_of(draw: st.DrawFn, type_name: str, min_rows: int = RUN_END_MIN_ROWS) -> list[Any]:
    """A column of at most 6 runs (values may repeat, be null, NaN, -0.0) and ≥ min_rows rows."""
    values = draw(st.lists(st.one_of(st.none(), TYPES[type_name][1]), min_size=1, max_size=6), label="values")
    lengths = draw(st.lists(st.integers(1, 400), min_size=len(values), max_size=len(values)), label="lengths")
    lengths[0] += max(0, min_rows - sum(lengths))
    return [v for v, n in zip(values, lengths, strict=True) for _ in range(n)]


# -- round trips ---------------------------------------------------------------------------------------------
@pytest.mark.unit
@pytest.mark.parametrize("type_name", list(TYPES))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_long_runs_of_every_type_round_trip_run_end_encoded(type_name: str, data: st.DataObject) -> None:
    values = data.draw(runs_of(type_name, min_rows=max(RUN_END_MIN_ROWS, int(6 / RUN_END_RATIO))), label="column")
    compression = data.draw(st.sampled_from(COMPRESSIONS), label="compression")
    chunk, stats = check_round_trip(type_name, values, compression)  # exact values and statistics
    # (strings read as dictionaries, bools and decimals use runs only in uncompressed chunks)
    slow = type_name in ("bool", "decimal(10,2)")
    assert _run_end(chunk) == (compression == "none" or not (stats.dictionary or slow))
    assert pa.types.is_run_end_encoded(_payload(chunk).type) == _run_end(chunk)
    # the same statistics, and the same array read back, as without run ends
    before, before_stats = encode_chunk(pa.array(values, TYPES[type_name][0]), compression, run_end=False)
    assert not _run_end(before)
    assert (stats.rows, stats.nulls, stats.min, stats.max, stats.dictionary) == \
        (before_stats.rows, before_stats.nulls, before_stats.min, before_stats.max, before_stats.dictionary)
    got, expected = decode_chunk(chunk), decode_chunk(before)
    assert got.type == expected.type
    assert comparable(plain(got).to_pylist()) == comparable(plain(expected).to_pylist())


@pytest.mark.unit
@pytest.mark.parametrize("type_name", list(TYPES))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_column_of_every_type_round_trips_when_run_end_is_forced(type_name: str, data: st.DataObject) -> None:
    values = data.draw(st.lists(st.one_of(st.none(), TYPES[type_name][1]), min_size=1, max_size=60), label="values")
    compression = data.draw(st.sampled_from(COMPRESSIONS), label="compression")
    dictionary = data.draw(st.sampled_from([None, True, False]), label="dictionary")
    chunk, stats = check_round_trip(type_name, values, compression, run_end=True, dictionary=dictionary)
    assert _run_end(chunk)
    _, before = encode_chunk(pa.array(values, TYPES[type_name][0]), compression, dictionary=dictionary, run_end=False)
    assert stats.dictionary == before.dictionary  # read back as a dictionary exactly when it was before


@pytest.mark.unit
def test_float_bits_survive_runs() -> None:
    """0.0 / -0.0 / NaN / a NaN with payload bits / null / inf, 100 rows each (nulls 50)."""
    patterns = {pa.float64(): (pa.uint64(), [0, 1 << 63, 0x7FF8 << 48, (0x7FF8 << 48) | 1, None, 0x7FF << 52]),
                pa.float32(): (pa.uint32(), [0, 1 << 31, 0x7FC00000, 0x7FC00001, None, 0x7F800000])}
    for type_, (bits, words) in patterns.items():
        array = pa.array([w for w in words for _ in range(50 if w is None else 100)], bits).view(type_)
        chunk, stats = encode_chunk(array)
        assert _run_end(chunk) and (stats.min, stats.max) == (None, None)
        assert _payload(chunk).run_ends.to_pylist() == [100, 200, 300, 400, 450, 550]
        assert decode_chunk(chunk).view(bits).equals(array.view(bits))


@pytest.mark.unit
def test_dictionary_read_strings_get_their_dictionary_back_exactly() -> None:
    values = pa.array(["b"] * 700 + [None] * 300 + ["a"] * 600 + ["b"] * 500)
    chunk, stats = encode_chunk(values, "none")
    assert chunk[5] == FLAG_RUN_END | FLAG_DICTIONARY and stats.dictionary
    assert _payload(chunk).values.to_pylist() == ["b", None, "a", "b"]  # one value per run
    before, _ = encode_chunk(values, "none", run_end=False)
    assert decode_chunk(chunk).equals(decode_chunk(before))  # the same dictionary and indices

    # a dictionary array in (as compaction hands over scanned columns) stays one; unused
    # dictionary entries are dropped, so the bounds are those of the values present
    sliced = pc.dictionary_encode(pa.array(["z"] + ["m"] * 800 + ["c"] * 800)).slice(1)
    chunk, stats = encode_chunk(sliced, "none")
    assert _run_end(chunk) and stats.dictionary and (stats.min, stats.max) == ("c", "m")
    assert decode_chunk(chunk).type == pa.dictionary(pa.int32(), pa.string())
    assert decode_chunk(chunk).to_pylist() == sliced.to_pylist()


@pytest.mark.unit
def test_plain_read_strings_stay_plain() -> None:
    values = pa.array([f"name-{i // 100}" for i in range(10_000)])
    chunk, stats = encode_chunk(values, dictionary=False)  # as the writer asks after a plain segment
    assert chunk[5] == FLAG_RUN_END and not stats.dictionary
    assert decode_chunk(chunk).equals(values)


@pytest.mark.unit
def test_sliced_and_chunked_input_with_runs() -> None:
    base = pa.array([1] * 1000 + [None] * 1000 + [2] * 1000, pa.int16())
    chunk, stats = encode_chunk(base.slice(500, 2000))
    assert _run_end(chunk) and decode_chunk(chunk).equals(base.slice(500, 2000))
    assert (stats.rows, stats.nulls, stats.min, stats.max) == (2000, 1000, 1, 2)
    chunked = pa.chunked_array([pa.array(["x"] * 600), pa.array(["x"] * 100 + ["y"] * 700)])
    chunk, _ = encode_chunk(chunked, "none")
    assert _run_end(chunk) and plain(decode_chunk(chunk)).to_pylist() == ["x"] * 700 + ["y"] * 700


# -- the rule ------------------------------------------------------------------------------------------------
@pytest.mark.unit
@settings(max_examples=200, deadline=None)
@given(type_name=st.sampled_from(sorted(TYPES)), data=st.data())
def test_count_runs_counts_changes_of_value(type_name: str, data: st.DataObject) -> None:
    few = data.draw(st.lists(st.one_of(st.none(), TYPES[type_name][1]), min_size=1, max_size=4), label="few")
    values = data.draw(st.lists(st.sampled_from(few), max_size=200), label="values")
    array = pa.array(values, TYPES[type_name][0])
    key = comparable(values)  # NaN equals NaN, -0.0 differs from 0.0, as runs compare bits
    expected = sum(1 for i in range(len(values)) if i == 0 or key[i] != key[i - 1])
    assert count_runs(array) == expected
    if type_name in ("string", "int64", "float64", "date32"):  # a dictionary's runs are its indices'
        assert count_runs(pc.dictionary_encode(array)) == expected


def _runs_column(rows: int, runs: int, seed: int = 1) -> list[int]:
    """``rows`` ints in exactly ``runs`` runs of random lengths, neighbours always different."""
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, rows), runs - 1))
    out: list[int] = []
    for i, (start, end) in enumerate(zip([0, *cuts], [*cuts, rows], strict=True)):
        out += [i % 7] * (end - start)
    return out


@pytest.mark.unit
@pytest.mark.parametrize("rows", [RUN_END_MIN_ROWS, 4096, SEGMENT_ROWS])
def test_run_end_is_chosen_exactly_up_to_the_ratio(rows: int) -> None:
    limit = int(RUN_END_RATIO * rows)
    for type_ in (pa.int64(), pa.float64(), pa.date32()):
        at = pa.array(_runs_column(rows, limit), pa.int32()).cast(type_)
        over = pa.array(_runs_column(rows, limit + 1), pa.int32()).cast(type_)
        assert count_runs(at) == limit and count_runs(over) == limit + 1
        assert _run_end(encode_chunk(at)[0]), type_
        assert not _run_end(encode_chunk(over)[0]), type_
    at = pa.array([f"city {v}" for v in _runs_column(rows, limit)])
    over = pa.array([f"city {v}" for v in _runs_column(rows, limit + 1)])
    for compression in COMPRESSIONS:  # strings read plain: under every codec
        assert _run_end(encode_chunk(at, compression, dictionary=False)[0])
        assert not _run_end(encode_chunk(over, compression, dictionary=False)[0])
    # strings read as dictionaries: only uncompressed (compressed, their indices already
    # shrink to a few bytes a run and read back faster)
    assert _run_end(encode_chunk(at, "none")[0]) and not _run_end(encode_chunk(over, "none")[0])
    for compression in ("zstd", "lz4"):
        chunk, stats = encode_chunk(at, compression)
        assert chunk[5] == FLAG_DICTIONARY | FLAG_PACKED and stats.dictionary


@pytest.mark.unit
def test_bools_and_decimals_use_runs_only_uncompressed() -> None:
    """Arrow expands their runs slowly: compressed, plain reads back faster."""
    bools = pa.array([True] * 5000 + [None] * 1000 + [False] * 4000)
    decimals = pa.array([Decimal("1.25")] * 5000 + [None] * 1000 + [Decimal("-3.50")] * 4000, pa.decimal128(10, 2))
    ints = pa.array([7] * 5000 + [None] * 1000 + [-1] * 4000)
    for compression in COMPRESSIONS:
        for values in (bools, decimals):
            chunk, stats = encode_chunk(values, compression)
            assert _run_end(chunk) == (compression == "none"), (compression, values.type)
            assert decode_chunk(chunk).equals(values) and stats.nulls == 1000
        assert _run_end(encode_chunk(ints, compression)[0])  # the others under every codec


@pytest.mark.unit
def test_short_columns_are_never_run_end_encoded() -> None:
    assert not _run_end(encode_chunk(pa.array([1] * (RUN_END_MIN_ROWS - 1)))[0])
    assert _run_end(encode_chunk(pa.array([1] * RUN_END_MIN_ROWS))[0])


@pytest.mark.unit
def test_random_data_is_not_run_end_encoded() -> None:
    rng = np.random.default_rng(3)
    n = SEGMENT_ROWS
    columns = {
        "ints": pa.array(rng.integers(0, 1 << 40, n)),
        "few ints": pa.array(rng.integers(0, 4, n)),  # few values but short runs: a dictionary
        "floats": pa.array(rng.random(n)),
        "bools": pa.array(rng.random(n) < 0.5),
        "strings": pa.array([f"s{v}" for v in rng.integers(0, 1 << 30, n)]),
        "categories": pa.array([["red", "green", "blue"][v] for v in rng.integers(0, 3, n)]),
        "sorted distinct": pa.array(np.arange(n) * 3 + rng.integers(0, 3, n)),  # no repeats, uneven steps
    }
    for name, array in columns.items():
        chunk, stats = encode_chunk(array)
        assert not _run_end(chunk), name
        assert stats == encode_chunk(array, run_end=False)[1], name  # and nothing else changed


# -- what run ends save --------------------------------------------------------------------------------------
def ip_ranges(rows: int, runs: int, seed: int = 11) -> pa.Table:
    """A sorted IP-range table: location columns repeat over long runs of consecutive ranges;
    the range bounds are distinct. Cities recur in separate runs; a country spans ~5 city runs."""
    rng = np.random.default_rng(seed)
    cuts = np.sort(rng.choice(np.arange(1, rows), runs - 1, replace=False))
    lengths = np.diff(np.concatenate([[0], cuts, [rows]]))
    cities = 3000
    city = np.repeat(rng.integers(0, cities, runs), lengths)
    country = np.repeat(np.cumsum(rng.random(runs) < 0.2) % 240, lengths)
    ip_from = np.cumsum(rng.integers(1, 600, rows))
    return pa.table({
        "ip_from": ip_from, "ip_to": ip_from + 1,
        "country": pa.array(np.array([f"Country {i}" for i in range(240)])[country]),
        "city": pa.array(np.array([f"City {i}" for i in range(cities)])[city]),
        "latitude": np.round(rng.uniform(-60, 70, cities), 5)[city],
        "longitude": np.round(rng.uniform(-180, 180, cities), 5)[city],
        "zip": pa.array(np.array([f"{(i * 7919) % 99999:05d}" for i in range(cities)])[city]),
    })


def _stored_bytes(table: pa.Table, columns: list[str], compression: str, **options: Any) -> int:
    return sum(len(encode_chunk(table.column(c).slice(start, SEGMENT_ROWS), compression, **options)[0])
               for c in columns for start in range(0, table.num_rows, SEGMENT_ROWS))


@pytest.fixture(scope="module")
def ip_million() -> pa.Table:
    return ip_ranges(1_000_000, 2_000)


RUN_COLUMNS = ["country", "city", "latitude", "longitude", "zip"]


@pytest.mark.unit
@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_run_columns_of_a_sorted_range_table_are_run_end_encoded(ip_million: pa.Table, compression: str) -> None:
    for name in ip_million.column_names:
        chunk, stats = encode_chunk(ip_million.column(name).slice(0, SEGMENT_ROWS), compression)
        expected = name in RUN_COLUMNS and (compression == "none" or not stats.dictionary)
        assert _run_end(chunk) == expected, name
        assert stats.dictionary == (name in ("country", "city", "zip"))


@pytest.mark.unit
@pytest.mark.parametrize(("compression", "numbers_smaller", "strings_smaller", "plain_strings_smaller"),
                         [("none", 20, 20, 100), ("lz4", 0.95, 1, 50), ("zstd", 0.75, 1, 50)])
def test_sorted_range_table_sizes(ip_million: pa.Table, compression: str, numbers_smaller: float,
                                  strings_smaller: float, plain_strings_smaller: float) -> None:
    """Bytes of the run columns encoded per 65,536-row segment, now against before (the
    dictionary rule alone) and against plain (neither). Without compression run ends save
    ~50x. Compressed, the floats' packed dictionaries (format 3) are as small under lz4 and
    ~20% smaller under zstd, which stores their runs of repeated small indices in a few bytes;
    run ends are kept for them because they read back 1.7-2.4x faster. Compressed dictionary
    strings are the very same chunks as before. Against a plain string column (one the writer stopped
    dictionary-encoding) run ends save 100x and more whatever the codec."""
    numbers, strings = ["latitude", "longitude"], ["country", "city", "zip"]
    now = _stored_bytes(ip_million, numbers, compression)
    before = _stored_bytes(ip_million, numbers, compression, run_end=False)
    assert before / now >= numbers_smaller, (before, now)
    now = _stored_bytes(ip_million, strings, compression)
    before = _stored_bytes(ip_million, strings, compression, run_end=False)
    assert before / now >= strings_smaller, (before, now)
    if strings_smaller == 1:
        assert now == before
    now = _stored_bytes(ip_million, strings, compression, dictionary=False)
    before = _stored_bytes(ip_million, strings, compression, dictionary=False, run_end=False)
    assert before / now >= plain_strings_smaller, (before, now)
    assert _stored_bytes(ip_million, RUN_COLUMNS, compression) / ip_million.num_rows < 0.2  # bytes a row


# -- damage ----------------------------------------------------------------------------------------------------
def _with_valid_crc(data: bytearray) -> bytes:
    data[8:12] = struct.pack("<I", zlib.crc32(bytes(data[16:]), zlib.crc32(bytes(data[4:8]))))
    return bytes(data)


@pytest.mark.unit
def test_a_damaged_run_end_chunk_fails_its_checksum() -> None:
    chunk, _ = encode_chunk(pa.array(["Lyon"] * 3000 + ["Nice"] * 2000), "none")
    assert chunk[5] == FLAG_RUN_END | FLAG_DICTIONARY
    for position in (HEADER_SIZE + 3, len(chunk) // 2, len(chunk) - 1):
        damaged = bytearray(chunk)
        damaged[position] ^= 0x10
        for check in (verify_chunk, decode_chunk):
            with pytest.raises(ChunkFormatError, match="checksum mismatch"):
                check(bytes(damaged))


@pytest.mark.unit
def test_run_ends_that_would_read_out_of_bounds_are_rejected() -> None:
    """A chunk whose checksum holds but whose run ends are wrong (written by a bug, not by
    damage) is an error, not a crash or a wrong answer."""
    chunk, _ = encode_chunk(pa.array([5] * 300 + [6] * 300 + [7] * 400, pa.int64()), "none")
    ends = struct.pack("<3i", 300, 600, 1000)
    assert bytes(chunk).count(ends) == 1
    for bad in [(600, 300, 1000), (300, 600, 900), (300, 600, 5000), (300, 300, 1000)]:
        data = bytearray(bytes(chunk).replace(ends, struct.pack("<3i", *bad)))
        with pytest.raises(ChunkFormatError, match="run-end"):
            decode_chunk(_with_valid_crc(data))


@pytest.mark.unit
def test_dictionary_flag_on_a_run_end_number_column_is_rejected() -> None:
    chunk, _ = encode_chunk(pa.array([5] * 1000, pa.int64()))
    data = bytearray(chunk)
    data[5] |= FLAG_DICTIONARY
    with pytest.raises(ChunkFormatError, match="dictionary flag"):
        decode_chunk(_with_valid_crc(data))


# -- end to end, both stores -----------------------------------------------------------------------------------
def ip_locations(rows: int = 60_000, runs: int = 120) -> pa.Table:
    """A sorted range table in the schema's own types: nulls inside runs, dates and timestamps."""
    table = ip_ranges(rows, runs, seed=5)
    rng = np.random.default_rng(9)
    changes = pc.not_equal(table.column("city")[1:], table.column("city")[:-1]).to_numpy(zero_copy_only=False)
    run_of = np.concatenate([[0], np.cumsum(changes)])  # the city run of each row
    missing = rng.random(runs) < 0.15  # whole runs of unknown zip codes
    zips = pc.if_else(pa.array(missing[run_of]), pa.scalar(None, pa.string()), table.column("zip"))
    since = pa.array([dt.date(2010, 1, 1) + dt.timedelta(days=int(d)) for d in rng.integers(0, 4000, runs)])
    return (table.set_column(table.schema.get_field_index("zip"), "zip", zips)
            .append_column("since", since.take(pa.array(run_of)))
            .append_column("checked", since.take(pa.array(run_of)).cast(pa.timestamp("us")))
            .append_column("mobile", pa.array(run_of % 3 == 0)))


QUERIES = [
    "SELECT count(*) AS n FROM ip",
    "SELECT count(*), count(zip), count(DISTINCT city), count(DISTINCT country) FROM ip",
    "SELECT country, count(*) AS n, min(ip_from), max(ip_to), avg(latitude) FROM ip GROUP BY country",
    "SELECT city, zip, count(*) AS n FROM ip GROUP BY city, zip",
    "SELECT country, city, latitude, longitude FROM ip WHERE ip_from <= 9000000 AND ip_to >= 9000000",
    "SELECT count(*) FROM ip WHERE city = 'City 17' OR country IN ('Country 3', 'Country 4')",
    "SELECT count(*) FROM ip WHERE zip IS NULL",
    "SELECT count(*) FROM ip WHERE latitude > 10.5 AND longitude < 0",
    "SELECT min(city), max(city), min(zip), max(latitude) FROM ip WHERE country > 'Country 50'",
    "SELECT since, count(*) FROM ip WHERE since >= DATE '2015-01-01' GROUP BY since",
    "SELECT mobile, count(*), min(checked) FROM ip GROUP BY mobile",
    "SELECT city, count(*) AS n FROM ip WHERE ip_from BETWEEN 1000000 AND 2000000 GROUP BY city",
]


def _rows(table: pa.Table) -> list[tuple[Any, ...]]:
    def cell(v: Any) -> Any:
        return round(v, 6) if isinstance(v, float) else v
    return sorted((tuple(cell(v) for v in r.values()) for r in table.to_pylist()),
                  key=lambda r: tuple((v is None, repr(v)) for v in r))


@pytest.mark.parametrize("compression", ["zstd", "none"])
def test_sorted_range_table_answers_sql_as_duckdb_does(store: Store, raw_store: Any, compression: str) -> None:
    table = ip_locations()
    ds = store.create_dataset("ip", table.schema, sort_by="ip_from", segment_rows=8192, compression=compression)
    ds.append(table)
    segments = ds.snapshot().segments
    assert len(segments) == 8
    strings = FLAG_DICTIONARY | (FLAG_RUN_END if compression == "none" else FLAG_PACKED)
    for segment in segments:
        flags = {c: raw_store.read_chunk("ip", segment, c)[5] for c in table.column_names}
        assert flags == {"ip_from": 0, "ip_to": 0, "country": strings, "city": strings, "zip": strings,
                         "latitude": FLAG_RUN_END, "longitude": FLAG_RUN_END, "since": FLAG_RUN_END,
                         "checked": FLAG_RUN_END, "mobile": FLAG_RUN_END if compression == "none" else 0}

    reference = duckdb.connect()
    reference.register("ip", table)
    for query in QUERIES:
        assert _rows(store.sql(query)) == _rows(reference.sql(query).to_arrow_table()), query

    # scans see what they saw before: strings as dictionaries, the rest in their own types
    scanned = ds.scan().to_arrow()
    assert scanned.schema.field("city").type == pa.dictionary(pa.int32(), pa.string())
    assert scanned.schema.field("latitude").type == pa.float64()
    assert scanned.select(table.column_names).cast(table.schema).sort_by("ip_from").equals(table)
    assert ds.verify() == (8 * len(table.column_names), [])

    # a damaged run-end chunk is the usual corrupt-chunk error, naming itself
    raw_store.flip_chunk_byte("ip", segments[3], "latitude", position=-5)
    with pytest.raises(CorruptChunkError, match="checksum mismatch") as info:
        store.sql("SELECT sum(latitude) FROM ip")
    assert (info.value.column, info.value.segment) == ("latitude", segments[3].segment)
    assert [(p.column, p.segment) for p in ds.verify()[1]] == [("latitude", segments[3].segment)]
