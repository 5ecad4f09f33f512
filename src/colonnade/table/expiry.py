"""Expiring old versions: removing them from time travel, and the log entries only they needed.

``expire`` chooses the oldest version to keep, K, and never the latest one away:

* ``older_than`` (default 7 days): a version is expired once it was *superseded* longer ago
  than that (its successor was committed before ``now - older_than``), so the version that was
  current at any moment of the period is kept, and a reader that pinned it then still reads it;
* ``retain_last=N``: the N newest versions are kept;
* both: a version is expired only if both say so (``retain_last`` is a floor under the age).

Order of the steps, each safe to be cut short (running ``expire`` again finishes the job):

1. **A fallback.** The newest readable checkpoint below K from which the stored commits
   continue without a gap is kept, with its commits up to K; when there is none, a checkpoint of
   K - 1 is written (K - 1 plus commit K also build K). So one damaged checkpoint — K's, or the
   fallback — is still survivable; if both are damaged, opening the dataset fails with a
   CorruptCheckpointError naming K's (never a state replayed from part of the log).
2. **A checkpoint at K.** The state of K is read (checkpoint + commits) and stored as the
   checkpoint of K, listing the segments only the newly expired versions read (so that
   ``vacuum`` knows them for committed ones once their commits are gone); it is read back and
   checked.
3. **The mark.** The store's oldest kept version is raised to K: from then on versions below K
   are VersionNotFoundError ("it was expired") and ``describe``/history list K onwards. Commits
   of concurrent writers (always above the latest version, so above K) are untouched.
4. **Removal.** Commit records up to the fallback's version and checkpoints below it are
   removed; the store keeps every removed version taken for put-if-absent.

Expire removes history, not data: the segments only expired versions needed stay in the store
until ``vacuum`` (see :mod:`colonnade.table.vacuum`).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from colonnade.errors import ConfigError, CorruptCheckpointError, StoreError
from colonnade.storage.base import ChunkStore
from colonnade.table import log
from colonnade.table.commits import Commit

if TYPE_CHECKING:
    from colonnade.table.dataset import Dataset

#: How long versions stay available for time travel unless told otherwise: 7 days.
DEFAULT_RETENTION_SECONDS = 7 * 86400.0


@dataclass(frozen=True)
class ExpireResult:
    """What ``expire`` did (or, with ``dry_run``, would do)."""

    dataset: str
    dry_run: bool
    latest: int
    oldest_before: int  # the oldest kept version before (0: nothing was ever expired)
    oldest: int  # the oldest kept version after
    commits_removed: int = 0
    checkpoints_removed: tuple[int, ...] = ()
    checkpoints_written: tuple[int, ...] = ()
    fallback: int | None = None  # checkpoint kept to stand in for the oldest kept one's
    versions: tuple[int, int] | None = field(default=None)  # first and last expired version
    retention: Any = None  # the DeleteResult of the dataset's retention, run first (None: none)

    @property
    def versions_expired(self) -> int:
        return 0 if self.versions is None else self.versions[1] - self.versions[0] + 1

    def to_dict(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "dry_run": self.dry_run, "latest": self.latest,
                "oldest_before": self.oldest_before, "oldest": self.oldest,
                "versions_expired": self.versions_expired,
                "expired": None if self.versions is None else list(self.versions),
                "commits_removed": self.commits_removed,
                "checkpoints_removed": list(self.checkpoints_removed),
                "checkpoints_written": list(self.checkpoints_written), "fallback": self.fallback,
                "retention": None if self.retention is None else self.retention.to_dict()}


def retention_seconds(older_than: float | str | dt.timedelta | None) -> float | None:
    """``older_than`` in seconds: a number, a duration text (``7d``) or a timedelta."""
    if older_than is None:
        return None
    if isinstance(older_than, str):
        from colonnade.config import parse_duration

        return parse_duration(older_than)
    seconds = older_than.total_seconds() if isinstance(older_than, dt.timedelta) else float(older_than)
    if seconds < 0:
        raise ConfigError(f"older_than must not be negative, got {seconds:g} seconds")
    return seconds


def choose_oldest(commits: list[Commit], latest: int, older_than: float | None,
                  retain_last: int | None, now: float) -> int:
    """The oldest version to keep, given the kept ``commits`` in version order (see the module
    docstring for the rule); at most ``latest``."""
    if retain_last is not None and retain_last < 1:
        raise ConfigError(f"retain_last must be at least 1 (the latest version is never expired), "
                          f"got {retain_last}")
    if older_than is None and retain_last is None:
        older_than = DEFAULT_RETENTION_SECONDS
    by_count = by_age = latest
    if retain_last is not None:
        by_count = max(1, latest - retain_last + 1)
    if older_than is not None:
        cutoff = now - older_than
        by_age = next((c.version for c, successor in zip(commits, commits[1:], strict=False)
                       if successor.at > cutoff), latest)
    if older_than is not None and retain_last is not None:
        return min(by_count, by_age)
    return by_count if retain_last is not None else by_age


def expire_versions(ds: Dataset, older_than: float | str | dt.timedelta | None = None,
           retain_last: int | None = None, now: float | None = None, dry_run: bool = False) -> ExpireResult:
    """Remove old versions of ``ds`` from time travel (see the module docstring)."""
    store, name = ds.store, ds.name
    seconds = retention_seconds(older_than)
    latest = store.latest_version(name)
    oldest_before = store.oldest_version(name)
    first = max(oldest_before, 1)
    kept = log.history(store, name, first - 1) if latest else []
    target = choose_oldest(kept, latest, seconds, retain_last, time.time() if now is None else now)
    target = max(target, oldest_before)
    versions = (first, target - 1) if latest and target - 1 >= first else None
    advancing = target > oldest_before and target >= 2
    written: list[int] = []
    if advancing:
        # 1. a fallback for the checkpoint the kept log will start from, 2. that checkpoint,
        # listing the segments only the expired versions read (for vacuum)
        if _fallback(store, name, target) is None:
            written += _ensure_checkpoint(store, name, target - 1, dry_run)
        expired = () if dry_run else _only_expired(store, name, oldest_before, kept, target)
        written += _ensure_checkpoint(store, name, target, dry_run, expired)
        if not dry_run:
            # 3. the mark: from here on versions below `target` are expired
            store.set_oldest_version(name, target)
    if not dry_run:
        target = max(target, store.oldest_version(name))  # a concurrent expire went further
    fallback = _fallback(store, name, target) if target >= 2 else None
    if fallback is None and dry_run and advancing:
        fallback = target - 1  # the checkpoint that would be written
    # 4. what only the expired versions needed
    commits_removed, checkpoints = 0, []
    if fallback is not None:
        checkpoints = [v for v in store.list_checkpoints(name) if v < fallback]
        if dry_run:
            commits_removed = len(store.list_commits(name, 0, fallback))
        else:
            commits_removed = store.delete_commits(name, fallback)
            store.delete_checkpoints(name, checkpoints)
    return ExpireResult(name, dry_run, latest, oldest_before, target, commits_removed,
                        tuple(checkpoints), tuple(written), fallback, versions)


def _readable(store: ChunkStore, name: str, version: int) -> bool:
    data = store.get_checkpoint(name, version)
    if data is None:
        return False
    try:
        log.decode_checkpoint(name, version, data)
    except CorruptCheckpointError:
        return False
    return True


def _only_expired(store: ChunkStore, name: str, oldest_before: int, kept: list[Commit],
                  target: int) -> set[str]:
    """Segments some version in ``[oldest_before, target)`` reads and ``target`` does not."""
    read = {s.segment for s in log.load_snapshot(store, name, oldest_before).segments}
    read.update(s.segment for c in kept if c.version <= target for s in c.added)
    return read - {s.segment for s in log.load_snapshot(store, name, target).segments}


def _ensure_checkpoint(store: ChunkStore, name: str, version: int, dry_run: bool,
                       expired: Collection[str] = ()) -> list[int]:
    """Make sure a readable checkpoint of ``version`` (listing ``expired``) is stored; the
    versions written (or that would be)."""
    if _readable(store, name, version) and not expired:
        return []
    if dry_run:
        return [version]
    state = log.load_snapshot(store, name, version)
    store.put_checkpoint(name, version, log.encode_checkpoint(state, expired))
    data = store.get_checkpoint(name, version)
    if data is None or log.decode_checkpoint(name, version, data) != state:
        raise StoreError(f"dataset {name!r}: the checkpoint of version {version} did not read back "
                         f"as written; nothing was expired")
    return [version]


def _fallback(store: ChunkStore, name: str, oldest: int) -> int | None:
    """The newest readable checkpoint below ``oldest`` from which the stored commits continue
    without a gap up to ``oldest`` (None if there is none)."""
    stored = [v for v, _payload in store.list_commits(name, 0, oldest)]
    start = oldest  # the first version of the unbroken run of stored commits ending at `oldest`
    for version in reversed(stored):
        if version != start - 1 and version != start:
            break
        start = version
    for version in sorted((v for v in store.list_checkpoints(name) if start - 1 <= v < oldest), reverse=True):
        if _readable(store, name, version):
            return version
    return None
