"""SQL through DuckDB: the Arrow dataset adapter, predicate reading and pruning rules."""

from colonnade.query.adapter import ColonnadeArrowDataset

__all__ = ["ColonnadeArrowDataset"]
