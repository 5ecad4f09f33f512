"""Expire on every backend: which versions leave time travel (never the latest), what reading
one says afterwards, the checkpoint and fallback the kept log starts from (one damaged
checkpoint is survivable, two are a clear error, never a wrong state), and writers that commit
while it runs."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest

from colonnade.errors import ConfigError, CorruptCheckpointError, VersionNotFoundError
from colonnade.store import Store
from colonnade.table import commits as commits_module
from colonnade.table import log
from colonnade.table.dataset import Dataset

SCHEMA = pa.schema([("id", pa.int64()), ("cat", pa.string())])
DAY = 86400.0


def ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def rows(*values: int) -> pa.Table:
    return pa.table({"id": list(values), "cat": ["ab"[v % 2] for v in values]}, schema=SCHEMA)


def build(store: Store, appends: int) -> Dataset:
    """``t``: v1..v<appends> append id i; then an overwrite (id 100) and one more append (101)."""
    ds = store.create_dataset("t", SCHEMA, partition_by="cat")
    for i in range(1, appends + 1):
        ds.append(rows(i), source=f"src:{i}")
    ds.overwrite(rows(100))
    ds.append(rows(101))
    return store.dataset("t")


def damage(store: Store, version: int) -> None:
    data = bytearray(store.chunk_store.get_checkpoint("t", version) or b"")
    data[len(data) // 2] ^= 0xFF
    store.chunk_store.put_checkpoint("t", version, bytes(data))


@pytest.fixture
def every_five(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLONNADE_CHECKPOINT_INTERVAL", "5")


def test_expired_versions_say_so_and_kept_ones_read_as_before(store: Store) -> None:
    ds = build(store, 5)  # v1-5 appends, v6 overwrite, v7 append
    before = {v: ids(ds.scan(version=v).to_arrow()) for v in range(1, 8)}
    result = ds.expire(retain_last=3)
    assert (result.oldest_before, result.oldest, result.latest, result.versions) == (0, 5, 7, (1, 4))
    assert result.checkpoints_written == (4, 5) and result.fallback == 4
    assert result.commits_removed == 4  # 1-4: the fallback checkpoint of 4 stands in for them
    assert [v for v, _ in store.chunk_store.list_commits("t")] == [5, 6, 7]
    for old in (0, 1, 4):
        with pytest.raises(VersionNotFoundError) as info:
            ds.scan(version=old).to_arrow()
        assert str(info.value) == (f"dataset 't' has no version {old}: it was expired (the oldest "
                                   f"version kept is 5, the latest 7)")
        assert (info.value.oldest, info.value.latest) == (5, 7)
        with pytest.raises(VersionNotFoundError, match="it was expired"):
            store.sql("SELECT count(*) FROM t", version=old)
    fresh = store.dataset("t")
    for v in (5, 6, 7):
        assert ids(fresh.scan(version=v).to_arrow()) == before[v]
        assert store.sql("SELECT id FROM t ORDER BY id", version=v).column("id").to_pylist() == before[v]
    assert [c.version for c in fresh.history()] == [5, 6, 7]
    assert [v["version"] for v in fresh.describe()["versions"]] == [5, 6, 7]
    # source identities of expired commits are still known (they live in the checkpoint)
    assert fresh.find_source("src:1") == 1 and fresh.append(rows(1), source="src:1").skipped


def test_the_latest_version_is_never_expired(store: Store) -> None:
    ds = build(store, 2)  # latest 4
    result = ds.expire(retain_last=1)
    assert (result.oldest, result.versions) == (4, (1, 3))
    assert [c.version for c in ds.history()] == [4] and ids(ds.scan(version=4).to_arrow()) == [100, 101]
    again = ds.expire(retain_last=1, dry_run=True)
    assert (again.oldest, again.versions, again.commits_removed) == (4, None, 0)
    assert ds.expire(older_than=0).versions is None  # everything is old: still the latest stays
    assert store.chunk_store.latest_version("t") == 4 and ids(ds.to_arrow()) == [100, 101]


def test_a_dry_run_changes_nothing(store: Store) -> None:
    ds = build(store, 4)
    plan = ds.expire(retain_last=2, dry_run=True)
    assert (plan.oldest, plan.versions, plan.checkpoints_written, plan.fallback) == (5, (1, 4), (4, 5), 4)
    assert plan.commits_removed == 4
    assert store.chunk_store.oldest_version("t") == 0 and store.chunk_store.list_checkpoints("t") == []
    assert ids(ds.scan(version=1).to_arrow()) == [1] and len(ds.history()) == 6


def test_by_age_keeps_every_version_current_during_the_period(store: Store,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1_000_000.0]
    monkeypatch.setattr(commits_module, "time", SimpleNamespace(time=lambda: clock[0]))
    ds = store.create_dataset("t", SCHEMA)
    for day in (0, 1, 2, 10, 11):  # v1..v5 committed on these days
        clock[0] = 1_000_000.0 + day * DAY
        ds.append(rows(day))
    now = 1_000_000.0 + 12 * DAY
    # 7 days: v3 was superseded on day 10, within the period: it is kept, v1 and v2 go
    assert ds.expire(now=now, dry_run=True).oldest == 3  # the default is 7 days
    assert ds.expire(older_than="7d", now=now, dry_run=True).oldest == 3
    assert ds.expire(older_than=1.5 * DAY, now=now, dry_run=True).oldest == 4
    # both: only versions that are old and not among the N newest
    assert ds.expire(older_than="7d", retain_last=4, now=now, dry_run=True).oldest == 2
    assert ds.expire(older_than="7d", retain_last=1, now=now, dry_run=True).oldest == 3
    assert ds.expire(older_than="30d", now=now, dry_run=True).versions is None
    assert ds.expire(older_than="7d", now=now).oldest == 3
    assert [c.version for c in ds.history()] == [3, 4, 5]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"retain_last": 0}, "retain_last must be at least 1 (the latest version is never expired), got 0"),
    ({"older_than": "7x"}, "invalid duration '7x'"),
    ({"older_than": -5}, "older_than must not be negative"),
])
def test_bad_options_are_refused_before_anything_changes(store: Store, kwargs: dict[str, Any],
                                                         message: str) -> None:
    ds = build(store, 2)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ds.expire(**kwargs)
    assert store.chunk_store.oldest_version("t") == 0 and len(ds.history()) == 4


def test_one_damaged_checkpoint_is_survivable_two_are_a_clear_error(store: Store) -> None:
    ds = build(store, 5)
    good = ds.snapshot()
    good6 = ds.snapshot(6)
    ds.expire(retain_last=3)  # oldest kept 5: checkpoints of 5 and (fallback) 4
    damage(store, 5)
    damaged: list[CorruptCheckpointError] = []
    assert log.load_snapshot(store.chunk_store, "t", None, damaged) == good
    assert [d.version for d in damaged] == [5]
    assert store.dataset("t").snapshot(6) == good6
    checked, problems = store.dataset("t").verify_checkpoints()
    assert checked == 2 and [(p.version, p.fatal) for p in problems] == [(5, False)]

    damage(store, 4)  # the fallback too: nothing older can stand in, the log before 5 is gone
    for read in (lambda: store.dataset("t").snapshot(), lambda: store.dataset("t").scan().to_arrow(),
                 lambda: store.dataset("t").snapshot(6)):
        with pytest.raises(CorruptCheckpointError) as info:
            read()
        assert info.value.fatal and info.value.version == 5
        assert str(info.value) == (
            "dataset 't': checkpoint of version 5 is unreadable: checksum mismatch; fallback "
            "checkpoint of version 4: checksum mismatch; the log before version 5 was expired, so "
            "no older state can stand in for it")
    checked, problems = store.dataset("t").verify_checkpoints()
    assert [(p.version, p.fatal) for p in problems] == [(4, False), (5, True)]


def test_a_missing_start_checkpoint_is_named(store: Store) -> None:
    ds = build(store, 3)
    ds.expire(retain_last=2)  # oldest kept 4, fallback 3
    store.chunk_store.delete_checkpoints("t", [3, 4])
    with pytest.raises(CorruptCheckpointError,
                       match="checkpoint of version 4 is unreadable: missing; the log before version 4 "
                             "was expired"):
        store.dataset("t").snapshot()
    checked, problems = store.dataset("t").verify_checkpoints()
    assert checked == 1 and [(p.version, p.fatal, p.reason.split(";")[0]) for p in problems] == [(4, True, "missing")]


def test_an_older_checkpoint_and_its_tail_are_the_fallback(store: Store, every_five: None) -> None:
    ds = build(store, 10)  # v1-10 appends, v11 overwrite, v12 append; checkpoints 5 and 10
    expected = {v: ds.snapshot(v) for v in (10, 11, 12)}
    result = ds.expire(retain_last=3)
    assert (result.oldest, result.fallback, result.checkpoints_written) == (10, 5, ())
    assert result.commits_removed == 5 and result.checkpoints_removed == ()
    assert [v for v, _ in store.chunk_store.list_commits("t")] == list(range(6, 13))  # 6-9 hidden
    assert [c.version for c in ds.history()] == [10, 11, 12]
    damage(store, 10)
    fresh = store.dataset("t")
    assert {v: fresh.snapshot(v) for v in (10, 11, 12)} == expected  # 5 + commits 6..12
    with pytest.raises(VersionNotFoundError, match="it was expired"):
        fresh.snapshot(8)  # buildable from the fallback, but expired all the same
    # the next expire starts from a new checkpoint; the newest older readable one is its fallback
    # (11: the overwrite removed a checkpoint interval of segments, so it wrote one)
    ds.append(rows(102))
    again = store.dataset("t").expire(retain_last=2)
    assert store.chunk_store.list_checkpoints("t")[-2:] == [11, 12]
    assert (again.oldest, again.fallback, again.checkpoints_written) == (12, 11, (12,))
    assert store.dataset("t").snapshot(12) == expected[12]
    # the damaged 10 is older than the fallback: it went with the rest of the expired log
    assert store.chunk_store.list_checkpoints("t") == [11, 12]
    assert store.dataset("t").verify_checkpoints() == (2, [])


def test_a_cut_short_expire_is_finished_by_the_next(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    ds = build(store, 4)

    def crash(*args: object) -> int:
        raise KeyboardInterrupt  # the process dies after the mark, before any removal

    monkeypatch.setattr(store.chunk_store, "delete_commits", crash)
    with pytest.raises(KeyboardInterrupt):
        ds.expire(retain_last=2)
    monkeypatch.undo()
    assert store.chunk_store.oldest_version("t") == 5
    assert len(store.chunk_store.list_commits("t")) == 6  # nothing removed yet
    with pytest.raises(VersionNotFoundError, match="it was expired"):
        ds.snapshot(2)
    assert ids(store.dataset("t").to_arrow()) == [100, 101]
    finished = store.dataset("t").expire(retain_last=2)
    assert finished.versions is None and finished.commits_removed == 4
    assert [v for v, _ in store.chunk_store.list_commits("t")] == [5, 6]


def test_writers_committing_during_expire_lose_nothing(store: Store) -> None:
    """Appends from two threads while a third expires down to the newest version over and over:
    every append commits, on versions of its own, and the final state holds every row."""
    ds = store.create_dataset("t", SCHEMA, partition_by="cat")
    ds.append(rows(0))
    stop = threading.Event()
    errors: list[BaseException] = []
    per_writer = 12

    def writer(n: int) -> None:
        try:
            mine = store.dataset("t")  # each writer keeps its own cached state
            for i in range(per_writer):
                value = 1000 * (n + 1) + i
                assert mine.append(rows(value), source=f"w{n}:{i}").version is not None
        except BaseException as exc:
            errors.append(exc)

    def expirer() -> None:
        mine = store.dataset("t")
        try:
            while not stop.is_set():
                mine.expire(retain_last=1)
        except BaseException as exc:
            errors.append(exc)

    expiring = threading.Thread(target=expirer)
    expiring.start()
    writers = [threading.Thread(target=writer, args=(n,)) for n in range(2)]
    for t in writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    expiring.join()
    assert not errors, errors
    expected = [0] + [1000 * (n + 1) + i for n in range(2) for i in range(per_writer)]
    fresh = store.dataset("t")
    assert fresh.version == 1 + 2 * per_writer
    assert ids(fresh.to_arrow()) == sorted(expected)
    assert fresh.snapshot().rows == len(expected)
    assert all(fresh.find_source(f"w{n}:{i}") is not None for n in range(2) for i in range(per_writer))


def test_a_writer_whose_state_is_older_than_the_expired_log_reads_it_afresh(store: Store) -> None:
    stale = build(store, 2)
    assert stale.snapshot().version == 4  # cached
    other = store.dataset("t")
    for i in range(5):
        other.append(rows(200 + i))
    other.overwrite(rows(300))
    other.append(rows(301))
    other.expire(retain_last=1)  # the commits right after the stale state are gone
    assert stale.snapshot() == store.dataset("t").snapshot()
    assert stale.append(rows(302)).version == 12
    assert ids(store.dataset("t").to_arrow()) == [300, 301, 302]
