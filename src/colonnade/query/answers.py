"""Answers worked out beside the query's DuckDB cursor, before a query is run the normal way:
aggregates that segment statistics decide exactly (:mod:`colonnade.query.stats_answers`), and
grouped aggregates computed per segment in the scan (:mod:`colonnade.query.grouped`).

Both are only tried when the name the query reads can only mean the dataset (no view,
temporary table or macro of the session may shadow it) and the session changed no setting
(answers take their types from a connection without the session's settings)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from colonnade.errors import DatasetNotFoundError
from colonnade.query.memo import Memo
from colonnade.query.stats_answers import StatsAnswers

if TYPE_CHECKING:
    from colonnade.store import Reads, Store
    from colonnade.table.commits import Snapshot
    from colonnade.table.dataset import Dataset


@dataclass
class Answer:
    """A query answered beside its cursor: the answer, the dataset it read, how it was worked
    out (for ``explain``: ``how`` then the SQL DuckDB ran, if any) and what the scan read."""

    table: pa.Table
    dataset: str
    how: str
    sql: str
    metrics: dict[str, Any]


class Answers:
    """The answers of one store's queries worked out beside their cursor, with their caches."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._stats = StatsAnswers()
        #: per query text, whether its partial-rows form answers it as written (DuckDB's parse
        #: and catalog decide, and they depend on the text alone: worked out once)
        self._faithful: Memo[str, bool] = Memo()

    def find(self, query: str, version: int | None, versions: dict[str, int] | None,
             reads: Reads | None = None) -> Answer | None:
        """The answer of ``query`` from statistics or partial aggregates; None when the query
        must run the normal way (``reads``: what the query read, see :meth:`Store._read`)."""
        found = self.from_stats(query, version, versions, reads)
        return found if found is not None else self.grouped(query, version, versions, reads)

    def from_stats(self, query: str, version: int | None, versions: dict[str, int] | None,
                   reads: Reads | None = None) -> Answer | None:
        """The answer of ``query`` from segment statistics, if it is an aggregate query they
        decide exactly; None otherwise (nothing is read)."""
        plan = self._stats.plan(query)
        found = None if plan is None else self._pinned(plan.table, version, versions, reads)
        if plan is None or found is None:
            return None
        with self._store._sessions.cursor() as cursor:
            answered = self._stats.answer(cursor.con, query, plan, *found)
        if answered is None:
            return None
        return Answer(answered.table, answered.dataset, "answered from segment statistics, as",
                      answered.sql, answered.metrics)

    def grouped(self, query: str, version: int | None, versions: dict[str, int] | None,
                reads: Reads | None = None) -> Answer | None:
        """The answer of ``query`` through partial aggregates of each segment, if it is a
        grouped query they answer; None otherwise. A scan's error is raised as it is."""
        plan = self._stats.grouped(query)
        found = None if plan is None else self._pinned(plan.table, version, versions, reads)
        if plan is None or found is None:
            return None
        ds, snapshot, seen = found
        from colonnade.query import grouped

        if grouped.stored_columns(plan, seen) is None:
            return None
        with self._store._sessions.cursor() as cursor:
            if not self._faithful.get(query, lambda: grouped.only_merged_aggregates(cursor.con, query)
                                      and grouped.faithful(cursor.con, query, plan)):
                return None
            out_schema = self._stats.answer_schema(query, plan.table, seen)
            answered = None if out_schema is None else grouped.answer(cursor.con, plan, ds, snapshot, seen, out_schema)
        if answered is None:
            return None
        return Answer(answered.table, answered.dataset, "each segment aggregated in the scan, then",
                      answered.sql, answered.metrics)

    def _pinned(self, table: str, version: int | None, versions: dict[str, int] | None,
                reads: Reads | None) -> tuple[Dataset, Snapshot, pa.Schema] | None:
        """The dataset a query names as ``table``, its pinned snapshot and the schema scans of it
        yield; None when the name may mean something else or no dataset has it."""
        store = self._store
        if store._sessions.may_hide_scans or store._sessions.configured:
            return None
        stored = store._sql_datasets(False).get(table.lower())
        if stored is None:
            stored = store._sql_datasets(True).get(table.lower())
        if stored is None:
            return None
        pins = {store.resolve(name): v for name, v in (versions or {}).items()}
        try:
            ds, snapshot = store._read(stored, pins.get(stored, version), reads)
        except DatasetNotFoundError:  # dropped since the listing kept: the query says so
            store._listed = None
            return None
        return ds, snapshot, ds.read_schema_at(snapshot)
