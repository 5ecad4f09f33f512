"""The SQL of estimates and error bounds over a stratified sample, and the pieces it needs:
Student t and normal quantiles (no scipy), literals for re-running groups, DuckDB's names.

:mod:`colonnade.query.estimate_analysis` reads what a query asks; this module writes the common
table expressions that answer it from a sample relation ``S`` (the dataset's columns plus
``__stratum``) and a strata relation ``T(__stratum, __pop_n, __samp_n)`` (N_h and n_h). With
w_h = N_h/n_h and c_h = N_h(N_h−n_h)/(n_h(n_h−1)), per output group (its domain: the rows that
pass WHERE and fall in the group, y_i = 0 outside it):

* a total (count(*), count(x), sum(x)) is Σ w_h Σy with variance Σ c_h (Σy² − (Σy)²/n_h);
  a stratum without a row in the domain adds nothing to either, so WHERE is pushed down as is;
* avg(x) is the ratio R = Σ w_h Σy / Σ w_h Σx (x_i: x is not null) with the linearized variance
  of u = y − R·x, each stratum's term times m_h(n_h−1)/((m_h−1)n_h) for small domains;
* the bounds are ± q·SE, q Student's t quantile. For counts, SnappyData's rule: m_d − 1 degrees
  of freedom when the group has m_d < 30 sample rows (outside complete strata), else the normal
  quantile; and a Wilson score interval on the share of the sampled strata's rows instead of
  ± q·SE (a Wald interval misses whenever the sample sees a share of 0 or 1), whose larger side
  is the absolute error. For sum and avg, min(m_d − 1, Satterthwaite's) degrees of freedom,
  Satterthwaite's counting each stratum's own rows in the domain: with SnappyData's rule, groups
  of 30–100 rows spread thinly over many strata were covered 0.89 of the time, not 0.95;
* an estimate is exact (error 0) when every stratum it reads is complete (n_h = N_h), or when
  the caller says so (a count(*) whose WHERE and GROUP BY read only stratification columns);
* a group of fewer than :data:`MIN_DOMAIN_ROWS` sample rows has no relative error (NULL): the
  interval is unreliable there, so the behavior treats it as failing. So does a stratum of one
  sample row out of more (its variance is unknown).

The experiments behind these choices (coverage at 0.95 per kind) are in the AQP design memo and
``tests/query/test_estimate_coverage.py``.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import math
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Below this many sample rows in a group (outside complete strata), the relative error is NULL.
MIN_DOMAIN_ROWS = 10
#: Student's t is inlined below this many degrees of freedom; from there on, counts take the
#: normal quantile, sums and averages the normal one corrected toward t.
NORMAL_FROM_ROWS = 30
#: Internal names start with this, so that they cannot meet a user's.
PREFIX = "__aqp_"


# -- quantiles -----------------------------------------------------------------------------------
def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (Lentz's method)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for aa in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                   -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 3e-16:
            break
    return h


def _beta_regularized(a: float, b: float, x: float) -> float:
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x)
                     + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1 - x) / b


def _upper_tail_root(tail: Callable[[float], float], target: float) -> float:
    """The t ≥ 0 where the decreasing ``tail(t)`` equals ``target``, by bisection."""
    low, high = 0.0, 1.0
    while tail(high) > target:
        high *= 2
    for _ in range(200):
        middle = (low + high) / 2
        if middle in (low, high):
            break
        low, high = (middle, high) if tail(middle) > target else (low, middle)
    return (low + high) / 2


@functools.lru_cache(maxsize=256)
def t_quantile(confidence: float, df: float | None) -> float:
    """The two-sided quantile: P(|T| ≤ q) = confidence for Student's t with ``df`` degrees of
    freedom (None: the normal distribution), e.g. 2.5706 for 0.95 and df 5, 1.95996 for None."""
    alpha = (1 - confidence) / 2
    if df is None:
        return _upper_tail_root(lambda z: 0.5 * math.erfc(z / math.sqrt(2)), alpha)
    return _upper_tail_root(lambda t: 0.5 * _beta_regularized(df / 2, 0.5, df / (df + t * t)),
                            alpha)


# -- the estimator --------------------------------------------------------------------------------
@dataclass(frozen=True)
class GroupKey:
    """A GROUP BY expression (SQL over the dataset's rows) and its column in the generated
    expressions: the column itself when the key is one (so DuckDB names it as the dataset does),
    else ``__aqp_g<i>``."""

    expression: str
    column: str
    is_column: bool


@dataclass(frozen=True)
class Estimate:
    """An aggregate to estimate: ``kind`` count_star | count | sum | avg, its argument's SQL,
    and whether it is exact by construction (the caller knows the strata)."""

    kind: str
    argument: str | None
    exact: bool = False


def _y(k: int, a: Estimate) -> str:
    return f"{PREFIX}m" if a.kind == "count_star" else f"{PREFIX}y{k}"


def _per_stratum(k: int, a: Estimate) -> list[str]:
    if a.kind == "count_star":
        return []
    if a.kind == "count":
        return [f"count({a.argument})::DOUBLE AS {PREFIX}y{k}"]
    value = f"CAST({a.argument} AS DOUBLE)"
    return [f"coalesce(sum({value}), 0) AS {PREFIX}y{k}",
            f"coalesce(sum(pow({value}, 2)), 0) AS {PREFIX}yy{k}",
            f"count({a.argument})::DOUBLE AS {PREFIX}x{k}"]


def summary_column(argument: str | None, columns: Mapping[str, tuple[int, bool]]) -> tuple[int, bool] | None:
    """(index, numeric) in a per-stratum summary of the column an aggregate's argument is, if it
    is one of ``columns`` (lower-cased names), bare or quoted."""
    if argument is None:
        return None
    name = argument.strip()
    if len(name) > 1 and name[0] == name[-1] == '"':
        name = name[1:-1]
    return columns.get(name.lower())


def _summarised(k: int, a: Estimate, columns: Mapping[str, tuple[int, bool]]) -> list[str]:
    """:func:`_per_stratum`'s columns read from a per-stratum summary (see
    :func:`estimator_ctes`)."""
    if a.kind == "count_star":
        return []
    found = summary_column(a.argument, columns)
    assert found is not None
    i = found[0]
    if a.kind == "count":
        return [f"__n{i}::DOUBLE AS {PREFIX}y{k}"]
    return [f"__s{i} AS {PREFIX}y{k}", f"__ss{i} AS {PREFIX}yy{k}", f"__n{i}::DOUBLE AS {PREFIX}x{k}"]


def _term(k: int, a: Estimate) -> str:
    """The stratum's variance term: c_h (Σy² − (Σy)²/n_h), of u = y − R·x for avg (times the
    small-domain factor m_h(n_h−1)/((m_h−1)n_h)); y² = y for counts (y is 0 or 1)."""
    p, y = PREFIX, _y(k, a)
    if a.kind in ("count_star", "count"):
        return f"{p}c * ({y} - {y} * {y} / {p}samp) AS {p}v{k}"
    if a.kind == "sum":
        return f"{p}c * ({p}yy{k} - {y} * {y} / {p}samp) AS {p}v{k}"
    r, x, yy = f"{p}r{k}", f"{p}x{k}", f"{p}yy{k}"
    return (f"{p}c * (({yy} - 2 * {r} * {y} + {r} * {r} * {x}) - pow({y} - {r} * {x}, 2) / {p}samp)"
            f" * CASE WHEN {x} > 1 THEN {x} * ({p}samp - 1) / (({x} - 1) * {p}samp) ELSE 1 END"
            f" AS {p}v{k}")


def _per_group(k: int, a: Estimate) -> list[str]:
    p, y, v = PREFIX, _y(k, a), f"{PREFIX}v{k}"
    if a.kind in ("count_star", "count"):
        return [f"coalesce(sum({p}wt * {y}), 0) AS {p}raw{k}",
                f"coalesce(sum(CASE WHEN {p}census THEN {y} ELSE 0 END), 0) AS {p}exact_part{k}",
                f"coalesce(sum(CASE WHEN {p}census THEN 0 ELSE {p}wt * {y} END), 0) "
                f"AS {p}sampled_part{k}",
                f"greatest(coalesce(sum({v}), 0), 0) AS {p}var{k}"]
    x = f"{p}x{k}"
    total = f"nullif(sum({p}wt * {x}), 0)"
    return [f"CASE WHEN sum({x}) > 0 THEN sum({p}wt * {y}) END AS {p}raw{k}" if a.kind == "sum"
            else f"sum({p}wt * {y}) / {total} AS {p}raw{k}",
            f"greatest(sum({v}), 0)" + ("" if a.kind == "sum" else f" / pow({total}, 2)")
            + f" AS {p}var{k}",
            f"coalesce(sum(CASE WHEN {p}census THEN 0 ELSE {x} END), 0) AS {p}rows{k}",
            # Satterthwaite's degrees of freedom, each stratum's from its rows in the domain
            f"pow(sum({v}), 2) / nullif(sum(pow({v}, 2) / greatest({x} - 1, 1)), 0) AS {p}satt{k}"]


def _quantile(df: str) -> str:
    """Student's t quantile of ``df`` (SQL, whole) degrees of freedom: from the inlined table
    below 30, else the normal one corrected by Cornish-Fisher's expansion (to 1e-4 there)."""
    p, z = PREFIX, f"{PREFIX}z"
    return (f"CASE WHEN {df} >= {NORMAL_FROM_ROWS} THEN {z} + (pow({z}, 3) + {z}) / (4 * {df}) "
            f"+ (5 * pow({z}, 5) + 16 * pow({z}, 3) + 3 * {z}) / (96 * pow({df}, 2)) "
            f"+ (3 * pow({z}, 7) + 19 * pow({z}, 5) + 17 * pow({z}, 3) - 15 * {z}) "
            f"/ (384 * pow({df}, 3)) "
            f"WHEN {df} >= 1 THEN {p}t[CAST({df} AS BIGINT)] END")


def _bounds(k: int, a: Estimate) -> list[list[str]]:
    """Columns of the CTEs after ``__aqp_groups``, by stage: a stage uses the ones before it
    (separate CTEs: DuckDB would copy a lateral alias's expression into every use)."""
    p = PREFIX
    counted = a.kind in ("count_star", "count")
    raw, q = f"{p}raw{k}", f"{p}q{k}"
    # sample rows of the domain (sum, avg: of its values that are not NULL)
    rows = f"{p}m_sampled" if counted else f"{p}rows{k}"
    exact = "TRUE" if a.exact else f"{p}all_census"
    stages: list[list[str]] = [[f"CAST(round({raw}) AS BIGINT) AS {p}est{k}" if counted
                                else f"{raw} AS {p}est{k}"], [], [], [], []]
    if counted:  # SnappyData's rule: t of m_d - 1 degrees of freedom below 30 sample rows, else z
        share, n = f"{p}p{k}", f"{p}n{k}"
        stages[0] += [f"CASE WHEN {rows} >= {NORMAL_FROM_ROWS} THEN {p}z WHEN {rows} >= 2 "
                      f"THEN {p}t[CAST({rows} AS BIGINT) - 1] END AS {q}",
                      f"{p}sampled_part{k} / nullif({p}pop_sampled, 0) AS {share}"]
        stages[1].append(f"CASE WHEN {share} > 0 AND {share} < 1 AND {p}var{k} > 0 "
                         f"THEN {share} * (1 - {share}) * {p}pop_sampled * {p}pop_sampled "
                         f"/ {p}var{k} "
                         f"ELSE {p}samp_sampled END AS {n}")
        center = f"({share} + {q} * {q} / (2 * {n})) / (1 + {q} * {q} / {n})"
        half = (f"{q} / (1 + {q} * {q} / {n}) * sqrt({share} * (1 - {share}) / {n} "
                f"+ {q} * {q} / (4 * {n} * {n}))")
        stages[2] += [f"CASE WHEN {exact} THEN {raw} WHEN NOT {p}any_unknown THEN {p}exact_part{k} "
                      f"+ {p}pop_sampled * ({center} {sign} {half}) END AS {p}{name}{k}"
                      for name, sign in (("lower_bound", "-"), ("upper_bound", "+"))]
        stages[3].append(f"CASE WHEN {exact} THEN 0 ELSE greatest({p}upper_bound{k} - {raw}, "
                         f"{raw} - {p}lower_bound{k}) END AS {p}absolute_error{k}")
        last = 4
    else:  # the same, also capped by the domain's effective degrees of freedom
        df = f"{p}df{k}"
        stages[0].append(f"floor(least({rows} - 1, coalesce({p}satt{k}, {rows} - 1))) AS {df}")
        stages[1].append(f"{_quantile(df)} AS {q}")
        stages[2].append(f"CASE WHEN {exact} THEN 0 WHEN NOT {p}any_unknown "
                         f"THEN {q} * sqrt({p}var{k}) END AS {p}absolute_error{k}")
        stages[3] += [f"{raw} - {p}absolute_error{k} AS {p}lower_bound{k}",
                      f"{raw} + {p}absolute_error{k} AS {p}upper_bound{k}"]
        last = 3
    stages[last].append(
        f"CASE WHEN {exact} THEN 0 WHEN {rows} >= {MIN_DOMAIN_ROWS} THEN {p}absolute_error{k} / "
        f"CASE WHEN abs({raw}) > 1 THEN abs({raw}) ELSE abs({raw}) + 1 END END "
        f"AS {p}relative_error{k}")
    return [stage for stage in stages if stage]


def estimator_ctes(sample_rel: str, strata_rel: str, where: str | None, keys: Sequence[GroupKey],
                   estimates: Sequence[Estimate], confidence: float,
                   summary: tuple[str, Mapping[str, tuple[int, bool]]] | None = None) -> str:
    """``WITH ...`` up to ``__aqp_bounds``: one row per group, with its keys and, per estimate
    k, ``__aqp_est<k>``, ``__aqp_absolute_error<k>``, ``__aqp_relative_error<k>``,
    ``__aqp_lower_bound<k>`` and ``__aqp_upper_bound<k>``.

    ``summary`` (relation, columns): when the keys and WHERE read only the stratification
    columns and each estimate is count(*) or of a bare column, the sums per stratum are read
    from a summary of the sample with one row per stratum: its stratification columns,
    ``__m`` (rows) and per column i ``__n<i>`` (non-null values) and, numeric ones,
    ``__s<i>``, ``__ss<i>`` (sum, sum of squares)."""
    p = PREFIX
    t_values = ", ".join(repr(t_quantile(confidence, df)) for df in range(1, NORMAL_FROM_ROWS))
    key_items = [k.column if k.is_column else f"{k.expression} AS {k.column}" for k in keys]
    key_list = ", ".join(k.column for k in keys)
    ratios = [f"sum({p}pop / {p}samp * {p}y{k}) OVER {p}group / "
              f"nullif(sum({p}pop / {p}samp * {p}x{k}) OVER {p}group, 0) AS {p}r{k}"
              for k, a in enumerate(estimates) if a.kind == "avg"]
    sampled = f"CASE WHEN {p}census THEN 0 ELSE {{}} END"
    window = f" WINDOW {p}group AS ({'PARTITION BY ' + key_list if keys else ''})" if ratios else ""
    lines = [
        f"WITH {p}quantiles AS (",
        f"  SELECT [{t_values}]::DOUBLE[] AS {p}t, {t_quantile(confidence, None)!r} AS {p}z),",
        f"{p}per_stratum AS (",
        *(["  SELECT " + ", ".join([*key_items, "__stratum", f"__m::DOUBLE AS {p}m"]
                                   + [c for k, a in enumerate(estimates) for c in _summarised(k, a, summary[1])]),
           f"  FROM {summary[0]} AS {p}s",
           *([f"  WHERE {where}"] if where else []),
           "  ),"] if summary is not None else
          ["  SELECT " + ", ".join([*key_items, "__stratum", f"count(*)::DOUBLE AS {p}m"]
                                   + [c for k, a in enumerate(estimates) for c in _per_stratum(k, a)]),
           f"  FROM {sample_rel} AS {p}s",
           *([f"  WHERE {where}"] if where else []),
           "  GROUP BY ALL),"]),
        f"{p}strata AS (",
        f"  SELECT s.*, t.__pop_n::DOUBLE AS {p}pop, t.__samp_n::DOUBLE AS {p}samp",
        f"  FROM {p}per_stratum AS s JOIN {strata_rel} AS t ON s.__stratum = t.__stratum",
        "  WHERE t.__pop_n > 0),",
        f"{p}weighted AS (",
        f"  SELECT *, {p}pop / {p}samp AS {p}wt, {p}samp >= {p}pop AS {p}census,",
        f"    {p}samp <= 1 AND {p}samp < {p}pop AS {p}unknown,",
        f"    CASE WHEN {p}samp > 1 AND {p}samp < {p}pop",
        f"      THEN {p}pop * ({p}pop - {p}samp) / ({p}samp * ({p}samp - 1)) ELSE 0 END AS {p}c"
        + "".join(f",\n    {r}" for r in ratios),
        f"  FROM {p}strata{window}),",
        f"{p}terms AS (",
        "  SELECT *" + "".join(f"\n    , {_term(k, a)}" for k, a in enumerate(estimates)),
        f"  FROM {p}weighted),",
        f"{p}groups AS (",
        "  SELECT " + ",\n    ".join([
            *(k.column for k in keys),
            f"coalesce(bool_or({p}unknown), FALSE) AS {p}any_unknown",
            # no row of a whole-table query: exact if every stratum is complete
            f"coalesce(bool_and({p}census), FALSE) AS {p}all_census" if keys else
            f"coalesce(bool_and({p}census), (SELECT coalesce(bool_and(__samp_n >= __pop_n), TRUE) "
            f"FROM {strata_rel} AS t WHERE __pop_n > 0)) AS {p}all_census",
            f"coalesce(sum({sampled.format(p + 'm')}), 0) AS {p}m_sampled",
            f"coalesce(sum({sampled.format(p + 'pop')}), 0) AS {p}pop_sampled",
            f"coalesce(sum({sampled.format(p + 'samp')}), 0) AS {p}samp_sampled",
            *(c for k, a in enumerate(estimates) for c in _per_group(k, a))]),
        f"  FROM {p}terms" + (f" GROUP BY {key_list}" if keys else "") + "),",
    ]
    stages = [_bounds(k, a) for k, a in enumerate(estimates)]
    depth = max(len(s) for s in stages)
    source = f"{p}groups, {p}quantiles"
    for i in range(depth):
        name = f"{p}bounds" if i == depth - 1 else f"{p}stage{i}"
        columns = [c for s in stages if i < len(s) for c in s[i]]
        lines += [f"{name} AS (", "  SELECT *" + "".join(f"\n    , {c}" for c in columns),
                  f"  FROM {source})" + ("" if i == depth - 1 else ",")]
        source = name
    return "\n".join(lines)


# -- literals and names ----------------------------------------------------------------------------
def sql_literal(value: Any) -> str | None:
    """``value`` (as pyarrow's ``to_pylist`` gives it) as a DuckDB literal; None if it has no
    literal here (lists, structs, maps)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"CAST('{value!r}' AS DOUBLE)"
    if isinstance(value, decimal.Decimal):
        return f"CAST('{value}' AS DECIMAL(38, {max(0, -int(value.as_tuple().exponent))}))"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, dt.datetime):
        return f"CAST('{value.isoformat()}' AS {'TIMESTAMPTZ' if value.tzinfo else 'TIMESTAMP'})"
    if isinstance(value, dt.date):
        return f"CAST('{value.isoformat()}' AS DATE)"
    if isinstance(value, dt.time):
        return f"CAST('{value.isoformat()}' AS TIME)"
    if isinstance(value, dt.timedelta):
        micros = (value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds
        return f"to_microseconds({micros})"
    if isinstance(value, bytes):
        return "CAST('" + "".join(f"\\x{b:02X}" for b in value) + "' AS BLOB)"
    if isinstance(value, uuid.UUID):
        return f"CAST('{value}' AS UUID)"
    return None


_names_lock = threading.Lock()
_names_connection: Any = None


def duckdb_names(expressions: Iterable[str]) -> list[str | None]:
    """The name DuckDB gives each unaliased select expression (its parsed form printed back:
    ``count(*)`` → ``count_star()``, ``sum(a*b)`` → ``sum((a * b))``); None where DuckDB does not
    parse it. Asked of DuckDB's parser (``json_serialize_sql``), which no table is needed for."""
    return [_duckdb_name(e) for e in expressions]


@functools.lru_cache(maxsize=1024)
def _duckdb_name(expression: str) -> str | None:
    global _names_connection
    import duckdb

    with _names_lock:
        if _names_connection is None:
            _names_connection = duckdb.connect()
        try:
            rows = _names_connection.execute("SELECT json_deserialize_sql(json_serialize_sql(?))",
                                             ["SELECT " + expression]).fetchall()
        except duckdb.Error:
            return None
    text = rows[0][0] if rows else None
    return text[len("SELECT "):] if isinstance(text, str) and text.startswith("SELECT ") else None
