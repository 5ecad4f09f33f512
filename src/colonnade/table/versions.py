"""The versions of one dataset a :class:`~colonnade.table.dataset.Dataset` object has read: the
latest (extended by the commits made since, each time it is asked for), the last
:data:`PINNED_KEPT` older ones (time travel, reads pinned to a version), and the schemas the
commits recorded, decoded once. A version never changes once committed; an older one that was
expired since is never served (checked on every ask)."""

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
        self.latest: Snapshot | None = None  # the newest state read, extended on demand
        self._pinned: dict[int, Snapshot] = {}  # older versions read, the last PINNED_KEPT of them
        self._pinned_lock = threading.Lock()
        self._schemas: dict[int, tuple[list[list[str]], pa.Schema]] = {}  # decoded recorded schemas

    def snapshot(self, version: int | None = None) -> Snapshot:
        """The dataset as of ``version`` (default: the latest): see :meth:`Dataset.snapshot`."""
        if version is not None:
            kept = self._pinned.get(version)
            if kept is not None:
                log.check_kept(self.store, self.name, version)  # an expired version is never served
                return kept
        latest = self.latest
        if version is not None and latest is not None:
            log.check_kept(self.store, self.name, version)  # an expired version is never served
        if latest is not None and (version is None or version > latest.version):
            extended = log.extend(self.store, latest, version)  # None: expired past it
            if extended is not None:
                latest = self.latest = extended
                if version is None or version == latest.version:
                    return latest
        elif latest is not None and version == latest.version:
            return latest
        snapshot = log.load_snapshot(self.store, self.name, version)
        if version is None:
            self.latest = snapshot
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
