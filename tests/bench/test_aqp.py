"""``colonnade bench aqp`` end to end at a small size: the report's parts exist and hold what
they say (exact answers checked against the generated events, coverage counted)."""

from __future__ import annotations

import json
from pathlib import Path

from colonnade.bench import aqp


def test_bench_aqp_reports_speed_coverage_and_upkeep(tmp_path: Path) -> None:
    report = aqp.main(events=60_000, out=tmp_path, queries=15, repeats=1, rounds=2, echo=lambda _: None)
    assert json.loads((tmp_path / "aqp-sqlite.json").read_text())["events"] == 60_000
    assert (tmp_path / "aqp-sqlite.png").stat().st_size > 0
    assert "## Coverage: 15 random queries" in (tmp_path / "aqp-sqlite.md").read_text()
    assert report["sample"]["base_version"] == 2  # the commit listing the sample, then the append
    assert report["sample"]["strata"] > 1000
    assert all(q["exact_correct"] for q in report["seed_queries"])
    assert [q["groups"] for q in report["seed_queries"]] == [20, 20, 20]
    assert report["seed_queries"][0]["max_actual_relative_error"] == 0.0  # counts: strata sizes
    kinds = report["random"]["kinds"]
    assert sum(v["groups"] for v in kinds.values()) > 0
    assert all(v["covered"] <= v["groups"] for v in kinds.values())
    assert report["ingest"]["plain_rows_per_s"] > 0 and report["build"]["seconds"] > 0
    # the ingest measured twice from empty datasets (the sample above is the last round's):
    # the share reported is the median of the rounds'
    rounds = report["ingest"]["rounds"]
    assert len(rounds) == 2
    for r in rounds:  # (its seconds are rounded to the millisecond)
        assert abs(r["cost_share"] - (1 - r["plain_seconds"] / r["sampled_seconds"])) < 0.05
    assert abs(report["ingest"]["cost_share"] - sum(r["cost_share"] for r in rounds) / 2) <= 1e-4
    assert abs(report["ingest"]["plain_seconds"] - sum(r["plain_seconds"] for r in rounds)) <= 2e-3
    assert "the median of 2 rounds from empty datasets" in (tmp_path / "aqp-sqlite.md").read_text()
