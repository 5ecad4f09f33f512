"""The storage protocol: what every store (embedded SQLite, Apache Cassandra) must provide.

A store holds, per dataset, a log — its spec, commit records and checkpoints
(:class:`LogStore`) — and data — chunk bytes and segment-index rows (:class:`DataStore`).
Each backend implements both in one place (:class:`ChunkStore`). The table layer builds the
commit protocol on top of the guarantees below; a store that can't keep one of them is not a
store.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ChunkRef:
    """Address of one chunk: one column of one segment of one partition.

    ``bucket`` groups segments of a partition so that one column of many segments can be read
    with one request while keeping each Cassandra partition bounded.
    """

    partition: str
    column: str
    segment: str
    bucket: int = 0


@dataclass(frozen=True)
class SegmentRow:
    """One segment-index row: written before the commit that names the segment."""

    partition: str
    segment: str
    commit: str
    rows: int
    bucket: int
    stats: bytes  # JSON, decoded by the table layer


class LogStore(ABC):
    """The log of every dataset of a store: its catalog entry (name and spec), its commit
    records and its checkpoints. The table layer builds the commit protocol on it.

    Guarantees every implementation must keep:

    1. **Atomic, exclusive commits (put-if-absent).** ``commit(dataset, version, payload)``
       either makes the whole record visible or nothing, and succeeds for exactly one caller per
       ``(dataset, version)``; every other caller gets
       :class:`~colonnade.errors.CommitConflictError` and nothing of theirs is written. A caller
       that gets any other error must not assume either outcome: it reads the log back
       (``list_commits``) to learn what happened.
    2. **Durable.** When ``commit`` returns, the record survives a crash of the writing process
       (and, for SQLite, of the machine).
    3. **Consistent listing.** After ``commit`` returns, ``list_commits`` and ``latest_version``
       from any client see that version (for Cassandra: at the configured read/write
       consistency, which must overlap). Commits are listed in version order, without gaps.
    4. **Create exactly once.** ``create_dataset`` succeeds for one caller per name, where names
       that differ only in case are one name (SQL folds them): creating ``Trips`` next to
       ``trips`` fails, whoever runs first.
    5. **Checkpoints are hints, until the log is expired below them.** ``put_checkpoint``
       overwrites; a checkpoint may be missing or damaged and readers fall back to an older one
       or to the log itself, so it needs no agreement between writers. Once the commits below a
       version are removed (6), the log starts from the newest checkpoint at or below the first
       commit left: the table layer keeps an older checkpoint and its commits as a fallback, and
       fails with :class:`~colonnade.errors.CorruptCheckpointError` rather than read a log that
       no longer starts at version 1 as if it did.
    6. **Expiry never touches what is kept.** ``set_oldest_version`` only raises the mark (a
       lower or equal one is ignored) and never above the latest version; ``delete_commits``
       only removes records below the mark, so the latest version is never removed, and it
       refuses (ValueError, nothing removed) otherwise. A record is removed whole or not at
       all; a concurrent reader lists every kept version as before, and sees each removed one
       either still there or gone (it must not need one: a reader pins versions at or above the
       mark, read from a checkpoint at or above it or from the fallback the table layer keeps).
       **Put-if-absent stays correct**: a removed version stays taken, so ``commit`` of any
       version at or below the latest one fails with CommitConflictError for every caller, even
       after its record was removed (a writer that read an old version never re-creates it);
       commits of new versions by concurrent writers are neither blocked nor lost.
       ``delete_checkpoints`` removes checkpoints of the given versions (the table layer only
       removes ones below the fallback it keeps).

    Stores are safe to use from several threads at once.
    """

    uri: str

    # the catalog
    @abstractmethod
    def create_dataset(self, name: str, spec: str) -> None:
        """Record a new dataset; raise DatasetExistsError if the name, or a name equal to it
        ignoring case, is taken (``existing`` names the one that is)."""

    @abstractmethod
    def get_dataset(self, name: str) -> str:
        """The spec JSON of the dataset with exactly this name; DatasetNotFoundError if absent."""

    @abstractmethod
    def update_dataset(self, name: str, spec: str) -> None:
        """Replace a dataset's spec (schema evolution); the dataset must exist."""

    @abstractmethod
    def list_datasets(self) -> list[str]:
        """Names of all datasets, sorted."""

    @abstractmethod
    def drop_dataset(self, name: str) -> None:
        """Delete a dataset and everything stored for it (log, checkpoints, segments, chunks);
        raise DatasetNotFoundError if absent."""

    # commits
    @abstractmethod
    def commit(self, dataset: str, version: int, payload: bytes) -> None:
        """Atomically write commit ``version``; CommitConflictError if the version is taken."""

    @abstractmethod
    def list_commits(self, dataset: str, after: int = 0, upto: int | None = None) -> list[tuple[int, bytes]]:
        """Commit records with ``after < version ≤ upto`` (no upper bound when None), in
        version order."""

    # A commit's mark names one commit record: the same record always has the same mark, one
    # written again under its version (the dataset dropped and created again) another. Readers
    # following a log compare the mark of the last commit they read instead of reading it again.
    # Here a mark is the payload itself (cheap to read again from a local store); a store where
    # that costs overrides both methods.
    def list_commits_marked(self, dataset: str, after: int = 0, upto: int | None = None
                            ) -> list[tuple[int, bytes, bytes]]:
        """:meth:`list_commits` with each commit's mark: ``(version, payload, mark)``."""
        return [(v, p, p) for v, p in self.list_commits(dataset, after, upto)]

    def follow_commits(self, dataset: str, version: int, upto: int | None = None
                       ) -> tuple[bytes | None, list[tuple[int, bytes, bytes]]]:
        """The mark of commit ``version`` (None when there is none: never made, expired,
        dropped) and the commits with ``version < v ≤ upto`` with theirs, in one round trip
        where the store can."""
        rows = self.list_commits_marked(dataset, version - 1, upto)
        mark = rows.pop(0)[2] if rows and rows[0][0] == version else None
        return mark, rows

    def latest_version(self, dataset: str) -> int:
        """The newest committed version (0 when there is none)."""
        commits = self.list_commits(dataset)
        return commits[-1][0] if commits else 0

    # checkpoints
    @abstractmethod
    def put_checkpoint(self, dataset: str, version: int, payload: bytes) -> None:
        """Write (or overwrite) the checkpoint of ``version``."""

    @abstractmethod
    def list_checkpoints(self, dataset: str) -> list[int]:
        """Versions that have a checkpoint, ascending."""

    @abstractmethod
    def get_checkpoint(self, dataset: str, version: int) -> bytes | None:
        """The checkpoint of ``version`` (None if there is none)."""

    @abstractmethod
    def delete_checkpoints(self, dataset: str, versions: Collection[int]) -> None:
        """Remove the checkpoints of ``versions`` (absent ones are ignored)."""

    # expiry (guarantee 6)
    @abstractmethod
    def oldest_version(self, dataset: str) -> int:
        """The oldest version kept for time travel: 0 until versions were expired (version 0,
        the empty dataset, is kept until then)."""

    @abstractmethod
    def set_oldest_version(self, dataset: str, version: int) -> None:
        """Raise the oldest kept version to ``version``; a lower or equal one is ignored, a
        version above the latest one is refused with ValueError. Durable when it returns."""

    @abstractmethod
    def delete_commits(self, dataset: str, upto: int) -> int:
        """Remove the commit records with ``version ≤ upto``; how many were removed. ``upto``
        must be below :meth:`oldest_version` (else ValueError and nothing is removed), so the
        latest version and every kept one stay. Removed versions stay taken for ``commit``."""


class DataStore(ABC):
    """Chunk bytes and segment-index rows of every dataset of a store.

    Guarantees every implementation must keep:

    1. **Durable writes.** When ``put_chunks``/``put_segments`` return, what they wrote survives
       a crash of the writing process; a commit written after them makes them durable with it.
    2. **Read your chunks.** A chunk or segment row written before a commit that names it is
       readable by every reader that can see the commit.
    3. **Nothing partial is visible.** Chunks and segment rows not named by a commit are never
       returned as data by the table layer; they are found and removed by ``vacuum``.

    Stores are safe to use from several threads at once.
    """

    @abstractmethod
    def put_chunks(self, dataset: str, chunks: Sequence[tuple[ChunkRef, bytes]]) -> None:
        """Write chunks (durably, see guarantee 1). Existing keys are overwritten."""

    @abstractmethod
    def get_chunks(self, dataset: str, refs: Sequence[ChunkRef]) -> Iterator[tuple[ChunkRef, bytes]]:
        """Yield the bytes of each requested chunk, in any order. A missing chunk is yielded
        with empty bytes so the caller can name it in its error."""

    @abstractmethod
    def put_segments(self, dataset: str, segments: Sequence[SegmentRow]) -> None:
        """Write segment-index rows (durably)."""

    @abstractmethod
    def get_segments(self, dataset: str, partitions: Collection[str] | None = None) -> list[SegmentRow]:
        """Segment-index rows of the given partitions (all when None), committed or not."""

    @abstractmethod
    def delete_segments(self, dataset: str, segments: Sequence[SegmentRow], columns: Sequence[str]) -> None:
        """Remove segment rows and their chunks of the given columns (used by vacuum)."""

    def stored_bytes(self, dataset: str) -> dict[str, int] | None:
        """Bytes on disk per column as the store reports them, when it can (else None)."""
        return None

    def reclaim(self) -> None:  # noqa: B027 - optional hook
        """Return the space of deleted data to the file system now, if the store can (Cassandra
        frees it on its own schedule, when it compacts)."""

    def disk_bytes(self) -> int | None:
        """Bytes the store takes on disk, when it can tell (else None)."""
        return None


class ChunkStore(LogStore, DataStore):
    """A backend: a log store and a data store in one place (one SQLite file, one Cassandra
    keyspace), found by URI scheme (:func:`colonnade.storage.open_store`)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""
