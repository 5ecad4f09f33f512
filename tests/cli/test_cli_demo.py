"""``demo`` on 20,000 generated rows: answers checked against DuckDB reading the generated file."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import Result

from colonnade.bench.gdelt_data import GDELT_COLUMNS
from colonnade.cli.demo import run_demo

pytestmark = pytest.mark.unit

Invoke = Callable[..., Result]
ROWS = 20_000


def over_file(path: Path, query: str) -> tuple[Any, ...]:
    """``query`` with ``gdelt`` being the raw TSV, read by DuckDB on its own."""
    names = ", ".join(f"'{c}'" for c in GDELT_COLUMNS)
    source = (f"read_csv('{path}', delim='\t', header=false, quote='', escape='', "
              f"all_varchar=true, names=[{names}])")
    con = duckdb.connect()
    try:
        row = con.execute(query.replace("gdelt", source)).fetchone()
    finally:
        con.close()
    assert row is not None
    return tuple(row)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path, Path, Result]:
    from click.testing import CliRunner

    from colonnade.cli.main import cli

    root = tmp_path_factory.mktemp("demo")
    store, data = root / "demo.db", root / "data"
    result = CliRunner().invoke(cli, ["demo", "--rows", str(ROWS), "--store", str(store),
                                      "--data-dir", str(data), "--keep", "--json"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout), store, data / f"gdelt-{ROWS}.tsv", result


def test_demo_q1_counts_every_row_with_num_articles(demo_run: tuple[dict[str, Any], Path, Path, Result]) -> None:
    report, _, path, _ = demo_run
    assert path.exists()
    (expected,) = over_file(path, "SELECT count(NumArticles) FROM gdelt")
    (total,) = over_file(path, "SELECT count(*) FROM gdelt")
    assert total == ROWS
    q1 = next(q for q in report["queries"] if q["name"] == "Q1")
    assert list(q1["answer"][0].values()) == [expected]
    assert report["rows"] == ROWS
    assert report["ingest"]["rows"] == ROWS


def test_demo_q3_and_its_pruning(demo_run: tuple[dict[str, Any], Path, Path, Result]) -> None:
    report, _, path, _ = demo_run
    expected = over_file(path, "SELECT avg(AvgTone::DOUBLE), min(AvgTone::DOUBLE), max(AvgTone::DOUBLE) "
                               "FROM gdelt WHERE MonthYear::INTEGER = 198012")
    q3 = next(q for q in report["queries"] if q["name"] == "Q3")
    got = list(q3["answer"][0].values())
    assert all(math.isclose(a, b, rel_tol=1e-9) for a, b in zip(got, expected, strict=True))
    e = report["explain_q3"]
    assert e["partitions_scanned"] == 1 < e["partitions_total"]
    assert 1 <= e["segments_scanned"] < e["segments_total"]


def test_demo_q2_is_the_top_ten_actors_by_tone(demo_run: tuple[dict[str, Any], Path, Path, Result]) -> None:
    report, _, _, _ = demo_run
    q2 = next(q for q in report["queries"] if q["name"] == "Q2")
    tones = [row["tone"] for row in q2["answer"]]
    assert len(tones) == 10 and tones == sorted(tones, reverse=True)


def test_demo_store_holds_the_dataset(demo_run: tuple[dict[str, Any], Path, Path, Result],
                                      invoke: Invoke) -> None:
    _, store, _, _ = demo_run
    info = json.loads(invoke("--store", str(store), "describe", "gdelt", "--json", store=False).stdout)
    assert info["rows"] == ROWS
    assert info["partition_by"] == ["identity(MonthYear)"]
    assert len(info["columns"]) == 57
    assert invoke("--store", str(store), "verify", "gdelt", store=False).exit_code == 0


def test_demo_human_output_and_rerun(tmp_path: Path, invoke: Invoke) -> None:
    data = tmp_path / "data"
    first = invoke("demo", "--rows", "3000", "--data-dir", str(data))
    assert first.exit_code == 0, first.stderr
    for name in ("Q1", "Q2", "Q3"):
        assert f"\n{name}  SELECT" in "\n" + first.stdout
    assert "Q3 pruning: scanned " in first.stdout
    assert not (data / "gdelt-3000.tsv").exists()  # not kept without --keep
    assert "dropping" not in first.stderr
    second = invoke("demo", "--rows", "3000", "--data-dir", str(data))
    assert second.exit_code == 0, second.stderr
    assert "dropping the dataset 'gdelt' an earlier demo made" in second.stderr
    count = invoke("sql", "SELECT count(*) AS n FROM gdelt", "--format", "csv")
    assert count.stdout == "n\n3000\n"


def test_run_demo_from_python(tmp_path: Path) -> None:
    messages: list[str] = []
    result = run_demo(rows=2000, store=str(tmp_path / "py.db"), log=messages.append)
    assert result.rows == 2000
    assert result.data_file is None
    assert [q.name for q in result.queries] == ["Q1", "Q2", "Q3"]
    assert result.answer("Q1").num_rows == 1
    assert any(m.startswith("generating 2,000") for m in messages)
