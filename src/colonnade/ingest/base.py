"""What every ingest source is: a schema, then Arrow record batches with the input consumed so far.

A source reads one input file with bounded memory and yields record batches in its own schema
(the dataset's types where the dataset already has the column); the pipeline conforms them to
the dataset and writes them. A bad row is either raised as :class:`~colonnade.errors.BadRowError`
(``on_error="strict"``, the default) or handed to the ``on_reject`` callback as a :class:`Reject`
(``on_error="quarantine"``) while the good rows flow on. Guarantees every source keeps:

1. rows come out in input order, and a row is either yielded or reported, never both or neither;
2. a reported row names its 1-based physical line (the header counts; a line break inside a
   quoted field counts), the column when one is to blame, and the reason;
3. memory is bounded by the source's block size, not by the input's size;
4. an unreadable file (truncated Parquet, bad Arrow IPC) raises :class:`~colonnade.errors.IngestError`
   naming the file, before or while batches are yielded — never a silently short read.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import pyarrow as pa

#: On which error policy a source runs: raise at the first bad row, or report it and go on.
ON_ERROR = ("strict", "quarantine")


@dataclass(frozen=True)
class Reject:
    """A row that was not ingested, with where it was and why."""

    path: str
    line: int | None
    column: str | None
    reason: str
    raw: str

    def to_dict(self) -> dict[str, object]:
        return {"file": self.path, "line": self.line, "column": self.column,
                "reason": self.reason, "raw": self.raw}


OnReject = Callable[[Reject], None]


class Source(ABC):
    """One input file as record batches; use as a context manager (it holds the file open)."""

    #: Lower-case format name: csv, parquet or arrow.
    format: str = ""

    def __init__(self, path: Path, name: str | None = None) -> None:
        self.path = path
        #: How messages and rejects name the input (``<stdin>`` for a spooled standard input).
        self.name = name or str(path)
        self.size = path.stat().st_size

    @property
    @abstractmethod
    def schema(self) -> pa.Schema:
        """The schema of the batches :meth:`read` yields."""

    @property
    def schema_known(self) -> bool:
        """False when the column types could not be told (a CSV file with no rows)."""
        return True

    @abstractmethod
    def read(self) -> Iterator[tuple[pa.RecordBatch, int]]:
        """Batches in input order, each with the bytes of the input file parsed up to its last
        row (never decreasing; the file's size with the last batch, unless the file ends with
        rows that were reported rather than read)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the file."""

    def __enter__(self) -> Source:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
