"""Conflict rules of the commit protocol and schema changes as commits, on both stores.

Races are made deterministic: another writer commits either while an operation consumes its
input (between its read and its commit) or just before its first commit attempt
(:class:`table_helpers.RaceFirstCommit`)."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pytest
from table_helpers import racing

from colonnade.errors import CommitConflictError, SchemaError
from colonnade.schema.spec import DatasetSpec
from colonnade.store import Store
from colonnade.table.commits import Commit
from colonnade.table.conflicts import ReadSet

SCHEMA = pa.schema([("id", pa.int64()), ("cat", pa.string())])


def rows(ids: range | list[int], cat: str = "a") -> pa.Table:
    return pa.table({"id": list(ids), "cat": [cat] * len(ids)}, schema=SCHEMA)


def ids(store: Store, name: str = "t", version: int | None = None) -> list[int]:
    return sorted(store.dataset(name).scan(version=version).to_arrow().column("id").to_pylist())


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text
    return text


def test_an_overwrite_racing_an_append_fails_and_keeps_the_table(store: Store) -> None:
    ds = store.create_dataset("t", SCHEMA, partition_by="cat")
    ds.append(rows(range(5)))
    other = store.dataset("t")

    def data() -> Iterator[pa.RecordBatch]:
        # the overwrite has read the table; another writer appends before it commits
        other.append(rows([100], "b"))
        yield from rows([7, 8]).to_batches()

    with pytest.raises(CommitConflictError) as info:
        ds.overwrite(data())
    message = one_line(info.value)
    assert info.value.version == 2 and info.value.operation == "append"
    assert "'t'" in message and "version 2 (append)" in message and "cat=b" in message
    assert "overwrite" in message
    assert ids(store) == [0, 1, 2, 3, 4, 100]
    assert store.dataset("t").version == 2


def test_an_overwrite_that_loses_its_version_to_an_append_fails(store: Store) -> None:
    store.create_dataset("t", SCHEMA).append(rows(range(3)))
    other = store.dataset("t")
    ds, raced = racing(store, "t", lambda: other.append(rows([50])))
    with pytest.raises(CommitConflictError, match=r"version 2 \(append\).*added rows to the table"):
        ds.overwrite(rows([9]))
    assert raced.raced
    assert ids(store) == [0, 1, 2, 50]


def test_blind_appends_never_conflict(store: Store) -> None:
    store.create_dataset("t", SCHEMA, partition_by="cat").append(rows(range(3)))
    other = store.dataset("t")
    ds, raced = racing(store, "t", lambda: other.append(rows([10, 11])))
    result = ds.append(rows([20]))
    assert raced.raced and result.version == 3
    assert ids(store) == [0, 1, 2, 10, 11, 20]


def test_commit_returns_a_result_not_a_sentinel(store: Store) -> None:
    ds = store.create_dataset("t", SCHEMA)
    ds.append(rows([1]), source="file:a")
    again = store.dataset("t").commit(Commit.new("append", source="file:a"))
    assert again.version is None and not again.committed
    assert "file:a" in again.reason and "version 1" in again.reason
    done = store.dataset("t").commit(Commit.new("append", source="file:b"))
    assert done.committed and done.version == 2


def test_removing_a_segment_removed_meanwhile_conflicts(store: Store) -> None:
    ds = store.create_dataset("t", SCHEMA)
    ds.append(rows([1]))
    ds.append(rows([2]))
    first, second = ds.snapshot().segments
    read = ds.snapshot()
    ds.commit(Commit.new("delete", removed=[first.segment]), reads=ds.reads(read, removes=[first.segment]))
    with pytest.raises(CommitConflictError, match=r"version 3 \(delete\).*removed segment"):
        ds.commit(Commit.new("delete", removed=[first.segment, second.segment]),
                  reads=ds.reads(read, removes=[first.segment, second.segment]))
    assert ids(store) == [2]
    # removing other segments than the winner did is no conflict
    ds.commit(Commit.new("delete", removed=[second.segment]), reads=ds.reads(read, removes=[second.segment]))
    assert ids(store) == []


def test_reads_of_partitions_conflict_only_with_adds_to_them(store: Store) -> None:
    ds = store.create_dataset("t", SCHEMA, partition_by="cat")
    ds.append(rows([1], "a"))
    read = ds.snapshot()
    ds.append(rows([2], "b"))
    # read partition cat=a only: an add to cat=b does not matter
    ds.commit(Commit.new("delete"), reads=ds.reads(read, partitions=["cat=a"]))
    with pytest.raises(CommitConflictError, match="partition cat=b"):
        ds.commit(Commit.new("delete"), reads=ds.reads(read, partitions=["cat=b"]))
    with pytest.raises(CommitConflictError):
        ds.commit(Commit.new("overwrite"), reads=ds.reads(read, whole_table=True))
    # a compaction's segments hold no new rows
    compacted = ds.snapshot()
    ds.commit(Commit.new("compact"), reads=ReadSet.blind(ds.version))
    ds.commit(Commit.new("delete"), reads=ds.reads(compacted, partitions=["cat=a", "cat=b"]))


def test_an_operation_whose_read_version_was_expired_meanwhile_conflicts(store: Store) -> None:
    ds = store.create_dataset("t", SCHEMA, partition_by="cat")
    ds.append(rows([1], "a"))
    read = ds.snapshot()  # v1
    ds.append(rows([2], "b"))
    ds.append(rows([3], "b"))
    store.dataset("t").expire(retain_last=1)  # v2 is gone: what it added can't be checked
    with pytest.raises(CommitConflictError, match="the versions after 1, which this overwrite read, were expired"):
        ds.commit(Commit.new("overwrite"), reads=ds.reads(read, whole_table=True))
    assert ds.commit(Commit.new("append"), reads=ReadSet.blind(read.version)).version == 4  # blind: fine
    assert ids(store) == [1, 2, 3]


# -- schema changes are commits -----------------------------------------------------------------
def test_a_failed_merge_append_changes_nothing(store: Store) -> None:
    ds = store.create_dataset("t", SCHEMA)
    ds.append(rows([1]))

    def failing() -> Iterator[pa.RecordBatch]:
        yield pa.record_batch({"id": [2], "cat": ["a"], "extra": [1.5]})
        raise ValueError("the input broke")

    with pytest.raises(ValueError, match="the input broke"):
        ds.append(failing(), schema_mode="merge")
    assert ds.schema == SCHEMA and ds.version == 1
    again = store.dataset("t")
    assert again.schema == SCHEMA
    assert DatasetSpec.from_json(store.chunk_store.get_dataset("t")).schema == SCHEMA
    assert again.append(rows([3])).version == 2  # a plain append with the original schema
    assert ids(store) == [1, 3]


def test_a_merge_is_recorded_by_the_data_commit(store: Store) -> None:
    ds = store.create_dataset("t", SCHEMA)
    ds.append(rows([1]))
    result = ds.append(pa.table({"id": [2], "cat": ["b"], "score": [7]}), schema_mode="merge")
    assert result.version == 2
    commit = ds.history()[-1]
    assert commit.schema == [["id", "int64"], ["cat", "string"], ["score", "int64"]]
    assert commit.rows_added == 1
    assert store.dataset("t").schema.names == ["id", "cat", "score"]


def test_the_schema_is_the_one_the_log_records(store: Store) -> None:
    ds = store.create_dataset("t", SCHEMA)
    ds.append(rows([1]))
    ds.append(pa.table({"id": [2], "cat": ["b"], "score": [7]}), schema_mode="merge")
    # a stale catalog entry (the cache) does not decide the schema: the log does
    store.chunk_store.update_dataset("t", store.dataset("t").spec.with_schema(SCHEMA).to_json())
    assert store.dataset("t").schema.names == ["id", "cat", "score"]
    assert store.dataset("t").append(pa.table({"id": [3], "cat": ["c"], "score": [9]})).version == 3
    with pytest.raises(SchemaError):
        store.dataset("t").append(rows([4]))


def test_two_concurrent_schema_changes_conflict(store: Store) -> None:
    store.create_dataset("t", SCHEMA).append(rows([1]))
    other = store.dataset("t")
    ds, raced = racing(store, "t", lambda: other.append(
        pa.table({"id": [2], "cat": ["a"], "y": ["why"]}), schema_mode="merge"))
    with pytest.raises(CommitConflictError, match=r"version 2 \(append\).*changed the schema"):
        ds.append(pa.table({"id": [3], "cat": ["a"], "x": [1.5]}), schema_mode="merge")
    assert raced.raced
    assert store.dataset("t").schema.names == ["id", "cat", "y"]
    assert ids(store) == [1, 2]
    # a plain append racing a schema change is no conflict, and keeps the new schema
    third = store.dataset("t")
    ds, raced = racing(store, "t", lambda: third.append(
        pa.table({"id": [4], "cat": ["a"], "y": ["b"], "z": [1]}), schema_mode="merge"))
    assert ds.append(pa.table({"id": [5], "cat": ["a"], "y": ["c"]})).version == 4
    assert store.dataset("t").schema.names == ["id", "cat", "y", "z"]
    assert ids(store) == [1, 2, 4, 5]
