"""``colonnade bench joins`` end to end on a few thousand rows: every query's answer is checked
against DuckDB over Parquet inside the bench (a wrong one fails the run), the report has every
ratio and the concurrent reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from colonnade.bench import joins as study
from colonnade.bench.gdelt import BenchError


def test_bench_joins_runs_and_reports_every_ratio(tmp_path: Path) -> None:
    report = study.main(rows=3000, out=tmp_path, repeats=1, echo=lambda _: None)
    assert set(report["seconds"]) == set(study.QUERIES)
    assert all(set(r) == {"embedded cold", "embedded warm"} and all(v > 0 for v in r.values())
               for r in report["ratios"].values())
    assert set(report["concurrent_read_all_rows_per_s"]["embedded"]) == {"1", "2", "4"}
    text = (tmp_path / "joins.md").read_text()
    assert all(f"| {q} |" in text for q in study.QUERIES) and (tmp_path / "joins.png").exists()


def test_a_wrong_answer_fails_the_bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_load = study._load

    def load_without_an_actor(uri: str, tsv: Path, rows: int, dim: pa.Table, echo: Any) -> str:
        return real_load(uri, tsv, rows, dim.slice(1), echo)  # its events join nothing in Colonnade

    monkeypatch.setattr(study, "_load", load_without_an_actor)
    with pytest.raises(BenchError, match="J1 over embedded cold: .* ≠ DuckDB's"):
        study.main(rows=3000, out=tmp_path, repeats=1, echo=lambda _: None)
