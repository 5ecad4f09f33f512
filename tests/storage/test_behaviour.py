"""The behaviour every store must show, run against each backend through the ``store`` fixture:
the invariants of DESIGN.md (atomic visibility, idempotent ingest, checksummed reads naming
dataset, column and segment) and the ChunkStore guarantees the commit protocol rests on."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import colonnade
from colonnade.errors import (
    CommitConflictError,
    CorruptChunkError,
    CorruptCommitError,
    DatasetExistsError,
)
from colonnade.storage.base import ChunkRef
from colonnade.store import Store
from colonnade.table.commits import Commit
from colonnade.table.dataset import Dataset
from colonnade.table.writer import SegmentWriter

SCHEMA = pa.schema([("id", pa.int64()), ("cat", pa.string()), ("v", pa.float64())])


def rows(ids: range | list[int]) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "cat": [f"c{i % 3}" for i in ids], "v": [i * 0.5 for i in ids]}, schema=SCHEMA)


def scanned_ids(ds: Dataset, **kwargs: object) -> list[int]:
    return sorted(ds.scan(columns=["id"], **kwargs).to_arrow().column("id").to_pylist())  # type: ignore[arg-type]


def count(store: Store, table: str = "t") -> int:
    return int(store.sql(f"SELECT count(*) AS n FROM {table}").column("n")[0].as_py())


@pytest.fixture
def dataset(store: Store) -> Dataset:
    """``t``: partitioned by ``cat``, small segments, rows 0..59 committed as version 1."""
    ds = store.create_dataset("t", SCHEMA, partition_by="cat", sort_by="id", segment_rows=8)
    assert ds.append(rows(range(60))).version == 1
    return ds


# -- invariant 1: a reader sees all of a commit or none of it ------------------------------------------
def test_segments_written_without_a_commit_are_invisible(store: Store, dataset: Dataset) -> None:
    writer = SegmentWriter(store.chunk_store, dataset.spec, commit_id=str(uuid.uuid4()))
    writer.write(dataset.conform(rows(range(1000, 1050)).to_batches()[0]))
    entries = writer.finish()
    assert len(entries) >= 3
    assert len(store.chunk_store.get_segments("t")) == len(dataset.snapshot().segments) + len(entries)

    assert dataset.version == 1
    assert scanned_ids(dataset) == list(range(60))
    assert count(store) == 60
    assert store.sql("SELECT count(*) AS n FROM t WHERE id >= 1000").to_pylist() == [{"n": 0}]
    assert dataset.verify()[1] == []


def test_vacuum_removes_orphans_and_never_a_committed_segment(store: Store, dataset: Dataset) -> None:
    committed = {s.segment for s in dataset.snapshot().segments}
    writer = SegmentWriter(store.chunk_store, dataset.spec, commit_id=str(uuid.uuid4()))
    writer.write(dataset.conform(rows(range(1000, 1030)).to_batches()[0]))
    orphans = writer.finish()

    assert dataset.vacuum().segments == 0, "within the grace period a concurrent writer's segments are kept"
    assert dataset.vacuum(grace_seconds=0, dry_run=True).segments == len(orphans)
    assert len(store.chunk_store.get_segments("t")) == len(committed) + len(orphans)
    assert dataset.vacuum(grace_seconds=0).segments == len(orphans)

    assert {r.segment for r in store.chunk_store.get_segments("t")} == committed
    refs = [ChunkRef(e.partition, c, e.segment, e.bucket) for e in orphans for c in SCHEMA.names]
    assert all(data == b"" for _, data in store.chunk_store.get_chunks("t", refs)), "orphan chunks deleted"
    assert scanned_ids(dataset) == list(range(60))
    checked, problems = dataset.verify()
    assert problems == [] and checked == len(committed) * len(SCHEMA.names)
    assert dataset.vacuum(grace_seconds=0).segments == 0


def test_a_failed_append_commits_nothing_and_leaves_only_orphans(store: Store, dataset: Dataset) -> None:
    def batches() -> Iterator[pa.RecordBatch]:
        # enough rows that segments are stored before the failure: a sorted dataset buffers up
        # to 8 segments of a partition (here 64 rows) before it sorts and stores them
        yield from rows(range(100, 500)).to_batches(max_chunksize=10)
        raise RuntimeError("the source broke")

    with pytest.raises(RuntimeError, match="the source broke"):
        dataset.append(batches())
    assert dataset.version == 1
    assert scanned_ids(dataset) == list(range(60))
    assert count(store) == 60
    assert dataset.vacuum(grace_seconds=0).segments >= 1  # segments written before the failure
    assert scanned_ids(dataset) == list(range(60))


def test_readers_never_see_part_of_a_commit(store: Store) -> None:
    """Each commit adds 40 rows in 5 segments over 2 partitions; a concurrent reader must only
    ever count multiples of 40."""
    ds = store.create_dataset("t", SCHEMA, partition_by="cat", segment_rows=8)
    seen: list[int] = []
    done = threading.Event()

    def reader() -> None:
        with colonnade.connect(store.uri) as other:
            while not done.is_set():
                seen.append(count(other))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for i in range(8):
            ds.append(rows(range(i * 40, i * 40 + 40)))
    finally:
        done.set()
        thread.join()
    assert seen, "the reader ran"
    assert all(n % 40 == 0 for n in seen), sorted(set(seen))
    assert seen == sorted(seen), "versions only move forward"
    assert count(store) == 320


# -- invariant 2: re-running an ingest adds nothing ------------------------------------------------------
def test_appends_with_the_same_source_are_idempotent(store: Store, dataset: Dataset) -> None:
    first = dataset.append(rows(range(100, 110)), source="file:a.csv:sha256:aa")
    assert (first.version, first.rows, first.skipped) == (2, 10, False)
    again = dataset.append(rows(range(100, 110)), source="file:a.csv:sha256:aa")
    assert again.skipped and again.version is None and again.rows == 0
    assert "already" in again.reason
    assert dataset.version == 2 and count(store) == 70
    other = dataset.append(rows(range(200, 205)), source="file:b.csv:sha256:bb")
    assert other.version == 3
    forced = dataset.append(rows(range(100, 110)), source="file:a.csv:sha256:aa", force=True)
    assert forced.version == 4 and count(store) == 85
    assert [c.source for c in dataset.history()] == [None, "file:a.csv:sha256:aa", "file:b.csv:sha256:bb",
                                                     "file:a.csv:sha256:aa"]
    # a re-opened store knows the source too
    with colonnade.connect(store.uri) as reopened:
        assert reopened.dataset("t").append(rows(range(100, 110)), source="file:b.csv:sha256:bb").skipped


def test_concurrent_appends_of_one_source_commit_once(store: Store, dataset: Dataset) -> None:
    barrier = threading.Barrier(4)

    def ingest(_: int) -> colonnade.AppendResult:
        with colonnade.connect(store.uri) as mine:
            ds = mine.dataset("t")
            barrier.wait()
            return ds.append(rows(range(1000, 1100)), source="kafka:topic/0:0-99")

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(ingest, range(4)))
    assert sorted(r.skipped for r in results) == [False, True, True, True], results
    assert count(store) == 160
    assert [c.source for c in dataset.history()].count("kafka:topic/0:0-99") == 1


# -- the commit protocol under concurrency ---------------------------------------------------------------
def test_concurrent_commits_take_contiguous_versions(store: Store) -> None:
    store.create_dataset("t", SCHEMA, partition_by="cat", segment_rows=4)
    threads, appends = 4, 10

    def worker(t: int) -> list[int]:
        versions = []
        with colonnade.connect(store.uri) as mine:
            ds = mine.dataset("t")
            for i in range(appends):
                base = t * 10_000 + i * 100
                versions.append(ds.append(rows(range(base, base + 5))).version)
        return versions

    with ThreadPoolExecutor(threads) as pool:
        per_thread = list(pool.map(worker, range(threads)))
    taken = sorted(v for vs in per_thread for v in vs)
    assert taken == list(range(1, threads * appends + 1))
    for vs in per_thread:
        assert vs == sorted(vs), "one writer's versions increase"
    ds = store.dataset("t")
    assert [c.version for c in ds.history()] == taken
    expected = sorted(t * 10_000 + i * 100 + k for t in range(threads) for i in range(appends) for k in range(5))
    assert scanned_ids(ds) == expected  # every row exactly once
    assert count(store) == len(expected)


def test_store_commit_is_exclusive_per_version(store: Store) -> None:
    cs = store.chunk_store
    cs.create_dataset("d", "{}")
    cs.commit("d", 1, b"first")
    with pytest.raises(CommitConflictError) as info:
        cs.commit("d", 1, b"second")
    assert (info.value.dataset, info.value.version) == ("d", 1)
    cs.commit("d", 2, b"two")
    cs.commit("d", 3, b"three")
    assert cs.list_commits("d") == [(1, b"first"), (2, b"two"), (3, b"three")]
    assert cs.list_commits("d", after=1) == [(2, b"two"), (3, b"three")]
    assert cs.list_commits("d", after=3) == []


def test_a_commit_mark_names_one_commit_record(store: Store) -> None:
    """Readers following a log compare the mark of the last commit they read instead of reading
    it again: a record keeps its mark, a record written again under its version (the dataset
    dropped and created again; every commit record differs) has another, an expired one none."""
    cs = store.chunk_store
    cs.create_dataset("d", "{}")
    for v in (1, 2, 3):
        cs.commit("d", v, b"commit %d" % v)
    marked = cs.list_commits_marked("d")
    assert [(v, p) for v, p, _ in marked] == cs.list_commits("d")
    marks = {v: m for v, _, m in marked}
    assert len(set(marks.values())) == 3 and all(marks.values())
    assert cs.follow_commits("d", 1) == (marks[1], marked[1:])
    assert cs.follow_commits("d", 2, upto=2) == (marks[2], [])
    assert cs.follow_commits("d", 3) == (marks[3], [])
    assert cs.follow_commits("d", 4) == (None, [])
    assert cs.list_commits_marked("d", 1, 2) == marked[1:2]
    assert cs.list_commits_marked("d") == marked  # the same records, the same marks
    cs.drop_dataset("d")
    assert cs.follow_commits("d", 2) == (None, [])
    cs.create_dataset("d", "{}")
    for v in (1, 2, 3, 4):
        cs.commit("d", v, b"commit %d, made again" % v)
    mark, after = cs.follow_commits("d", 2)
    assert mark is not None and mark != marks[2] and [v for v, _, _ in after] == [3, 4]
    cs.set_oldest_version("d", 3)
    cs.delete_commits("d", 2)
    assert cs.follow_commits("d", 2) == (None, after)  # expired: nothing to follow on from


def test_store_commit_race_has_one_winner(store: Store) -> None:
    store.chunk_store.create_dataset("d", "{}")
    barrier = threading.Barrier(6)

    def attempt(i: int) -> bool:
        with colonnade.connect(store.uri) as mine:
            barrier.wait()
            try:
                mine.chunk_store.commit("d", 1, f"writer {i}".encode())
                return True
            except CommitConflictError:
                return False

    with ThreadPoolExecutor(6) as pool:
        wins = list(pool.map(attempt, range(6)))
    assert wins.count(True) == 1
    [(version, payload)] = store.chunk_store.list_commits("d")
    assert version == 1 and payload == f"writer {wins.index(True)}".encode()


def test_create_dataset_exactly_once(store: Store) -> None:
    barrier = threading.Barrier(4)

    def create(_: int) -> bool:
        with colonnade.connect(store.uri) as mine:
            barrier.wait()
            try:
                mine.create_dataset("t", SCHEMA)
                return True
            except DatasetExistsError:
                return False

    with ThreadPoolExecutor(4) as pool:
        assert sorted(pool.map(create, range(4))) == [False, False, False, True]
    assert store.datasets() == ["t"]


def test_missing_chunks_are_reported_empty(store: Store, dataset: Dataset) -> None:
    seg = dataset.snapshot().segments[0]
    refs = [ChunkRef(seg.partition, "id", seg.segment, seg.bucket),
            ChunkRef(seg.partition, "id", uuid.uuid4().hex, seg.bucket),
            ChunkRef("cat=nowhere", "v", uuid.uuid4().hex, 0)]
    got = dict(store.chunk_store.get_chunks("t", refs))
    assert set(got) == set(refs)
    assert got[refs[0]] != b"" and got[refs[1]] == b"" and got[refs[2]] == b""


# -- invariant 3: every chunk read is checksummed ---------------------------------------------------------
def test_a_corrupt_chunk_fails_every_scan_that_touches_it(store: Store, dataset: Dataset, raw_store) -> None:
    seg = next(s for s in dataset.snapshot().segments if s.partition == "cat=c1")
    raw_store.flip_chunk_byte("t", seg, "v")

    for scan in (dataset.scan(), dataset.scan(columns=["v"]), dataset.scan(columns=["id"], filter=pc.field("v") > 0)):
        with pytest.raises(CorruptChunkError) as info:
            scan.to_arrow()
        error = info.value
        assert (error.dataset, error.column, error.segment) == ("t", "v", seg.segment)
        assert "'t'" in str(error) and "'v'" in str(error) and seg.segment in str(error)

    # scans that don't read that chunk are unaffected
    assert scanned_ids(dataset) == list(range(60))
    assert dataset.scan(filter=pc.field("cat") == "c2").count_rows() == 20
    assert store.sql("SELECT sum(v) AS s FROM t WHERE cat IN ('c0', 'c2')").to_pylist() == \
        [{"s": sum(i * 0.5 for i in range(60) if i % 3 != 1)}]

    # through SQL it is the same error, not DuckDB's wrapping of it
    for query in ("SELECT sum(v) FROM t", "SELECT id FROM t WHERE v >= 0"):  # (v > 1000 is pruned now)
        with pytest.raises(CorruptChunkError) as info:
            store.sql(query)
        assert (info.value.dataset, info.value.column, info.value.segment) == ("t", "v", seg.segment)
        assert "Traceback" not in str(info.value)
    with pytest.raises(CorruptChunkError):
        store.explain("SELECT max(v) FROM t")


def test_a_missing_chunk_is_an_error_naming_it(store: Store, dataset: Dataset, raw_store) -> None:
    seg = dataset.snapshot().segments[2]
    raw_store.delete_chunk("t", seg, "cat")
    with pytest.raises(CorruptChunkError, match="missing") as info:
        dataset.scan(columns=["cat"]).to_arrow()
    assert (info.value.column, info.value.segment) == ("cat", seg.segment)
    problems = dataset.verify()[1]
    assert [(p.column, p.segment) for p in problems] == [("cat", seg.segment)]


def test_verify_lists_every_bad_chunk(store: Store, dataset: Dataset, raw_store) -> None:
    segments = dataset.snapshot().segments
    checked, problems = dataset.verify()
    assert problems == [] and checked == len(segments) * 3
    bad = {(segments[0].segment, "id"), (segments[-1].segment, "cat")}
    raw_store.flip_chunk_byte("t", segments[0], "id", position=20)
    raw_store.flip_chunk_byte("t", segments[-1], "cat", position=-3)
    checked, problems = dataset.verify()
    assert checked == len(segments) * 3
    assert {(p.segment, p.column) for p in problems} == bad
    assert len(problems) == 2
    assert all(isinstance(p, CorruptChunkError) and p.dataset == "t" for p in problems)


def test_a_chunk_swapped_for_another_valid_chunk_is_caught_by_verify(store: Store, dataset: Dataset,
                                                                     raw_store) -> None:
    segments = dataset.snapshot().segments
    longer = max(segments, key=lambda s: s.rows)
    shorter = min(segments, key=lambda s: s.rows)
    assert longer.rows > shorter.rows
    raw_store.write_chunk("t", shorter, "id", raw_store.read_chunk("t", longer, "id"))
    problems = dataset.verify()[1]
    assert [(p.segment, p.column) for p in problems] == [(shorter.segment, "id")]
    assert "rows" in problems[0].reason


@pytest.mark.parametrize(("payload", "reason"), [
    (b"{not json", "not valid JSON"),
    (b'{"id": "x"}', "no format version"),
    (json.dumps({"format": 99, "id": "x"}).encode(), "commit format 99 is unknown"),
    (json.dumps({"format": 1, "id": "x"}).encode(), "malformed"),
])
def test_a_corrupt_commit_record_is_an_error(store: Store, dataset: Dataset, raw_store, payload: bytes,
                                             reason: str) -> None:
    dataset.append(rows(range(100, 105)))
    raw_store.write_commit("t", 1, payload)
    with pytest.raises(CorruptCommitError, match=reason) as info:
        dataset.history()
    assert (info.value.dataset, info.value.version) == ("t", 1)
    # every reader that opens the dataset now fails (a Dataset object that read commit 1 before
    # the damage keeps the state it read then, as a checkpoint would)
    with pytest.raises(CorruptCommitError):
        store.dataset("t").scan().to_arrow()
    with pytest.raises(CorruptCommitError):
        store.sql("SELECT count(*) FROM t")
    with pytest.raises(CorruptCommitError):
        store.dataset("t").append(rows(range(200, 201)))


# -- datasets are independent ------------------------------------------------------------------------------
def test_datasets_do_not_see_each_other(store: Store) -> None:
    a = store.create_dataset("a", SCHEMA, partition_by="cat", segment_rows=5)
    b = store.create_dataset("b", SCHEMA, partition_by="cat", segment_rows=5)
    a.append(rows(range(0, 30)))
    b.append(rows(range(100, 110)))
    b.append(rows(range(110, 120)))
    assert (a.version, b.version) == (1, 2)
    assert scanned_ids(a) == list(range(30)) and scanned_ids(b) == list(range(100, 120))
    assert b.vacuum(grace_seconds=0).segments == 0 and a.vacuum(grace_seconds=0).segments == 0
    store.drop_dataset("a")
    assert scanned_ids(b) == list(range(100, 120))
    assert store.sql("SELECT count(*) AS n FROM b").to_pylist() == [{"n": 20}]


def test_commit_records_carry_what_they_added(store: Store, dataset: Dataset) -> None:
    [commit] = dataset.history()
    assert isinstance(commit, Commit) and commit.kind == "append"
    assert commit.rows_added == 60
    assert {s.segment for s in commit.added} == {s.segment for s in dataset.snapshot().segments}
    assert {s.partition for s in commit.added} == {"cat=c0", "cat=c1", "cat=c2"}
    assert abs(commit.at - time.time()) < 600
