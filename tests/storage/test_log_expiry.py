"""Removing old log entries (the log store's guarantee 6), on every backend: only below the
oldest kept version, never the latest, and an expired version stays taken for put-if-absent,
with writers committing at the same time."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from colonnade.errors import CommitConflictError
from colonnade.storage.base import ChunkStore
from colonnade.store import Store


def _log(store: Store, versions: int, name: str = "t") -> ChunkStore:
    cs = store.chunk_store
    cs.create_dataset(name, "{}")
    for v in range(1, versions + 1):
        cs.commit(name, v, f"v{v}".encode())
    return cs


def test_expired_versions_stay_taken(store: Store) -> None:
    cs = _log(store, 5)
    assert cs.oldest_version("t") == 0
    cs.set_oldest_version("t", 4)
    assert cs.oldest_version("t") == 4
    assert cs.delete_commits("t", 3) == 3
    assert [v for v, _ in cs.list_commits("t")] == [4, 5]
    assert cs.list_commits("t", 0, 4) == [(4, b"v4")]
    assert cs.latest_version("t") == 5
    for taken in (1, 2, 3, 4, 5):  # a writer that read an old version never re-creates it
        with pytest.raises(CommitConflictError):
            cs.commit("t", taken, b"late")
    assert [v for v, _ in cs.list_commits("t")] == [4, 5]
    cs.commit("t", 6, b"v6")
    assert [(v, p) for v, p in cs.list_commits("t", 3)] == [(4, b"v4"), (5, b"v5"), (6, b"v6")]
    assert cs.delete_commits("t", 3) == 0  # again: nothing left to remove


def test_kept_versions_and_the_latest_are_never_removed(store: Store) -> None:
    cs = _log(store, 3)
    with pytest.raises(ValueError, match="commits from version 0 on are kept"):
        cs.delete_commits("t", 1)  # no mark yet: nothing may go
    with pytest.raises(ValueError, match="the latest is 3"):
        cs.set_oldest_version("t", 4)
    cs.set_oldest_version("t", 3)
    for upto in (3, 4, 100):
        with pytest.raises(ValueError, match="commits from version 3 on are kept"):
            cs.delete_commits("t", upto)
    assert [v for v, _ in cs.list_commits("t")] == [1, 2, 3]
    cs.set_oldest_version("t", 2)  # the mark never goes down
    assert cs.oldest_version("t") == 3
    assert cs.delete_commits("t", 2) == 2 and cs.latest_version("t") == 3


def test_the_oldest_mark_only_goes_up_under_concurrent_setters(store: Store) -> None:
    cs = _log(store, 40)
    marks = list(range(1, 41))
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda v: cs.set_oldest_version("t", v), reversed(marks)))
    assert cs.oldest_version("t") == 40


def test_checkpoints_are_removed_by_version(store: Store) -> None:
    cs = _log(store, 3)
    for v in (1, 2, 3):
        cs.put_checkpoint("t", v, b"c" * v)
    cs.delete_checkpoints("t", [1, 2, 7])
    assert cs.list_checkpoints("t") == [3] and cs.get_checkpoint("t", 1) is None
    assert cs.get_checkpoint("t", 3) == b"ccc"


def test_a_rewritten_checkpoint_with_fewer_parts_reads_whole(store: Store) -> None:
    cs = _log(store, 1)
    big = bytes(range(256)) * (3 * 4096 + 17)  # several 1 MiB parts on Cassandra
    cs.put_checkpoint("t", 1, big)
    cs.put_checkpoint("t", 1, b"small")
    assert cs.list_checkpoints("t") == [1] and cs.get_checkpoint("t", 1) == b"small"


def test_writers_commit_while_old_commits_are_removed(store: Store) -> None:
    """Writers keep taking new versions while the log below a rising mark is removed: every
    commit lands exactly once, contiguously, and none of the kept ones is removed."""
    cs = _log(store, 10)
    done = threading.Event()
    won: list[int] = []
    lock = threading.Lock()

    def writer(n: int) -> None:
        for i in range(15):
            version = cs.latest_version("t")
            while True:
                version += 1
                try:
                    cs.commit("t", version, f"w{n}.{i}".encode())
                    break
                except CommitConflictError:
                    continue
            with lock:
                won.append(version)

    def expirer() -> None:
        while not done.is_set():
            latest = cs.latest_version("t")
            cs.set_oldest_version("t", latest)
            cs.delete_commits("t", latest - 1)

    with ThreadPoolExecutor(4) as pool:
        expiring = pool.submit(expirer)
        writers = [pool.submit(writer, n) for n in range(3)]
        for w in writers:
            w.result()
        done.set()
        expiring.result()
    assert sorted(won) == list(range(11, 56))  # 45 commits, each on a version of its own
    kept = cs.list_commits("t")
    assert kept and kept[-1][0] == 55 and kept[0][0] == cs.oldest_version("t")
    assert [v for v, _ in kept] == list(range(kept[0][0], 56))  # no gap in what is kept


def test_drop_forgets_the_mark(store: Store) -> None:
    cs = _log(store, 2)
    cs.set_oldest_version("t", 2)
    store.drop_dataset("t")
    cs = _log(store, 1)
    assert cs.oldest_version("t") == 0 and [v for v, _ in cs.list_commits("t")] == [1]
