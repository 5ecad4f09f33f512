"""Stratified samples as a store offers them, and the queries they answer (``WITH ERROR``).

``Store.create_sample`` builds a sample of a dataset stratified on a query column set (see
:mod:`colonnade.table.sample` for how it is kept current). A query ending in
``WITH ERROR e [CONFIDENCE c] [BEHAVIOR 'b']`` runs on the best sample of the dataset it reads,
at the version it reads: the sample whose column set equals the query's (the columns of its
WHERE, GROUP BY and HAVING), else one whose set holds the query's, else the one sharing most
columns with it (ties: the larger sample); with none, or a query a sample cannot answer, it runs
exactly on the dataset, and ``explain`` says why. :mod:`colonnade.query.estimates` rewrites the
query into its estimates and error bounds and applies the behavior.

SQL spellings, as SnappyData's: ``CREATE SAMPLE TABLE name ON dataset OPTIONS (qcs 'a,b',
fraction '0.03' [, strataReservoirSize '50'])`` and ``DROP SAMPLE TABLE [IF EXISTS] name``.
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from colonnade.errors import (
    ColonnadeError,
    DatasetNotFoundError,
    QueryError,
    SchemaError,
)
from colonnade.sqlnames import quoted
from colonnade.table.dataset import Dataset
from colonnade.table.sample import (
    SampleState,
    catch_up,
    create_sample,
    drop_sample,
    sample_names,
    sample_settings,
    state_of,
    txn_id,
)

if TYPE_CHECKING:
    from colonnade.query.error_clause import ErrorClause
    from colonnade.query.estimates import Approximable, SampleQuery
    from colonnade.store import Store
    from colonnade.table.commits import Snapshot

_CREATE = re.compile(r"(?is)^\s*create\s+sample\s+table\s+(?P<name>\w+)(?:\s+on\s+(?P<base>\w+))?"
                     r"\s+options\s*\((?P<options>.*)\)\s*;?\s*$")
_DROP = re.compile(r"(?is)^\s*drop\s+sample\s+table\s+(?P<exists>if\s+exists\s+)?(?P<name>\w+)\s*;?\s*$")
_OPTION = re.compile(r"(?s)\s*(\w+)\s+'((?:[^']|'')*)'\s*(?:,|$)")


@dataclass(frozen=True)
class SampleInfo:
    """A sample as listed: its settings, the base version it represents, rows and strata."""

    name: str
    dataset: str
    on: tuple[str, ...]
    fraction: float
    min_per_stratum: int
    base_version: int
    rows: int
    strata: int
    version: int

    @classmethod
    def of(cls, state: SampleState) -> SampleInfo:
        s = state.settings
        return cls(state.name, s.base, s.on, s.fraction, s.min_per_stratum, state.base_version,
                   state.rows, int((state.strata.population > 0).sum()),
                   state.snapshot.version)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dataset": self.dataset, "on": list(self.on),
                "fraction": self.fraction, "min_per_stratum": self.min_per_stratum,
                "base_version": self.base_version, "rows": self.rows, "strata": self.strata,
                "version": self.version}


def default_name(dataset: str, on: Sequence[str]) -> str:
    words = [re.sub(r"\W", "_", c) for c in on]
    return f"{dataset}_by_{'_'.join(words)}"[:128]


def create(store: Store, dataset: str, on: Sequence[str] | str, fraction: float,
           name: str | None = None, min_per_stratum: int = 50, seed: int | None = None) -> SampleInfo:
    from colonnade.store import _check_name

    base = store.dataset(dataset)
    columns = [c.strip() for c in on.split(",")] if isinstance(on, str) else list(on)
    schema = base.schema_at(base.snapshot())
    by_lower = {n.lower(): n for n in schema.names}
    columns = [by_lower.get(c.lower(), c) for c in columns]
    name = name or default_name(base.name, columns)
    _check_name(name)
    if name in store:
        raise SchemaError(f"dataset {name!r} already exists: name the sample with --name")
    return SampleInfo.of(create_sample(base, name, columns, fraction, min_per_stratum, seed))


def samples(store: Store, dataset: str | None = None) -> list[SampleInfo]:
    """The samples of ``dataset`` (of every dataset by default), each as of its latest version."""
    names = [store.resolve(dataset)] if dataset is not None else store.datasets()
    out = []
    for base_name in names:
        base = store.dataset(base_name)
        for name in sample_names(base.snapshot()):
            try:
                sample = store.dataset(name)
            except DatasetNotFoundError:
                continue
            out.append(SampleInfo.of(state_of(sample, sample.snapshot())))
    return out


def drop(store: Store, name: str, if_exists: bool = False) -> bool:
    """Drop sample ``name``; False if there was none (with ``if_exists``)."""
    try:
        sample = store.dataset(name)
    except DatasetNotFoundError:
        if if_exists:
            return False
        raise
    settings = sample_settings(sample.snapshot())
    if settings is None:
        raise SchemaError(f"dataset {sample.name!r} is not a sample: drop it with drop_dataset")
    try:
        drop_sample(store.dataset(settings.base), sample.name)
    except DatasetNotFoundError:  # its base is gone, or no longer lists it
        store.drop_dataset(sample.name)
    return True


# -- SQL ----------------------------------------------------------------------------------------
def statement(store: Store, query: str) -> pa.Table | None:
    """Run ``CREATE SAMPLE TABLE`` / ``DROP SAMPLE TABLE``; None for any other statement."""
    found = _CREATE.match(query)
    if found:
        options = _options(found.group("options"))
        base = found.group("base") or options.pop("basetable", None)
        if base is None:
            raise QueryError("CREATE SAMPLE TABLE needs the dataset it samples: ON dataset")
        if "qcs" not in options or "fraction" not in options:
            raise QueryError("CREATE SAMPLE TABLE needs OPTIONS (qcs 'columns', fraction 'f')")
        unknown = sorted(set(options) - {"qcs", "fraction", "stratareservoirsize"})
        if unknown:
            raise QueryError(f"unknown sample option {unknown[0]!r}: qcs, fraction, strataReservoirSize")
        try:
            fraction = float(options["fraction"])
            keep = int(options.get("stratareservoirsize", "50"))
        except ValueError as exc:
            raise QueryError(f"bad sample option: {exc}") from None
        info = create(store, base, options["qcs"], fraction, found.group("name"), keep)
        return pa.table({"sample": [info.name], "rows": [info.rows], "strata": [info.strata]})
    found = _DROP.match(query)
    if found:
        dropped = drop(store, found.group("name"), if_exists=bool(found.group("exists")))
        return pa.table({"dropped": [found.group("name") if dropped else None]})
    if re.match(r"(?is)^\s*(create|drop)\s+sample\s+table\b", query):
        raise QueryError("expected CREATE SAMPLE TABLE name ON dataset OPTIONS (qcs '...', "
                         "fraction '...') or DROP SAMPLE TABLE [IF EXISTS] name")
    return None


def _options(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    position = 0
    text = text.strip()
    while position < len(text):
        found = _OPTION.match(text, position)
        if not found:
            raise QueryError(f"bad sample options near {text[position:position + 30]!r}: "
                             "expected name 'value', ...")
        out[found.group(1).lower()] = found.group(2).replace("''", "'")
        position = found.end()
    return out


@dataclass(frozen=True)
class Approximate:
    """How a ``WITH ERROR`` query was answered: the answer, the sample (None: run exactly on the
    dataset, ``reason`` says why) and the SQL that ran."""

    table: pa.Table
    sample: SampleInfo | None
    reason: str
    sql: str


#: What a query asks (analysed once per text) and its rewrite per clause and sample columns:
#: both are pure functions of their keys.
_ANALYSED: dict[str, Approximable | str] = {}
_REWRITTEN: dict[tuple[str, ErrorClause, tuple[str, ...], tuple[Any, ...]], SampleQuery] = {}
#: count queries answered from strata sizes: (query, sample columns) -> SQL on the strata
_COUNTED: dict[tuple[str, tuple[str, ...]], str] = {}


def _remember(cache: dict[Any, Any], key: Any, value: Any) -> None:
    """Keep ``value``, forgetting the oldest entry of a full cache (threads may race: a lost
    entry is computed again)."""
    with contextlib.suppress(KeyError, RuntimeError, StopIteration):
        while len(cache) >= 512:
            cache.pop(next(iter(cache)))
    cache[key] = value


def answer(store: Store, query: str, version: int | None = None,
           versions: dict[str, int] | None = None) -> Approximate | None:
    """Answer a query that ends in ``WITH ERROR`` (None for any other query)."""
    from colonnade.query.error_clause import split_error_clause
    from colonnade.query.estimates import analyse, apply_behavior, exact_sql, sample_sql

    head, clause = split_error_clause(query)
    if clause is None:
        return None
    found = _ANALYSED.get(head)
    if found is None:
        found = analyse(head)
        _remember(_ANALYSED, head, found)
    if isinstance(found, str):
        return _exact(store, head, version, versions, found)
    q = found
    # the base and its samples are read as SQL reads datasets: the objects kept by the store,
    # followed on from the versions read last (one log read each, no catalog read)
    listed = store._sql_datasets(False).get(q.table.lower()) or store._sql_datasets(True).get(q.table.lower())
    try:
        if listed is None:
            raise DatasetNotFoundError(q.table)
        base, newest = store._read(listed, None)
    except DatasetNotFoundError:
        store._listed = None
        return _exact(store, head, version, versions, f"{q.table!r} is not a dataset")
    pins = {store.resolve(n): v for n, v in (versions or {}).items()}
    at = pins.get(base.name, version)
    chosen, reason = choose(store, base, q, at, newest)
    if chosen is None:
        return _exact(store, exact_sql(q), version, versions, reason)
    counted = _counts_from_strata(store, q, head, chosen)
    if counted is not None:
        return Approximate(counted[0], SampleInfo.of(chosen), f"{reason}; the counts are its "
                           "strata's sizes (exact)", counted[1])
    sample = store._known(chosen.name)
    summarised = _summary_columns(sample.schema_at(chosen.snapshot))
    key = (head, clause, chosen.settings.on, tuple(summarised.items()))
    sq = _REWRITTEN.get(key)
    if sq is None:
        sq = sample_sql(q, clause, "__colonnade_sample", "__colonnade_strata",
                        stratified_on=chosen.settings.on, summary=("__colonnade_summary", summarised))
        _remember(_REWRITTEN, key, sq)
    table = _run(store, sample, chosen, sq.sql)
    result = apply_behavior(table, sq, clause, lambda sql: store.sql(sql, version, versions))
    return Approximate(result, SampleInfo.of(chosen), reason, sq.sql)


_ERROR_FUNCTIONS = re.compile(r"(?i)\b(absolute_error|relative_error|lower_bound|upper_bound)\s*\(")


def _counts_from_strata(store: Store, q: Approximable, head: str,
                        state: SampleState) -> tuple[pa.Table, str] | None:
    """The answer of a query whose aggregates are all ``count(*)`` and whose WHERE, GROUP BY and
    HAVING read only the sample's columns, from the sizes of its strata (exact: each stratum's
    rows all pass or all fail), with the SQL that gave it; None for any other query (and for one
    asking for error functions, which the sample's answer gives)."""
    import duckdb
    import sqlglot
    from sqlglot import exp

    from colonnade.query.estimates import exact_sql
    from colonnade.store import _one_line

    on = {c.lower() for c in state.settings.on}
    if (any(a.kind != "count_star" for a in q.aggregates) or not q.columns <= on
            or _ERROR_FUNCTIONS.search(head)):
        return None
    sql = _COUNTED.get((head, state.settings.on))
    if sql is None:
        tree = sqlglot.parse_one(exact_sql(q), read="duckdb")

        def counted(node: exp.Expression) -> exp.Expression:
            if isinstance(node, exp.Count) and isinstance(node.this, exp.Star):
                return exp.cast(exp.func("sum", exp.column("__pop_n")), exp.DataType.build("BIGINT"))
            if isinstance(node, exp.Table):
                node.set("this", exp.to_identifier("__colonnade_strata_values"))
                node.set("db", None)
                node.set("catalog", None)
            return node

        sql = tree.transform(counted).sql(dialect="duckdb")
        _remember(_COUNTED, (head, state.settings.on), sql)
    with store._sessions.cursor() as cursor:
        con = cursor.con
        con.register("__colonnade_strata_values", _strata_values(store, state))
        try:
            return con.sql(sql).to_arrow_table(), sql
        except duckdb.Error as exc:
            raise QueryError(_one_line(exc)) from None
        finally:
            con.unregister("__colonnade_strata_values")


def _strata_values(store: Store, state: SampleState) -> pa.Table:
    """The key values and population of every stratum with rows (one table per sample state
    kept by this store object)."""
    kept = store._sample_values.get(state.name)
    if kept is not None and kept[0] is state:
        return kept[1]
    schema = store._known(state.name).schema_at(state.snapshot)
    present = [i for i, v in enumerate(state.strata.values)
               if v is not None and state.strata.population[i] > 0]
    columns = {name: pa.array([state.strata.values[i][j] for i in present],  # type: ignore[index]
                              schema.field(name).type) for j, name in enumerate(state.settings.on)}
    columns["__pop_n"] = pa.array(state.strata.population[present], pa.int64())
    table = pa.table(columns)
    store._sample_values[state.name] = (state, table)
    return table


def _run(store: Store, sample: Dataset, state: SampleState, sql: str) -> pa.Table:
    """Run the sample query ``sql`` (reading ``__colonnade_sample``, the live rows, and
    ``__colonnade_strata``) on this thread's cursor, as a prepared statement kept per cursor:
    a query asked again of the same sample version is not planned again (planning the estimator
    query takes longer than running it)."""
    import duckdb

    from colonnade.store import _one_line

    with store._sessions.cursor() as cursor:
        con = cursor.con
        live, strata, summary = _materialized(store, con, sample, state)
        text = sql.replace("__colonnade_sample", live).replace("__colonnade_strata", strata) \
            .replace("__colonnade_summary", summary)
        prepared = cursor.prepared
        try:
            name = prepared.get(text)
            if name is None:
                if len(prepared) >= PREPARED_KEPT:
                    con.execute(f"DEALLOCATE {prepared.pop(next(iter(prepared)))}")
                name = f"__colonnade_q{next(_PREPARED_IDS)}"
                con.execute(f"PREPARE {name} AS {text}")
                prepared[text] = name
            return con.sql(f"EXECUTE {name}").to_arrow_table()
        except duckdb.Error as exc:
            raise QueryError(_one_line(exc)) from None


#: Prepared sample queries kept per cursor.
PREPARED_KEPT = 64
_PREPARED_IDS = itertools.count()


def _summary_columns(schema: pa.Schema) -> dict[str, tuple[int, bool]]:
    """The columns of a sample's summary per stratum: lower-cased name -> (index, numeric)."""
    from colonnade.table.sample import KEY_COLUMN, STRATUM_COLUMN

    return {f.name.lower(): (i, pa.types.is_integer(f.type) or pa.types.is_floating(f.type)
                             or pa.types.is_decimal(f.type))
            for i, f in enumerate(schema) if f.name not in (KEY_COLUMN, STRATUM_COLUMN)}


def _summary_sql(source: str, state: SampleState, schema: pa.Schema) -> str:
    """The summary per stratum of the live rows ``source`` (see
    :func:`~colonnade.query.estimate_sql.estimator_ctes`)."""
    on = [quoted(c) for c in state.settings.on]
    items = ["count(*) AS __m"]
    for i, numeric in _summary_columns(schema).values():
        column = quoted(schema.field(i).name)
        items.append(f"count({column}) AS __n{i}")
        if numeric:
            value = f"CAST({column} AS DOUBLE)"
            items += [f"coalesce(sum({value}), 0) AS __s{i}", f"coalesce(sum(pow({value}, 2)), 0) AS __ss{i}"]
    return (f"SELECT __stratum, {', '.join(on)}, {', '.join(items)} FROM {source} "
            f"GROUP BY __stratum, {', '.join(on)}")


def _materialized(store: Store, con: Any, sample: Dataset, state: SampleState) -> tuple[str, str, str]:
    """DuckDB tables holding the sample's live rows, its strata and its summary per stratum as
    of ``state``: made once per sample version by this store object (the sample is small;
    queries then read DuckDB's own columns instead of decoding chunks and testing keys each
    time). Named by version, so a query of one version never reads another's; the two newest
    versions are kept (a query of the one before may still be running)."""
    made = store._live_tables
    with store._live_lock:
        tags = made.setdefault(state.name, [])
        for version, tag in tags:
            if version == state.snapshot.version:
                return _table_names(tag)
        # a name never used before: no statement prepared on an older table can match it
        tag = f"{state.name}_{state.snapshot.version}_{next(_PREPARED_IDS)}"
        live, strata, summary = _table_names(tag)
        adapter = _live_sample(sample, state)
        con.register("__colonnade_sample_rows", adapter)
        con.register("__colonnade_strata_rows", _strata_table(store, state))
        try:
            con.execute(f"CREATE OR REPLACE TABLE {live} AS SELECT * FROM __colonnade_sample_rows")
            con.execute(f"CREATE OR REPLACE TABLE {strata} AS SELECT * FROM __colonnade_strata_rows")
            con.execute(f"CREATE OR REPLACE TABLE {summary} AS "
                        + _summary_sql(live, state, sample.schema_at(state.snapshot)))
        except Exception:
            if adapter.errors:
                raise adapter.errors[0] from None
            raise
        finally:
            con.unregister("__colonnade_sample_rows")
            con.unregister("__colonnade_strata_rows")
        tags.append((state.snapshot.version, tag))
        while len(tags) > 2:
            _, old = tags.pop(0)
            for table in _table_names(old):
                con.execute(f"DROP TABLE IF EXISTS {table}")
    return live, strata, summary


def _table_names(tag: str) -> tuple[str, str, str]:
    return f'"__colonnade_live_{tag}"', f'"__colonnade_strata_{tag}"', f'"__colonnade_summary_{tag}"'


def _live_sample(sample: Dataset, state: SampleState) -> Any:
    """The sample's live rows (key at most their stratum's threshold) as DuckDB reads a
    dataset, without the key column: the threshold test is applied to each batch as it is
    read (a join with the strata would cost DuckDB more than the query itself)."""
    from colonnade.query.adapter import ColonnadeArrowDataset, LazyScanner
    from colonnade.table.sample import KEY_COLUMN, STRATUM_COLUMN

    thresholds = state.strata.threshold

    class LiveSample(ColonnadeArrowDataset):
        @property
        def schema(self) -> pa.Schema:
            full = super().schema
            return full.remove(full.get_field_index(KEY_COLUMN))

        def scanner(self, columns: list[str] | None = None, filter: Any = None,
                    **kwargs: Any) -> LazyScanner:
            wanted = list(columns) if columns is not None else list(self.schema.names)
            read = [*wanted, *(c for c in (STRATUM_COLUMN, KEY_COLUMN) if c not in wanted)]
            inner = super().scanner(read, filter)
            schema = pa.schema([inner.projected_schema.field(c) for c in wanted])

            def batches() -> Any:
                for batch in inner.to_batches():
                    ids = batch.column(STRATUM_COLUMN).to_numpy()
                    live = batch.column(KEY_COLUMN).to_numpy() <= thresholds[ids]
                    yield batch.filter(pa.array(live)).select(wanted)

            return LazyScanner(schema, batches)

        def count_rows(self, filter: Any = None, **kwargs: Any) -> int:
            if filter is None:  # DuckDB asks while planning: the strata know it
                return state.rows
            return int(sum(b.num_rows for b in self.scanner([STRATUM_COLUMN], filter).to_batches()))

    return LiveSample(sample, state.snapshot)


def _exact(store: Store, sql: str, version: int | None, versions: dict[str, int] | None,
           reason: str) -> Approximate:
    """Run a ``WITH ERROR`` query exactly: its error functions are 0 (absolute and relative
    errors) or NULL (bounds), as SnappyData answers them on a base table."""
    from colonnade.query.estimates import analyse, exact_sql

    found = analyse(sql)
    text = exact_sql(found) if not isinstance(found, str) else _without_error_functions(sql)
    return Approximate(store.sql(text, version, versions), None, reason, text)


def _without_error_functions(sql: str) -> str:
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except sqlglot.errors.SqlglotError:
        return sql  # DuckDB says what is wrong with it

    def replace(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Anonymous):
            name = node.name.lower()
            if name in ("absolute_error", "relative_error"):
                return exp.Literal.number(0)
            if name in ("lower_bound", "upper_bound"):
                return exp.Cast(this=exp.Null(), to=exp.DataType.build("DOUBLE"))
        return node

    return tree.transform(replace).sql(dialect="duckdb")


def choose(store: Store, base: Dataset, q: Approximable, version: int | None,
           newest: Snapshot | None = None) -> tuple[SampleState | None, str]:
    """The sample to answer ``q`` at base ``version`` (latest if None), and why; or None and
    why none (``newest``: the base's latest snapshot, if read already)."""
    wanted = {c.lower() for c in q.columns}
    newest = base.snapshot() if newest is None else newest
    target = newest if version is None else base.snapshot(version)
    latest = target.version == newest.version
    candidates: list[tuple[tuple[int, int, int], SampleState]] = []
    why: list[str] = []
    for name in sample_names(newest if latest else target):
        try:
            sample, read = store._read(name, None)
            state = _state(store, sample, read)
            if state.base_version < target.version and latest:
                state = catch_up(base, sample)  # a commit whose maintenance failed
            found = state if state.base_version == target.version else \
                _at_base_version(sample, state, target.version)
        except ColonnadeError as exc:
            why.append(f"sample {name} can't be read: {exc}")
            continue
        if found is None:
            why.append(f"sample {name} has no version for version {target.version} of {base.name}")
            continue
        state = found
        on = {c.lower() for c in state.settings.on}
        rank = 2 if on == wanted else 1 if on >= wanted else 0
        overlap = len(on & wanted)
        if rank == 0 and overlap == 0 and wanted:
            why.append(f"sample {name} shares no column with the query's {sorted(wanted)}")
            continue
        candidates.append(((rank, overlap, state.rows), state))
    if not candidates:
        return None, "; ".join(why) or f"{base.name} has no sample"
    (rank, _, _), best = max(candidates, key=lambda c: c[0])
    how = ("its columns are the query's" if rank == 2 else "its columns hold the query's"
           if rank == 1 else "it shares most columns with the query")
    return best, f"sample {best.name}: {how}"


def _state(store: Store, sample: Dataset, snapshot: Snapshot | None = None) -> SampleState:
    """The sample's latest state (``snapshot``, if read already), read once per version by
    this store object (queries of a version read its strata once)."""
    snapshot = sample.snapshot() if snapshot is None else snapshot
    cache = store._sample_states
    kept = cache.get(sample.name)
    if kept is not None and kept[0] is snapshot:
        return kept[1]  # type: ignore[no-any-return]
    state = state_of(sample, snapshot)
    cache[sample.name] = (snapshot, state, state.strata_table())
    return state


def _strata_table(store: Store, state: SampleState) -> pa.Table:
    kept = store._sample_states.get(state.name)
    if kept is not None and kept[1] is state:
        return kept[2]  # type: ignore[no-any-return]
    return state.strata_table()


def _at_base_version(sample: Dataset, state: SampleState, base_version: int) -> SampleState | None:
    """The sample as of its version that represents ``base_version``, if it has one."""
    marker = txn_id(state.settings.base)
    for commit in reversed(sample.history()):
        for t in commit.txns:
            if t.app_id == marker and t.version == base_version:
                return state_of(sample, sample.snapshot(commit.version))
            if t.app_id == marker and t.version < base_version:
                return None
    return None


def explain_text(found: Approximate, clause: ErrorClause | None = None) -> str:
    if found.sample is None:
        return f"answered exactly ({found.reason}), as: {found.sql}"
    s = found.sample
    return (f"answered from sample {s.name} of {s.dataset} (fraction {s.fraction}, on "
            f"{', '.join(s.on)}, {s.rows} rows, base version {s.base_version}; {found.reason}), "
            f"as: {found.sql}")
