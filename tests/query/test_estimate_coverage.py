"""Do the error bounds hold? A differential test in DuckDB: skewed data (200k rows, Zipf-like
stratum sizes over 500 strata of (geo, publisher), other columns too), a sample drawn as
:mod:`colonnade.table.sample` draws it (per stratum, the rows whose key u ≤ max(F, K-th smallest
u): bottom-K ∪ Bernoulli(F)), and 200 random queries (grouped and filtered on stratification
columns and others; count(*), count(x), sum(x), avg(x)) answered from the sample and exactly.

Per aggregate kind, the share of groups whose exact value lies within [lower_bound,
upper_bound] at confidence 0.95 must be 0.93–0.97. Counted are the groups with a relative error
(not NULL: enough sample rows) that is not 0; those with 0 (every stratum complete, or a count(*)
of whole strata) are checked to equal the exact value instead. The errors stated must also be the
right size: for a calibrated interval the median of actual/stated error is Φ⁻¹(0.75)/Φ⁻¹(0.975)
≈ 0.34 (less with t quantiles and Wilson intervals), so it must be 0.2–0.5.
"""

from __future__ import annotations

import collections
import math
import random
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from colonnade.query.error_clause import ErrorClause
from colonnade.query.estimates import Approximable, analyse, sample_sql

pytestmark = pytest.mark.unit

SEED = 7
ROWS, GEOS, PUBLISHERS = 200_000, 20, 25
FRACTION, MIN_ROWS = 0.03, 50
QUERIES = 200
KINDS = ("count_star", "count", "sum", "avg")
GROUPINGS = [[], ["geo"], ["publisher"], ["geo", "publisher"], ["device"], ["geo", "device"],
             ["hour"], ["publisher", "device"]]


def _data(seed: int) -> tuple[pa.Table, pa.Table, pa.Table]:
    """The base rows, the sample (with ``__stratum``) and the strata (N_h, n_h)."""
    rng = np.random.default_rng(seed)
    geo_p = 1 / np.arange(1, GEOS + 1) ** 1.1
    publisher_p = 1 / np.arange(1, PUBLISHERS + 1) ** 0.9
    geo = rng.choice(GEOS, ROWS, p=geo_p / geo_p.sum())
    publisher = rng.choice(PUBLISHERS, ROWS, p=publisher_p / publisher_p.sum())
    base = pa.table({
        "geo": pa.array([f"g{i}" for i in geo]),
        "publisher": pa.array([f"p{i}" for i in publisher]),
        "device": pa.array([f"d{i}" for i in rng.integers(0, 6, ROWS)]),
        "hour": rng.integers(0, 24, ROWS).astype(np.int32),
        "bid": pa.array(rng.lognormal(0, 0.5, ROWS) * (1 + geo / 10), mask=rng.random(ROWS) < 0.05),
        "clicks": pa.array(rng.gamma(2.0, 3.0, ROWS), mask=rng.random(ROWS) < 0.1),
        "price": rng.uniform(1, 100, ROWS),
        "qty": pa.array(rng.poisson(3, ROWS).astype(np.int64), mask=rng.random(ROWS) < 0.02)})
    stratum = geo * PUBLISHERS + publisher
    key = rng.random(ROWS)  # u ~ U(0, 1), one per row
    order = np.lexsort((key, stratum))
    rank = np.empty(ROWS, np.int64)
    rank[order] = np.arange(ROWS) - np.searchsorted(stratum[order], stratum[order])
    population = np.bincount(stratum, minlength=GEOS * PUBLISHERS)
    kth = np.ones(GEOS * PUBLISHERS)
    kth[stratum[rank == MIN_ROWS - 1]] = key[rank == MIN_ROWS - 1]
    threshold = np.where(population > MIN_ROWS, np.maximum(FRACTION, kth), 1.0)
    kept = key <= threshold[stratum]
    sample = base.filter(pa.array(kept)).append_column(
        "__stratum", pa.array(stratum[kept].astype(np.int64)))
    sampled = np.bincount(stratum[kept], minlength=GEOS * PUBLISHERS)
    strata = pa.table({"__stratum": np.arange(GEOS * PUBLISHERS, dtype=np.int64),
                       "__pop_n": population.astype(np.int64),
                       "__samp_n": sampled.astype(np.int64)})
    return base, sample, strata


def _where(rng: random.Random) -> str:
    choice = rng.randrange(7)
    if choice == 1:
        publishers = ", ".join(f"'p{rng.randrange(PUBLISHERS)}'" for _ in range(3))
        return f"publisher IN ({publishers})"
    if choice == 2:
        return f"device = 'd{rng.randrange(6)}'"
    if choice == 3:
        return f"bid > {rng.choice([0.5, 1, 2])}"
    if choice == 4:
        hour = rng.randrange(20)
        return f"hour BETWEEN {hour} AND {hour + rng.randrange(1, 6)}"
    if choice == 5:
        return (f"geo IN ('g{rng.randrange(5)}', 'g{rng.randrange(GEOS)}') "
                f"AND device <> 'd{rng.randrange(6)}'")
    if choice == 6:
        return f"price < {rng.choice([20, 50, 80])}"
    return ""


@pytest.fixture(scope="module")
def measured() -> dict[str, Any]:
    base, sample, strata = _data(SEED)
    con = duckdb.connect()
    con.execute("SET threads TO 2")
    for name, table in (("imps", base), ("imps_s", sample), ("imps_t", strata)):
        con.register("incoming", table)
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM incoming")
        con.unregister("incoming")
    rng = random.Random(SEED)
    covered: collections.Counter[str] = collections.Counter()
    counted: collections.Counter[str] = collections.Counter()
    exact: collections.Counter[str] = collections.Counter()
    unknown: collections.Counter[str] = collections.Counter()
    ratios: dict[str, list[float]] = collections.defaultdict(list)
    wrong: list[tuple[Any, ...]] = []
    for _ in range(QUERIES):
        groups, where = rng.choice(GROUPINGS), _where(rng)
        aggregates = ["count(*)", f"count({rng.choice(['bid', 'clicks', 'qty'])})",
                      f"sum({rng.choice(['bid', 'clicks', 'price', 'qty'])})",
                      f"avg({rng.choice(['bid', 'clicks', 'price', 'qty'])})"]
        keys = ", ".join(groups)
        rest = (" FROM imps" + (f" WHERE {where}" if where else "")
                + (f" GROUP BY {keys}" if keys else ""))
        errors = ", ".join(f"lower_bound({a}), upper_bound({a}), relative_error({a})"
                           for a in aggregates)
        q = analyse(f"SELECT {keys + ', ' if keys else ''}{', '.join(aggregates)}, {errors}{rest}")
        assert isinstance(q, Approximable), q
        sq = sample_sql(q, ErrorClause(0.1), "imps_s", "imps_t", stratified_on=("geo", "publisher"))
        exact_query = f"SELECT {keys + ', ' if keys else ''}{', '.join(aggregates)}{rest}"
        truth = {r[:len(groups)]: r[len(groups):] for r in con.execute(exact_query).fetchall()}
        for row in con.execute(sq.sql).fetchall():
            key, values, bounds = row[:len(groups)], row[len(groups):][:4], row[len(groups) + 4:]
            for i, kind in enumerate(KINDS):
                low, high, relative = bounds[3 * i:3 * i + 3]
                true = truth[key][i]
                if values[i] is None or true is None:
                    continue
                estimate, true = float(values[i]), float(true)
                if relative is None:
                    unknown[kind] += 1
                elif relative == 0:
                    exact[kind] += 1
                    if not math.isclose(estimate, true, rel_tol=1e-9, abs_tol=1e-9):
                        wrong.append((q.where, key, kind, estimate, true))
                else:
                    slack = 1e-9 * max(1.0, abs(true))
                    counted[kind] += 1
                    covered[kind] += low - slack <= true <= high + slack
                    scale = abs(estimate) if abs(estimate) > 1 else abs(estimate) + 1
                    ratios[kind].append(abs(estimate - true) / scale / relative)
    con.close()
    return {"coverage": {k: covered[k] / counted[k] for k in KINDS}, "counted": counted,
            "exact": exact, "unknown": unknown, "wrong": wrong,
            "median_ratio": {k: float(np.median(ratios[k])) for k in KINDS},
            "sample_rows": sample.num_rows}


def test_the_sample_is_bottom_k_and_a_fraction() -> None:
    base, sample, strata = _data(SEED)
    population, kept = strata.column("__pop_n").to_numpy(), strata.column("__samp_n").to_numpy()
    assert (kept[population <= MIN_ROWS] == population[population <= MIN_ROWS]).all()
    large = population > MIN_ROWS
    assert (kept[large] >= MIN_ROWS).all()
    big = population > 10 * MIN_ROWS / FRACTION
    assert np.allclose(kept[big] / population[big], FRACTION, rtol=0.25)
    assert 0.05 < sample.num_rows / base.num_rows < 0.25


@pytest.mark.parametrize("kind", KINDS)
def test_bounds_cover_the_exact_value_at_the_confidence(measured: dict[str, Any],
                                                        kind: str) -> None:
    coverage, counted = measured["coverage"][kind], measured["counted"][kind]
    assert counted > 5000
    assert 0.93 <= coverage <= 0.97, (kind, coverage, counted)


@pytest.mark.parametrize("kind", KINDS)
def test_stated_errors_are_the_size_of_actual_errors(measured: dict[str, Any], kind: str) -> None:
    assert 0.2 <= measured["median_ratio"][kind] <= 0.5, measured["median_ratio"]


def test_exact_estimates_are_exact(measured: dict[str, Any]) -> None:
    assert measured["wrong"] == []
    # complete strata, and count(*) of whole strata (queries on geo and publisher only)
    assert measured["exact"]["count_star"] > measured["exact"]["sum"] > 500
    # thin groups (< 10 sample rows) have no relative error: a minority
    assert 0 < measured["unknown"]["avg"] < measured["counted"]["avg"]
