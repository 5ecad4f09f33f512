"""``colonnade sql`` with several statements (split by DuckDB's parser) and per-dataset versions,
through the real console script."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

import colonnade

pytestmark = pytest.mark.unit

PYTHON = sys.executable
COLONNADE = str(Path(PYTHON).with_name("colonnade"))


def run(store: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLONNADE_")}
    return subprocess.run([COLONNADE, "--store", str(store), *args], capture_output=True, text=True,
                          env=env, input=input, timeout=300)


def test_each_statement_on_stdin_is_answered_in_turn(events: Path) -> None:
    script = "SELECT 1 AS a;\nSELECT 'x;y' AS b; -- a comment; with a semicolon\nSELECT 3 AS c /* ; */;\n"
    result = run(events, "sql", "-", "--format", "csv", input=script)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "a\n1\n\nb\nx;y\n\nc\n3\n"


def test_each_answer_in_every_format(events: Path) -> None:
    script = "SELECT 1 AS a; SELECT 2 AS b"
    assert run(events, "sql", "--format", "json", script).stdout == '[\n{"a": 1}\n]\n[\n{"b": 2}\n]\n'
    assert run(events, "sql", "--format", "jsonl", script).stdout == '{"a": 1}\n{"b": 2}\n'
    assert run(events, "sql", script).stdout == "a\n-\n1\n\nb\n-\n2\n"


def test_statements_share_one_session_and_quiet_ones_print_nothing(events: Path) -> None:
    script = ("SET threads = 1; CREATE TEMP TABLE per_region AS SELECT region, count(*) AS n FROM events "
              "GROUP BY region; SELECT * FROM per_region ORDER BY region; DROP TABLE per_region;")
    result = run(events, "sql", "-", "--format", "csv", input=script)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "region,n\nnorth,3\nsouth,2\nwest,1\n"


def test_a_failing_statement_stops_the_script_after_the_answers_before_it(events: Path) -> None:
    result = run(events, "sql", "--format", "csv", "SELECT 1 AS a; SELECT * FROM nowhere; SELECT 3 AS c")
    assert result.returncode == 1
    assert result.stdout == "a\n1\n"
    assert result.stderr.startswith("error: ") and "nowhere" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_only_comments_is_an_empty_query(events: Path) -> None:
    result = run(events, "sql", "-", input="-- nothing here;\n;\n")
    assert result.returncode == 2
    assert "the query is empty" in result.stderr


@pytest.fixture
def two_datasets(events: Path, new_events: Callable[[], pa.Table]) -> Path:
    """``events`` and ``other`` at version 2, each with 6 rows at version 1 and 12 at 2."""
    with colonnade.connect(str(events)) as store:
        store.dataset("events").append(new_events())
        other = store.create_dataset("other", new_events().schema)
        other.append(new_events())
        other.append(new_events())
    return events


COUNTS = "SELECT (SELECT count(*) FROM events) AS events, (SELECT count(*) FROM other) AS other"


@pytest.mark.parametrize(("pins", "answer"), [
    ([], "12,12"),
    (["--version", "1"], "6,6"),
    (["--version", "events=1"], "6,12"),
    (["--version", "other=1"], "12,6"),
    (["--version", "events=1", "--version", "other=1"], "6,6"),
    (["--version", "1", "--version", "other=2"], "6,12"),
    (["--version", "2", "--version", "events=1"], "6,12"),
])
def test_versions_pin_every_dataset_or_one(two_datasets: Path, pins: list[str], answer: str) -> None:
    result = run(two_datasets, "sql", "--format", "csv", *pins, COUNTS)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"events,other\n{answer}\n"


def test_a_pin_of_a_missing_dataset_is_an_error(two_datasets: Path) -> None:
    result = run(two_datasets, "sql", "--version", "nope=1", COUNTS)
    assert result.returncode == 1
    assert result.stderr == "error: dataset 'nope' does not exist\n"


def test_a_pin_of_a_missing_version_is_an_error(two_datasets: Path) -> None:
    result = run(two_datasets, "sql", "--version", "other=9", COUNTS)
    assert result.returncode == 1
    assert result.stderr.startswith("error: dataset 'other' has no version 9")


@pytest.mark.parametrize("pin", ["x", "events=", "=3", "events=-1", "events=one"])
def test_malformed_pins_are_usage_errors(two_datasets: Path, pin: str) -> None:
    result = run(two_datasets, "sql", "--version", pin, COUNTS)
    assert result.returncode == 2
    assert "--version" in result.stderr and "DATASET=N" in result.stderr
