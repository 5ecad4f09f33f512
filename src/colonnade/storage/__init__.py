"""Stores: the storage protocol and its backends, found by URI scheme and imported lazily."""

from __future__ import annotations

from colonnade.storage.base import ChunkRef, ChunkStore, SegmentRow

__all__ = ["ChunkRef", "ChunkStore", "SegmentRow", "open_store"]


def open_store(uri: str) -> ChunkStore:
    """Open the store a URI names: ``sqlite:///path`` or a plain path, or ``cassandra://...``."""
    from colonnade.config import parse_store_uri

    parsed = parse_store_uri(uri)
    if parsed.scheme == "sqlite":
        from colonnade.storage.sqlite import SQLiteStore

        return SQLiteStore(parsed.path, uri=parsed.display)
    if parsed.scheme == "cassandra":
        try:
            from colonnade.storage.cassandra import CassandraStore
        except ImportError as exc:  # pragma: no cover - depends on the environment
            from colonnade.errors import NotInstalledError

            raise NotInstalledError(
                f"the Cassandra store needs cassandra-driver: pip install 'colonnade[cassandra]' ({exc})"
            ) from exc
        return CassandraStore(parsed)
    raise AssertionError(parsed.scheme)
