"""``colonnade bench geo`` and ``colonnade bench tiles``, run small: every answer and every block
they report was checked against the data (they raise otherwise), and the reports hold what the
README quotes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from colonnade.bench import geo, tiles


@pytest.mark.unit
def test_geo_bench_small_run(tmp_path: Path) -> None:
    report = geo.main(rows=30_000, boxes=3, repeats=1, out=tmp_path, echo=lambda _: None)
    saved = json.loads((tmp_path / "geo.json").read_text())
    assert saved["rows"] == 30_000 and (tmp_path / "geo.png").stat().st_size > 0
    assert "| 1° |" in (tmp_path / "geo.md").read_text()
    for side in ("1", "10", "45"):
        size = report["sizes"][side]
        assert size["correct"] and len(size["runs"]) == 3
        assert 0 < size["curve"]["mean_share"] <= size["month"]["mean_share"] <= 1
    assert report["curve_dataset"]["off_curve_rows"] > 0  # the generator writes events without a place
    assert report["encode_points_per_s"]["hilbert"] > 1e6


@pytest.mark.unit
def test_land_cover_tiles_are_classes_in_regions() -> None:
    t = tiles.land_cover(zoom=2, size=64)
    assert len(t) == 16 and all(a.shape == (64, 64) and a.dtype == np.uint8 for a in t.values())
    cells = np.concatenate([a.ravel() for a in t.values()])
    assert set(np.unique(cells)) <= set(range(8)) and len(np.unique(cells)) >= 4
    assert tiles.summary([0.01, 0.02, 0.03])["p50_ms"] == pytest.approx(20.0)


@pytest.mark.cassandra
@pytest.mark.timeout(900)
def test_tiles_bench_small_run_on_cassandra(cassandra_node: str, cassandra_admin: Any, tmp_path: Path) -> None:
    keyspace = "bench_tiles_smoke"
    try:
        report = tiles.main(store=f"cassandra://{cassandra_node}/{keyspace}", out=tmp_path, write_iterations=1,
                            read_iterations=2, echo=lambda _: None)
    finally:
        for ks in (keyspace, f"{keyspace}_tiles"):
            cassandra_admin.execute(f"DROP KEYSPACE IF EXISTS {ks}", timeout=300)
    saved = json.loads((tmp_path / f"tiles-{report['nodes']}node.json").read_text())
    for op, n in (("write", 1), ("read", 2), ("read_aligned", 2)):
        assert set(saved[op]) == set(tiles.LAYOUTS) and all(v["n"] == n for v in saved[op].values()), op
    assert saved["colonnade_bytes"] > 0 and "write-optimized" in (tmp_path / f"tiles-{report['nodes']}node.md").read_text()
