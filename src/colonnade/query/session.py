"""DuckDB sessions of one store: one in-memory database, one cursor (connection) per thread.

Queries from several threads run at once: each thread has its own cursor on the store's
database (DuckDB runs cursors in parallel), and registers there the datasets its query reads,
so one thread's version pins never show in another's answers. Within a thread, statements share
one session (``SET``, temporary tables, variables carry over, as in a DuckDB shell); views and
macros live in the database, seen by every thread.

The names a query reads come from DuckDB's own parser (:func:`query_names`), with the names read
through the views and macros of the database once a statement may have defined some.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from colonnade.query.memo import Memo
from colonnade.query.where import dicts_of, parsed_sql

if TYPE_CHECKING:
    import duckdb

#: Statement types that define nothing a later query could read through.
HARMLESS = ("SELECT", "SET", "VARIABLE_SET", "TRANSACTION", "EXPLAIN", "PRAGMA")


class _Cursor:
    """A thread's cursor and the names registered on it."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self.registered: dict[str, Any] = {}  # name -> the object registered under it
        self.busy = False  # a streamed answer of this thread is open on it
        self.prepared: dict[str, str] = {}  # prepared sample queries: SQL text -> statement name


class Sessions:
    """The DuckDB database of one store and a cursor per thread on it."""

    def __init__(self) -> None:
        self._root: duckdb.DuckDBPyConnection | None = None
        self._lock = threading.Lock()
        self._local = threading.local()
        self._cursors: weakref.WeakSet[_Cursor] = weakref.WeakSet()
        #: a statement that may define views or macros ran: names are read through them too,
        #: and WHERE clauses are not used for pruning (see ``adapter.use_where``)
        self.may_hide_scans = False
        #: a statement that may change a setting ran (SET, PRAGMA...): answers computed outside
        #: the query's own cursor (from statistics, from partial rows) are not used, since
        #: settings can change an answer's types
        self.configured = False

    def _new_cursor(self) -> _Cursor:
        import duckdb

        with self._lock:
            if self._root is None:
                self._root = duckdb.connect()
            cursor = _Cursor(self._root.cursor())
            self._cursors.add(cursor)
        weakref.finalize(cursor, cursor.con.close)  # a thread that ends closes its cursor
        return cursor

    @contextmanager
    def cursor(self) -> Iterator[_Cursor]:
        """This thread's cursor (a fresh one, closed after, when the thread's own cursor holds a
        streamed answer still open)."""
        mine: _Cursor | None = getattr(self._local, "cursor", None)
        if mine is None or mine.con is None:
            mine = self._local.cursor = self._new_cursor()
        if mine.busy:
            extra = self._new_cursor()
            try:
                yield extra
            finally:
                extra.con.close()
            return
        mine.busy = True
        try:
            yield mine
        finally:
            mine.busy = False

    def noted(self, kinds: list[str]) -> None:
        """Remember that statements of these kinds ran (views or macros may exist from now on)."""
        if any(k not in HARMLESS for k in kinds):
            self.may_hide_scans = True
        if any(k not in ("SELECT", "EXPLAIN") for k in kinds):
            self.configured = True

    def close(self) -> None:
        with self._lock:
            for cursor in list(self._cursors):
                try:
                    cursor.con.close()
                except Exception:  # noqa: BLE001 - closing what may be closed already
                    pass
            if self._root is not None:
                self._root.close()
                self._root = None
        self._local = threading.local()


def table_names(con: duckdb.DuckDBPyConnection, query: str) -> set[str] | None:
    """The tables and views ``query`` names, unqualified (names of common table expressions
    too, when they are also table names somewhere: registering more than needed is harmless).

    DuckDB's own parser reads SELECT statements (``json_serialize_sql``: parsed, not bound);
    sqlglot's parser reads the others (``CREATE VIEW``, ``INSERT``...). None when neither can
    read the statement (the caller then registers everything)."""
    parsed = parsed_sql(con, query)
    if parsed is None:  # not serializable: sqlglot reads it
        return _sqlglot_names(query)
    names = set()
    for d in dicts_of(parsed["statements"]):
        if d.get("type") == "BASE_TABLE" and isinstance(d.get("table_name"), str):
            if _default_schema(str(d.get("catalog_name") or ""), str(d.get("schema_name") or "")):
                names.add(d["table_name"])
    return names


#: Names read by query texts already seen (a text always names the same tables).
_NAMES: Memo[str, frozenset[str] | None] = Memo()


def _cached_names(con: duckdb.DuckDBPyConnection, query: str) -> set[str] | None:
    def read() -> frozenset[str] | None:
        found = table_names(con, query)
        return None if found is None else frozenset(found)
    cached = _NAMES.get(query, read)
    return None if cached is None else set(cached)


def _default_schema(catalog: str, schema: str) -> bool:
    catalog, schema = catalog.lower(), schema.lower()
    return (not schema and not catalog) or (schema in ("main", "temp") and catalog in ("", "memory", "temp"))


def _sqlglot_names(query: str) -> set[str] | None:
    import sqlglot
    from sqlglot import exp

    try:
        trees = sqlglot.parse(query, read="duckdb")
    except sqlglot.errors.SqlglotError:
        return None
    names: set[str] = set()
    for tree in trees:
        if tree is None:
            continue
        for table in tree.find_all(exp.Table):
            if table.name and _default_schema(table.catalog, table.db):
                names.add(table.name)
    return names


def query_names(con: duckdb.DuckDBPyConnection, query: str, through_views: bool) -> set[str] | None:
    """The names ``query`` reads: what it names and, ``through_views``, what the views it
    names read, and what every macro of the database reads (a macro call is not a table
    name), transitively."""
    names = _cached_names(con, query)
    if names is None or not through_views:
        return names
    views = {str(n).lower(): str(sql) for n, sql in con.execute(
        "SELECT view_name, sql FROM duckdb_views() WHERE NOT internal").fetchall()}
    macros = [str(d) for (d,) in con.execute(
        "SELECT macro_definition FROM duckdb_functions() WHERE function_type IN ('macro', 'table_macro') "
        "AND NOT internal AND macro_definition IS NOT NULL").fetchall()]
    for body in macros:
        names |= table_names(con, body if body.lstrip().upper().startswith("SELECT") else f"SELECT {body}") or set()
    pending, seen = list(names), set()
    while pending:
        name = pending.pop().lower()
        if name in seen or name not in views:
            continue
        seen.add(name)
        more = table_names(con, views[name]) or set()
        names |= more
        pending.extend(more)
    return names


__all__ = ["HARMLESS", "Sessions", "query_names", "table_names"]
