"""``WITH ERROR`` queries through a store, on every store: answered from a sample kept current
by several commits, with bounds that cover the exact answers (DuckDB over the rows the commits
left) at the stated confidence; behaviors, ``explain``, pinned versions and bad input."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from colonnade import Store
from colonnade.errors import QueryError

PUBS = 6
GEOS = 40


def _rows(n: int, seed: int) -> pa.Table:
    """Strata of very different sizes (Zipf geos × publishers), a column outside the sample's
    column set, moderate measures (gamma) with some NULLs."""
    rng = np.random.default_rng(seed)
    geo = (rng.zipf(1.3, n) - 1) % GEOS
    bid = rng.gamma(4.0, 1.0, n)
    return pa.table({"geo": pa.array([f"g{g:02d}" for g in geo]),
                     "pub": pa.array(rng.integers(0, PUBS, n)),
                     "site": pa.array(rng.integers(0, 8, n)),
                     "bid": pa.array(bid, mask=rng.random(n) < 0.05)})


#: The rows the last commit of :func:`_build` deletes.
DELETED = "site = 7 AND bid > 9"


def _build(store: Store, name: str = "imps", seed: int = 11) -> pa.Table:
    """The dataset and its sample, made by several commits; returns the rows it holds after them."""
    ds = store.create_dataset(name, _rows(1, 0).schema)
    parts = [_rows(60_000, seed * 10 + 1)]
    ds.append(parts[0])
    store.create_sample(name, "geo,pub", 0.03, min_per_stratum=50, seed=seed)
    for i in range(3):  # the sample is maintained by these commits
        parts.append(_rows(40_000, seed * 10 + 2 + i))
        ds.append(parts[-1])
    ds.delete(DELETED)
    duck = duckdb.connect()
    duck.register("written", pa.concat_tables(parts))
    return duck.sql(f"SELECT * FROM written WHERE ({DELETED}) IS NOT TRUE").to_arrow_table()


@pytest.fixture
def imps(store: Store) -> Store:
    _build(store)
    return store


KINDS = {"count_star": "count(*)", "count": "count(bid)", "sum": "sum(bid)", "avg": "avg(bid)"}


def _random_query(rng: np.random.Generator, table: str) -> tuple[str, list[str], list[str]]:
    groups = [["geo"], ["pub"], ["geo", "pub"], [], ["site"], ["pub", "site"]][int(rng.integers(6))]
    filters = []
    for _ in range(int(rng.integers(0, 3))):
        pick = int(rng.integers(3))
        if pick == 0:
            filters.append(f"pub IN ({', '.join(map(str, rng.choice(PUBS, 3, replace=False)))})")
        elif pick == 1:
            filters.append(f"site {'<' if rng.random() < 0.5 else '>='} {int(rng.integers(2, 7))}")
        else:
            filters.append(f"bid > {rng.uniform(1, 6):.2f}")
    kinds = sorted(set(rng.choice(list(KINDS), size=2).tolist()))
    select = [*groups] + [f"{KINDS[k]} AS a{i}, lower_bound(a{i}) AS lo{i}, upper_bound(a{i}) AS hi{i}, "
                          f"relative_error(a{i}) AS re{i}" for i, k in enumerate(kinds)]
    where = f" WHERE {' AND '.join(filters)}" if filters else ""
    group = f" GROUP BY {', '.join(groups)}" if groups else ""
    return f"SELECT {', '.join(select)} FROM {table}{where}{group}", groups, kinds


def test_bounds_cover_the_exact_answers_at_the_stated_confidence(store: Store) -> None:
    """500 random queries, in five rounds of 100 each on a dataset and sample of its own (the
    groups of one sample's answers are correlated: five samples make the figure steadier).
    A group counts when its error is known (≥ 10 sample rows) and not zero (exact)."""
    rng = np.random.default_rng(3)
    covered = {k: 0 for k in KINDS}
    checked = {k: 0 for k in KINDS}
    duck = duckdb.connect()
    for round_ in range(5):
        table = f"imps{round_}"
        duck.register(table, _build(store, table, seed=11 + round_))
        for _ in range(100):
            sql, groups, kinds = _random_query(rng, table)
            approx = store.sql(sql + " WITH ERROR 0.5 BEHAVIOR 'do_nothing'").to_pylist()
            exact_sql = sql
            for i in range(len(kinds)):
                exact_sql = exact_sql.replace(f", lower_bound(a{i}) AS lo{i}, upper_bound(a{i}) AS "
                                              f"hi{i}, relative_error(a{i}) AS re{i}", "")
            truth = {tuple(r[g] for g in groups): r for r in duck.sql(exact_sql).to_arrow_table().to_pylist()}
            for r in approx:
                t = truth[tuple(r[g] for g in groups)]  # a group the sample has exists
                for i, kind in enumerate(kinds):
                    if r[f"re{i}"] is None or t[f"a{i}"] is None or r[f"re{i}"] == 0:
                        continue
                    checked[kind] += 1
                    covered[kind] += r[f"lo{i}"] - 1e-9 <= t[f"a{i}"] <= r[f"hi{i}"] + 1e-9
    coverage = {k: round(covered[k] / checked[k], 4) for k in KINDS}
    assert all(checked[k] > 1000 for k in KINDS), checked
    assert all(0.93 <= c <= 0.97 for c in coverage.values()), coverage


def test_a_count_on_the_sample_columns_is_exact_and_groups_match(imps: Store) -> None:
    exact = imps.sql("SELECT geo, pub, count(*) AS n FROM imps GROUP BY ALL ORDER BY ALL")
    approx = imps.sql("SELECT geo, pub, count(*) AS n, absolute_error(n) AS e FROM imps "
                      "GROUP BY ALL ORDER BY ALL WITH ERROR 0.01")
    assert approx.column_names == ["geo", "pub", "n", "e"]
    assert approx.select(["geo", "pub", "n"]).to_pylist() == exact.to_pylist()
    assert set(approx.column("e").to_pylist()) == {0.0}


def test_behaviors(imps: Store) -> None:
    sql = "SELECT geo, avg(bid) AS a FROM imps WHERE site = 3 GROUP BY geo ORDER BY geo"
    exact = {r["geo"]: r["a"] for r in imps.sql(sql).to_pylist()}
    stated = imps.sql(sql.replace("AS a", "AS a, relative_error(a) AS re")
                      + " WITH ERROR 0.5 BEHAVIOR 'do_nothing'").to_pylist()
    errors = sorted(r["re"] for r in stated if r["re"] is not None)
    # half the groups pass, half fail; the limit halfway between two groups' errors, so that
    # no group's error, added up in another order by another run, falls on either side of it
    half = len(errors) // 2
    assert errors[half - 1] < errors[half]
    limit = (errors[half - 1] + errors[half]) / 2
    failing = {r["geo"] for r in stated if r["re"] is None or r["re"] > limit}
    with pytest.raises(QueryError, match="geo.*relative error") as info:
        imps.sql(f"{sql} WITH ERROR {limit} BEHAVIOR 'strict'")
    assert "\n" not in str(info.value)
    full = imps.sql(f"{sql} WITH ERROR {limit}").to_pylist()  # run_on_full_table
    assert {r["geo"]: r["a"] for r in full} == pytest.approx(exact, rel=1e-12)  # float sums
    omitted = imps.sql(f"{sql} WITH ERROR {limit} BEHAVIOR 'local_omit'").to_pylist()
    assert {r["geo"] for r in omitted if r["a"] is None} == failing
    partial = imps.sql(f"{sql} WITH ERROR {limit} BEHAVIOR 'partial_run_on_base_table'").to_pylist()
    assert [r["geo"] for r in partial] == sorted(exact)
    for r in partial:
        if r["geo"] in failing:
            assert r["a"] == pytest.approx(exact[r["geo"]], rel=1e-12)
        else:
            assert r["a"] == pytest.approx(next(s["a"] for s in stated if s["geo"] == r["geo"]), rel=1e-12)


def test_explain_names_the_sample_or_why_none(imps: Store) -> None:
    report = imps.explain("SELECT pub, sum(bid) FROM imps GROUP BY pub WITH ERROR 0.2")
    latest = imps.dataset("imps").snapshot().version
    assert "sample imps_by_geo_pub" in report.plan and "fraction 0.03" in report.plan
    assert f"base version {latest}" in report.plan
    report = imps.explain("SELECT count(DISTINCT pub) FROM imps WITH ERROR 0.2")
    assert "answered exactly" in report.plan and "count(DISTINCT" in report.plan


def test_a_pinned_version_uses_the_sample_as_of_that_version(imps: Store) -> None:
    ds = imps.dataset("imps")
    older = ds.snapshot().version - 2  # one of the appends
    sql = "SELECT count(*) AS n FROM imps WITH ERROR 0.2"
    assert imps.sql(sql, version=older).column("n").to_pylist() == \
        imps.sql("SELECT count(*) AS n FROM imps", version=older).column("n").to_pylist()
    report = imps.explain(sql, version=older)
    assert f"base version {older}" in report.plan


@pytest.mark.parametrize(("tail", "message"), [
    ("WITH ERROR 1.5", "WITH ERROR must be between 0 and 1"),
    ("WITH ERROR 0.1 BEHAVIOR 'sometimes'", "unknown BEHAVIOR"),
    ("WITH ERROR 0.1 CONFIDENCE 2", "CONFIDENCE"),
])
def test_bad_clauses_are_one_line_errors(imps: Store, tail: str, message: str) -> None:
    with pytest.raises(QueryError, match=message) as info:
        imps.sql(f"SELECT count(*) FROM imps {tail}")
    assert "\n" not in str(info.value)


def test_counts_over_the_sample_columns_are_the_strata_sizes(imps: Store) -> None:
    sql = ("SELECT geo, count(*) AS n FROM imps WHERE pub IN (1, 2) GROUP BY geo "
           "HAVING count(*) > 10 ORDER BY n DESC, geo")
    assert imps.sql(sql + " WITH ERROR 0.05").to_pylist() == imps.sql(sql).to_pylist()
    assert "the counts are its strata's sizes" in imps.explain(sql + " WITH ERROR 0.05").plan
    unaliased = "SELECT pub, count(*) FROM imps GROUP BY pub ORDER BY pub"
    assert imps.sql(unaliased + " WITH ERROR 0.05") == imps.sql(unaliased)


def test_a_query_read_before_reads_the_logs_only_and_sees_a_base_made_again(imps: Store) -> None:
    """A ``WITH ERROR`` query reads its base and sample as SQL reads datasets: once read, each
    costs one read of its log (no catalog read, no checkpoint), and a base dropped and made
    again (with a sample of its own) is answered from the new one."""
    sql = "SELECT geo, count(*) AS n FROM imps GROUP BY geo ORDER BY geo WITH ERROR 0.05"
    exact = sql.removesuffix(" WITH ERROR 0.05")
    assert imps.sql(sql).to_pylist() == imps.sql(exact).to_pylist()
    calls: list[str] = []
    raw = imps.chunk_store
    spied = {n: getattr(raw, n) for n in ("get_dataset", "list_datasets", "list_checkpoints", "follow_commits")}
    for name, real in spied.items():
        setattr(raw, name, lambda *a, _n=name, _r=real, **k: calls.append(_n) or _r(*a, **k))
    try:
        assert imps.sql(sql).to_pylist() == imps.sql(exact).to_pylist()
        calls.clear()
        imps.sql(sql)
        assert sorted(calls) == ["follow_commits", "follow_commits"], calls  # the base's, the sample's
    finally:
        for name, real in spied.items():
            setattr(raw, name, real)
    for info in imps.samples("imps"):
        imps.drop_sample(info.name)
    imps.drop_dataset("imps")
    _build(imps, seed=12)
    assert imps.sql(sql).to_pylist() == imps.sql(exact).to_pylist()


@pytest.mark.parametrize("sql", [
    "SELECT geo, sum(bid) AS s, avg(bid) AS a, count(bid) AS c, count(*) AS n, relative_error(s) AS e, "
    "lower_bound(a) AS lo, upper_bound(c) AS hi FROM imps GROUP BY geo",
    "SELECT pub, avg(\"bid\") AS a FROM imps WHERE geo IN ('g00', 'g03') AND pub < 3 GROUP BY pub",
    "SELECT sum(bid) AS s, absolute_error(s) AS e FROM imps WHERE geo > 'g05'",
    "SELECT upper(geo) AS g, count(bid) AS c FROM imps GROUP BY upper(geo) HAVING c > 5",
])
def test_the_summary_per_stratum_gives_the_answers_the_sample_rows_give(
        imps: Store, monkeypatch: pytest.MonkeyPatch, sql: str) -> None:
    """Keys and WHERE on the sample's columns, aggregates of bare columns: the sums per stratum
    are read from the sample's summary; the answers are those its rows give."""
    import colonnade.samples as samples

    text = f"{sql} WITH ERROR 0.5 BEHAVIOR 'do_nothing'"
    summarised = imps.sql(text).to_pylist()
    assert "__colonnade_summary" in imps.explain(text).plan
    samples._REWRITTEN.clear()
    monkeypatch.setattr(samples, "_summary_columns", lambda schema: {})  # nothing summarised
    from_rows = imps.sql(text).to_pylist()
    assert "__colonnade_summary" not in imps.explain(text).plan
    samples._REWRITTEN.clear()
    key = lambda r: tuple(str(v) for v in r.values())[:1]  # noqa: E731
    assert len(summarised) == len(from_rows)
    for a, b in zip(sorted(summarised, key=key), sorted(from_rows, key=key), strict=True):
        assert a.keys() == b.keys()
        for name in a:
            if isinstance(a[name], float):
                assert a[name] == pytest.approx(b[name], rel=1e-9, nan_ok=True)
            elif isinstance(a[name], int) and isinstance(b[name], int):
                # a count estimate is a weighted sum rounded to an integer: a sum that lands on
                # a half may round either way when added up in another order
                assert abs(a[name] - b[name]) <= 1, name
            else:
                assert a[name] == b[name]


def test_a_script_splits_around_sample_statements() -> None:
    from colonnade.statements import split_statements

    script = ("CREATE SAMPLE TABLE s ON t OPTIONS (qcs 'a;b', fraction '0.1');\n"
              "SELECT 'x;y' AS v; -- a comment; with error\n"
              "SELECT a, count(*) FROM t GROUP BY a WITH ERROR 0.1 BEHAVIOR 'strict';")
    found = split_statements(script)
    assert [s.text for s in found] == [
        "CREATE SAMPLE TABLE s ON t OPTIONS (qcs 'a;b', fraction '0.1')",
        "SELECT 'x;y' AS v",
        "-- a comment; with error\nSELECT a, count(*) FROM t GROUP BY a WITH ERROR 0.1 BEHAVIOR 'strict'"]
    assert all(s.answers for s in found)
