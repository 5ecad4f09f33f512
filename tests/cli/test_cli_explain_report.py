"""``colonnade explain`` through the real console script: warnings about filters that were not
used for pruning (text and ``--json``), columns read only for the filter, and a LIMIT that reads
one segment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import colonnade

COLONNADE = str(Path(sys.executable).with_name("colonnade"))


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLONNADE_")}
    return subprocess.run([COLONNADE, *args], capture_output=True, text=True, env=env, timeout=120, check=False)


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("explain") / "s.db")
    n = 2000
    table = pa.table({
        "id": pa.array(range(n), pa.int64()),
        "name": pa.array([f"name-{i % 30}" for i in range(n)]),
        "score": pa.array([i / 8 for i in range(n)], pa.float64()),
    })
    with colonnade.connect(path) as store:
        store.create_dataset("people", table.schema, segment_rows=100).append(table)
    return path


QUERY = ("SELECT id FROM people WHERE upper(name) = 'NAME-7' AND CAST(id AS VARCHAR) LIKE '1%' "
         "AND score > 100 AND id < 1500")


def test_json_lists_warnings_and_filter_only_columns(store_path: str) -> None:
    result = run("--store", store_path, "explain", QUERY, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert "filter on `upper(name)` was not used for pruning: function calls are not projected" in report["warnings"]
    assert any("CAST(id AS VARCHAR)" in w and "pattern matches" in w for w in report["warnings"]), report["warnings"]
    assert len(report["warnings"]) == 2  # score > 100 and id < 1500 both pruned
    assert report["segments_scanned"] == 15 - 8  # score > 100: ids > 800; id < 1500
    (scan,) = report["scans"]["people"]
    assert "id" in scan["columns"]
    assert "filter_columns" in scan


def test_text_prints_warnings_and_filter_only_columns(store_path: str) -> None:
    result = run("--store", store_path, "explain", "SELECT name FROM people WHERE id < 150 AND upper(name) = 'X'")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "warning: filter on `upper(name)` was not used for pruning: function calls are not projected" in lines
    assert any(line.startswith("scan people: columns name; filter-only columns id;") for line in lines), lines
    assert any(line.startswith("segments read:") for line in lines)


def test_limit_reads_one_segment(store_path: str) -> None:
    result = run("--store", store_path, "explain", "SELECT * FROM people LIMIT 5", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["rows"] == 5 and report["segments_total"] == 20
    assert report["segments_read"] == 1 and report["chunks_read"] == 3
