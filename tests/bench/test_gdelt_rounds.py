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
    for name in rounds["order"]:  # each timed call's system time and page faults, beside its time
        assert set(rounds["system"][name]) == {"read_all", *gdelt.QUERIES}
        for kept in rounds["system"][name].values():
            assert len(kept["system_s"]) == len(kept["minor_faults"]) == 2
            assert all(c >= 0 for c in kept["system_s"]) and all(f >= 0 for f in kept["minor_faults"])
        slowest = rounds["slowest_read_all"][name]
        assert slowest["seconds"] == rounds["spread"][name]["read_all"][1] >= slowest["median_seconds"]
        assert slowest["minor_faults"] in rounds["system"][name]["read_all"]["minor_faults"]
    md = (tmp_path / "gdelt.md").read_text()
    assert "Round by round (median of 2 rounds" in md
    assert f"- colonnade (embedded): {rounds['slowest_read_all']['colonnade (embedded)']['seconds']:.2f} s" in md
    assert gdelt.main(rows=3000, out=tmp_path, repeats=1, warmup_s=0, rounds=0, echo=lambda _: None)["rounds"] is None
