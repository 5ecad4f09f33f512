"""Colonnade: a columnar analytical store on Apache Cassandra or one embedded SQLite file,
with SQL answered by DuckDB.

    >>> import colonnade
    >>> store = colonnade.connect("sqlite:///example.db")   # doctest: +SKIP

The public names are loaded on first use (PEP 562): ``import colonnade`` runs nothing else, so
the command line starts without pyarrow or DuckDB (and its Ctrl-C guard covers nearly all of
its loading).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (10 ms)
if TYPE_CHECKING:
    from typing import Any

    from colonnade.errors import ColonnadeError
    from colonnade.schema.spec import DatasetSpec
    from colonnade.store import Explain, Store, connect
    from colonnade.table import AppendResult, Dataset, Scan

__version__ = "0.1.0"

_LAZY = {
    "AppendResult": "colonnade.table",
    "ColonnadeError": "colonnade.errors",
    "Dataset": "colonnade.table",
    "DatasetSpec": "colonnade.schema.spec",
    "Explain": "colonnade.store",
    "Scan": "colonnade.table",
    "Store": "colonnade.store",
    "connect": "colonnade.store",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'colonnade' has no attribute {name!r}")
    value = getattr(__import__(module, fromlist=[name]), name)
    globals()[name] = value  # the next lookup doesn't come here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = ["AppendResult", "ColonnadeError", "Dataset", "DatasetSpec", "Explain", "Scan", "Store",
           "__version__", "connect"]
