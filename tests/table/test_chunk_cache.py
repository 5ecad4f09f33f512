"""The decoded-chunk cache: the same answers, read from memory the second time, within its budget."""

from __future__ import annotations

import pyarrow as pa
import pytest

from colonnade.store import Store, connect
from colonnade.table.cache import ChunkCache, cache_of, default_cache_mb


def _data(n: int) -> pa.Table:
    return pa.table({"k": [f"g{i % 7}" for i in range(n)], "v": [i * 0.5 for i in range(n)],
                     "id": list(range(n))})


def test_a_cached_store_answers_the_same_and_reads_nothing_the_second_time(store: Store) -> None:
    ds = store.create_dataset("t", _data(1).schema, segment_rows=1_000)
    ds.append(_data(10_000))
    cached = connect(store.uri, cache_mb=64)
    try:
        query = "SELECT k, sum(v) AS s, count(*) AS n FROM t GROUP BY k ORDER BY k"
        expected = store.sql(query)
        first = cached.explain(query)
        assert first.totals()["bytes_read"] > 0
        assert cached.sql(query).equals(expected)
        again = cached.explain(query)
        assert again.totals()["bytes_read"] == 0 and again.totals()["chunks_read"] == first.totals()["chunks_read"]
        assert cached.sql(query).equals(expected)
        ds.append(_data(500))  # a new segment: read from the store, the old ones from memory
        assert cached.sql(query).equals(store.sql(query))
        cache = cache_of(cached.chunk_store)
        assert cache is not None and cache.hits > 0 and len(cache) == 11 * 2  # k and v of 11 segments
    finally:
        cached.close()


def test_the_cache_is_on_by_default_and_zero_turns_it_off(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a budget a store caches up to an eighth of the machine's memory (at most 8 GiB):
    a self-join decodes its table once; ``COLONNADE_CACHE_MB=0`` or ``cache_mb=0`` turns it off."""
    monkeypatch.delenv("COLONNADE_CACHE_MB", raising=False)
    path = f"{tmp_path}/c.db"
    with connect(path) as s:
        ds = s.create_dataset("t", _data(1).schema, segment_rows=1_000)
        ds.append(_data(5_000))
        cache = cache_of(s.chunk_store)
        assert cache is not None and cache.capacity == min(default_cache_mb(), 8 << 10) * 2**20 > 0
        joined = s.explain("SELECT count(*) AS n FROM t a JOIN t b USING (id) WHERE a.v >= 0 AND b.v >= 0")
        # id and v of 5 segments, each decoded once: the second scan of the join finds them
        assert joined.totals()["chunks_read"] > 0 and (cache.misses, cache.hits, len(cache)) == (10, 10, 10)
        assert s.sql("SELECT count(*) AS n FROM t a JOIN t b USING (id) WHERE a.v >= 0").to_pylist() == [{"n": 5_000}]
    monkeypatch.setenv("COLONNADE_CACHE_MB", "0")
    with connect(path) as s:
        assert cache_of(s.chunk_store) is None
    monkeypatch.delenv("COLONNADE_CACHE_MB")
    with connect(path, cache_mb=0) as s:
        assert cache_of(s.chunk_store) is None


def test_the_cache_keeps_the_most_recently_used_within_its_budget() -> None:
    cache = ChunkCache(3 * 8_000)
    arrays = {i: pa.array(range(1_000), pa.int64()) for i in range(5)}  # 8,000 bytes each
    for i, a in arrays.items():
        cache.put((str(i), "c", "int64"), a)
        if i == 2:
            assert cache.get(("0", "c", "int64")) is not None  # 0 used again: 1 goes first
    assert cache.nbytes <= cache.capacity and len(cache) == 3
    assert cache.get(("1", "c", "int64")) is None and cache.get(("2", "c", "int64")) is None
    assert cache.get(("0", "c", "int64")) is not None and cache.get(("4", "c", "int64")) is not None
    cache.put(("big", "c", "int64"), pa.array(range(10_000), pa.int64()))  # over the budget: not kept
    assert cache.get(("big", "c", "int64")) is None
