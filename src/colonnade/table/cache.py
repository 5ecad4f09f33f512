"""A cache of decoded column chunks, for processes that query the same data again and again
(a dashboard's loop, a notebook, queries beside a stream).

Segments never change once written (a segment id is never reused): a chunk decoded once —
after its checksum was verified — can answer every later scan of that segment and column, as
long as it is kept. The cache keeps decoded arrays up to a byte budget, least recently used
first out, per store object: the scans of one query (a self-join reads a table once) and later
queries on the same store share it. The budget is an eighth of the machine's memory (at most
8 GiB) unless ``colonnade.connect(uri, cache_mb=N)`` or ``$COLONNADE_CACHE_MB`` gives one; 0
turns it off. A chunk damaged in the store after it was cached is not noticed by
scans that find it in the cache (they return the data as it was verified); ``verify`` always
reads the store.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any

import pyarrow as pa

ENV = "COLONNADE_CACHE_MB"

Key = tuple[str, str, str]  # segment, column, Arrow type as text


class ChunkCache:
    """Decoded arrays by (segment, column, type), least recently used out past ``capacity``
    bytes; safe to share between threads."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.nbytes = 0
        self.hits = 0
        self.misses = 0
        self._items: OrderedDict[Key, pa.Array] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Key) -> pa.Array | None:
        with self._lock:
            array = self._items.get(key)
            if array is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return array

    def put(self, key: Key, array: pa.Array) -> None:
        size = array.nbytes
        if size > self.capacity:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.nbytes -= old.nbytes
            self._items[key] = array
            self.nbytes += size
            while self.nbytes > self.capacity and self._items:
                _, dropped = self._items.popitem(last=False)
                self.nbytes -= dropped.nbytes

    def __len__(self) -> int:
        return len(self._items)


def default_cache_mb() -> int:
    """An eighth of the machine's memory in MiB, at most 8 GiB (0 when it can't be read)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0
    return int(min(total // 8, 8 << 30) >> 20)


def cache_of(store: Any) -> ChunkCache | None:
    """The chunk cache of a store object (made on first use), or None when caching is off
    (``store.cache_mb``, set by ``connect``, else ``$COLONNADE_CACHE_MB``, else
    ``default_cache_mb()``; 0: off)."""
    cache = getattr(store, "_chunk_cache", None)
    if cache is not None:
        return cache
    mb = getattr(store, "cache_mb", None)
    if mb is None:
        text = os.environ.get(ENV, "").strip()
        mb = default_cache_mb() if not text else int(text) if text.isdigit() else 0
    if mb <= 0:
        return None
    cache = ChunkCache(mb * 2**20)
    store._chunk_cache = cache
    return cache
