"""``colonnade compact``, ``delete`` and ``alter --retain``, run as the real console script on
both stores: summaries, ``--json``, one-line errors that change nothing, confirmation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from colonnade.store import Store

COLONNADE = str(Path(sys.executable).with_name("colonnade"))
SCHEMA = pa.schema([("id", pa.int64()), ("cat", pa.string()), ("day", pa.date32())])


def run(store: Store, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLONNADE_")}
    return subprocess.run([COLONNADE, "--store", store.uri, *args], capture_output=True, text=True,
                          env=env, timeout=180, stdin=subprocess.DEVNULL, check=False)


@pytest.fixture
def small(store: Store) -> Store:
    import datetime as dt

    ds = store.create_dataset("t", SCHEMA, partition_by="cat")
    for i in range(6):
        ds.append(pa.table({"id": [2 * i, 2 * i + 1], "cat": ["a", "b"],
                            "day": [dt.date(2024, 1, 1 + i)] * 2}, schema=SCHEMA))
    return store


def count(store: Store) -> int:
    return int(store.sql("SELECT count(*) AS n FROM t").to_pylist()[0]["n"])


def test_compact_prints_a_summary_and_json(small: Store) -> None:
    done = run(small, "compact", "t", "--partition", "cat = 'a'")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("compacted t: 6 segments → 1, 6 rows, 1 partition, ")
    assert done.stdout.rstrip().endswith("(v7)")
    again = run(small, "compact", "t", "--json")
    assert again.returncode == 0, again.stderr
    info = json.loads(again.stdout)
    assert info["version"] == 8 and info["segments_before"] == 6 and info["segments_after"] == 1
    assert count(small) == 12 and len(small.dataset("t").snapshot().segments) == 2


def test_delete_asks_unless_yes_and_reports(small: Store) -> None:
    refused = run(small, "delete", "t", "--where", "id < 4")
    assert refused.returncode == 1 and refused.stderr.startswith("error: not confirmed")
    assert count(small) == 12
    done = run(small, "delete", "t", "--where", "id < 4", "--yes")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "deleted 4 rows from t: 4 segments removed, 0 rewritten (v7)\n"
    as_json = run(small, "delete", "t", "--where", "id = 5 OR cat IS NULL", "--yes", "--json")
    info = json.loads(as_json.stdout)
    assert info["rows_deleted"] == 1 and info["version"] == 8 and info["segments_removed"] == 1
    assert count(small) == 7
    assert small.sql("SELECT count(*) AS n FROM t", version=6).to_pylist() == [{"n": 12}]


@pytest.mark.parametrize("where, reason", [("nope = 1", "nope"), ("id =", "syntax error")])
def test_a_bad_predicate_is_one_line_and_changes_nothing(small: Store, where: str, reason: str) -> None:
    done = run(small, "delete", "t", "--where", where, "--yes")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("error: dataset 't': bad predicate") and reason in done.stderr
    assert done.stderr.count("\n") == 1
    assert small.dataset("t").version == 6


def test_alter_sets_and_removes_retention(small: Store) -> None:
    done = run(small, "alter", "t", "--retain", "90d", "--on", "day")
    assert done.returncode == 0 and done.stdout == "altered t: retention 90d on day (v7)\n"
    assert small.dataset("t").snapshot().properties["retention"]["seconds"] == 90 * 86400
    bad = run(small, "alter", "t", "--retain", "90d", "--on", "id")
    assert bad.returncode == 1 and bad.stderr == (
        "error: retention column 'id' of dataset 't' is int64, not a date or timestamp\n")
    wrong = run(small, "alter", "t", "--retain", "ninety", "--on", "day")
    assert wrong.returncode == 1 and wrong.stderr.startswith("error: invalid duration 'ninety'")
    # the rows are from 2024: a compaction (retention first) deletes them all
    compacted = run(small, "compact", "t", "--json")
    assert json.loads(compacted.stdout)["retention"]["rows_deleted"] == 12 and count(small) == 0
    removed = run(small, "alter", "t", "--retain", "none", "--json")
    assert json.loads(removed.stdout) == {"dataset": "t", "version": 9, "retention": None}
    assert small.dataset("t").snapshot().properties["retention"] is None


def test_describe_lists_the_newest_versions_and_says_where_the_rest_are(store: Store) -> None:
    ds = store.create_dataset("t", pa.schema([("id", pa.int64())]))
    for i in range(25):
        ds.append(pa.table({"id": [i]}))
    out = run(store, "describe", "t")
    assert out.returncode == 0, out.stderr
    assert out.stdout.rstrip().endswith('the newest 20 of 25 versions kept; every one: SELECT * FROM "t$commits"')
    listed = json.loads(run(store, "describe", "t", "--json", "--versions", "3").stdout)
    assert [v["version"] for v in listed["versions"]] == [23, 24, 25] and listed["versions_kept"] == 25
    assert len(json.loads(run(store, "describe", "t", "--json", "--versions", "30").stdout)["versions"]) == 25
    every = run(store, "sql", 'SELECT count(*) AS n FROM "t$commits"', "--format", "csv")
    assert every.stdout == "n\n25\n", every.stderr
