"""The bridge to DuckDB: a dataset as a ``pyarrow.dataset.Dataset`` that pushes work down.

DuckDB calls ``scanner(columns=..., filter=...)`` with the projection and the filter it wants,
then ``to_reader()`` on what it gets back. We plan a Colonnade scan with both (pruning partitions
and segments) and hand DuckDB a lazy scanner: its reader yields the rows that match the filter
(applied exactly, so DuckDB's answer is the same as without pushdown) segment by segment, and
fetches chunks only as DuckDB pulls, so a query that stops early (``LIMIT``) stops the reads.
(Arrow's own ``Scanner.from_batches`` would drain dozens of batches ahead of DuckDB on a
background thread.) Every scan's metrics are kept for ``explain``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pds

from colonnade.errors import ColonnadeError
from colonnade.table.scan import Scan, ScanMetrics, read_schema

if TYPE_CHECKING:
    from colonnade.table.commits import Snapshot
    from colonnade.table.dataset import Dataset


class ColonnadeArrowDataset(pds.Dataset):  # type: ignore[misc]
    """A pinned snapshot of a dataset, seen by DuckDB (or any Arrow consumer) as a Dataset."""

    def __init__(self, dataset: Dataset, snapshot: Snapshot) -> None:
        # pyarrow's Dataset has no Python-level __init__ to call: this class only overrides
        # the methods consumers use (schema, scanner, to_table, to_batches, count_rows).
        self._dataset = dataset
        self._snapshot = snapshot
        self._schema = read_schema(dataset.schema_at(snapshot), snapshot, list(dataset.schema.names))
        self._lock = threading.Lock()
        self.scans: list[ScanMetrics] = []
        self.errors: list[ColonnadeError] = []

    @property
    def schema(self) -> pa.Schema:
        return self._schema

    @property
    def version(self) -> int:
        return self._snapshot.version

    def _scan(self, columns: list[str] | None, filter: pc.Expression | None) -> Scan:
        return Scan(self._dataset, tuple(columns) if columns is not None else None, filter,
                    snapshot=self._snapshot)

    def scanner(self, columns: list[str] | None = None, filter: pc.Expression | None = None,
                **kwargs: Any) -> LazyScanner:
        scan = self._scan(columns, filter)
        plan = scan.plan()
        with self._lock:
            self.scans.append(plan.metrics)
        return LazyScanner(scan.output_schema(plan), lambda: self._recording(scan.to_batches(plan)))

    def _recording(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Keep the first Colonnade error of a scan: DuckDB turns it into text, and callers
        want the original (e.g. CorruptChunkError with its dataset, column and segment)."""
        try:
            yield from batches
        except ColonnadeError as exc:
            with self._lock:
                self.errors.append(exc)
            raise

    def to_table(self, columns: list[str] | None = None, filter: pc.Expression | None = None,
                 **kwargs: Any) -> pa.Table:
        return self.scanner(columns=columns, filter=filter).to_table()

    def to_batches(self, columns: list[str] | None = None, filter: pc.Expression | None = None,
                   **kwargs: Any) -> Any:
        return self.scanner(columns=columns, filter=filter).to_batches()

    def count_rows(self, filter: pc.Expression | None = None, **kwargs: Any) -> int:
        if filter is None:
            return self._snapshot.rows
        return self.scanner(columns=[], filter=filter).count_rows()

    def head(self, num_rows: int, columns: list[str] | None = None, filter: pc.Expression | None = None,
             **kwargs: Any) -> pa.Table:
        return self.scanner(columns=columns, filter=filter).head(num_rows)

    def __repr__(self) -> str:
        return f"ColonnadeArrowDataset({self._dataset.name!r}, version={self.version})"


class LazyScanner:
    """The part of ``pyarrow.dataset.Scanner`` that consumers use, over a planned scan whose
    batches are produced only as they are pulled."""

    def __init__(self, schema: pa.Schema, batches: Callable[[], Iterator[pa.RecordBatch]]) -> None:
        self.projected_schema = schema
        self._batches = batches

    def to_reader(self) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self.projected_schema, self._batches())

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        return self._batches()

    def to_table(self) -> pa.Table:
        return pa.Table.from_batches(list(self._batches()), schema=self.projected_schema)

    def head(self, num_rows: int) -> pa.Table:
        out, have = [], 0
        batches = self._batches()
        try:
            for batch in batches:
                out.append(batch.slice(0, num_rows - have))
                have += out[-1].num_rows
                if have >= num_rows:
                    break
        finally:
            close = getattr(batches, "close", None)
            if close is not None:
                close()
        return pa.Table.from_batches(out, schema=self.projected_schema)

    def count_rows(self) -> int:
        return sum(b.num_rows for b in self._batches())
