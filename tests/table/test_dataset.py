"""Datasets on every store: create/list/drop, append and scan of every type, versions and time
travel, describe, schema checks and evolution, overwrite, pandas."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import colonnade
from colonnade.errors import (
    ColonnadeError,
    DatasetExistsError,
    DatasetNotFoundError,
    SchemaError,
    SpecError,
    VersionNotFoundError,
)
from colonnade.store import Store
from colonnade.table.versions import PINNED_KEPT
from colonnade.table.writer import column_stats_from_text

ALL_TYPES = pa.schema([
    ("b", pa.bool_()), ("i8", pa.int8()), ("i16", pa.int16()), ("i32", pa.int32()), ("i64", pa.int64()),
    ("u8", pa.uint8()), ("u16", pa.uint16()), ("u32", pa.uint32()), ("u64", pa.uint64()),
    ("f32", pa.float32()), ("f64", pa.float64()), ("s", pa.string()), ("bin", pa.binary()),
    ("d", pa.date32()), ("ts", pa.timestamp("us")), ("dec", pa.decimal128(10, 2)),
])


def all_types_table(n: int = 300) -> pa.Table:
    """Every type, nulls in every column, extremes, unicode, NaN/inf, low and high cardinality."""
    def nulls(values: list[Any], every: int = 7) -> list[Any]:
        return [None if i % every == 3 else v for i, v in enumerate(values)]

    r = range(n)
    return pa.table({
        "b": nulls([i % 3 == 0 for i in r]),
        "i8": nulls([(-128, 127, 0, -1)[i % 4] if i < 8 else i % 100 - 50 for i in r]),
        "i16": nulls([i * 100 - 15000 for i in r]),
        "i32": nulls([(-(2**31), 2**31 - 1)[i % 2] if i < 4 else i * 7 for i in r]),
        "i64": nulls([(-(2**63), 2**63 - 1)[i % 2] if i < 4 else i * 10**12 for i in r]),
        "u8": nulls([i % 256 for i in r]),
        "u16": nulls([65535 - i for i in r]),
        "u32": nulls([2**32 - 1 - i for i in r]),
        "u64": nulls([2**64 - 1 - i for i in r]),
        "f32": nulls([(math.nan, math.inf, -math.inf, -0.0)[i] if i < 4 else i / 4 for i in r]),
        "f64": nulls([(math.nan, math.inf, -math.inf, -0.0)[i] if i < 4 else i * 1.5 - 7 for i in r]),
        "s": nulls([("", "日本語", "é🎉", "x" * 1000)[i] if i < 4 else f"s{i % 5}" for i in r]),
        "bin": nulls([bytes([i % 256]) * (i % 4) for i in r]),
        "d": nulls([dt.date(1969, 12, 31) + dt.timedelta(days=i * 3) for i in r]),
        "ts": nulls([dt.datetime(2020, 1, 1, 0, 0, 0, 1) + dt.timedelta(hours=i, microseconds=i) for i in r]),
        "dec": nulls([Decimal(i * 37 - 5000) / 100 for i in r]),
    }, schema=ALL_TYPES)


def normalize(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    out = []
    for row in rows:
        values: list[Any] = []
        for v in row.values():
            if isinstance(v, float) and math.isnan(v):
                values.append("NaN")
            elif isinstance(v, float):
                values.append((v, math.copysign(1.0, v)))
            else:
                values.append(v)
        out.append(tuple(values))
    return sorted(out, key=repr)


def same_rows(a: pa.Table, b: pa.Table) -> bool:
    return normalize(plain(a).to_pylist()) == normalize(plain(b).to_pylist())


def plain(table: pa.Table) -> pa.Table:
    """Dictionary columns decoded (scans keep low-cardinality strings as dictionaries)."""
    cols = [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in table.columns]
    return pa.table(cols, names=table.column_names)


def ids(table: pa.Table, column: str = "id") -> list[int]:
    return sorted(table.column(column).to_pylist())


# -- datasets ----------------------------------------------------------------------------------------
def test_create_list_drop(store: Store) -> None:
    assert store.datasets() == []
    schema = pa.schema([("id", pa.int64())])
    store.create_dataset("beta", schema)
    store.create_dataset("alpha", schema, partition_by="bucket(4, id)", sort_by="id")
    assert store.datasets() == ["alpha", "beta"]
    assert "alpha" in store and "gamma" not in store
    with pytest.raises(DatasetExistsError):
        store.create_dataset("alpha", schema)
    ds = store.dataset("alpha")
    assert ds.schema == schema
    assert [str(t) for t in ds.spec.partition_by] == ["bucket(4, id)"]
    ds.append(pa.table({"id": list(range(10))}))
    store.drop_dataset("alpha")
    assert store.datasets() == ["beta"]
    with pytest.raises(DatasetNotFoundError):
        store.dataset("alpha")
    with pytest.raises(DatasetNotFoundError):
        store.drop_dataset("alpha")
    # the name is free again, and nothing of the old dataset shows through
    again = store.create_dataset("alpha", schema)
    assert again.version == 0
    assert again.scan().to_arrow().num_rows == 0
    assert store.sql("SELECT count(*) AS n FROM alpha").to_pylist() == [{"n": 0}]


def test_invalid_dataset_names(store: Store) -> None:
    for name in ("", "1abc", "a-b", "a b", "a;drop", "x" * 200):
        with pytest.raises(SchemaError, match="invalid dataset name"):
            store.create_dataset(name, pa.schema([("id", pa.int64())]))
    assert store.datasets() == []


def test_invalid_specs_are_refused_before_anything_is_stored(store: Store) -> None:
    with pytest.raises(SpecError):
        store.create_dataset("t", pa.schema([("id", pa.int64())]), partition_by="month(id)")
    with pytest.raises(SpecError):
        store.create_dataset("t", pa.schema([("id", pa.int64())]), sort_by="nope")
    assert store.datasets() == []


# -- append and scan ---------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", [
    {},
    {"partition_by": "month(d), bucket(3, i64)", "sort_by": "ts", "segment_rows": 40},
    {"partition_by": "truncate(10, u8), s", "sort_by": "f64, i8", "segment_rows": 17, "compression": "lz4"},
    {"partition_by": "day(ts)", "segment_rows": 1000, "compression": "none"},
], ids=["plain", "month-bucket", "truncate-string", "day"])
def test_append_and_scan_every_type(store: Store, layout: dict[str, Any]) -> None:
    table = all_types_table()
    ds = store.create_dataset("t", ALL_TYPES, **layout)
    result = ds.append(table)
    assert (result.version, result.rows) == (1, table.num_rows)
    assert result.segments >= 1 and result.bytes > 0
    out = ds.scan().to_arrow()
    assert out.schema.names == ALL_TYPES.names
    assert plain(out).schema == ALL_TYPES
    assert same_rows(out, table)
    # and through SQL, all columns
    assert same_rows(store.sql("SELECT * FROM t"), table)
    assert store.sql("SELECT count(*) AS n FROM t").to_pylist() == [{"n": table.num_rows}]


def test_scan_builder_is_immutable_and_projects(store: Store) -> None:
    ds = store.create_dataset("t", ALL_TYPES, partition_by="month(d)", segment_rows=50)
    table = all_types_table(200)
    ds.append(table)
    base = ds.scan()
    narrowed = base.select("i32", "s").where(pc.field("i32") > 700)
    assert base.columns is None and base.filter is None
    out = narrowed.to_arrow()
    assert out.column_names == ["i32", "s"]
    expected = [v for v in table.column("i32").to_pylist() if v is not None and v > 700]
    assert sorted(out.column("i32").to_pylist()) == sorted(expected)
    assert narrowed.count_rows() == len(expected)
    assert base.count_rows() == 200
    batches = list(narrowed.to_batches())
    assert sum(b.num_rows for b in batches) == len(expected)
    assert narrowed.to_reader().read_all().num_rows == len(expected)
    with pytest.raises(SchemaError, match="nope"):
        ds.scan(columns=["nope"]).to_arrow()


def test_scan_filter_on_date_partitions_and_nulls(store: Store) -> None:
    ds = store.create_dataset("t", ALL_TYPES, partition_by="month(d)", segment_rows=30)
    table = all_types_table(250)
    ds.append(table)
    since = dt.date(1970, 6, 1)
    out = ds.scan(columns=["d"], filter=pc.field("d") >= pa.scalar(since)).to_arrow()
    expected = [d for d in table.column("d").to_pylist() if d is not None and d >= since]
    assert sorted(out.column("d").to_pylist()) == sorted(expected)
    nulls = ds.scan(columns=["d"], filter=pc.field("d").is_null()).to_arrow()
    assert nulls.num_rows == table.column("d").null_count > 0


def test_many_appends_from_many_kinds_of_input(store: Store) -> None:
    schema = pa.schema([("id", pa.int64()), ("s", pa.string())])
    ds = store.create_dataset("t", schema, segment_rows=10)
    t = pa.table({"id": [1, 2, 3], "s": ["a", "b", None]}, schema=schema)
    ds.append(t)                                         # table
    ds.append(t.to_batches()[0])                         # batch
    ds.append(pa.RecordBatchReader.from_batches(schema, t.to_batches()))  # reader
    ds.append(iter([t.to_batches()[0], t]))              # iterable of batches and tables
    ds.append(t.to_pandas())                             # pandas
    ds.append(pa.table({"s": ["x"], "id": pa.array([4], pa.int32())}))  # other order, safe cast
    assert ds.version == 6
    assert ids(ds.scan().to_arrow()) == sorted([1, 2, 3] * 6 + [4])
    assert ds.append(pa.table({"id": pa.array([], pa.int64()), "s": pa.array([], pa.string())})).skipped
    assert ds.version == 6
    with pytest.raises(SchemaError):
        ds.append(42)


def test_null_and_the_string_null_are_different_partitions(store: Store) -> None:
    ds = store.create_dataset("t", pa.schema([("id", pa.int64()), ("cat", pa.string())]), partition_by="cat")
    ds.append(pa.table({"id": [1, 2, 3], "cat": [None, "__null__", "a"]}))
    assert store.sql("SELECT id FROM t WHERE cat IS NULL").to_pylist() == [{"id": 1}]
    assert store.sql("SELECT id FROM t WHERE cat = '__null__'").to_pylist() == [{"id": 2}]
    assert ds.describe()["partitions"] == 3


def test_large_segments_and_many_segments(store: Store) -> None:
    ds = store.create_dataset("t", pa.schema([("id", pa.int64()), ("v", pa.float64())]), segment_rows=997)
    n = 20_000
    ds.append(pa.table({"id": range(n), "v": [i * 0.5 for i in range(n)]}))
    assert ds.describe()["segments"] == math.ceil(n / 997)
    assert store.sql("SELECT count(*) AS n, sum(id) AS s FROM t").to_pylist() == [{"n": n, "s": n * (n - 1) // 2}]


def test_a_bucket_holds_at_most_bucket_bytes_of_segments(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bucket (on Cassandra, one Cassandra partition of every column of its segments) is
    closed before the Arrow bytes of its segments would pass BUCKET_BYTES; a segment larger
    than that has a bucket of its own."""
    from colonnade.table import writer

    schema = pa.schema([("id", pa.int64()), ("cat", pa.string())])
    ds = store.create_dataset("t", schema, partition_by="cat", segment_rows=100)
    table = pa.table({"id": range(1000), "cat": ["a"] * 1000}, schema=schema)
    segment_bytes = table.slice(0, 100).nbytes
    monkeypatch.setattr(writer, "BUCKET_BYTES", 3 * segment_bytes)
    ds.append(table)
    per_bucket: dict[int, int] = {}
    for s in ds.snapshot().segments:
        per_bucket[s.bucket] = per_bucket.get(s.bucket, 0) + 1
    assert sorted(per_bucket.values()) == [1, 3, 3, 3]
    monkeypatch.setattr(writer, "BUCKET_BYTES", 1)
    ds.append(table.slice(0, 300))
    assert len({s.bucket for s in ds.snapshot().segments}) == 4 + 3
    assert ids(ds.scan().to_arrow()) == sorted(list(range(1000)) + list(range(300)))


def test_partitions_filling_exact_segments(store: Store) -> None:
    """Batches of exactly ``segment_rows`` rows: every segment full, none empty, and one
    partition's segments of one append spread over buckets of at most 16 segments."""
    from colonnade.table.writer import SEGMENTS_PER_BUCKET

    schema = pa.schema([("id", pa.int64()), ("cat", pa.string())])
    ds = store.create_dataset("t", schema, partition_by="cat", segment_rows=5)
    batches = [pa.record_batch({"id": range(i * 5, i * 5 + 5), "cat": ["a"] * 5}, schema=schema) for i in range(40)]
    result = ds.append(iter(batches))
    assert (result.rows, result.segments) == (200, 40)
    segments = ds.snapshot().segments
    assert sorted(s.rows for s in segments) == [5] * 40
    per_bucket: dict[int, int] = {}
    for s in segments:
        per_bucket[s.bucket] = per_bucket.get(s.bucket, 0) + 1
    assert max(per_bucket.values()) <= SEGMENTS_PER_BUCKET
    assert len(per_bucket) == math.ceil(40 / SEGMENTS_PER_BUCKET)
    ds.append(pa.table({"id": range(1000, 1010), "cat": ["b"] * 10}, schema=schema))
    assert ids(ds.scan().to_arrow()) == list(range(200)) + list(range(1000, 1010))



def test_a_sorted_append_under_memory_pressure_leaves_each_partition_in_disjoint_segments(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows of eight partitions interleaved, more of them than the memory limit: partitions are
    flushed several times (runs whose key ranges overlap), then at the end read back, sorted
    with their last rows and written again, so each partition's segments hold disjoint id
    ranges, all full but its last; nothing is lost and the runs leave no orphan behind. A
    partition too large to merge keeps its runs, and its rows."""
    monkeypatch.setenv("COLONNADE_MEMORY_LIMIT_MB", "1")
    schema = pa.schema([("id", pa.int64()), ("part", pa.int32()), ("pad", pa.string())])
    ds = store.create_dataset("t", schema, partition_by="part", sort_by="id", segment_rows=500)
    n = 24_000
    order = [(i * 7919) % n for i in range(n)]  # ids in a scrambled order, partitions interleaved
    table = pa.table({"id": order, "part": [i % 8 for i in order], "pad": [f"{i:0>100}" for i in order]},
                     schema=schema)
    result = ds.append(iter(table.to_batches(max_chunksize=1_000)))
    assert result.rows == n
    by_part: dict[Any, list[Any]] = {}
    for s in ds.snapshot().segments:
        by_part.setdefault(s.values, []).append(s)
    assert len(by_part) == 8
    for segments in by_part.values():
        stats = sorted((column_stats_from_text(s.stats)["id"] for s in segments), key=lambda st: st.min)
        assert all(a.max < b.min for a, b in zip(stats, stats[1:], strict=False)), "key ranges overlap"
        assert sorted(s.rows for s in segments)[1:] == [500] * (len(segments) - 1)
    assert ids(ds.scan().to_arrow()) == list(range(n))
    assert ds.vacuum(grace_seconds=0, dry_run=True).orphans == 0

    big = pa.table({"id": range(n, 3 * n), "part": [9] * (2 * n), "pad": ["x" * 100] * (2 * n)}, schema=schema)
    ds.append(iter(big.take(order + [n + i for i in order]).to_batches(max_chunksize=1_000)))
    assert store.sql("SELECT count(*) AS c, count(DISTINCT id) AS d FROM t WHERE part = 9").to_pylist() == \
        [{"c": 2 * n, "d": 2 * n}]
    assert ds.vacuum(grace_seconds=0, dry_run=True).orphans == 0

# -- versions and time travel ------------------------------------------------------------------------
def test_versions_and_time_travel(store: Store) -> None:
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    ds = store.create_dataset("t", schema, partition_by="bucket(2, id)", segment_rows=5)
    assert ds.version == 0
    assert ds.append(pa.table({"id": range(0, 10), "v": ["a"] * 10})).version == 1
    assert ds.append(pa.table({"id": range(10, 15), "v": ["b"] * 5})).version == 2
    assert ds.overwrite(pa.table({"id": [100, 101], "v": ["c", "c"]})).version == 3
    assert ds.append(pa.table({"id": [102], "v": ["d"]})).version == 4
    assert ds.version == 4

    assert ids(ds.scan(version=1).to_arrow()) == list(range(10))
    assert ids(ds.scan(version=2).to_arrow()) == list(range(15))
    assert ids(ds.scan(version=3).to_arrow()) == [100, 101]
    assert ids(ds.scan().to_arrow()) == [100, 101, 102]
    assert ids(ds.scan().at_version(2).to_arrow()) == list(range(15))
    assert ds.scan(version=0).to_arrow().num_rows == 0
    assert ds.scan(version=2).count_rows() == 15

    q = "SELECT count(*) AS n FROM t"
    assert store.sql(q, version=1).to_pylist() == [{"n": 10}]
    assert store.sql(q, version=2).to_pylist() == [{"n": 15}]
    assert store.sql(q).to_pylist() == [{"n": 3}]
    assert store.sql(q, versions={"t": 3}).to_pylist() == [{"n": 2}]
    assert store.explain("SELECT * FROM t", version=1).rows == 10

    history = ds.history()
    assert [c.version for c in history] == [1, 2, 3, 4]
    assert [c.kind for c in history] == ["append", "append", "overwrite", "append"]
    assert [c.rows_added for c in history] == [10, 5, 2, 1]
    assert len(history[2].removed) == len(ds.snapshot(2).segments)

    for bad in (5, 99, -1):
        with pytest.raises(ColonnadeError, match=f"no version {bad}"):
            ds.scan(version=bad).to_arrow()
    with pytest.raises(ColonnadeError, match="no version 7"):
        store.sql(q, version=7)


def test_an_older_version_is_read_once_and_never_served_once_expired(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    ds = store.create_dataset("t", pa.schema([("id", pa.int64())]))
    for i in range(PINNED_KEPT + 6):  # versions up to 10: those asked for are all older than the latest
        ds.append(pa.table({"id": [i]}))
    reads: list[str] = []
    for name in ("list_checkpoints", "list_commits", "get_checkpoint"):
        real = getattr(store.chunk_store, name)
        monkeypatch.setattr(store.chunk_store, name, lambda *a, _r=real, _n=name, **k: reads.append(_n) or _r(*a, **k))
    first = ds.snapshot(2)
    assert first.rows == 2 and reads
    reads.clear()
    assert ds.snapshot(2) is first and not reads  # kept: only checked against expiry
    assert store.sql("SELECT count(*) AS n FROM t", version=2).to_pylist() == [{"n": 2}]
    for v in range(3, 3 + PINNED_KEPT):  # the last PINNED_KEPT versions asked for are kept
        ds.snapshot(v)
    reads.clear()
    assert ds.snapshot(2) is not first and reads and ds.snapshot(2).rows == 2
    ds.expire(retain_last=1)
    with pytest.raises(VersionNotFoundError):
        ds.snapshot(2)
    with pytest.raises(VersionNotFoundError):
        store.sql("SELECT count(*) AS n FROM t", version=2)


def test_time_travel_across_datasets_with_different_histories(store: Store) -> None:
    a = store.create_dataset("a", pa.schema([("id", pa.int64())]))
    b = store.create_dataset("b", pa.schema([("id", pa.int64())]))
    for i in range(3):
        a.append(pa.table({"id": [i]}))
    b.append(pa.table({"id": [10, 11]}))
    got = store.sql("SELECT (SELECT count(*) FROM a) AS na, (SELECT count(*) FROM b) AS nb",
                    versions={"a": 2, "b": 1})
    assert got.to_pylist() == [{"na": 2, "nb": 2}]


# -- describe ----------------------------------------------------------------------------------------
def test_describe(store: Store) -> None:
    schema = pa.schema([("id", pa.int64()), ("d", pa.date32()), ("s", pa.string())])
    ds = store.create_dataset("t", schema, partition_by="month(d)", sort_by="id", segment_rows=4)
    days = [dt.date(2024, 1, 1), dt.date(2024, 1, 15), dt.date(2024, 2, 1)]
    ds.append(pa.table({"id": range(9), "d": [days[i % 3] for i in range(9)], "s": ["x"] * 9}), source="f1")
    ds.append(pa.table({"id": [9], "d": [None], "s": [None]}))
    info = ds.describe()
    assert info["name"] == "t" and info["store"] == store.uri
    assert info["rows"] == 10
    assert info["version"] == 2
    assert info["partitions"] == 3  # January, February, null
    # January has 6 rows in segments of 4: 2 segments; February 3 rows: 1; null: 1
    assert info["segments"] == 4
    assert info["partition_by"] == ["month(d)"] and info["sort_by"] == ["id"] and info["segment_rows"] == 4
    assert [(c["name"], c["type"]) for c in info["columns"]] == [("id", "int64"), ("d", "date32"), ("s", "string")]
    assert all(c["bytes"] > 0 for c in info["columns"])
    assert info["bytes"] == sum(c["bytes"] for c in info["columns"]) == sum(info["partition_bytes"].values())
    assert [(v["version"], v["kind"], v["rows_added"], v["source"]) for v in info["versions"]] == \
        [(1, "append", 9, "f1"), (2, "append", 1, None)]


# -- schema checks and evolution ---------------------------------------------------------------------
def test_strict_schema_mismatch_is_a_readable_error(store: Store) -> None:
    ds = store.create_dataset("t", pa.schema([("id", pa.int64()), ("name", pa.string())]))
    with pytest.raises(SchemaError) as info:
        ds.append(pa.table({"id": [1], "name": ["a"], "extra": [1.5]}))
    message = str(info.value)
    assert "'t'" in message
    assert "+ extra: float64 (not in the dataset)" in message
    with pytest.raises(SchemaError) as info:
        ds.append(pa.table({"id": ["not a number"], "name": ["a"]}))
    assert "'id'" in str(info.value) and "int64" in str(info.value)
    with pytest.raises(SchemaError) as info:
        ds.append(pa.table({"ident": [1], "name": ["a"]}))
    assert "- id: int64 (missing from the data)" in str(info.value)
    assert "+ ident: int64 (not in the dataset)" in str(info.value)
    assert ds.version == 0, "a refused append commits nothing"


def test_merge_adds_nullable_columns_and_old_segments_read_nulls(store: Store) -> None:
    ds = store.create_dataset("t", pa.schema([("id", pa.int64())]), segment_rows=2)
    ds.append(pa.table({"id": [1, 2, 3]}))
    with pytest.raises(SchemaError):
        ds.append(pa.table({"id": [4], "tag": ["new"]}))
    result = ds.append(pa.table({"id": [4, 5], "tag": ["new", None], "w": [1.5, 2.5]}), schema_mode="merge")
    assert result.version == 2
    assert store.dataset("t").schema == pa.schema([("id", pa.int64()), ("tag", pa.string()), ("w", pa.float64())])
    out = store.dataset("t").scan().to_arrow()
    rows = sorted(plain(out).to_pylist(), key=lambda r: r["id"])
    assert rows == [
        {"id": 1, "tag": None, "w": None}, {"id": 2, "tag": None, "w": None}, {"id": 3, "tag": None, "w": None},
        {"id": 4, "tag": "new", "w": 1.5}, {"id": 5, "tag": None, "w": 2.5},
    ]
    assert store.sql("SELECT count(*) AS n FROM t WHERE tag IS NULL").to_pylist() == [{"n": 4}]
    assert store.sql("SELECT id FROM t WHERE w > 2").to_pylist() == [{"id": 5}]
    # the old version still reads, with the old rows and the old schema (time travel)
    at_v1 = store.dataset("t").scan(version=1).to_arrow()
    assert at_v1.column_names == ["id"] and ids(at_v1) == [1, 2, 3]
    assert store.sql("SELECT * FROM t ORDER BY id", version=1).column_names == ["id"]
    with pytest.raises(SchemaError, match="tag"):
        store.dataset("t").scan(version=1, columns=["tag"]).to_arrow()
    # merge never changes a column's type
    with pytest.raises(SchemaError, match="id"):
        store.dataset("t").append(pa.table({"id": ["x"]}), schema_mode="merge")
    with pytest.raises(SchemaError, match="schema mode"):
        store.dataset("t").append(pa.table({"id": [1]}), schema_mode="loose")


# -- overwrite and pandas ----------------------------------------------------------------------------
def test_overwrite_replaces_everything_in_one_commit(store: Store) -> None:
    ds = store.create_dataset("t", pa.schema([("id", pa.int64()), ("cat", pa.string())]), partition_by="cat",
                              segment_rows=3)
    ds.append(pa.table({"id": range(10), "cat": ["a", "b"] * 5}))
    before = ds.describe()
    result = ds.overwrite(pa.table({"id": [7, 8], "cat": ["c", "c"]}))
    assert result.version == 2 and result.rows == 2
    assert ids(ds.scan().to_arrow()) == [7, 8]
    assert ds.describe()["partitions"] == 1
    assert len(ds.history()[-1].removed) == before["segments"]
    assert store.sql("SELECT count(*) AS n FROM t WHERE cat = 'a'").to_pylist() == [{"n": 0}]
    # overwrite with nothing empties the dataset
    ds.overwrite(pa.table({"id": pa.array([], pa.int64()), "cat": pa.array([], pa.string())}))
    assert ds.scan().to_arrow().num_rows == 0 and ds.version == 3


def test_pandas_in_and_out(store: Store) -> None:
    frame = pd.DataFrame({"id": [3, 1, 2], "name": ["c", "a", None], "x": [0.5, None, 2.0],
                          "when": pd.to_datetime(["2024-01-01", "2024-02-01", "2024-03-01"])})
    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("x", pa.float64()),
                        ("when", pa.timestamp("us"))])
    ds = store.create_dataset("t", schema)
    ds.append(frame)
    out = ds.scan().to_pandas().sort_values("id").reset_index(drop=True)
    assert list(out.columns) == ["id", "name", "x", "when"]
    assert out["id"].tolist() == [1, 2, 3]
    assert out["name"][0] == "a" and pd.isna(out["name"][1]) and out["name"][2] == "c"
    assert math.isnan(out["x"][0]) and out["x"].tolist()[1:] == [2.0, 0.5]
    assert out["when"].tolist() == list(pd.to_datetime(["2024-02-01", "2024-03-01", "2024-01-01"]))
    sql = store.sql("SELECT name, x FROM t WHERE id >= 2 ORDER BY id").to_pandas()
    assert pd.isna(sql["name"][0]) and sql["name"][1] == "c" and sql["x"].tolist() == [2.0, 0.5]


def test_reopened_store_sees_everything(store: Store) -> None:
    ds = store.create_dataset("t", pa.schema([("id", pa.int64())]), partition_by="bucket(3, id)", sort_by="id")
    ds.append(pa.table({"id": range(50)}))
    with colonnade.connect(store.uri) as again:
        assert again.datasets() == ["t"]
        other = again.dataset("t")
        assert [str(t) for t in other.spec.partition_by] == ["bucket(3, id)"]
        assert other.spec.sort_by == ("id",)
        assert ids(other.scan().to_arrow()) == list(range(50))


def test_the_compression_level_of_an_append_is_honoured_and_reads_back_the_same(store: Store) -> None:
    from colonnade.config import WriteSettings

    rows = pa.table({"k": pa.array(range(50_000), pa.int64()),
                     "s": pa.array([f"v{(i * 7919) % 5003:05d}-{i % 977}" for i in range(50_000)])})
    ds = store.create_dataset("lv", rows.schema)
    sizes = {}
    for level in (1, 19):
        settings = WriteSettings.from_env(compression="zstd", compression_level=level)
        sizes[level] = ds.append(rows, settings=settings).bytes
    assert sizes[19] < sizes[1]  # the level reached the codec
    back = ds.scan().to_arrow().sort_by([("k", "ascending"), ("s", "ascending")])
    assert back.column("s").to_pylist() == [v for v in rows.column("s").to_pylist() for _ in range(2)]
