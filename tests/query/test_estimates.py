"""Estimates from a stratified sample: what :func:`analyse` accepts and refuses, the SQL of
the estimators (checked against the memo's formulas computed with numpy, and against DuckDB's
exact answer on a sample that holds every row), output names, and the five behaviors."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from colonnade.errors import QueryError
from colonnade.query.error_clause import ErrorClause, split_error_clause
from colonnade.query.estimate_sql import sql_literal
from colonnade.query.estimates import (
    Approximable,
    SampleQuery,
    analyse,
    apply_behavior,
    exact_sql,
    sample_sql,
    t_quantile,
)

pytestmark = pytest.mark.unit

Rows = list[tuple[Any, ...]]

#: (region, shop): (rows, sample rows); north is complete, south and NULL too thin to trust.
STRATA = {("north", "a"): (30, 30), ("north", "b"): (20, 20), ("south", "a"): (400, 6),
          ("east", "a"): (3000, 600), ("east", "b"): (2000, 400), (None, "a"): (300, 5)}


def _register(con: duckdb.DuckDBPyConnection, name: str, table: pa.Table) -> None:
    con.register("incoming", table)
    con.execute(f"CREATE TABLE {name} AS SELECT * FROM incoming")
    con.unregister("incoming")


def _strata(ids: list[int], population: list[int], kept: list[int]) -> pa.Table:
    return pa.table({"__stratum": pa.array(ids, pa.int64()),
                     "__pop_n": pa.array(population, pa.int64()),
                     "__samp_n": pa.array(kept, pa.int64())})


@pytest.fixture(scope="module")
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    """``sales``, its sample ``sales_s`` with strata ``sales_t`` (:data:`STRATA`), and a
    sample of every row, ``sales_all`` with ``sales_all_t`` (so estimates are exact)."""
    rng = np.random.default_rng(7)
    columns: dict[str, list[Any]] = {
        k: [] for k in ("region", "shop", "Channel", "amount", "units", "day", "__stratum", "kept")}
    for h, ((region, shop), (rows, kept)) in enumerate(STRATA.items()):
        chosen = np.zeros(rows, bool)
        chosen[rng.permutation(rows)[:kept]] = True
        columns["region"] += [region] * rows
        columns["shop"] += [shop] * rows
        columns["Channel"] += [rng.choice(["web", "store", None]) for _ in range(rows)]
        columns["amount"] += [None if rng.random() < 0.05 else float(a)
                              for a in rng.gamma(4.0, 25.0, rows)]
        columns["units"] += [int(u) for u in rng.poisson(5, rows)]
        columns["day"] += [dt.date(2024, 1, 1) + dt.timedelta(days=int(d))
                           for d in rng.integers(0, 7, rows)]
        columns["__stratum"] += [h] * rows
        columns["kept"] += list(chosen)
    table = pa.table({k: pa.array(v, pa.int32() if k == "units" else None)
                      for k, v in columns.items()})
    connection = duckdb.connect()
    _register(connection, "sales_all", table.drop_columns(["kept"]))
    connection.execute("CREATE TABLE sales AS SELECT * EXCLUDE (__stratum) FROM sales_all")
    _register(connection, "sales_s", table.filter(table.column("kept")).drop_columns(["kept"]))
    ids = list(range(len(STRATA)))
    _register(connection, "sales_t", _strata(ids, [n for n, _ in STRATA.values()],
                                             [k for _, k in STRATA.values()]))
    population = [n for n, _ in STRATA.values()]  # and a stratum with no rows
    _register(connection, "sales_all_t", _strata(ids + [99], population + [0], population + [0]))
    yield connection
    connection.close()


def _answer(con: duckdb.DuckDBPyConnection, sql: str, sample: str = "sales_s",
            run_exact: Callable[[str], pa.Table] | None = None,
            on: tuple[str, ...] = ("region", "shop")) -> pa.Table:
    """``sql`` (with its WITH ERROR tail) answered from ``sample`` (strata ``<sample>_t``)."""
    head, clause = split_error_clause(sql)
    assert clause is not None
    q = analyse(head)
    assert isinstance(q, Approximable), q
    sq = sample_sql(q, clause, sample, f"{sample.removesuffix('_s')}_t", on)
    result = con.sql(sq.sql).to_arrow_table()
    return apply_behavior(result, sq, clause,
                          run_exact or (lambda exact: con.sql(exact).to_arrow_table()))


def _rows(table: pa.Table) -> Rows:
    return list(zip(*(c.to_pylist() for c in table.columns), strict=True))


def _same(got: Rows, want: Rows) -> bool:
    """Equal rows, numbers to 1e-9 (an estimate is a double; an exact sum a HUGEINT)."""
    if len(got) != len(want):
        return False
    for g, w in zip(got, want, strict=True):
        for a, b in zip(g, w, strict=True):
            numbers = (float, decimal.Decimal)
            if isinstance(a, numbers) or isinstance(b, numbers):
                if a is None or b is None or not math.isclose(float(a), float(b), rel_tol=1e-9,
                                                              abs_tol=1e-9):
                    return False
            elif a != b:
                return False
    return True


# -- analyse -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("sql", "reason"), [
    ("SELECT count(*) FROM sales JOIN other USING (id)", "a join cannot be answered from a sample"),
    ("SELECT count(*) FROM sales, other", "a join cannot be answered from a sample"),
    ("SELECT count(*) FROM (SELECT * FROM sales)", "the query must read one dataset"),
    ("SELECT count(*) FROM read_parquet('x.parquet')", "the query must read one dataset"),
    ("SELECT count(*) FROM sales WHERE units IN (SELECT 1)", "subqueries cannot be answered"),
    ("SELECT count(*) FROM sales UNION ALL SELECT count(*) FROM sales", "set operations"),
    ("WITH s AS (SELECT * FROM sales) SELECT count(*) FROM s", "a query with a WITH clause"),
    ("SELECT DISTINCT region, count(*) FROM sales GROUP BY region", "SELECT DISTINCT"),
    ("SELECT region FROM sales GROUP BY region", "no count, sum or avg in the select list"),
    ("SELECT count(DISTINCT region) FROM sales",
     "count(DISTINCT region) cannot be estimated from a sample"),
    ("SELECT sum(DISTINCT units) FROM sales", "sum(DISTINCT units) cannot be estimated"),
    ("SELECT min(units), count(*) FROM sales", "min/max cannot be estimated from a sample"),
    ("SELECT max(units) FROM sales", "min/max cannot be estimated from a sample"),
    ("SELECT median(units) FROM sales",
     "median() cannot be estimated from a sample: only count, sum and avg can"),
    ("SELECT sum(units) OVER () FROM sales", "window functions cannot be estimated"),
    ("SELECT count(*) FILTER (WHERE units > 1) FROM sales", "aggregates with FILTER"),
    ("SELECT region, count(*) FROM sales GROUP BY ROLLUP (region)",
     "GROUPING SETS, ROLLUP and CUBE"),
    ("SELECT *, count(*) FROM sales GROUP BY ALL", "SELECT * cannot be estimated"),
    ("SELECT region, count(*) FROM sales", "column region must be in GROUP BY"),
    ("SELECT relative_error(units) FROM sales", "relative_error() takes an aggregate"),
    ("SELECT sum(units) / 2 AS s, absolute_error(s) FROM sales",
     "absolute_error() takes an aggregate"),
    ("SELECT count(*) FROM sales WHERE relative_error(count(*)) < 1",
     "relative_error() is not allowed in WHERE"),
    ("SELECT sum(sum(units)) FROM sales", "an aggregate is not allowed in an aggregate's argument"),
    ("SELECT count(*) FROM sales LIMIT 10%", "LIMIT must be a whole number"),
    ("SELECT region, count(*) FROM sales GROUP BY region ORDER BY ALL", "ORDER BY ALL"),
    ("SELECT count(*) FROM sales; SELECT 1", "only a single statement"),
    ("SELECT count(* FROM sales", "the query does not parse"),
])
def test_what_a_sample_cannot_answer(sql: str, reason: str) -> None:
    found = analyse(sql)
    assert isinstance(found, str) and found.startswith(reason), found
    assert "\n" not in found


def test_the_query_column_set_is_where_group_by_and_having_outside_aggregates() -> None:
    q = analyse('SELECT upper(s.region) AS r, "Channel", sum(units) AS total FROM sales AS s '
                "WHERE day > DATE '2024-01-02' AND NOT (shop = 'b') GROUP BY r, 2 "
                "HAVING sum(amount) > 1 AND r <> 'X' AND relative_error(total) < 0.5")
    assert isinstance(q, Approximable)
    assert q.table == "sales"
    assert q.columns == {"region", "shop", "day", "channel"}
    assert [g.expression for g in q.group_by] == ["UPPER(region)", '"Channel"']
    assert [(a.kind, a.argument) for a in q.aggregates] == [("sum", "units"), ("sum", "amount")]
    assert q.checked == (0,)  # HAVING's sum(amount) is not in the select list


def test_group_by_an_alias_that_is_also_a_column_means_the_column() -> None:
    q = analyse("SELECT upper(region) AS region, count(*) FROM sales GROUP BY region")
    assert isinstance(q, Approximable)
    assert [g.expression for g in q.group_by] == ["region"]


def test_the_sample_sql() -> None:
    q = analyse("SELECT region, avg(amount) AS a, count(*) FROM sales WHERE units > 2 "
                "GROUP BY region HAVING count(*) > 5 ORDER BY upper_bound(a) DESC LIMIT 4")
    assert isinstance(q, Approximable)
    sql = sample_sql(q, ErrorClause(0.1), "S", "T").sql
    assert sql.startswith("WITH __aqp_quantiles AS (\n  SELECT [12.706204736174687, "
                          "4.302652729749459, 3.182446305283707")
    assert "1.959963984540054 AS __aqp_z" in sql
    assert "  FROM S AS __aqp_s\n  WHERE units > 2\n  GROUP BY ALL)" in sql
    assert "JOIN T AS t ON s.__stratum = t.__stratum\n  WHERE t.__pop_n > 0)" in sql
    assert "WINDOW __aqp_group AS (PARTITION BY region)" in sql
    assert "CAST(round(__aqp_raw1) AS BIGINT) AS __aqp_est1" in sql
    assert sql.endswith('SELECT region,\n  __aqp_est0 AS "a",\n  __aqp_est1 AS "count_star()",\n'
                        "  __aqp_upper_bound0 AS __aqp_order0,\n  __aqp_relative_error0,\n"
                        "  __aqp_relative_error1,\n  region AS __aqp_key0\nFROM __aqp_bounds\n"
                        "WHERE __aqp_est1 > 5\nORDER BY 4 DESC\nLIMIT 4")
    partial = sample_sql(q, ErrorClause(0.1, behavior="partial_run_on_base_table"), "S", "T")
    assert partial.deferred and partial.sql.endswith("WHERE __aqp_est1 > 5")
    assert partial.hidden == ("__aqp_order0", "__aqp_relative_error0", "__aqp_relative_error1",
                              "__aqp_key0")
    assert "SELECT [6.313751514675" in sample_sql(q, ErrorClause(0.1, 0.9), "S", "T").sql
    # count(*) over whole strata is exact: the sample's columns hold the query's
    exact = sample_sql(q, ErrorClause(0.1), "S", "T", stratified_on=("Region", "units")).sql
    assert "CASE WHEN TRUE THEN __aqp_raw1" in exact  # count(*)'s bounds; avg(amount): estimated
    assert "CASE WHEN __aqp_all_census THEN 0 WHEN NOT __aqp_any_unknown THEN __aqp_q0" in exact
    assert exact_sql(q) == ('SELECT region, AVG(amount) AS "a", COUNT(*) AS "count_star()" FROM '
                            "sales WHERE (units > 2) GROUP BY region HAVING COUNT(*) > 5 ORDER BY "
                            "CAST(NULL AS DOUBLE) DESC LIMIT 4")


def test_the_hidden_columns_are_what_behavior_needs() -> None:
    q = analyse("SELECT region, shop, sum(units) FROM sales GROUP BY region, shop")
    assert isinstance(q, Approximable)
    sq = sample_sql(q, ErrorClause(0.1), "S", "T")
    assert isinstance(sq, SampleQuery) and sq.visible == 3
    assert sq.hidden == ("__aqp_relative_error0", "__aqp_key0", "__aqp_key1")
    assert sq.exact == exact_sql(q)


# -- the estimators against the memo's formulas ------------------------------------------------
def _relative(error: float, estimate: float) -> float:
    return error / (abs(estimate) if abs(estimate) > 1 else abs(estimate) + 1)


def test_estimates_and_bounds_follow_the_formulas() -> None:
    """Strata 1 (N=200, 25 sampled) and 2 (N=150, 20 sampled), 3 complete (12 rows); WHERE on
    a column that is not stratified on; NULLs in the measure. Recomputed with numpy."""
    rng = np.random.default_rng(3)
    strata = [(200, 25), (150, 20), (12, 12)]
    values = [rng.gamma(3.0, 4.0, n) for _, n in strata]
    values[0][[2, 7]] = np.nan
    inside = [rng.random(n) < 0.8 for _, n in strata]
    con = duckdb.connect()
    v = np.concatenate(values)
    _register(con, "tiny_s", pa.table({
        "v": pa.array(v, mask=np.isnan(v)), "w": pa.array(np.concatenate(inside).astype(int)),
        "__stratum": pa.array(np.repeat([1, 2, 3], [n for _, n in strata]), pa.int64())}))
    _register(con, "tiny_t", _strata([1, 2, 3], [b for b, _ in strata], [n for _, n in strata]))
    aggregates = ["sum(v)", "avg(v)", "count(*)", "count(v)"]
    errors = ", ".join(f"{f}({a})" for a in aggregates
                       for f in ("absolute_error", "relative_error", "lower_bound", "upper_bound"))
    q = analyse(f"SELECT {', '.join(aggregates)}, {errors} FROM tiny WHERE w = 1")
    assert isinstance(q, Approximable)
    (got,) = con.sql(sample_sql(q, ErrorClause(0.2), "tiny_s", "tiny_t").sql).fetchall()
    con.close()

    sampled = [0, 1]  # strata 1 and 2; stratum 3 is exact
    x = [(i & ~np.isnan(vals)).astype(float) for vals, i in zip(values, inside, strict=True)]
    y = [np.where(has > 0, np.nan_to_num(vals), 0.0) for vals, has in zip(values, x, strict=True)]
    weight = [big / n for big, n in strata]

    def variance(h: int, values: np.ndarray) -> float:  # N²(1 − n/N) s²/n over all n rows
        big, n = strata[h]
        return float(big ** 2 * (1 - n / big) * values.var(ddof=1) / n)

    def quantile(terms: list[float], rows: list[float]) -> float:  # min(m − 1, Satterthwaite)
        satterthwaite = sum(terms) ** 2 / sum(t * t / max(r - 1, 1)
                                              for t, r in zip(terms, rows, strict=True))
        return t_quantile(0.95, math.floor(min(sum(rows) - 1, satterthwaite)))

    x_rows = [x[h].sum() for h in sampled]
    total = sum(weight[h] * y[h].sum() for h in range(3))
    terms = [variance(h, y[h]) for h in sampled]
    error = quantile(terms, x_rows) * math.sqrt(sum(terms))
    estimated = sum(weight[h] * x[h].sum() for h in range(3))
    ratio = total / estimated
    terms = [variance(h, y[h] - ratio * x[h]) * x[h].sum() * (strata[h][1] - 1)
             / ((x[h].sum() - 1) * strata[h][1]) for h in sampled]  # the small-domain factor
    ratio_error = quantile(terms, x_rows) * math.sqrt(sum(terms)) / estimated
    want: list[float] = [total, ratio]
    errors_want = [(error, _relative(error, total), total - error, total + error),
                   (ratio_error, _relative(ratio_error, ratio), ratio - ratio_error,
                    ratio + ratio_error)]
    for indicator in ([i.astype(float) for i in inside], x):  # count(*), count(v): Wilson
        exact_part = float(indicator[2].sum())
        population = sum(strata[h][0] for h in sampled)
        share = sum(weight[h] * indicator[h].sum() for h in sampled) / population
        spread = sum(variance(h, indicator[h]) for h in sampled)
        n_eff = share * (1 - share) * population ** 2 / spread
        z = t_quantile(0.95, None)  # 31 rows in the domain: SnappyData's rule takes z
        assert sum(inside[h].sum() for h in sampled) >= 30
        center = (share + z * z / (2 * n_eff)) / (1 + z * z / n_eff)
        half = z / (1 + z * z / n_eff) * math.sqrt(share * (1 - share) / n_eff
                                                   + z * z / (4 * n_eff ** 2))
        low = exact_part + population * (center - half)
        high = exact_part + population * (center + half)
        estimate = exact_part + population * share
        absolute = max(high - estimate, estimate - low)
        want.append(math.floor(estimate + 0.5))  # DuckDB rounds halves away from 0
        errors_want.append((absolute, _relative(absolute, estimate), low, high))
    assert got[:4] == pytest.approx(want, rel=1e-9)
    assert isinstance(got[2], int) and isinstance(got[3], int)
    # past 30 degrees of freedom the SQL's t quantile is Cornish-Fisher's (to 1e-6 here)
    assert got[4:20] == pytest.approx([e for four in errors_want for e in four], rel=1e-5)


def test_thin_groups_and_one_row_strata_have_no_relative_error() -> None:
    con = duckdb.connect()
    _register(con, "thin_s", pa.table({"g": ["few"] * 5 + ["one"],
                                       "v": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
                                       "__stratum": pa.array([1] * 5 + [2], pa.int64())}))
    _register(con, "thin_t", _strata([1, 2], [100, 40], [5, 1]))
    q = analyse("SELECT g, sum(v), relative_error(sum(v)), absolute_error(sum(v)), "
                "lower_bound(sum(v)) FROM thin GROUP BY g ORDER BY g")
    assert isinstance(q, Approximable)
    few, one = con.sql(sample_sql(q, ErrorClause(0.5), "thin_s", "thin_t").sql).fetchall()
    con.close()
    # 5 rows: an interval (t of 4 df), but no relative error; 1 row of 40: nothing is known
    assert few[1] == 300.0 and few[2] is None
    assert few[3] == pytest.approx(t_quantile(0.95, 4) * math.sqrt(100 ** 2 * 0.95 * 2.5 / 5))
    assert one[1] == 240.0 and one[2:5] == (None, None, None)


# -- exact when the sample holds every row: the plumbing against DuckDB ------------------------
DIFFERENTIAL = [
    "SELECT region, shop, count(*), count(amount), sum(units), avg(amount) FROM sales "
    "GROUP BY region, shop ORDER BY region, shop",
    "SELECT upper(region) AS r, sum(amount) / count(*) AS mean FROM sales WHERE units > 2 "
    "GROUP BY r ORDER BY mean DESC NULLS FIRST",
    'SELECT s."Channel", count(*) AS n FROM sales AS s GROUP BY ALL HAVING count(*) > 10 '
    "ORDER BY n DESC, 1 LIMIT 2 OFFSET 1",
    "SELECT channel, region, avg(units * 2.5), count() FROM sales GROUP BY 1, 2 "
    "ORDER BY 3 DESC, 1, 2 LIMIT 4",
    "SELECT count(*), sum(units), avg(amount), COUNT(*) + 1 FROM sales "
    "WHERE region IS NULL OR shop = 'b'",
    "SELECT day, sum(amount) AS total FROM sales WHERE day >= DATE '2024-01-03' GROUP BY day "
    "HAVING total > 0 ORDER BY total LIMIT 3",
    "SELECT count(*), sum(units) FROM sales WHERE units < 0",
    "SELECT Region, SUM(units) FROM sales GROUP BY region ORDER BY sum(units) DESC",
    "SELECT region IS NULL AS missing, CAST(sum(units) AS INTEGER), "
    "if(count(*) > 100, 'many', 'few') FROM sales GROUP BY missing ORDER BY missing",
    "SELECT region, avg(amount) FROM sales GROUP BY region ORDER BY count(*) DESC",
    "SELECT shop, CASE WHEN count(*) > 100 THEN sum(units) END AS big, sum(units) AS SUM "
    "FROM sales GROUP BY shop ORDER BY shop",
]


@pytest.mark.parametrize("sql", DIFFERENTIAL)
def test_a_complete_sample_answers_exactly(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    want = con.sql(sql).to_arrow_table()
    got = _answer(con, sql + " WITH ERROR 0.01 BEHAVIOR 'strict'", sample="sales_all")
    assert got.column_names == want.column_names
    q = analyse(sql)
    assert isinstance(q, Approximable)
    exact = con.sql(exact_sql(q)).to_arrow_table()
    assert exact.column_names == want.column_names and _same(_rows(exact), _rows(want))
    got_rows, want_rows = _rows(got), _rows(want)
    if "ORDER BY" not in sql:
        got_rows, want_rows = sorted(got_rows, key=repr), sorted(want_rows, key=repr)
    assert _same(got_rows, want_rows), (got_rows, want_rows)


def test_exact_errors_are_zero_and_bounds_the_estimate(con: duckdb.DuckDBPyConnection) -> None:
    got = _answer(con, "SELECT region, shop, avg(amount) AS a, absolute_error(count(*)), "
                       "relative_error(a), lower_bound(a) AS lo, upper_bound(sum(units)), "
                       "sum(units) FROM sales GROUP BY ALL WITH ERROR 0.01", sample="sales_all")
    assert got.column_names == ["region", "shop", "a", "absolute_error(count_star())",
                                "relative_error(a)", "lo", "upper_bound(sum(units))", "sum(units)"]
    for row in _rows(got):
        assert row[3] == 0 and row[4] == 0 and row[5] == row[2] and row[6] == row[7]
    assert got.schema.field("absolute_error(count_star())").type == pa.float64()


# -- behaviors ---------------------------------------------------------------------------------
QUERY = ("SELECT region, count(*) AS n, avg(amount) AS a, relative_error(a) AS re FROM sales "
         "GROUP BY region ORDER BY n DESC")


def _by_region(table: pa.Table) -> dict[Any, dict[str, Any]]:
    return {row["region"]: row for row in table.to_pylist()}


def test_do_nothing_and_no_limit_keep_every_estimate(con: duckdb.DuckDBPyConnection) -> None:
    def never(sql: str) -> pa.Table:
        raise AssertionError("nothing should run exactly")

    for tail in ("WITH ERROR 0.2 BEHAVIOR 'do_nothing'", "WITH ERROR BEHAVIOR 'strict'"):
        got = _answer(con, f"{QUERY} {tail}", run_exact=never)
        assert got.column_names == ["region", "n", "a", "re"]
        rows = _by_region(got)
        assert rows["south"]["re"] is None and rows[None]["re"] is None  # 6 and 5 sample rows
        assert rows["north"]["re"] == 0 and rows["north"]["n"] == 50
        assert 0 < rows["east"]["re"] < 0.2 and rows["east"]["n"] == 5000  # whole strata
        assert got.column("n").to_pylist() == sorted(got.column("n").to_pylist(), reverse=True)


def test_local_omit_blanks_failing_aggregates_and_their_errors(
        con: duckdb.DuckDBPyConnection) -> None:
    got = _by_region(_answer(con, f"{QUERY} WITH ERROR 0.2 BEHAVIOR 'local_omit'"))
    assert got["south"] == {"region": "south", "n": 400, "a": None, "re": None}
    assert got[None]["n"] == 300 and got[None]["a"] is None
    assert got["east"]["a"] is not None and got["north"]["a"] is not None
    # without knowing the strata, the count is a Wilson interval: of 6 rows, unknown too
    unknown = _by_region(_answer(con, f"{QUERY} WITH ERROR 0.2 BEHAVIOR 'local_omit'", on=()))
    assert unknown["south"]["n"] is None and unknown["east"]["n"] == 5000


def test_strict_names_the_first_failing_group(con: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(QueryError) as raised:
        _answer(con, f"{QUERY} WITH ERROR 0.2 BEHAVIOR 'strict'")
    assert str(raised.value) == (
        "WITH ERROR 0.2 BEHAVIOR 'strict': the estimate of avg(amount) for region='south' has an "
        "unknown error (fewer than 10 sample rows, or a stratum of one sample row)")
    with pytest.raises(QueryError, match=r"the estimate of avg\(amount\) for region='east' has a "
                                         r"relative error of 0\.0\d+, above 0\.001$"):
        _answer(con, "SELECT region, avg(amount) FROM sales WHERE region = 'east' GROUP BY region "
                     "WITH ERROR 0.001 BEHAVIOR 'strict'")


def test_run_on_full_table_reruns_the_whole_query(con: duckdb.DuckDBPyConnection) -> None:
    ran: list[str] = []

    def run(sql: str) -> pa.Table:
        ran.append(sql)
        return con.sql(sql).to_arrow_table()

    got = _answer(con, f"{QUERY} WITH ERROR 0.2", run_exact=run)
    assert ran == ['SELECT region, COUNT(*) AS "n", AVG(amount) AS "a", CAST(0 AS DOUBLE) AS "re" '
                   "FROM sales GROUP BY region ORDER BY 2 DESC"]
    assert _rows(got) == _rows(con.sql(ran[0]).to_arrow_table())
    ran.clear()
    _answer(con, "SELECT count(*) FROM sales WHERE region = 'north' WITH ERROR 0.2", run_exact=run)
    assert ran == []


@pytest.mark.parametrize(("order", "limit"), [
    ("n DESC", "LIMIT 3"), ("re, region", "LIMIT 2 OFFSET 1"), ("upper_bound(a) DESC, region", ""),
    ("", "")])
def test_partial_reruns_only_failing_groups_then_orders(con: duckdb.DuckDBPyConnection,
                                                        order: str, limit: str) -> None:
    ran: list[str] = []

    def run(sql: str) -> pa.Table:
        ran.append(sql)
        return con.sql(sql).to_arrow_table()

    head = ("SELECT region, count(*) AS n, avg(amount) AS a, relative_error(a) AS re FROM sales "
            f"GROUP BY region {'ORDER BY ' + order if order else ''} {limit}")
    got = _answer(con, f"{head} WITH ERROR 0.2 BEHAVIOR 'partial_run_on_base_table'",
                  run_exact=run)
    assert len(ran) == 1 and "IS NOT DISTINCT FROM (region)" in ran[0] and "ORDER BY" not in ran[0]
    rerun = con.sql(ran[0]).to_arrow_table().column(0).to_pylist()
    assert sorted(rerun, key=repr) == ["south", None]
    # what it should be: the sample's passing rows, the exact failing ones, sorted and cut here
    estimated = _by_region(_answer(con, "SELECT region, count(*) AS n, avg(amount) AS a, "
                                        "relative_error(a) AS re, upper_bound(a) AS hi FROM sales "
                                        "GROUP BY region WITH ERROR BEHAVIOR 'do_nothing'"))
    exact = _by_region(con.sql("SELECT region, count(*) AS n, avg(amount) AS a, 0.0 AS re, "
                               "NULL::DOUBLE AS hi FROM sales GROUP BY region").to_arrow_table())
    merged = [exact[r] if r in ("south", None) else estimated[r] for r in estimated]
    keys = {"n DESC": lambda r: -r["n"],  # DuckDB puts NULLs last
            "re, region": lambda r: (r["re"], r["region"] is None, r["region"] or ""),
            "upper_bound(a) DESC, region": lambda r: (r["hi"] is None, -(r["hi"] or 0),
                                                      r["region"] is None, r["region"] or "")}
    if order:
        merged.sort(key=keys[order])
    start = 1 if "OFFSET" in limit else 0
    stop = int(limit.split()[1]) + start if limit else None
    want = [(r["region"], r["n"], r["a"], r["re"]) for r in merged[start:stop]]
    got_rows = _rows(got) if order else sorted(_rows(got), key=repr)
    assert _same(got_rows, want if order else sorted(want, key=repr)), (got_rows, want)
    assert got.schema == pa.schema([("region", pa.string()), ("n", pa.int64()),
                                    ("a", pa.float64()), ("re", pa.float64())])


def test_partial_without_groups_reruns_the_query(con: duckdb.DuckDBPyConnection) -> None:
    sql = "SELECT sum(units) AS s FROM sales WHERE region = 'south'"
    got = _answer(con, f"{sql} WITH ERROR 0.1 BEHAVIOR 'partial_run_on_base_table'")
    assert _rows(got) == _rows(con.sql(sql).to_arrow_table())


# -- pieces ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("confidence", "df", "quantile"), [
    (0.95, 1, 12.7062), (0.95, 2, 4.3027), (0.95, 5, 2.5706), (0.95, 30, 2.0423),
    (0.95, 1000, 1.9623), (0.95, None, 1.95996), (0.99, None, 2.57583), (0.9, 10, 1.8125),
    (0.999, 1, 636.6192)])
def test_t_quantiles(confidence: float, df: int | None, quantile: float) -> None:
    assert t_quantile(confidence, df) == pytest.approx(quantile,
                                                       abs=1e-4 if quantile < 100 else 1e-3)


def test_quantiles_past_the_table_follow_student_t(con: duckdb.DuckDBPyConnection) -> None:
    """From 30 degrees of freedom on, the SQL corrects z by Cornish-Fisher's expansion."""
    from colonnade.query.estimate_sql import _quantile

    for confidence in (0.8, 0.95, 0.999):
        z = t_quantile(confidence, None)
        for df in (30, 45, 200, 10_000):
            ((got,),) = con.sql(f"SELECT {_quantile(str(df))} FROM "
                                f"(SELECT {z!r} AS __aqp_z, [0.0] AS __aqp_t)").fetchall()
            assert got == pytest.approx(t_quantile(confidence, df), rel=2e-4)


@pytest.mark.parametrize("value", [
    None, True, -12, 2 ** 62, 0.1, -0.0, float("inf"), decimal.Decimal("12.340"), "it's", "",
    dt.date(2024, 2, 29), dt.datetime(2024, 1, 2, 3, 4, 5, 6), dt.time(1, 2, 3),
    dt.timedelta(days=2, microseconds=5), b"\x00\xffab", uuid.UUID(int=12345)])
def test_literals_read_back_as_the_value(value: Any) -> None:
    literal = sql_literal(value)
    assert literal is not None
    ((read,),) = duckdb.sql(f"SELECT {literal}").fetchall()
    assert read == value and type(read) is type(value)


def test_no_literal_for_nested_values() -> None:
    assert sql_literal([1, 2]) is None and sql_literal({"a": 1}) is None
