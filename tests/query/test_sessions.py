"""SQL sessions: only the datasets a query reads are registered and pinned; queries from several
threads run at once; metadata tables ``"t$commits"``, ``"t$segments"``, ``"t$partitions"``."""

from __future__ import annotations

import datetime as dt
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from colonnade.errors import DatasetNotFoundError, SpecError, VersionNotFoundError
from colonnade.query import adapter
from colonnade.store import Store

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("d", pa.date32())])


def _rows(start: int, n: int) -> pa.Table:
    return pa.table({"id": list(range(start, start + n)), "p": [["a", "b", "c"][i % 3] for i in range(n)],
                     "d": [None if i % 4 == 0 else dt.date(2024, 1, 1 + i % 20) for i in range(n)]}, schema=SCHEMA)


@pytest.fixture
def two(store: Store) -> Store:
    """``t`` with versions 1..3 (10 rows each) and ``one`` with a single version."""
    t = store.create_dataset("t", SCHEMA, partition_by="p", segment_rows=4)
    for v in range(3):
        t.append(_rows(v * 10, 10))
    store.create_dataset("one", SCHEMA).append(_rows(0, 5))
    return store


def test_a_version_pins_only_the_datasets_the_query_reads(two: Store) -> None:
    assert two.sql("SELECT count(*) AS n FROM t", version=2).column("n").to_pylist() == [20]
    assert two.sql("SELECT count(*) AS n FROM T", version=3).column("n").to_pylist() == [30]
    with pytest.raises(VersionNotFoundError, match="'one' has no version 2"):
        two.sql("SELECT count(*) FROM t, one", version=2)
    pinned = two.sql("SELECT (SELECT count(*) FROM t) AS t, (SELECT count(*) FROM one) AS o",
                     versions={"T": 1})
    assert pinned.to_pylist() == [{"t": 10, "o": 5}]
    with pytest.raises(DatasetNotFoundError):
        two.sql("SELECT 1", versions={"nope": 1})


def test_views_read_the_datasets_they_name_at_the_pinned_version(two: Store) -> None:
    two.sql("CREATE VIEW every_t AS SELECT * FROM t")
    assert two.sql("SELECT count(*) AS n FROM every_t", version=1).column("n").to_pylist() == [10]
    assert two.sql("SELECT count(*) AS n FROM every_t").column("n").to_pylist() == [30]


def test_queries_on_several_threads_overlap(two: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each query's scan waits for the other's: they finish only if they run at the same time."""
    barrier = threading.Barrier(2, timeout=30)
    recording = adapter.ColonnadeArrowDataset._recording

    def waiting(self: Any, batches: Any) -> Any:
        barrier.wait()
        yield from recording(self, batches)

    monkeypatch.setattr(adapter.ColonnadeArrowDataset, "_recording", waiting)

    def count(version: int) -> int:
        return int(two.sql("SELECT count(id) AS n FROM t WHERE id >= 0", version=version).column("n")[0].as_py())

    with ThreadPoolExecutor(2) as pool:
        assert list(pool.map(count, [1, 3])) == [10, 30]


def test_concurrent_answers_are_right(two: Store) -> None:
    reference = duckdb.connect()
    full = pa.concat_tables([_rows(v * 10, 10) for v in range(3)])
    reference.register("t", full)
    queries = ["SELECT p, count(*) AS n, min(d) AS lo FROM t GROUP BY p ORDER BY p",
               "SELECT sum(id) AS s FROM t WHERE p = 'b'", "SELECT id FROM t WHERE d IS NULL ORDER BY id"]
    expected = {q: reference.sql(q).fetchall() for q in queries}

    def run(i: int) -> bool:
        q = queries[i % len(queries)]
        if i % 2:
            with two.sql_reader(q) as reader:
                got = [tuple(r.values()) for r in reader.read_all().to_pylist()]
        else:
            got = [tuple(r.values()) for r in two.sql(q).to_pylist()]
        return got == expected[q]

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(run, range(24)))


def test_commits_table(two: Store) -> None:
    got = two.sql('SELECT version, operation, read_version, rows_added, segments_removed FROM "T$commits" '
                  "ORDER BY version", version=2).to_pylist()
    assert got == [{"version": 1, "operation": "append", "read_version": 0, "rows_added": 10, "segments_removed": 0},
                   {"version": 2, "operation": "append", "read_version": 1, "rows_added": 10, "segments_removed": 0}]
    history = two.dataset("t").history()
    assert two.sql('SELECT segments_added FROM "t$commits" ORDER BY version').column(0).to_pylist() == [
        len(c.added) for c in history]


def test_segments_and_partitions_tables(two: Store) -> None:
    ds = two.dataset("t")
    snapshot = ds.snapshot(2)
    stats = ds.segment_stats(snapshot)
    got = two.sql('SELECT segment, rows, bytes, columns.id.min AS lo, columns.id.max AS hi, columns.d.nulls AS dn '
                  'FROM "t$segments"', version=2).to_pylist()
    assert {r["segment"] for r in got} == {s.segment for s in snapshot.segments}
    for r in got:
        s = stats[r["segment"]]
        assert (r["lo"], r["hi"], r["dn"]) == (s["id"].min, s["id"].max, s["d"].nulls)
        assert r["bytes"] == sum(c.nbytes for c in s.values())
    assert sum(r["rows"] for r in got) == 20
    types = two.sql('SELECT columns.d.min AS d FROM "t$segments"').schema
    assert types.field("d").type == pa.date32()
    parts = two.sql('SELECT "values".p AS p, segments, rows FROM "t$partitions" ORDER BY p').to_pylist()
    full = pa.concat_tables([_rows(v * 10, 10) for v in range(3)]).column("p").to_pylist()
    assert [(r["p"], r["rows"]) for r in parts] == [(p, full.count(p)) for p in "abc"]
    assert sum(r["segments"] for r in parts) == len(ds.snapshot().segments)


def test_datasets_created_and_dropped_by_another_connection_are_seen_at_once(store: Store) -> None:
    """Queries name datasets from the listing an earlier query made (a point lookup lists
    nothing): a dataset another connection creates, drops, or drops and creates again under
    another case is seen by the next query all the same; a count answered from statistics too."""
    import colonnade

    store.create_dataset("a", SCHEMA).append(_rows(0, 3))
    other = colonnade.connect(store.uri) if store.uri.startswith("cassandra") else colonnade.connect(
        str(store.chunk_store.path))  # type: ignore[attr-defined]
    try:
        assert store.sql("SELECT count(*) AS n FROM a WHERE id >= 0").column("n").to_pylist() == [3]
        other.create_dataset("b", SCHEMA).append(_rows(0, 4))
        assert store.sql("SELECT count(*) AS n FROM b WHERE id >= 0").column("n").to_pylist() == [4]
        other.drop_dataset("a")
        for query in ("SELECT count(*) AS n FROM a WHERE id >= 0", "SELECT count(*) AS n FROM a"):
            with pytest.raises(Exception, match="(?i)does not exist|not found") as raised:
                store.sql(query)
            assert raised.type.__module__.startswith("colonnade"), raised.type  # no DuckDB or driver error
        other.create_dataset("A", SCHEMA).append(_rows(0, 7))
        assert store.sql("SELECT count(*) AS n FROM a WHERE id >= 0").column("n").to_pylist() == [7]
        assert store.sql("SELECT count(*) AS n FROM a").column("n").to_pylist() == [7]
        other.drop_dataset("A")
        other.create_dataset("a", SCHEMA).append(_rows(0, 2))
        assert store.sql("SELECT count(*) AS n FROM A").column("n").to_pylist() == [2]
        assert store.sql("SELECT count(*) AS n FROM a WHERE id >= 0").column("n").to_pylist() == [2]
    finally:
        other.close()


def test_a_dataset_read_before_costs_one_log_read_and_is_never_taken_for_one_made_again(store: Store) -> None:
    """The latest version of a dataset SQL read before is found with one read of the log, not
    of the catalog as well: that read goes on from the commit read last only if it is still
    there, the same record (its mark; the payload is not read again). A dataset dropped and created again under the name (with fewer,
    as many or more commits, another schema) is read afresh, never as the old one with its
    commits added; so is one whose commit read last was expired since."""
    import colonnade

    def count() -> list[tuple[int, int]]:
        table = store.sql("SELECT count(*) AS n, count(extra) AS e FROM t WHERE id >= 0")
        return list(zip(table.column("n").to_pylist(), table.column("e").to_pylist(), strict=True))

    plain = pa.schema([("id", pa.int64()), ("extra", pa.int64())])
    t = store.create_dataset("t", plain)
    t.append(pa.table({"id": [1, 2, 3], "extra": [None, None, None]}, schema=plain))
    t.append(pa.table({"id": [4, 5], "extra": [None, None]}, schema=plain))
    assert count() == [(5, 0)]

    calls: list[str] = []
    raw = store.chunk_store
    spied = {name: getattr(raw, name) for name in ("get_dataset", "follow_commits", "list_checkpoints",
                                                   "get_checkpoint", "list_datasets", "oldest_version")}

    def spy(name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            return spied[name](*args, **kwargs)
        return call

    for name in spied:
        setattr(raw, name, spy(name))
    other = colonnade.connect(store.uri) if store.uri.startswith("cassandra") else colonnade.connect(
        str(store.chunk_store.path))  # type: ignore[attr-defined]
    try:
        assert count() == [(5, 0)] and calls == ["follow_commits"]  # no catalog read
        other.dataset("t").append(pa.table({"id": [6], "extra": [None]}, schema=plain))
        calls.clear()
        assert count() == [(6, 0)] and calls == ["follow_commits"]

        wide = pa.schema([("id", pa.int64()), ("extra", pa.int64()), ("w", pa.string())])
        for commits in (1, 3, 5):  # fewer commits than the dataset read had, as many, more
            other.drop_dataset("t")
            again = other.create_dataset("t", wide, partition_by="w")
            for i in range(commits):  # each commit of this one has as many rows as it has commits
                again.append(pa.table({"id": [100 + i] * commits, "extra": [i] + [None] * (commits - 1),
                                       "w": ["x"] + ["y"] * (commits - 1)}, schema=wide))
            assert count() == [(commits * commits, commits)], commits
            assert store.sql("SELECT count(*) AS n FROM t WHERE w = 'x'").column("n").to_pylist() == [commits]

        # the commit read last expired since: the dataset is read afresh (its checkpoint)
        live = other.dataset("t")
        for i in range(3):
            live.append(pa.table({"id": [200 + i], "extra": [1], "w": ["z"]}, schema=wide))
        live.expire(retain_last=1)
        assert count() == [(28, 8)]
        # a Dataset object held by the user follows the same rule; its spec can't change
        held = store.dataset("t")
        assert held.snapshot().rows == 28
        other.drop_dataset("t")
        other.create_dataset("t", wide).append(pa.table({"id": [7], "extra": [7], "w": ["q"]}, schema=wide))
        assert held.snapshot().rows == 1 and count() == [(1, 1)]
        other.drop_dataset("t")
        other.create_dataset("t", plain).append(pa.table({"id": [8], "extra": [8]}, schema=plain))
        with pytest.raises(SpecError, match="dropped and created again since this object was opened"):
            held.snapshot()
        assert count() == [(1, 1)]
    finally:
        for name, real in spied.items():
            setattr(raw, name, real)
        other.close()
