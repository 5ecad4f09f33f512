"""Compaction, deletes and retention on both stores: answers unchanged by a compaction, old
versions still readable, concurrent appends kept, conflicts between rewrites of one segment,
and deletes that touch, drop or rewrite exactly the segments they must."""

from __future__ import annotations

import datetime as dt
import time

import pyarrow as pa
import pytest
from table_helpers import racing

from colonnade.errors import CommitConflictError, PredicateError, SchemaError
from colonnade.store import Store

SCHEMA = pa.schema([("id", pa.int64()), ("cat", pa.string()), ("day", pa.date32()), ("v", pa.float64())])
DAY0 = dt.date(2024, 1, 1)
QUERIES = [
    "SELECT count(*) AS n, sum(id) AS s, min(v) AS lo, max(v) AS hi FROM t",
    "SELECT cat, count(*) AS n, sum(v) AS s FROM t GROUP BY cat ORDER BY cat",
    "SELECT id, cat, day, v FROM t WHERE id BETWEEN 10 AND 40 ORDER BY id",
    "SELECT day, count(*) AS n FROM t WHERE cat = 'b' GROUP BY day ORDER BY day",
]


def rows(ids: list[int]) -> pa.Table:
    return pa.table({"id": ids, "cat": ["abc"[i % 3] for i in ids],
                     "day": [DAY0 + dt.timedelta(days=i % 20) for i in ids],
                     "v": [None if i % 7 == 0 else i * 0.5 for i in ids]}, schema=SCHEMA)


def small_appends(store: Store, n: int = 12, per: int = 5, **options: object) -> None:
    ds = store.create_dataset("t", SCHEMA, **options)  # type: ignore[arg-type]
    for i in range(n):
        ds.append(rows(list(range(i * per, (i + 1) * per))))


def answers(store: Store, version: int | None = None) -> list[list[dict[str, object]]]:
    return [store.sql(q, version=version).to_pylist() for q in QUERIES]


def ids(store: Store, version: int | None = None) -> list[int]:
    return sorted(store.dataset("t").scan(version=version).to_arrow().column("id").to_pylist())


# -- compaction ----------------------------------------------------------------------------------
def test_compaction_merges_small_segments_and_changes_no_answer(store: Store) -> None:
    small_appends(store, partition_by="cat", sort_by="id", segment_rows=8)
    ds = store.dataset("t")
    before, version = answers(store), ds.version
    assert len(ds.snapshot().segments) == 36
    result = ds.compact()
    assert result.version == version + 1 and result.segments_before == 36 and result.rows == 60
    after = ds.snapshot().segments
    assert result.segments_after == len(after) == 9  # 20 rows per partition: 8 + 8 + 4
    assert sorted(s.rows for s in after) == [4, 4, 4, 8, 8, 8, 8, 8, 8]
    commit = ds.history()[-1]
    assert commit.kind == "compact" and len(commit.removed) == 36 and len(commit.added) == 9
    assert answers(store) == before
    assert answers(store, version) == before  # the version before still reads, same answers
    assert len(ds.snapshot(version).segments) == 36
    assert ds.verify()[1] == []
    # merged segments follow each other in sort-key order within each partition
    stats = ds.segment_stats(ds.snapshot())
    for partition in ("cat=a", "cat=b", "cat=c"):
        ranges = [(stats[s.segment]["id"].min, stats[s.segment]["id"].max) for s in after if s.partition == partition]
        assert all(hi < lo for (_, hi), (lo, _) in zip(ranges, ranges[1:], strict=False)), ranges
    # nothing left to merge: full segments are not rewritten (one 4-row tail per partition)
    again = ds.compact()
    assert again.version is None and ds.version == version + 1


def test_compaction_reads_and_writes_only_the_small_segments(store: Store) -> None:
    ds = store.create_dataset("t", SCHEMA, segment_rows=10)
    ds.append(rows(list(range(30))))  # three full segments
    for i in range(4):
        ds.append(rows([100 + i]))
    full = {s.segment for s in ds.snapshot().segments if s.rows == 10}
    result = ds.compact()
    assert result.segments_before == 4 and result.segments_after == 1 and result.rows == 4
    assert full <= {s.segment for s in ds.snapshot().segments}
    # only some partitions, and another target
    assert ds.compact(target_rows=100).segments_before == 4  # 3 full (10 < 100) + the merged one


def test_compaction_of_chosen_partitions(store: Store) -> None:
    small_appends(store, partition_by="cat", segment_rows=100)
    ds = store.dataset("t")
    result = ds.compact(partitions=["cat=b"])
    assert result.partitions == 1 and result.segments_before == 12
    by_partition = {}
    for s in ds.snapshot().segments:
        by_partition[s.partition] = by_partition.get(s.partition, 0) + 1
    assert by_partition == {"cat=a": 12, "cat=b": 1, "cat=c": 12}


def test_an_append_racing_a_compaction_both_succeed(store: Store) -> None:
    small_appends(store, n=6, segment_rows=100)
    other = store.dataset("t")
    ds, raced = racing(store, "t", lambda: other.append(rows([1000, 1001])))
    result = ds.compact()
    assert raced.raced and result.version == 8
    assert ids(store) == list(range(30)) + [1000, 1001]
    assert {s.rows for s in store.dataset("t").snapshot().segments} == {30, 2}


def test_two_compactions_of_the_same_segments_one_fails(store: Store) -> None:
    small_appends(store, n=6, segment_rows=100)
    other = store.dataset("t")
    ds, raced = racing(store, "t", lambda: other.compact())
    with pytest.raises(CommitConflictError, match=r"version 7 \(compact\).*removed segment"):
        ds.compact()
    assert raced.raced and store.dataset("t").version == 7
    assert ids(store) == list(range(30))


def test_a_delete_racing_a_delete_of_the_same_segment_one_fails(store: Store) -> None:
    small_appends(store, n=2, segment_rows=100)
    other = store.dataset("t")
    ds, raced = racing(store, "t", lambda: other.delete("id = 1"))
    with pytest.raises(CommitConflictError, match=r"version 3 \(delete\)"):
        ds.delete("id = 2")
    assert ids(store) == [0] + list(range(2, 10))


# -- delete --------------------------------------------------------------------------------------
def test_delete_drops_whole_partitions_without_reading_and_rewrites_the_rest(store: Store) -> None:
    small_appends(store, n=4, per=10, partition_by="cat", segment_rows=100)
    ds = store.dataset("t")
    before = ds.version
    gone = ds.delete("cat = 'a'")  # partition-aligned: removed from partition values alone
    assert gone.rows_deleted == 14 and gone.segments_removed == 4 and gone.segments_read == 0
    assert gone.segments_rewritten == 0 and gone.version == before + 1
    kept = {s.segment for s in ds.snapshot().segments if s.partition == "cat=c"}
    some = ds.delete("id >= 35 AND cat = 'b'")  # stats rule out the other segments of cat=b
    assert some.rows_deleted == 1 and some.segments_read == 1 and some.segments_rewritten == 1
    assert kept <= {s.segment for s in ds.snapshot().segments}  # cat=c was not touched
    all_rows = ds.delete("id < 10 AND v IS NOT NULL OR id < 10")  # segment 0..9 of each partition
    assert all_rows.rows_deleted == 6 and all_rows.segments_removed == 2 and all_rows.segments_read == 0
    assert ids(store) == sorted(i for i in range(10, 40) if i % 3 != 0 and not (i >= 35 and i % 3 == 1))
    # NULL keeps the row: v is NULL for multiples of 7
    nulls = ds.delete("v > 0")
    assert ids(store) == [14, 28, 35]
    assert nulls.rows_deleted > 0
    # a reader pinned before the deletes still reads the deleted rows
    assert ids(store, before) == list(range(40))
    assert store.sql("SELECT count(*) AS n FROM t", version=before).to_pylist() == [{"n": 40}]
    assert ds.verify()[1] == []


def test_delete_with_a_predicate_matching_nothing_commits_nothing(store: Store) -> None:
    small_appends(store, n=2)
    ds = store.dataset("t")
    result = ds.delete("id > 1000")
    assert result.version is None and result.rows_deleted == 0 and ds.version == 2


@pytest.mark.parametrize("where, reason", [
    ("nope > 1", "nope"), ("id >", "syntax error"), ("id + 1", "not true or false"), ("", "empty"),
])
def test_a_bad_predicate_is_one_line_and_changes_nothing(store: Store, where: str, reason: str) -> None:
    small_appends(store, n=2)
    with pytest.raises(PredicateError, match=reason) as info:
        store.dataset("t").delete(where)
    assert "\n" not in str(info.value) and "'t'" in str(info.value)
    assert store.dataset("t").version == 2 and len(ids(store)) == 10


def test_delete_evaluates_sql_exactly(store: Store) -> None:
    small_appends(store, n=4, per=10, partition_by="day", segment_rows=100)
    ds = store.dataset("t")
    expected = store.sql("SELECT id FROM t WHERE NOT (lower(cat) = 'a' AND day < DATE '2024-01-10') "
                         "OR (lower(cat) = 'a' AND day < DATE '2024-01-10') IS NULL ORDER BY id")
    ds.delete("lower(cat) = 'a' AND day < '2024-01-10'")
    assert ids(store) == expected.column("id").to_pylist()


def test_an_overwrite_racing_a_delete_of_the_same_partition(store: Store) -> None:
    small_appends(store, n=2, partition_by="cat")
    other = store.dataset("t")
    ds, raced = racing(store, "t", lambda: other.append(rows([100])))  # cat=b
    with pytest.raises(CommitConflictError, match="cat=b"):
        ds.delete("cat = 'b' AND id > 5")
    assert 100 in ids(store) and 7 in ids(store)


# -- retention -----------------------------------------------------------------------------------
def test_retention_is_a_property_applied_by_compaction(store: Store) -> None:
    small_appends(store, n=4, per=10, partition_by="day", segment_rows=100)
    ds = store.dataset("t")
    with pytest.raises(SchemaError, match="not a date or timestamp"):
        ds.set_retention("90d", on="id")
    with pytest.raises(SchemaError, match="no column"):
        ds.set_retention("90d", on="nope")
    set_at = ds.set_retention("10d", on="day")
    assert set_at.version == 5 and ds.snapshot().properties["retention"]["column"] == "day"
    now = dt.datetime(2024, 1, 20, 12, tzinfo=dt.UTC).timestamp()  # cutoff 2024-01-10 12:00
    from colonnade.table.compaction import compact

    done = compact(ds, now=now)
    assert done.retention is not None and done.retention.segments_read == 0  # whole day partitions
    assert store.sql("SELECT min(day) AS d FROM t").to_pylist() == [{"d": dt.date(2024, 1, 10)}]
    assert store.sql("SELECT count(*) AS n FROM t").to_pylist() == [{"n": 22}]
    assert ds.history(after=5)[0].kind == "delete"
    ds.set_retention("none")
    assert compact(ds, now=time.time()).retention is None
    assert store.sql("SELECT count(*) AS n FROM t").to_pylist() == [{"n": 22}]


def test_retention_is_applied_by_expire_too(store: Store) -> None:
    small_appends(store, n=4, per=10, partition_by="day", segment_rows=100)
    ds = store.dataset("t")
    ds.set_retention("10d", on="day")
    now = dt.datetime(2024, 1, 20, 12, tzinfo=dt.UTC).timestamp()  # cutoff 2024-01-10 12:00
    dry = ds.expire(retain_last=1, now=now, dry_run=True)
    assert dry.retention is None and store.sql("SELECT count(*) AS n FROM t").to_pylist() == [{"n": 40}]
    done = ds.expire(retain_last=1, now=now)
    assert done.retention is not None and done.retention.rows_deleted == 18
    assert done.to_dict()["retention"]["rows_deleted"] == 18
    assert store.sql("SELECT count(*) AS n, min(day) AS d FROM t").to_pylist() == [{"n": 22, "d": dt.date(2024, 1, 10)}]
    assert done.oldest == done.latest == store.dataset("t").version  # the delete is the version kept
