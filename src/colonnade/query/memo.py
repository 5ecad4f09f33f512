"""A bounded memo shared by threads: what a query text (or another key) was found to be, kept
so that repeated queries skip parsing and checking it again.

Queries repeat a few texts, so a memo that is full is emptied rather than evicting in order:
no bookkeeping per lookup, and a workload of endless distinct texts can't grow it past
:data:`KEPT` entries. A lookup is one ``dict.get`` (atomic under the GIL: another thread may
empty the memo in between two); storing takes a lock, so that emptying can't interleave with
another thread's insertion. A value is computed outside the lock: two threads may both
compute it, and either's is kept.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar, cast

K = TypeVar("K")
V = TypeVar("V")

#: Entries a memo holds before it is emptied.
KEPT = 1024
_MISSING = object()


class Memo(Generic[K, V]):
    """Values found for keys, at most ``size`` of them."""

    def __init__(self, size: int = KEPT) -> None:
        self._found: dict[K, V] = {}
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: K, compute: Callable[[], V]) -> V:
        """The value kept for ``key``, else ``compute()``, kept (an exception it raises is
        raised, and nothing kept)."""
        found = self._found.get(key, _MISSING)
        if found is _MISSING:
            found = compute()
            with self._lock:
                if len(self._found) >= self._size:
                    self._found.clear()
                self._found[key] = cast(V, found)
        return cast(V, found)

    def __len__(self) -> int:
        return len(self._found)


__all__ = ["KEPT", "Memo"]
