"""The ``WITH ERROR`` tail: found on tokens (not in literals, comments or a CTE named error),
parsed in SnappyData's grammar, and refused with one-line messages."""

from __future__ import annotations

import subprocess
import sys

import pytest

from colonnade.errors import QueryError
from colonnade.query.error_clause import BEHAVIORS, ErrorClause, split_error_clause

pytestmark = pytest.mark.unit


def test_the_full_clause_is_cut_off_and_parsed() -> None:
    head, clause = split_error_clause(
        "SELECT geo, avg(bid) AS a FROM imps WHERE publisher = 'p1' GROUP BY geo ORDER BY geo "
        "LIMIT 10 with Error 0.1 Confidence 0.9 behavior 'LOCAL_OMIT';")
    assert head == ("SELECT geo, avg(bid) AS a FROM imps WHERE publisher = 'p1' GROUP BY geo "
                    "ORDER BY geo LIMIT 10")
    assert clause == ErrorClause(0.1, 0.9, "local_omit")


@pytest.mark.parametrize(("sql", "head", "clause"), [
    ("SELECT count(*) FROM t WITH ERROR 0.05", "SELECT count(*) FROM t", ErrorClause(0.05)),
    ("SELECT count(*) FROM t WITH ERROR .2 BEHAVIOR 'strict'", "SELECT count(*) FROM t",
     ErrorClause(0.2, behavior="strict")),
    ("SELECT count(*) FROM t WITH ERROR 0.1 CONFIDENCE .99", "SELECT count(*) FROM t",
     ErrorClause(0.1, 0.99)),
    ("SELECT count(*) FROM t WITH ERROR 1e-2", "SELECT count(*) FROM t", ErrorClause(0.01)),
    ("SELECT count(*) FROM t WITH ERROR BEHAVIOR 'partial_run_on_base_table' CONFIDENCE 0.8",
     "SELECT count(*) FROM t", ErrorClause(None, 0.8, "partial_run_on_base_table")),
    # a bare WITH ERROR accepts any error, and then does nothing by default
    ("SELECT count(*) FROM t WITH ERROR", "SELECT count(*) FROM t",
     ErrorClause(None, 0.95, "do_nothing")),
    ("SELECT count(*) FROM t WHERE s = 'with error 0.5' WITH ERROR",
     "SELECT count(*) FROM t WHERE s = 'with error 0.5'", ErrorClause(None, behavior="do_nothing")),
    ("WITH cte AS (SELECT * FROM t) SELECT count(*) FROM cte with error .2 behavior 'STRICT'",
     "WITH cte AS (SELECT * FROM t) SELECT count(*) FROM cte", ErrorClause(0.2, behavior="strict")),
    ("SELECT sum(x) FROM t /* with error */ WITH\n  ERROR 0.05 ;",
     "SELECT sum(x) FROM t /* with error */", ErrorClause(0.05)),
    ("SELECT sum(x) FROM (SELECT x FROM t) WITH ERROR 0.3", "SELECT sum(x) FROM (SELECT x FROM t)",
     ErrorClause(0.3)),
])
def test_the_tail_is_found_on_tokens(sql: str, head: str, clause: ErrorClause) -> None:
    assert split_error_clause(sql) == (head, clause)


@pytest.mark.parametrize("sql", [
    "SELECT x FROM t -- with error 0.1\n",
    "SELECT 'with error 0.1' AS s FROM t",
    "WITH error AS (SELECT 1 AS x) SELECT x FROM error",
    "WITH error (x) AS (SELECT 1) SELECT x FROM error",
    'SELECT "error" FROM t',
    "SELECT count(*) FROM t WHERE s = 'unterminated",
])
def test_no_tail(sql: str) -> None:
    assert split_error_clause(sql) == (sql, None)


def test_a_query_without_the_word_error_does_not_import_sqlglot() -> None:
    code = ("import sys; from colonnade.query.error_clause import split_error_clause; "
            "assert split_error_clause('SELECT 1 FROM t') == ('SELECT 1 FROM t', None); "
            "print('sqlglot' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(("tail", "message"), [
    ("WITH ERROR 1.5", "WITH ERROR must be between 0 and 1 (exclusive), got 1.5"),
    ("WITH ERROR 0", "WITH ERROR must be between 0 and 1 (exclusive), got 0"),
    ("WITH ERROR -0.1", "WITH ERROR must be between 0 and 1 (exclusive), got -0.1"),
    ("WITH ERROR 0.1 CONFIDENCE 1", "CONFIDENCE must be between 0 and 1 (exclusive), got 1"),
    ("WITH ERROR 0.1 CONFIDENCE", "CONFIDENCE needs a number, got nothing"),
    ("WITH ERROR 0.1 BEHAVIOR 'sometimes'",
     "unknown BEHAVIOR 'sometimes': expected one of do_nothing, local_omit, strict, "
     "run_on_full_table, partial_run_on_base_table"),
    ("WITH ERROR 0.1 BEHAVIOR strict",
     "BEHAVIOR needs a quoted name ('do_nothing', ...), got 'strict'"),
    ("WITH ERROR 0.1 ORDER BY 1", "unexpected 'ORDER BY' after WITH ERROR: expected WITH ERROR [e] "
     "[CONFIDENCE c] [BEHAVIOR 'b'] at the end of the query"),
    ("WITH ERROR 0.1 CONFIDENCE 0.9 CONFIDENCE 0.8", "unexpected 'CONFIDENCE' after WITH ERROR"),
    ("WITH ERROR 0.1; SELECT 2", "unexpected 'SELECT' after WITH ERROR"),
])
def test_bad_clauses_are_one_line_errors(tail: str, message: str) -> None:
    with pytest.raises(QueryError) as raised:
        split_error_clause(f"SELECT count(*) FROM t {tail}")
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)


def test_the_clause_checks_its_values_when_made_directly() -> None:
    assert ErrorClause(0.5).behavior == "run_on_full_table"
    assert BEHAVIORS == ("do_nothing", "local_omit", "strict", "run_on_full_table",
                         "partial_run_on_base_table")
    with pytest.raises(QueryError, match="CONFIDENCE must be between 0 and 1"):
        ErrorClause(0.5, confidence=0.0)
    with pytest.raises(QueryError, match="unknown BEHAVIOR 'STRICT'"):
        ErrorClause(0.5, behavior="STRICT")
