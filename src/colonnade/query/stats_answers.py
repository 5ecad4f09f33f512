"""Answers from segment statistics: the queries :mod:`colonnade.query.rewrite` recognises,
answered without reading a chunk when the statistics are exact.

Exactness, from how :mod:`colonnade.encoding.chunk` computes them:

* ``count(*)``: segment rows, from the commit log: exact;
* ``count(col)``: rows − nulls (Arrow's null count; NaN is a value, as in SQL): exact; a segment
  written before the column existed counts no value;
* ``min``/``max``: exact for integers, booleans, dates and timestamps. Strings: kept only up to
  256 characters (longer: unknown), and a dictionary-stored chunk's bounds come from its
  dictionary, which may hold values no row has: only plain chunks count. Floats: a chunk with
  NaN or ±inf keeps none, and -0.0/0.0 may differ in sign: not used when a bound is 0. Other
  types (decimals, binary, times, nested) keep none. A chunk of nulls only adds nothing.

Any aggregate that isn't exact sends the query the normal way. What is immutable is cached:
the analysis by query text, the answer's schema by text and dataset schema, the aggregated
values by dataset, version and text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from colonnade.query.memo import Memo
from colonnade.query.metadata import typed_values
from colonnade.query.rewrite import StatsQuery, analyse, rewrite, where_sql
from colonnade.sqlnames import quoted

if TYPE_CHECKING:
    import duckdb

    from colonnade.encoding.chunk import ChunkStats
    from colonnade.query.grouped import GroupedQuery
    from colonnade.table.commits import Snapshot
    from colonnade.table.dataset import Dataset



def exact_bounds(type_: pa.DataType, st: ChunkStats) -> bool:
    """Whether a chunk's min and max are the least and greatest values of its rows."""
    if st.min is None or st.max is None:
        return False
    if (pa.types.is_integer(type_) or pa.types.is_boolean(type_) or pa.types.is_date32(type_)
            or pa.types.is_timestamp(type_)):
        return True
    if pa.types.is_string(type_) or pa.types.is_large_string(type_):
        return not st.dictionary
    if pa.types.is_floating(type_):
        return st.min != 0 and st.max != 0
    return False


@dataclass
class Answered:
    """A query answered from statistics: the answer, the rewritten SQL, what a scan would
    have been (for ``explain``: nothing is read)."""

    table: pa.Table
    dataset: str
    plan: StatsQuery
    metrics: dict[str, Any] = field(default_factory=dict)

    @property
    def sql(self) -> str:
        """The rewritten query (rendered on demand: only ``explain`` shows it)."""
        literals = [_literal(self.table.column(i)[0]) for i in range(self.table.num_columns)]
        return rewrite(self.plan, self.table.column_names, literals)


def aggregate_values(ds: Dataset, snapshot: Snapshot, query: StatsQuery, partitions: set[str] | None,
                     columns: dict[str, str]) -> list[Any] | None:
    """The aggregates' values over the partitions kept (all if None), or None if a statistic
    isn't exact. ``columns`` maps names as written to stored column names."""
    schema = ds.schema_at(snapshot)
    segments = [s for s in snapshot.segments if partitions is None or s.partition in partitions]
    need_stats = any(a.kind != "count_star" for a in query.aggregates)
    stats = ds.segment_stats(snapshot, {s.partition for s in segments}) if need_stats and segments else {}
    out: list[Any] = []
    for a in query.aggregates:
        if a.kind == "count_star":
            out.append(sum(s.rows for s in segments))
            continue
        name = columns[a.column or ""]
        type_ = schema.field(name).type
        total, best = 0, None
        for s in segments:
            per = stats.get(s.segment)
            if per is None:
                return None  # the index row is missing: let the scan report it
            st = per.get(name)
            if st is None or st.nulls >= st.rows:
                continue  # no value in this segment
            total += st.rows - st.nulls
            if a.kind == "count":
                continue
            if not exact_bounds(type_, st):
                return None
            v = st.min if a.kind == "min" else st.max
            if best is None or (v < best if a.kind == "min" else v > best):
                best = v
        out.append(total if a.kind == "count" else best)
    return out


class StatsAnswers:
    """Answers from statistics for one store, with the caches described above."""

    def __init__(self) -> None:
        self._plans: Memo[str, StatsQuery | None] = Memo()
        self._schemas: Memo[tuple[str, str], pa.Schema] = Memo()
        self._values: Memo[tuple[Any, ...], tuple[list[Any] | None, set[str] | None]] = Memo()
        self._grouped: Memo[str, GroupedQuery | None] = Memo()

    def plan(self, query: str) -> StatsQuery | None:
        return self._plans.get(query, lambda: analyse(query))

    def grouped(self, query: str) -> GroupedQuery | None:
        """The grouped query ``query`` is (see :mod:`colonnade.query.grouped`), or None."""
        def analysed() -> GroupedQuery | None:
            from colonnade.query.grouped import analyse as analyse_grouped

            return analyse_grouped(query)
        return self._grouped.get(query, analysed)

    def answer(self, con: duckdb.DuckDBPyConnection, query: str, plan: StatsQuery, ds: Dataset,
               snapshot: Snapshot, read_schema: pa.Schema) -> Answered | None:
        """The answer of ``query`` (recognised as ``plan``) over ``snapshot``, or None."""
        schema = ds.schema_at(snapshot)
        by_lower = {n.lower(): n for n in schema.names}
        written = {a.column for a in plan.aggregates if a.column} | set(plan.where_columns)
        if any(c.lower() not in by_lower for c in written):
            return None
        columns = {c: by_lower[c.lower()] for c in written}
        spec = ds.spec_at(snapshot)
        identity = {t.source for t in spec.partition_by if t.name == "identity"}
        sources = {t.source for t in spec.partition_by if len(t.sources) == 1}
        if any(columns[c] not in sources for c in plan.where_columns):
            return None
        def computed() -> tuple[list[Any] | None, set[str] | None]:
            decided: set[str] | bool | None = None  # None: no WHERE; False: not decided exactly
            if plan.where is not None and all(columns[c] in identity for c in plan.where_columns):
                decided = self._partitions(con, plan, ds, snapshot, columns)
            elif plan.where is not None:
                decided = _decided_partitions(plan, ds, snapshot)
            if decided is False:
                return None, None
            chosen = decided if isinstance(decided, set) else None
            return aggregate_values(ds, snapshot, plan, chosen, columns), chosen
        values, partitions = self._values.get((ds.name, id(ds), snapshot.version, query), computed)
        if values is None:
            return None
        out_schema = self.answer_schema(query, plan.table, read_schema)
        if out_schema is None:
            return None  # DuckDB fails on it: the query run the normal way says why
        arrays = []
        for a, v, f in zip(plan.aggregates, values, out_schema, strict=True):
            if a.kind in ("count", "count_star"):
                arrays.append(pa.array([v], pa.int64()).cast(f.type))
            else:
                typed = typed_values([v], schema.field(columns[a.column or ""]).type)
                arrays.append(typed.cast(f.type))
        table = pa.Table.from_arrays(arrays, schema=out_schema)
        kept = [s for s in snapshot.segments if partitions is None or s.partition in partitions]
        metrics = {"partitions_total": len({s.partition for s in snapshot.segments}),
                   "partitions_scanned": len({s.partition for s in kept}),
                   "segments_total": len(snapshot.segments), "segments_scanned": 0, "segments_read": 0,
                   "chunks_read": 0, "bytes_read": 0, "rows_scanned": 0, "answered_from": "statistics",
                   "columns": sorted({columns[c] for c in written}), "filter": where_sql(plan)}
        return Answered(table, ds.name, plan, metrics)

    def answer_schema(self, query: str, table: str, read_schema: pa.Schema) -> pa.Schema | None:
        """DuckDB's own answer schema (names, types): the query run once over an empty table of
        the dataset's schema, registered as ``table``; None if DuckDB fails to run it."""
        import duckdb

        def run() -> pa.Schema:
            con = duckdb.connect()
            try:
                con.register(table, read_schema.empty_table())
                return con.sql(query).to_arrow_table().schema
            finally:
                con.close()
        try:
            return self._schemas.get((query, str(read_schema)), run)
        except duckdb.Error:
            return None  # not kept: the query run the normal way says why

    def _partitions(self, con: duckdb.DuckDBPyConnection, plan: StatsQuery, ds: Dataset,
                    snapshot: Snapshot, columns: dict[str, str]) -> set[str]:
        """The partitions whose rows all satisfy the WHERE (the others have none that do): the
        predicate evaluated by DuckDB on each partition's values."""
        schema = ds.schema_at(snapshot)
        positions = {t.source: i for i, t in enumerate(ds.spec_at(snapshot).partition_by) if t.name == "identity"}
        first: dict[str, tuple[Any, ...]] = {}
        for s in snapshot.segments:
            first.setdefault(s.partition, s.values)
        names = list(first)
        if not names:
            return set()
        data = {written: typed_values([first[p][positions[stored]] for p in names], schema.field(stored).type)
                for written, stored in columns.items() if written in plan.where_columns}
        table = pa.table(data)
        name = "__colonnade_partitions"
        con.register(name, table)
        try:
            sql = f"SELECT coalesce(({where_sql(plan)}), false) FROM {name} AS {quoted(plan.alias)}"
            kept = [bool(r[0]) for r in con.execute(sql).fetchall()]
        finally:
            con.unregister(name)
        return {p for p, k in zip(names, kept, strict=True) if k}


def _decided_partitions(plan: StatsQuery, ds: Dataset, snapshot: Snapshot) -> set[str] | bool:
    """The partitions whose rows all satisfy a WHERE on partition source columns, when the
    transforms decide every partition exactly (each one's source range is wholly in or wholly
    out, e.g. ``day(ts)`` partitions and ``ts >= '2024-03-01'``); False when one is only partly
    in (then the query is read)."""
    from sqlglot import exp

    from colonnade.errors import PredicateError
    from colonnade.table.predicate import Predicate

    assert plan.where is not None
    unqualified = plan.where.copy().transform(
        lambda n: exp.column(n.name, quoted=True) if isinstance(n, exp.Column) else n)
    spec = ds.spec_at(snapshot)
    values: dict[str, tuple[Any, ...]] = {}
    for s in snapshot.segments:
        values.setdefault(s.partition, s.values)
    try:
        with Predicate(ds.name, unqualified.sql(dialect="duckdb"), ds.schema_at(snapshot)) as predicate:
            kept = set()
            for partition, v in values.items():
                if predicate.all_match_partition(spec, v):
                    kept.add(partition)
                elif predicate.may_match_partition(spec, v):
                    return False  # some rows of it may match and others not
            return kept
    except PredicateError:
        return False


def _literal(scalar: pa.Scalar) -> str:
    from colonnade.query.probes import duck_type

    type_ = scalar.type
    name = duck_type(type_) or ("BIGINT" if pa.types.is_int64(type_) else str(type_).upper())
    if not scalar.is_valid:
        return f"CAST(NULL AS {name})"
    v = scalar.as_py()
    if pa.types.is_string(type_) or pa.types.is_large_string(type_) or pa.types.is_date(type_) or \
            pa.types.is_timestamp(type_):
        text = "'" + str(v).replace("'", "''") + "'"
    else:
        text = repr(v) if not isinstance(v, bool) else str(v).upper()
    return f"CAST({text} AS {name})"
