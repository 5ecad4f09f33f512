"""The GDELT study's round-by-round timing of every layout (embedded store and reference)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from colonnade.bench import gdelt


@pytest.mark.unit
@pytest.mark.timeout(300)
def test_rounds_time_every_layout_and_check_their_answers(tmp_path: Path) -> None:
    report = gdelt.main(rows=3000, out=tmp_path, repeats=1, warmup_s=0, rounds=2, echo=lambda _: None)
    rounds = json.loads((tmp_path / "gdelt.json").read_text())["rounds"]
    assert rounds == json.loads(json.dumps(report["rounds"]))
    assert rounds["rounds"] == 2 and rounds["order"] == ["colonnade (embedded)", "duckdb+parquet (reference)"]
    for name in rounds["order"]:
        assert set(rounds["seconds"][name]) == {"read_all", *gdelt.QUERIES}
        assert all(lo <= hi for lo, hi in rounds["spread"][name].values())
    assert set(rounds["ratios"]["colonnade (embedded)"]) == {*gdelt.QUERIES, "read_all_vs_reference"}
    assert "Round by round (median of 2 rounds" in (tmp_path / "gdelt.md").read_text()
    assert gdelt.main(rows=3000, out=tmp_path, repeats=1, warmup_s=0, rounds=0, echo=lambda _: None)["rounds"] is None
