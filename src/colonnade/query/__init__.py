"""SQL through DuckDB: the Arrow dataset adapter, predicate reading and pruning rules.

``ColonnadeArrowDataset`` is loaded on first use (it imports pyarrow.dataset). This package
builds on ``table`` (scans) and ``expressions``; neither imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from colonnade.query.adapter import ColonnadeArrowDataset


def __getattr__(name: str) -> Any:
    if name == "ColonnadeArrowDataset":
        from colonnade.query.adapter import ColonnadeArrowDataset

        return ColonnadeArrowDataset
    raise AttributeError(f"module 'colonnade.query' has no attribute {name!r}")


__all__ = ["ColonnadeArrowDataset"]
