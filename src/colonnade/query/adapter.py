"""The bridge to DuckDB: a dataset as a ``pyarrow.dataset.Dataset`` that pushes work down.

DuckDB calls ``scanner(columns=..., filter=...)`` with the projection and the filter it wants,
then ``to_reader()`` on what it gets back. We plan a Colonnade scan with both (pruning partitions
and segments) and hand DuckDB a lazy scanner: its reader yields the rows that match the filter
(applied exactly, so DuckDB's answer is the same as without pushdown) segment by segment, and
fetches chunks only as DuckDB pulls, so a query that stops early (``LIMIT``) stops the reads.
(Arrow's own ``Scanner.from_batches`` would drain dozens of batches ahead of DuckDB on a
background thread.) Every scan's metrics are kept for ``explain``.

DuckDB pushes only some filters (not those on float columns, nor comparisons it casts the column
for); :func:`use_where` reads the query's WHERE clauses before it runs and lets each dataset prune
with what is safe (see :mod:`colonnade.query.where` and :mod:`colonnade.query.probes`), and
remembers what could not be used and why, for ``explain``.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from colonnade._lazy import import_pyarrow_dataset
from colonnade.errors import ColonnadeError, UnsupportedOperationError
from colonnade.expressions.tree import And, columns_of, parse_expression
from colonnade.query.probes import ProbeRunner, bind, prune
from colonnade.query.where import (
    DatasetWhere,
    Probe,
    Rejected,
    probes_of,
    read_where,
    replace_probes,
    sql_text,
    statement_kinds,
)
from colonnade.sqlnames import quoted
from colonnade.table.scan import Pruned, Scan, ScanMetrics

if TYPE_CHECKING:
    import duckdb
    import pyarrow.dataset as pds

    from colonnade.encoding.chunk import ChunkStats
    from colonnade.table.commits import Snapshot
    from colonnade.table.dataset import Dataset
else:
    pds = import_pyarrow_dataset()  # without pandas: it costs seconds of start-up


class _SafeDataset(pds.Dataset):  # type: ignore[misc]
    """A ``pyarrow.dataset.Dataset`` implemented in Python. pyarrow's Dataset has no
    Python-level ``__init__`` to call, so its C++ state stays uninitialised, and every inherited
    method or property that reaches it crashes the interpreter or raises AttributeError: each one
    is overridden here or in the subclass, with a working implementation or an
    UnsupportedOperationError."""

    _label = "?"

    @property
    def schema(self) -> pa.Schema:
        raise NotImplementedError

    @property
    def partition_expression(self) -> pc.Expression:
        """True: a Colonnade dataset is one whole, not a partition of a larger dataset."""
        return pc.scalar(True)

    def get_fragments(self, filter: pc.Expression | None = None) -> Any:
        raise self._unsupported("get_fragments()", "a Colonnade dataset has no Arrow fragments")

    def replace_schema(self, schema: pa.Schema) -> Any:
        raise self._unsupported("replace_schema()", "its schema is the dataset's schema at its version")

    def sort_by(self, sorting: Any, **kwargs: Any) -> Any:
        raise self._unsupported("sort_by()", "use to_table().sort_by() or SQL ORDER BY")

    def join(self, right_dataset: Any, keys: Any, *args: Any, **kwargs: Any) -> Any:
        raise self._unsupported("join()", "use SQL")

    def join_asof(self, right_dataset: Any, on: Any, by: Any, tolerance: Any, *args: Any, **kwargs: Any) -> Any:
        raise self._unsupported("join_asof()", "use SQL")

    def __reduce__(self) -> Any:
        raise self._unsupported("pickling", "pickle the store URI and dataset name instead")

    def _unsupported(self, what: str, hint: str) -> UnsupportedOperationError:
        return UnsupportedOperationError(f"{what} is not supported on dataset {self._label!r} "
                                         f"as an Arrow dataset: {hint}")

    def scanner(self, columns: list[str] | None = None, filter: pc.Expression | None = None,
                **kwargs: Any) -> LazyScanner:
        raise NotImplementedError

    def to_table(self, columns: list[str] | None = None, filter: pc.Expression | None = None,
                 **kwargs: Any) -> pa.Table:
        return self.scanner(columns=columns, filter=filter).to_table()

    def to_batches(self, columns: list[str] | None = None, filter: pc.Expression | None = None,
                   **kwargs: Any) -> Any:
        return self.scanner(columns=columns, filter=filter).to_batches()

    def head(self, num_rows: int, columns: list[str] | None = None, filter: pc.Expression | None = None,
             **kwargs: Any) -> pa.Table:
        return self.scanner(columns=columns, filter=filter).head(num_rows)

    def count_rows(self, filter: pc.Expression | None = None, **kwargs: Any) -> int:
        return self.scanner(columns=[], filter=filter).count_rows()

    def take(self, indices: Any, columns: list[str] | None = None, filter: pc.Expression | None = None,
             **kwargs: Any) -> pa.Table:
        return self.to_table(columns=columns, filter=filter).take(indices)

    def filter(self, expression: pc.Expression) -> Any:
        raise self._unsupported("filter()", "pass filter= to scanner() or to_table()")


class ColonnadeArrowDataset(_SafeDataset):
    """A pinned snapshot of a dataset, seen by DuckDB (or any Arrow consumer) as a Dataset."""

    def __init__(self, dataset: Dataset, snapshot: Snapshot, filter: pc.Expression | None = None) -> None:
        self._dataset = dataset
        self._label = dataset.name
        self._filter = filter  # from filter(): part of every scan's filter
        self._snapshot = snapshot
        self._schema = dataset.read_schema_at(snapshot)  # time travel: the columns of that version
        self._lock = threading.Lock()
        self.scans: list[ScanMetrics] = []
        self.errors: list[ColonnadeError] = []
        self._where: Pruned | None = None
        self._rejected: list[Rejected] = []
        self._notes: list[str] = []

    def reads(self, dataset: Dataset, snapshot: Snapshot) -> bool:
        """Whether this is ``snapshot`` of ``dataset``, unfiltered (then it can stand for
        another query's adapter of it, once :meth:`reset`)."""
        return self._dataset is dataset and self._snapshot is snapshot and self._filter is None

    def reset(self) -> None:
        """Forget the last query's scans, errors and WHERE clauses, for the next query."""
        with self._lock:
            self.scans, self.errors = [], []
        self._where, self._rejected, self._notes = None, [], []

    @property
    def schema(self) -> pa.Schema:
        return self._schema

    @property
    def version(self) -> int:
        return self._snapshot.version

    def filter(self, expression: pc.Expression) -> ColonnadeArrowDataset:
        """This dataset with only the rows matching ``expression`` (and any earlier filter)."""
        combined = expression if self._filter is None else self._filter & expression
        return ColonnadeArrowDataset(self._dataset, self._snapshot, combined)

    def _scan(self, columns: list[str] | None, filter: pc.Expression | None) -> Scan:
        if self._filter is not None:
            filter = self._filter if filter is None else self._filter & filter
        return Scan(self._dataset, tuple(columns) if columns is not None else None, filter,
                    snapshot=self._snapshot, pruned=self._where)

    # -- the query's WHERE clauses
    def use_where(self, runner: ProbeRunner, where: DatasetWhere) -> None:
        """Prune every later scan with what ``where`` proves (decided now, before the query)."""
        ds, snapshot = self._dataset, self._snapshot
        schema = ds.schema_at(snapshot)
        # a conjunct DuckDB pushes itself is pruned on by the scan: only the rest is worth probing
        top = where.node.args if isinstance(where.node, And) else (where.node,)
        pushed = {id(p) for p in top if isinstance(p, Probe) and p.pushed}
        node = replace_probes(where.node, {id(p) for p in probes_of(where.node) if id(p) not in pushed})
        node, rejected = bind(runner, schema, node)
        self._rejected = list(where.rejected) + rejected
        self._notes = list(where.notes)
        if node is None or not probes_of(node):
            return

        def read_stats(partitions: list[str]) -> dict[str, dict[str, ChunkStats]]:
            return ds.segment_stats(snapshot, partitions)

        self._where = prune(runner, ds.spec_at(snapshot), schema, node, snapshot.segments, read_stats)

    def warnings(self, con: duckdb.DuckDBPyConnection) -> list[str]:
        """Why filters on this dataset were not used for pruning (after the query ran, on its
        connection). A filter DuckDB rewrites into one it pushes down (``CAST(ts AS DATE) = d``
        into a range of ``ts``) is not reported: each rejected filter is run alone against a
        stand-in for the dataset to see what DuckDB pushes for it."""
        if not self.scans:
            return []
        out = list(self._notes)
        for r in self._rejected:
            if not r.conjunct or not (r.columns & _pushed_columns(con, self._schema, r.alias, sql_text(con, r.conjunct))):
                out.append(r.message(sql_text(con, r.subject)))
        return out

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

    def count_rows(self, filter: pc.Expression | None = None, **kwargs: Any) -> int:
        if filter is None and self._filter is None:
            return self._snapshot.rows
        return self.scanner(columns=[], filter=filter).count_rows()

    def __repr__(self) -> str:
        return f"ColonnadeArrowDataset({self._dataset.name!r}, version={self.version})"


class _StandIn(_SafeDataset):
    """An empty dataset of a given schema that records the filters DuckDB pushes to it."""

    _label = "stand-in"

    def __init__(self, schema: pa.Schema) -> None:
        self._schema = schema
        self.filters: list[pc.Expression | None] = []

    @property
    def schema(self) -> pa.Schema:
        return self._schema

    def scanner(self, columns: list[str] | None = None, filter: pc.Expression | None = None,
                **kwargs: Any) -> LazyScanner:
        self.filters.append(filter)
        names = columns if columns is not None else self._schema.names
        return LazyScanner(pa.schema([self._schema.field(c) for c in names]), lambda: iter(()))


def _pushed_columns(con: duckdb.DuckDBPyConnection, schema: pa.Schema, alias: str, condition: str) -> set[str]:
    """Columns on which DuckDB pushes a predicate pruning can use, for ``WHERE condition`` alone."""
    stand_in = _StandIn(schema)
    name = "__colonnade_stand_in"
    con.register(name, stand_in)
    try:
        con.execute(f"SELECT count(*) FROM {name} AS {quoted(alias)} WHERE {condition}").fetchall()
    except Exception:  # noqa: BLE001 - e.g. it refers to other tables: then nothing is pushed
        return set()
    finally:
        con.unregister(name)
    return {c for f in stand_in.filters for c in columns_of(parse_expression(f))}


#: Connections that ran a statement which may define a view or a macro (CREATE, ATTACH, ...).
#: A view or macro can scan a dataset without the query naming it, so that a WHERE clause on the
#: one reference in the query would not hold for every scan: their queries are not analysed.
_MAY_HIDE_SCANS: weakref.WeakSet[Any] = weakref.WeakSet()
_HARMLESS = ("SELECT", "SET", "VARIABLE_SET", "TRANSACTION")


def use_where(con: duckdb.DuckDBPyConnection, query: str,
              adapters: dict[str, ColonnadeArrowDataset], may_hide_scans: bool | None = None) -> None:
    """Read ``query``'s WHERE clauses and let each registered dataset prune with them. Runs on
    the query's connection before the query (same settings: time zone, ...); whatever fails here
    only means less pruning. ``may_hide_scans`` says whether views or macros may exist in the
    query's database (by default: whether this connection ran a statement that may define one)."""
    try:
        kinds = statement_kinds(con, query)
    except Exception:  # noqa: BLE001 - a query DuckDB can't parse fails by itself
        return
    if may_hide_scans is None:
        if any(k not in _HARMLESS for k in kinds):
            _MAY_HIDE_SCANS.add(con)
        may_hide_scans = con in _MAY_HIDE_SCANS
    elif any(k not in _HARMLESS for k in kinds):
        may_hide_scans = True
    if may_hide_scans:
        for adapter in adapters.values():
            adapter._notes = ["filters were not analysed for pruning: this connection has run statements that "
                              "may define views or macros, which can read datasets the query does not name "
                              "(only what DuckDB pushes down is used)"]
        return
    try:
        found = read_where(con, query, {name: a.schema for name, a in adapters.items()})
        runner = ProbeRunner(con)
        for name, where in found.items():
            adapters[name].use_where(runner, where)
    except Exception:  # noqa: BLE001 - pruning is an optimisation: the query itself reports errors
        return


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
