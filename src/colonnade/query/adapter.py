"""The bridge to DuckDB: a dataset as a ``pyarrow.dataset.Dataset`` that pushes work down.

DuckDB calls ``scanner(columns=..., filter=...)`` with the projection and the filter it wants.
We plan a Colonnade scan with both (pruning partitions and segments), stream only the needed
chunks, and hand DuckDB a real Arrow ``Scanner`` over those batches that applies the filter
exactly, so DuckDB's answer is the same as without pushdown. Every scan's metrics are kept for
``explain``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from colonnade._lazy import import_pyarrow_dataset
from colonnade.errors import ColonnadeError
from colonnade.table.scan import Scan, ScanMetrics, read_schema

if TYPE_CHECKING:
    import pyarrow.dataset as pds

    from colonnade.table.commits import Snapshot
    from colonnade.table.dataset import Dataset
else:
    pds = import_pyarrow_dataset()  # without pandas: it costs seconds of start-up


class ColonnadeArrowDataset(pds.Dataset):  # type: ignore[misc]
    """A pinned snapshot of a dataset, seen by DuckDB (or any Arrow consumer) as a Dataset."""

    def __init__(self, dataset: Dataset, snapshot: Snapshot) -> None:
        # pyarrow's Dataset has no Python-level __init__ to call: this class only overrides
        # the methods consumers use (schema, scanner, to_table, to_batches, count_rows).
        self._dataset = dataset
        self._snapshot = snapshot
        schema = dataset.schema_at(snapshot)  # time travel: the columns of that version
        self._schema = read_schema(schema, snapshot, list(schema.names))
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
                    snapshot=self._snapshot, apply_filter=False)

    def scanner(self, columns: list[str] | None = None, filter: pc.Expression | None = None,
                **kwargs: Any) -> pds.Scanner:
        scan = self._scan(columns, filter)
        plan = scan.plan()
        with self._lock:
            self.scans.append(plan.metrics)
        out_columns = list(plan.columns)
        batches = self._recording(scan.to_batches(plan))
        return pds.Scanner.from_batches(batches, schema=plan.schema, columns=out_columns, filter=filter)

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
