"""The commit log: typed actions (format 2), format-1 stores still read, checkpoints (open reads
the newest one plus the tail; a damaged one is skipped and reported), missing versions."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import colonnade
from colonnade.errors import CorruptCommitError, VersionNotFoundError
from colonnade.store import Store
from colonnade.table import log
from colonnade.table.commits import (
    AddSegments,
    Commit,
    CommitInfo,
    RemoveSegments,
    SegmentEntry,
    SetProperties,
    SetSchema,
    Snapshot,
    Txn,
)

GOLDEN = Path(__file__).parent / "golden" / "commit-format-1.db"


def ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


# -- format 2: typed actions --------------------------------------------------------------------------
def test_a_commit_is_typed_actions_with_named_fields() -> None:
    entry = SegmentEntry("s1", "cat=a", 3, 0, ("a",), frozenset({"cat"}))
    commit = Commit(7, (CommitInfo("c1", "append", 1.5, 6, "w", {"input": "x.csv"}), Txn("file:x", 1),
                        SetSchema([["id", "int64"]]), SetProperties({"retain": "90d"}),
                        RemoveSegments(("s0",)), AddSegments((entry,))))
    payload = json.loads(commit.to_payload())
    assert payload["format"] == 2
    assert [a["type"] for a in payload["actions"]] == [
        "commit_info", "txn", "set_schema", "set_properties", "remove_segments", "add_segments"]
    assert payload["actions"][0] == {"type": "commit_info", "id": "c1", "operation": "append", "at": 1.5,
                                     "read_version": 6, "writer": "w", "info": {"input": "x.csv"}}
    assert payload["actions"][5]["segments"][0] == {"segment": "s1", "partition": "cat=a", "rows": 3,
                                                    "bucket": 0, "values": ["a"], "dictionary": ["cat"]}
    back = Commit.from_payload("d", 7, commit.to_payload())
    assert back == commit
    assert (back.source, back.kind, back.removed, back.added, back.schema) == \
        ("file:x", "append", ("s0",), (entry,), [["id", "int64"]])


@pytest.mark.parametrize(("payload", "reason"), [
    ({"format": 2, "actions": [{"type": "commit_info", "id": "x", "operation": "append", "at": 1},
                               {"type": "teleport", "where": "?"}]}, "unknown action type 'teleport'"),
    ({"format": 3, "actions": []}, "commit format 3 is unknown to this build (it reads formats 1, 2)"),
    ({"format": 2, "actions": [{"type": "txn", "app_id": "a", "version": 1}]}, "exactly one commit_info"),
    ({"format": 2, "actions": [{"type": "add_segments"}]}, "malformed record"),
])
def test_an_unknown_action_or_format_is_an_error_naming_dataset_and_version(payload: dict[str, Any],
                                                                             reason: str) -> None:
    with pytest.raises(CorruptCommitError) as info:
        Commit.from_payload("events", 12, json.dumps(payload).encode())
    assert str(info.value).startswith("dataset 'events': commit 12 is unreadable: ")
    assert reason in str(info.value)


# -- format 1 (golden store written by the build that wrote it) -------------------------------------
def test_a_store_written_in_commit_format_1_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copy(GOLDEN, path)
    with colonnade.connect(str(path)) as store:
        ds = store.dataset("events")
        assert [c.kind for c in ds.history()] == ["append", "append", "append", "overwrite"]
        assert ds.version == 4
        assert ids(ds.scan(version=1).to_arrow()) == [1, 2, 3]
        assert ids(ds.scan(version=3).to_arrow()) == [1, 2, 3, 4, 5, 6]
        assert ids(ds.scan().to_arrow()) == [7, 8]
        assert ds.find_source("golden:first") == 1 and ds.find_source("golden:other") is None
        assert store.sql("SELECT sum(score) AS s FROM events").to_pylist() == [{"s": 1.5}]
        # appending writes format 2 beside format 1; both read
        assert ds.append(pa.table({"id": [9], "cat": ["q"], "day": [None], "score": [2.0]}),
                         source="golden:second").version == 5
        latest = store.dataset("events")
        assert json.loads(store.chunk_store.list_commits("events", 4)[0][1])["format"] == 2
        assert ids(latest.scan().to_arrow()) == [7, 8, 9]
        assert latest.find_source("golden:second") == 5 and latest.find_source("golden:first") == 1
        assert latest.verify()[1] == []


def test_the_log_carries_segment_statistics_and_planning_reads_no_segment_index(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow.compute as pc

    ds = store.create_dataset("t", pa.schema([("id", pa.int64()), ("cat", pa.string())]), partition_by="cat")
    for lo in (0, 10, 20):
        ds.append(pa.table({"id": list(range(lo, lo + 10)), "cat": ["a"] * 5 + ["b"] * 5}))
    entry = ds.history()[0].added[0]
    assert entry.stats is not None and json.loads(entry.stats)["id"][:4] == [5, 0, 0, 4]  # rows, nulls, min, max
    requests: list[object] = []
    real = type(store.chunk_store).get_segments
    monkeypatch.setattr(type(store.chunk_store), "get_segments",
                        lambda self, *a, **k: requests.append(a) or real(self, *a, **k))
    plan = store.dataset("t").scan(filter=pc.field("id") >= 25).plan()
    assert [s.entry.rows for s in plan.segments] == [5] and plan.metrics.segments_total == 6
    assert ids(store.dataset("t").scan(filter=pc.field("id") >= 25).to_arrow()) == list(range(25, 30))
    assert requests == []  # statistics came from the log, not from the segment index


def test_segments_committed_before_the_log_carried_statistics_plan_from_the_segment_index(tmp_path: Path) -> None:
    import pyarrow.compute as pc

    path = tmp_path / "old.db"
    shutil.copy(GOLDEN, path)
    with colonnade.connect(str(path)) as store:
        ds = store.dataset("events")
        assert all(s.stats is None for s in ds.snapshot().segments)
        assert ids(ds.scan(filter=pc.field("id") > 7).to_arrow()) == [8]
        ds.append(pa.table({"id": [9], "cat": ["q"], "day": [None], "score": [2.0]}))
        mixed = store.dataset("events").snapshot()
        assert [s.stats is None for s in mixed.segments].count(False) == 1
        assert ids(store.dataset("events").scan(filter=pc.field("id") >= 8).to_arrow()) == [8, 9]


# -- checkpoints --------------------------------------------------------------------------------
@pytest.fixture
def every_five(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLONNADE_CHECKPOINT_INTERVAL", "5")


def _appends(store: Store, n: int) -> Any:
    ds = store.create_dataset("t", pa.schema([("id", pa.int64()), ("cat", pa.string())]), partition_by="cat")
    for i in range(1, n + 1):
        ds.append(pa.table({"id": [i], "cat": ["ab"[i % 2]]}), source=f"src:{i}", schema_mode="merge")
        if i == 6:
            ds.overwrite(pa.table({"id": [100], "cat": ["c"]}))  # v7 removes everything before
        if i == 8:
            ds.append(pa.table({"id": [200], "cat": ["a"], "w": [0.5]}), schema_mode="merge")
    return store.dataset("t")


def test_checkpoints_every_n_commits_and_open_reads_only_the_tail(store: Store, every_five: None) -> None:
    ds = _appends(store, 12)
    assert ds.version == 14
    # every 5, and after v7, the overwrite that removed 6 segments (at least an interval's worth)
    assert store.chunk_store.list_checkpoints("t") == [5, 7, 10]
    full = ds.history()
    for version in range(1, 15):
        expected = Snapshot.replay("t", full, version)
        got = ds.snapshot(version)
        assert got == expected, version  # a checkpoint plus a tail is the log itself
        assert ds.schema_at(got).names == (["id", "cat", "w"] if version >= 10 else ["id", "cat"])
    # opening the latest version reads the checkpoint of 10 and the commits after it only
    reads: list[tuple[int, int | None]] = []
    real = store.chunk_store.follow_commits

    def spy(dataset: str, version: int, upto: int | None = None) -> Any:
        reads.append((version, upto))
        return real(dataset, version, upto)

    store.chunk_store.follow_commits = spy  # type: ignore[method-assign]
    try:
        assert ds.find_source("src:2") == 2 and ds.find_source("src:12") == 14
        assert ids(ds.scan().to_arrow()) == [7, 8, 9, 10, 11, 12, 100, 200]
        # the checkpoint of 10 and the commits after it (with the mark of 10's own, which
        # later reads follow on from); then (state kept) only what came after 14
        assert reads and reads[0] == (10, None) and all(v == 14 for v, _ in reads[1:]), reads
    finally:
        store.chunk_store.follow_commits = real  # type: ignore[method-assign]


def test_a_damaged_checkpoint_falls_back_and_verify_names_it(store: Store, every_five: None,
                                                             tmp_path: Path) -> None:
    ds = _appends(store, 12)
    good = ds.snapshot()
    data = bytearray(store.chunk_store.get_checkpoint("t", 10) or b"")
    data[len(data) // 2] ^= 0xFF
    store.chunk_store.put_checkpoint("t", 10, bytes(data))
    damaged: list[log.CorruptCheckpointError] = []
    assert log.load_snapshot(store.chunk_store, "t", None, damaged) == good
    assert [d.version for d in damaged] == [10]
    checked, problems = ds.verify_checkpoints()
    assert checked == 3 and [p.version for p in problems] == [10]  # 5, 7 (the overwrite's), 10
    assert "checkpoint of version 10 is unreadable" in str(problems[0])
    from click.testing import CliRunner

    from colonnade.cli.main import cli

    verified = CliRunner().invoke(cli, ["--store", store.uri, "verify", "t"])
    assert verified.exit_code == 1
    assert "checkpoint of version 10 is unreadable: checksum mismatch (the log is read instead)" in verified.stdout
    assert verified.stderr == "error: 1 of 3 checkpoints of dataset 't' failed verification\n"
    store.chunk_store.put_checkpoint("t", 7, b"CLNCKPT")  # cut short
    store.chunk_store.put_checkpoint("t", 5, b"CLNCKPT\x09")  # a format this build does not read
    assert ds.snapshot() == good  # the log itself, from version 1
    assert ids(store.dataset("t").scan().to_arrow()) == [7, 8, 9, 10, 11, 12, 100, 200]


def test_a_missing_version_is_version_not_found(store: Store) -> None:
    ds = store.create_dataset("t", pa.schema([("id", pa.int64())]))
    ds.append(pa.table({"id": [1]}))
    for bad in (-1, 2, 99):
        with pytest.raises(VersionNotFoundError, match=f"dataset 't' has no version {bad}"):
            ds.snapshot(bad)
    assert ds.snapshot(0).rows == 0 and ds.snapshot(1).rows == 1


def test_a_long_run_of_appends_keeps_no_files_open(tmp_path: Path) -> None:
    """Each append writes from a thread of its own: the embedded store closes the connection of
    a thread that has ended instead of keeping its files open (a stream appends for days)."""
    import os

    with colonnade.connect(str(tmp_path / "s.db")) as store:
        ds = store.create_dataset("t", pa.schema([("id", pa.int64())]))
        ds.append(pa.table({"id": [0]}))
        before = len(os.listdir("/proc/self/fd"))
        for i in range(1, 150):
            ds.append(pa.table({"id": [i]}))
        assert len(os.listdir("/proc/self/fd")) <= before + 6
        assert ds.snapshot().rows == 150


@pytest.mark.parametrize("seed", range(20))
def test_applying_commits_in_any_split_gives_the_replayed_state(seed: int) -> None:
    import random

    rng = random.Random(seed)
    live: list[str] = []
    commits = []
    for version in range(1, 60):
        removed = rng.sample(live, k=min(len(live), rng.choice([0, 0, 0, 1, 3]))) if live else []
        added = [SegmentEntry(f"s{version}-{i}", f"p{rng.randrange(3)}", 1, 0, ()) for i in range(rng.randrange(3))]
        live = [s for s in live if s not in removed] + [s.segment for s in added]
        commits.append(Commit.new("append", added=added, removed=removed).at_version(version))
    whole = Snapshot.replay("t", commits)
    assert [s.segment for s in whole.segments] == live
    cut = sorted(rng.sample(range(1, 59), k=5))
    step = Snapshot.empty("t")
    for lo, hi in zip([0, *cut], [*cut, 59], strict=True):
        step = step.apply(commits[lo:hi])
    assert step.segments == whole.segments and step.version == whole.version == 59
    assert Snapshot.replay("t", commits, version=30).segments == Snapshot.replay("t", commits[:30]).segments


def test_a_checkpoint_in_format_1_still_reads() -> None:
    import zlib

    body = json.dumps({"version": 7, "schema": [["id", "int64"]], "properties": {"k": 1},
                       "segments": [{"segment": "s1", "partition": "d=1", "rows": 3, "bucket": 0,
                                     "values": [["date", "2024-01-02"]], "dictionary": ["c"]}],
                       "txns": {"file:a": [1, 4]}}).encode()
    data = log._HEADER.pack(log.MAGIC, 1, zlib.crc32(body), len(body)) + pa.compress(body, "zstd", asbytes=True)
    snapshot = log.decode_checkpoint("t", 7, data)
    import datetime as dt

    assert snapshot.segments == (SegmentEntry("s1", "d=1", 3, 0, (dt.date(2024, 1, 2),), frozenset({"c"})),)
    assert snapshot.txns == {"file:a": (1, 4)} and snapshot.properties == {"k": 1}
    again = log.decode_checkpoint("t", 7, log.encode_checkpoint(snapshot))  # written as format 2
    assert again == snapshot and log.encode_checkpoint(snapshot)[7] == log.CHECKPOINT_FORMAT == 2


def test_commit_info_records_the_operation_the_version_read_and_the_writer(store: Store) -> None:
    import os

    ds = store.create_dataset("t", pa.schema([("id", pa.int64())]))
    ds.append(pa.table({"id": [1]}))
    ds.append(pa.table({"id": [2]}))
    ds.overwrite(pa.table({"id": [3]}))
    infos = [c.commit_info for c in store.dataset("t").history()]
    assert [(i.operation, i.read_version) for i in infos] == [("append", 0), ("append", 1), ("overwrite", 2)]
    assert all(i.writer.startswith(f"colonnade {colonnade.__version__} on ") and f"(pid {os.getpid()})" in i.writer
               for i in infos)


def test_a_compaction_that_removes_many_segments_writes_a_checkpoint(store: Store, every_five: None) -> None:
    ds = store.create_dataset("t", pa.schema([("id", pa.int64())]))
    for i in range(7):
        ds.append(pa.table({"id": [i]}))
    assert store.chunk_store.list_checkpoints("t") == [5]
    done = ds.compact()
    assert done.version == 8 and done.segments_before == 7
    assert store.chunk_store.list_checkpoints("t") == [5, 8]  # not a multiple of 5: it shrank the state
    opened = log.load_snapshot(store.chunk_store, "t")
    assert len(opened.segments) == 1 and ids(store.dataset("t").scan().to_arrow()) == list(range(7))
    ds.append(pa.table({"id": [7]}))
    assert store.chunk_store.list_checkpoints("t") == [5, 8]  # an append removes nothing
