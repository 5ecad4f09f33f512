"""Invariants 2 and 6 on every backend: re-runs add nothing; bad input commits nothing silently."""

from __future__ import annotations

from pathlib import Path

import pytest
from ingest_helpers import EVENTS_SCHEMA, table_of, version_of

from colonnade.errors import BadRowError, TooManyErrorsError
from colonnade.ingest import ingest
from colonnade.ingest.rejects import read_rejects
from colonnade.store import Store

pytestmark = pytest.mark.unit


def test_strict_bad_row_commits_nothing(store: Store, fixtures: Path) -> None:
    store.create_dataset("t", EVENTS_SCHEMA, partition_by="ok")
    with pytest.raises(BadRowError, match=f"^{fixtures / 'quoted.csv'}:6: column amount"):
        ingest(store, "t", fixtures / "quoted.csv")
    assert version_of(store, "t") == 0
    assert store.sql("SELECT count(*) AS n FROM t").column("n").to_pylist() == [0]


def test_quarantine_commits_good_rows_once(store: Store, fixtures: Path, tmp_path: Path) -> None:
    path = fixtures / "quoted.csv"
    with pytest.raises(TooManyErrorsError):
        ingest(store, "t", path, schema=EVENTS_SCHEMA, on_error="quarantine", max_errors=1,
               rejects=tmp_path / "r.jsonl")
    assert version_of(store, "t") in (None, 0)
    result = ingest(store, "t", path, schema=EVENTS_SCHEMA, on_error="quarantine",
                    rejects=tmp_path / "r.jsonl")
    assert result.rows == 5 and result.rejected == 2
    assert [r["line"] for r in read_rejects(tmp_path / "r.jsonl")] == [6, 10]
    again = ingest(store, "t", path, on_error="quarantine", rejects=tmp_path / "r2.jsonl")
    assert again.rows == 0 and again.version is None
    assert table_of(store, "t").column("id").to_pylist() == [1, 2, 3, 5, 7]
