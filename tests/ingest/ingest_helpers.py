"""Helpers of the ingest tests (a plain module: ``conftest`` names clash across test folders)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from colonnade.store import Store

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "malformed"

EVENTS_SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64()),
                           ("day", pa.date32()), ("ok", pa.bool_())])


def table_of(store: Store, name: str, order_by: str = "id") -> pa.Table:
    """Every row of a dataset, ordered."""
    return store.sql(f"SELECT * FROM {name} ORDER BY {order_by}")


def version_of(store: Store, name: str) -> int | None:
    """The dataset's version, or None when it does not exist."""
    return store.dataset(name).version if name in store else None
