"""The versions of one dataset a :class:`~colonnade.table.dataset.Dataset` object has read: the
latest (extended by the commits made since, each time it is asked for), the last
:data:`PINNED_KEPT` older ones (time travel, reads pinned to a version), and the schemas the
commits recorded, decoded once. A version never changes once committed; an older one that was
expired since is never served (checked on every ask).

The latest is extended by :func:`~colonnade.table.log.follow`: the log is read on from the
commit of the version read last, and is only extended if that commit is still there, the same
record (its mark, see :meth:`~colonnade.storage.base.ChunkStore.follow_commits`). So a
dataset dropped and created again under the name since is never taken for the old one with
commits added (it is read afresh), and SQL needs no catalog read to know that
(:meth:`Versions.followed`)."""

from __future__ import annotations

import threading

import pyarrow as pa

from colonnade.schema.types import schema_from_json
from colonnade.storage.base import ChunkStore
from colonnade.table import log
from colonnade.table.commits import Snapshot
from colonnade.table.scan import read_schema

#: Older versions kept read per Dataset object.
PINNED_KEPT = 4


class Versions:
    """The versions of dataset ``name`` read so far, and their decoded schemas."""

    def __init__(self, store: ChunkStore, name: str) -> None:
        self.store = store
        self.name = name
        # the newest state read (extended on demand) and the mark of its own commit (None:
        # version 0, or that commit is gone), kept together
        self._latest: tuple[Snapshot, bytes | None] | None = None
        self._pinned: dict[int, Snapshot] = {}  # older versions read, the last PINNED_KEPT of them
        self._pinned_lock = threading.Lock()
        self._schemas: dict[int, tuple[list[list[str]], pa.Schema]] = {}  # decoded recorded schemas

    @property
    def latest(self) -> Snapshot | None:
        held = self._latest
        return None if held is None else held[0]

    def followed(self) -> Snapshot | None:
        """The latest snapshot, if it can be had by following the log on from the latest one
        read (see :func:`~colonnade.table.log.follow`): one read, which also shows the dataset
        is the one read before. None when it can't (nothing read yet, version 0, the commits
        since were expired, the log is another one): then ask :meth:`snapshot`."""
        held = self._latest
        return None if held is None else self._extend(held, None)

    def _extend(self, held: tuple[Snapshot, bytes | None], upto: int | None) -> Snapshot | None:
        """The latest snapshot extended up to ``upto``; None when it must be read afresh (the
        log can't be followed from it, or it is of version 0: no commit to follow from)."""
        found = None if held[1] is None else log.follow(self.store, held[0], held[1], upto)
        if found is None:
            return None
        self._latest = found
        return found[0]

    def snapshot(self, version: int | None = None) -> Snapshot:
        """The dataset as of ``version`` (default: the latest): see :meth:`Dataset.snapshot`."""
        if version is not None:
            kept = self._pinned.get(version)
            if kept is not None:
                log.check_kept(self.store, self.name, version)  # an expired version is never served
                return kept
        held = self._latest
        latest = None if held is None else held[0]
        if version is not None and latest is not None:
            log.check_kept(self.store, self.name, version)  # an expired version is never served
        if held is not None and latest is not None and (version is None or version > latest.version):
            extended = self._extend(held, version)
            if extended is not None:
                if version is None or version == extended.version:
                    return extended
        elif latest is not None and version == latest.version:
            return latest
        last: list[bytes] = []
        snapshot = log.load_snapshot(self.store, self.name, version, last=last if version is None else None)
        if version is None:
            self._latest = (snapshot, last[0] if last else None)
        else:
            with self._pinned_lock:
                self._pinned[version] = snapshot
                while len(self._pinned) > PINNED_KEPT:
                    self._pinned.pop(next(iter(self._pinned)))
        return snapshot

    def recorded_schema(self, snapshot: Snapshot) -> pa.Schema | None:
        """The schema ``snapshot``'s commits recorded last, decoded (None if they recorded none)."""
        if snapshot.schema is None:
            return None
        key = id(snapshot.schema)
        cached = self._schemas.get(key)
        if cached is None or cached[0] is not snapshot.schema:  # the same list, not a reused id
            cached = self._schemas[key] = (snapshot.schema, schema_from_json(snapshot.schema))
            if len(self._schemas) > 64:
                self._schemas.pop(next(iter(self._schemas)))
        return cached[1]


def read_schema_of(snapshot: Snapshot, schema: pa.Schema) -> pa.Schema:
    """The types a scan of every column of ``snapshot`` (whose schema is ``schema``) yields,
    worked out once per snapshot (see :func:`~colonnade.table.scan.read_schema`)."""
    cached = snapshot.__dict__.get("_read_schema")
    if cached is None or cached[0] is not schema:
        cached = (schema, read_schema(schema, snapshot, list(schema.names)))
        object.__setattr__(snapshot, "_read_schema", cached)  # a cache, not a field
    return cached[1]  # type: ignore[no-any-return]
