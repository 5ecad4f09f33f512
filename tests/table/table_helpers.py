"""Helpers of the table tests: a store that lets another writer commit at a chosen moment.

(A plain module rather than conftest: conftest names clash across test folders.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from colonnade.storage.base import ChunkStore
from colonnade.store import Store
from colonnade.table.dataset import Dataset


class RaceFirstCommit:
    """A chunk store that runs ``race`` (another writer's whole operation) just before the
    first commit record is written through it: the writer using it read the log, wrote its
    segments, and then loses the version it was about to take."""

    def __init__(self, store: ChunkStore, race: Callable[[], Any]) -> None:
        self._store = store
        self._race: Callable[[], Any] | None = race
        self.raced = False

    def commit(self, dataset: str, version: int, payload: bytes) -> None:
        if self._race is not None:
            race, self._race = self._race, None
            race()
            self.raced = True
        self._store.commit(dataset, version, payload)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def racing(store: Store, name: str, race: Callable[[], Any]) -> tuple[Dataset, RaceFirstCommit]:
    """Dataset ``name`` opened through a :class:`RaceFirstCommit` store."""
    raced = RaceFirstCommit(store.chunk_store, race)
    ds = Dataset(cast(ChunkStore, raced), store.dataset(name).spec)
    return ds, raced
