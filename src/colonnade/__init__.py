"""Colonnade: a columnar analytical store on Apache Cassandra or one embedded SQLite file,
with SQL answered by DuckDB.

    >>> import colonnade
    >>> store = colonnade.connect("sqlite:///example.db")   # doctest: +SKIP
"""

from colonnade.errors import ColonnadeError
from colonnade.schema.spec import DatasetSpec
from colonnade.store import Explain, Store, connect
from colonnade.table import AppendResult, Dataset, Scan

__version__ = "0.1.0"

__all__ = ["AppendResult", "ColonnadeError", "Dataset", "DatasetSpec", "Explain", "Scan", "Store",
           "__version__", "connect"]
