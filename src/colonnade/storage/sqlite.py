"""The embedded store: one SQLite file in WAL mode.

Chunks and segment rows are written in ordinary transactions; a commit record is written in a
``BEGIN IMMEDIATE`` transaction with ``synchronous=FULL``, which in WAL mode also makes every
earlier frame (the chunks it names) durable first. Each thread gets its own connection, so
DuckDB's scan threads and the ingest pipeline never share one.

Expiry deletes commit records; the commit transaction refuses every version at or below the
latest one (which is never deleted), so an expired version stays taken. The oldest version kept
is one row of ``log_bounds``, raised (never lowered) in one transaction.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path

from colonnade.errors import (
    CommitConflictError,
    DatasetExistsError,
    DatasetNotFoundError,
    StoreError,
)
from colonnade.storage.base import ChunkRef, ChunkStore, SegmentRow

_SCHEMA = """
CREATE TABLE IF NOT EXISTS datasets (
    name TEXT PRIMARY KEY, spec TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS commits (
    dataset TEXT NOT NULL, version INTEGER NOT NULL, payload BLOB NOT NULL,
    PRIMARY KEY (dataset, version)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS checkpoints (
    dataset TEXT NOT NULL, version INTEGER NOT NULL, payload BLOB NOT NULL,
    PRIMARY KEY (dataset, version)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS checkpoint_versions ON checkpoints (dataset, version);
CREATE TABLE IF NOT EXISTS log_bounds (
    dataset TEXT PRIMARY KEY, oldest INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS segments (
    dataset TEXT NOT NULL, partition TEXT NOT NULL, segment TEXT NOT NULL, commit_id TEXT NOT NULL,
    rows INTEGER NOT NULL, bucket INTEGER NOT NULL, stats BLOB NOT NULL,
    PRIMARY KEY (dataset, partition, segment)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS chunks (
    dataset TEXT NOT NULL, segment TEXT NOT NULL, column_name TEXT NOT NULL, data BLOB NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS chunks_key ON chunks (dataset, segment, column_name);
"""

_MAX_VERSION = 2**63 - 1
#: SQLite limits the number of host parameters per statement; stay well below it.
_IN_BATCH = 500


class SQLiteStore(ChunkStore):
    """A ChunkStore in one SQLite file (see the module docstring for how guarantees are kept)."""

    def __init__(self, path: str | Path, uri: str | None = None, busy_timeout_s: float = 60.0) -> None:
        self.path = Path(path).expanduser()
        self.uri = uri or f"sqlite:///{self.path}"
        self._busy_ms = int(busy_timeout_s * 1000)
        self._local = threading.local()
        self._all: list[tuple[threading.Thread, sqlite3.Connection]] = []  # (owner, connection)
        self._lock = threading.Lock()
        if self.path.parent and not self.path.parent.exists():
            raise StoreError(f"{self.uri}: directory {self.path.parent} does not exist")
        conn = self._conn()
        try:
            # a new file frees pages of dropped data incrementally (must precede the tables)
            conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
            conn.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.uri}: not a usable SQLite store: {exc}") from exc

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = sqlite3.connect(self.path, timeout=self._busy_ms / 1000, isolation_level=None,
                                       check_same_thread=False)
                conn.execute(f"PRAGMA busy_timeout={self._busy_ms}")
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute("PRAGMA cache_size=-8192")  # 8 MiB: chunks are read once, mmap serves the rest
                conn.execute("PRAGMA mmap_size=1073741824")
            except sqlite3.DatabaseError as exc:
                raise StoreError(f"{self.uri}: cannot open: {exc}") from exc
            self._local.conn = conn
            with self._lock:
                # connections of threads that have ended are closed (a writer thread per
                # append would otherwise leave one open file set behind each)
                alive = []
                for thread, other in self._all:
                    if thread.is_alive():
                        alive.append((thread, other))
                    else:
                        try:
                            other.close()
                        except sqlite3.Error:
                            pass
                self._all = [*alive, (threading.current_thread(), conn)]
        return conn

    def _write(self, sql: str, rows: Sequence[tuple[object, ...]] | None = None,
               immediate: bool = False) -> None:
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
            try:
                if rows is None:
                    conn.execute(sql)
                else:
                    conn.executemany(sql, rows)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # SQLite may have rolled back already (e.g. disk full)
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.uri}: write failed: {exc}") from exc

    # datasets
    def create_dataset(self, name: str, spec: str) -> None:
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")  # the check and the insert are one transaction
            try:
                taken = conn.execute("SELECT name FROM datasets WHERE lower(name) = lower(?)",
                                     (name,)).fetchone()
                if taken is not None:
                    raise DatasetExistsError(name, taken[0])
                conn.execute("INSERT INTO datasets (name, spec, created) VALUES (?, ?, ?)",
                             (name, spec, time.time()))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.uri}: write failed: {exc}") from exc

    def get_dataset(self, name: str) -> str:
        row = self._conn().execute("SELECT spec FROM datasets WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise DatasetNotFoundError(name)
        return str(row[0])

    def update_dataset(self, name: str, spec: str) -> None:
        self.get_dataset(name)
        self._write("UPDATE datasets SET spec = ? WHERE name = ?", [(spec, name)], immediate=True)

    def list_datasets(self) -> list[str]:
        return [r[0] for r in self._conn().execute("SELECT name FROM datasets ORDER BY name")]

    def drop_dataset(self, name: str) -> None:
        self.get_dataset(name)
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")
            for table in ("chunks", "segments", "checkpoints", "commits", "log_bounds"):
                conn.execute(f"DELETE FROM {table} WHERE dataset = ?", (name,))
            conn.execute("DELETE FROM datasets WHERE name = ?", (name,))
            conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise StoreError(f"{self.uri}: drop failed: {exc}") from exc

    # data
    def put_chunks(self, dataset: str, chunks: Sequence[tuple[ChunkRef, bytes]]) -> None:
        self._write(
            "INSERT OR REPLACE INTO chunks (dataset, segment, column_name, data) VALUES (?, ?, ?, ?)",
            [(dataset, ref.segment, ref.column, data) for ref, data in chunks],
        )

    def get_chunks(self, dataset: str, refs: Sequence[ChunkRef]) -> Iterator[tuple[ChunkRef, bytes]]:
        conn = self._conn()
        by_column: dict[str, dict[str, ChunkRef]] = {}
        for ref in refs:
            by_column.setdefault(ref.column, {})[ref.segment] = ref
        for column, wanted in by_column.items():
            segments = list(wanted)
            for i in range(0, len(segments), _IN_BATCH):
                batch = segments[i:i + _IN_BATCH]
                marks = ",".join("?" * len(batch))
                rows = conn.execute(
                    "SELECT segment, data FROM chunks WHERE dataset = ? AND column_name = ?"
                    f" AND segment IN ({marks})", (dataset, column, *batch)).fetchall()
                for segment, data in rows:
                    yield wanted.pop(segment), data
        for wanted in by_column.values():
            for ref in wanted.values():
                yield ref, b""  # missing: the caller names it in its error

    def put_segments(self, dataset: str, segments: Sequence[SegmentRow]) -> None:
        self._write(
            "INSERT OR REPLACE INTO segments (dataset, partition, segment, commit_id, rows, bucket, stats)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(dataset, s.partition, s.segment, s.commit, s.rows, s.bucket, s.stats) for s in segments],
        )

    def get_segments(self, dataset: str, partitions: Collection[str] | None = None) -> list[SegmentRow]:
        conn = self._conn()
        sql = "SELECT partition, segment, commit_id, rows, bucket, stats FROM segments WHERE dataset = ?"
        if partitions is None:
            rows = conn.execute(sql, (dataset,)).fetchall()
        else:
            parts = list(partitions)
            rows = []
            for i in range(0, len(parts), _IN_BATCH):
                batch = parts[i:i + _IN_BATCH]
                marks = ",".join("?" * len(batch))
                rows += conn.execute(sql + f" AND partition IN ({marks})", (dataset, *batch)).fetchall()
        return [SegmentRow(r[0], r[1], r[2], r[3], r[4], bytes(r[5])) for r in rows]

    def delete_segments(self, dataset: str, segments: Sequence[SegmentRow], columns: Sequence[str]) -> None:
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")
            for s in segments:
                conn.execute("DELETE FROM chunks WHERE dataset = ? AND segment = ?", (dataset, s.segment))
                conn.execute("DELETE FROM segments WHERE dataset = ? AND partition = ? AND segment = ?",
                             (dataset, s.partition, s.segment))
            conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise StoreError(f"{self.uri}: delete failed: {exc}") from exc

    # commit log
    def commit(self, dataset: str, version: int, payload: bytes) -> None:
        conn = self._conn()
        try:
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("BEGIN IMMEDIATE")
            # A version at or below the latest is taken, even if expiry removed its record
            # (the latest is never removed, so this is put-if-absent over every version).
            latest = conn.execute("SELECT max(version) FROM commits WHERE dataset = ?",
                                  (dataset,)).fetchone()[0]
            try:
                if latest is not None and version <= latest:
                    raise sqlite3.IntegrityError
                conn.execute("INSERT INTO commits (dataset, version, payload) VALUES (?, ?, ?)",
                             (dataset, version, payload))
            except sqlite3.IntegrityError:
                conn.execute("ROLLBACK")
                raise CommitConflictError(dataset, version) from None
            conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise StoreError(f"{self.uri}: commit failed: {exc}") from exc
        finally:
            conn.execute("PRAGMA synchronous=NORMAL")

    def list_commits(self, dataset: str, after: int = 0, upto: int | None = None) -> list[tuple[int, bytes]]:
        rows = self._conn().execute(
            "SELECT version, payload FROM commits WHERE dataset = ? AND version > ? AND version <= ?"
            " ORDER BY version", (dataset, after, _MAX_VERSION if upto is None else upto),
        ).fetchall()
        return [(int(v), bytes(p)) for v, p in rows]

    def latest_version(self, dataset: str) -> int:
        row = self._conn().execute("SELECT max(version) FROM commits WHERE dataset = ?", (dataset,)).fetchone()
        return int(row[0] or 0)

    def put_checkpoint(self, dataset: str, version: int, payload: bytes) -> None:
        self._write("INSERT OR REPLACE INTO checkpoints (dataset, version, payload) VALUES (?, ?, ?)",
                    [(dataset, version, payload)])

    def list_checkpoints(self, dataset: str) -> list[int]:
        return [int(r[0]) for r in self._conn().execute(
            "SELECT version FROM checkpoints WHERE dataset = ? ORDER BY version", (dataset,))]

    def get_checkpoint(self, dataset: str, version: int) -> bytes | None:
        row = self._conn().execute("SELECT payload FROM checkpoints WHERE dataset = ? AND version = ?",
                                   (dataset, version)).fetchone()
        return None if row is None else bytes(row[0])

    def delete_checkpoints(self, dataset: str, versions: Collection[int]) -> None:
        self._write("DELETE FROM checkpoints WHERE dataset = ? AND version = ?",
                    [(dataset, v) for v in versions])

    # expiry
    def oldest_version(self, dataset: str) -> int:
        row = self._conn().execute("SELECT oldest FROM log_bounds WHERE dataset = ?", (dataset,)).fetchone()
        return 0 if row is None else int(row[0])

    def set_oldest_version(self, dataset: str, version: int) -> None:
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")  # the check against the latest and the raise are one
            try:
                latest = self.latest_version(dataset)
                if version > latest:
                    raise ValueError(f"dataset {dataset!r}: cannot keep versions from {version} on, "
                                     f"the latest is {latest}")
                conn.execute("INSERT INTO log_bounds (dataset, oldest) VALUES (?, ?) ON CONFLICT (dataset)"
                             " DO UPDATE SET oldest = max(oldest, excluded.oldest)", (dataset, version))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.uri}: write failed: {exc}") from exc

    def delete_commits(self, dataset: str, upto: int) -> int:
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                oldest = self.oldest_version(dataset)
                if upto >= oldest:
                    raise ValueError(f"dataset {dataset!r}: commits from version {oldest} on are kept; "
                                     f"cannot remove those up to {upto}")
                removed = conn.execute("DELETE FROM commits WHERE dataset = ? AND version <= ?",
                                       (dataset, upto)).rowcount
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.uri}: delete failed: {exc}") from exc
        return int(removed)

    def stored_bytes(self, dataset: str) -> dict[str, int] | None:
        rows = self._conn().execute(
            "SELECT column_name, SUM(length(data)) FROM chunks WHERE dataset = ? GROUP BY column_name",
            (dataset,),
        ).fetchall()
        return {str(c): int(n) for c, n in rows}

    def reclaim(self) -> None:
        """Give the pages of deleted chunks back to the file system.

        Stores created with ``auto_vacuum=INCREMENTAL`` free their free pages in place; an older
        store is converted once by a full ``VACUUM`` (which rewrites the file)."""
        conn = self._conn()
        try:
            if conn.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:
                conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
                conn.execute("VACUUM")
            else:
                # a script steps the pragma to the end (one step of it frees one page)
                conn.executescript("PRAGMA incremental_vacuum;")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.uri}: reclaiming free space failed: {exc}") from exc

    def disk_bytes(self) -> int:
        total = 0
        for suffix in ("", "-wal"):
            try:
                total += Path(f"{self.path}{suffix}").stat().st_size
            except FileNotFoundError:
                pass
        return total

    def close(self) -> None:
        with self._lock:
            for _thread, conn in self._all:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
            self._all.clear()
        self._local = threading.local()
