"""The error hierarchy: one root, one class per stage, details kept as attributes.

Everything Colonnade raises on purpose derives from :class:`ColonnadeError`, so callers can
catch one class, and the CLI can print ``str(error)`` as a one-line reason.
"""

from __future__ import annotations


class ColonnadeError(Exception):
    """Root of every error Colonnade raises on purpose."""


class ConfigError(ColonnadeError):
    """A store URI, option or environment setting is invalid."""


class NotInstalledError(ColonnadeError):
    """An optional dependency needed by a backend is missing."""


class DatasetError(ColonnadeError):
    """A dataset-level problem (missing, already exists, bad spec)."""


class DatasetNotFoundError(DatasetError):
    def __init__(self, name: str) -> None:
        super().__init__(f"dataset {name!r} does not exist")
        self.name = name


class DatasetExistsError(DatasetError):
    """The name is taken: by a dataset of that name, or of a name that differs only in case
    (``existing``), which SQL could not tell apart."""

    def __init__(self, name: str, existing: str | None = None) -> None:
        if existing is None or existing == name:
            super().__init__(f"dataset {name!r} already exists")
        else:
            super().__init__(f"dataset {name!r} would collide with dataset {existing!r}: names that "
                             f"differ only in case are one name in SQL (to use it, say {existing!r})")
        self.name = name
        self.existing = existing or name


class VersionNotFoundError(DatasetError):
    """A version that the dataset's log does not have (``latest`` is its newest one), or no
    longer has: ``oldest`` is set when the version was expired (it is the oldest one kept)."""

    def __init__(self, dataset: str, version: int, latest: int | None, oldest: int | None = None) -> None:
        if oldest is not None:
            latest_text = f", the latest {latest}" if latest is not None else ""
            super().__init__(f"dataset {dataset!r} has no version {version}: it was expired (the "
                             f"oldest version kept is {oldest}{latest_text})")
        else:
            where = f" (latest is {latest})" if latest is not None else ""
            super().__init__(f"dataset {dataset!r} has no version {version}{where}")
        self.dataset = dataset
        self.version = version
        self.latest = latest
        self.oldest = oldest


class SchemaError(DatasetError):
    """Data does not match a dataset's schema, or a schema text is invalid."""


class PredicateError(DatasetError):
    """A predicate (of a delete, a retention) that does not parse, names a column the dataset
    lacks, or is not true or false."""

    def __init__(self, dataset: str, predicate: str, reason: str) -> None:
        super().__init__(f"dataset {dataset!r}: bad predicate {predicate.strip()!r}: {reason}")
        self.dataset = dataset
        self.predicate = predicate
        self.reason = reason


class SpecError(DatasetError):
    """A partition spec or sort key is invalid."""


class StoreError(ColonnadeError):
    """The store failed to read or write."""


class CommitConflictError(StoreError):
    """Another writer won the version this commit tried to take; with ``reason``: what that
    writer committed (``operation``) conflicts with what this commit read or removes, so this
    commit was not written (see :mod:`colonnade.table.conflicts`)."""

    def __init__(self, dataset: str, version: int, operation: str | None = None,
                 reason: str | None = None) -> None:
        if reason is None:
            super().__init__(f"dataset {dataset!r}: version {version} was taken by another writer")
        else:
            super().__init__(f"dataset {dataset!r}: conflicts with version {version} ({operation}) "
                             f"committed meanwhile: {reason}; nothing was committed")
        self.dataset = dataset
        self.version = version
        self.operation = operation
        self.reason = reason


class UnavailableError(StoreError):
    """Not enough replicas answered for the requested consistency level."""

    def __init__(self, message: str, consistency: str | None = None,
                 required: int | None = None, alive: int | None = None) -> None:
        super().__init__(message)
        self.consistency = consistency
        self.required = required
        self.alive = alive


class CorruptChunkError(ColonnadeError):
    """A stored chunk failed its checksum or could not be decoded."""

    def __init__(self, dataset: str, column: str, segment: str, reason: str) -> None:
        super().__init__(
            f"corrupt chunk: dataset {dataset!r}, column {column!r}, segment {segment}: {reason}"
        )
        self.dataset = dataset
        self.column = column
        self.segment = segment
        self.reason = reason


class CorruptCommitError(ColonnadeError):
    """A commit record is unreadable or of an unknown format version."""

    def __init__(self, dataset: str, version: int, reason: str) -> None:
        super().__init__(f"dataset {dataset!r}: commit {version} is unreadable: {reason}")
        self.dataset = dataset
        self.version = version
        self.reason = reason


class CorruptCheckpointError(ColonnadeError):
    """A checkpoint that cannot be read. Readers fall back to an older one or the log
    (``fatal`` False); when the log before it was expired and no fallback is readable, opening
    the dataset fails with this error (``fatal`` True)."""

    def __init__(self, dataset: str, version: int, reason: str, fatal: bool = False) -> None:
        super().__init__(f"dataset {dataset!r}: checkpoint of version {version} is unreadable: {reason}")
        self.dataset = dataset
        self.version = version
        self.reason = reason
        self.fatal = fatal


class IngestError(ColonnadeError):
    """An ingest failed; nothing of it was committed."""


class BadRowError(IngestError):
    """A row of an input file could not be parsed (strict mode)."""

    def __init__(self, path: str, line: int | None, column: str | None, reason: str) -> None:
        where = path
        if line is not None:
            where += f":{line}"
        if column is not None:
            where += f": column {column}"
        super().__init__(f"{where}: {reason}")
        self.path = path
        self.line = line
        self.column = column
        self.reason = reason


class TooManyErrorsError(IngestError):
    def __init__(self, path: str, count: int, limit: int) -> None:
        super().__init__(
            f"{path}: {count} bad rows exceed --max-errors {limit}; nothing was committed"
        )
        self.path = path
        self.count = count
        self.limit = limit


class QueryError(ColonnadeError):
    """A SQL query failed."""


class UnsupportedOperationError(QueryError):
    """An operation that the object does not support (e.g. a ``pyarrow.dataset.Dataset``
    method that the dataset handed to DuckDB does not implement)."""


class ClusterError(ColonnadeError):
    """The local Cassandra cluster manager failed."""
