"""Invariant 6 from the command line, on both stores (``tests/ingest`` proves the pipeline on
SQLite through the Python API; here ``colonnade ingest`` is run against each backend and what is
committed is checked in the store): strict aborts with file:line, column and reason and commits
nothing; quarantine commits the good rows, lists every bad one and prints the counts;
``--max-errors`` exceeded commits nothing; unreadable files commit nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from reliability_helpers import Zygote

from colonnade.store import Store

MALFORMED = Path(__file__).resolve().parent.parent / "fixtures" / "malformed"
EXTRA = Path(__file__).resolve().parent.parent / "fixtures" / "reliability"
SCHEMA = MALFORMED / "events.schema"
GOOD = "id,name,amount,day,ok\n100,z,0.5,2023-12-31,false\n"
COLUMNS = {"id", "name", "amount", "day", "ok"}

STRICT = [  # file, line, column, reason
    (MALFORMED / "field_count.csv", 4, None, "expected 5 fields, found 4"),
    (MALFORMED / "bad_number.csv", 5, "amount", "cannot parse 'abc' as float64"),
    (MALFORMED / "bad_id.csv", 3, "id", "cannot parse '2x' as int64"),
    (MALFORMED / "bad_date.csv", 3, "day", "cannot parse '2024-02-30' as date32"),
    (MALFORMED / "bad_bool.csv", 3, "ok", "cannot parse 'maybe' as bool"),
    (MALFORMED / "bad_utf8.csv", 5, "name", "invalid UTF-8"),
    (MALFORMED / "quoted.csv", 6, "amount", "cannot parse 'oops' as float64"),
    (MALFORMED / "crlf_bom.csv", 5, "amount", "cannot parse 'x' as float64"),
    (MALFORMED / "stray_quote.csv", 5, "ok", "cannot parse 'bad' as bool"),
    (MALFORMED / "unterminated.csv", 3, None, "unterminated quoted field"),
    (EXTRA / "cut_mid_record.csv", 2001, None, "expected 5 fields, found 4"),  # an interrupted copy
]

QUARANTINE: list[tuple[Path, list[int], list[tuple[int, str | None]]]] = [  # file, ids, rejected (line, column)
    (MALFORMED / "field_count.csv", [1, 2, 4], [(4, None), (6, None)]),
    (MALFORMED / "bad_utf8.csv", [1, 2, 3, 5], [(5, "name")]),
    (MALFORMED / "quoted.csv", [1, 2, 3, 5, 7], [(6, "amount"), (10, "day")]),
    (MALFORMED / "crlf_bom.csv", [1, 2, 4], [(5, "amount")]),
    (MALFORMED / "stray_quote.csv", [1, 2, 3], [(5, "ok")]),
    (MALFORMED / "bad_date.csv", [1, 3], [(3, "day")]),
    (EXTRA / "cut_mid_record.csv", list(range(1, 2000)), [(2001, None)]),
]


def state(store: Store, name: str) -> tuple[int, list[int]]:
    """(version, ids) of a dataset; (0, []) when it doesn't exist."""
    if name not in store:
        return 0, []
    ids = store.sql(f"SELECT id FROM {name} ORDER BY id").column("id").to_pylist()
    return store.dataset(name).version, ids


def one_line_error(result: Any) -> str:
    assert result.exit_code == 1, result.output
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    return str(result.stderr[len("error: "):-1])


@pytest.fixture
def good(tmp_path: Path) -> Path:
    path = tmp_path / "good.csv"
    path.write_text(GOOD)
    return path


@pytest.fixture
def store(module_store: Store) -> Store:
    return module_store


def test_strict_names_file_line_column_and_reason_and_commits_nothing(
        store: Store, invoke: Any, good: Path, name: str) -> None:
    named = set()
    prefix = name
    for i, (path, line, column, reason) in enumerate(STRICT):
        name = f"{prefix}s{i}"
        assert invoke("ingest", name, str(good), "--schema", str(SCHEMA)).exit_code == 0
        before = state(store, name)
        message = one_line_error(invoke("ingest", name, str(path)))  # the dataset's types apply
        where = f"{path}:{line}" + (f": column {column}" if column else "")
        assert message.startswith(f"{where}: {reason}"), (path.name, message)
        named.add(column)
        assert state(store, name) == before == (1, [100]), path.name
        assert store.dataset(name).verify()[1] == []
        # into a dataset that doesn't exist yet: it stays absent or empty
        message = one_line_error(invoke("ingest", f"{prefix}n{i}", str(path), "--schema", str(SCHEMA)))
        assert message.startswith(f"{where}: {reason}"), (path.name, message)
        assert state(store, f"{prefix}n{i}") == (0, []), path.name
    assert named - {None} == COLUMNS  # every column is validated


def test_quarantine_commits_good_rows_and_lists_every_bad_one(
        store: Store, invoke: Any, tmp_path: Path, name: str) -> None:
    prefix = name
    for i, (path, ids, bad) in enumerate(QUARANTINE):
        name, rejects = f"{prefix}q{i}", tmp_path / f"q{i}.jsonl"
        result = invoke("ingest", name, str(path), "--schema", str(SCHEMA), "--on-error",
                        "quarantine", "--rejects", str(rejects))
        assert result.exit_code == 0, (path.name, result.output)
        assert result.stdout.startswith(f"ingested {len(ids):,} rows from 1 file into {name} (v1)")
        assert result.stdout.endswith(f", {len(bad)} rejected (see {rejects})\n"), result.stdout
        assert state(store, name) == (1, ids), path.name
        rows = [json.loads(line) for line in rejects.read_text(encoding="utf-8").splitlines()]
        assert [(r["line"], r["column"]) for r in rows] == bad, path.name
        assert all(r["file"] == str(path) and r["reason"] and r["raw"] for r in rows)
        as_json = invoke("ingest", name, str(path), "--on-error", "quarantine", "--rejects",
                         str(tmp_path / "again.jsonl"), "--force", "--json")
        report = json.loads(as_json.stdout)
        assert (report["rows"], report["rejected"], report["version"]) == (len(ids), len(bad), 2)


def test_max_errors_exceeded_commits_nothing(store: Store, invoke: Any, good: Path,
                                             tmp_path: Path, name: str) -> None:
    path = MALFORMED / "field_count.csv"  # two bad rows
    assert invoke("ingest", name, str(good), "--schema", str(SCHEMA)).exit_code == 0
    for limit in (0, 1):
        message = one_line_error(invoke("ingest", name, str(path), "--on-error", "quarantine",
                                        "--max-errors", str(limit), "--rejects", str(tmp_path / "r.jsonl")))
        assert message == f"{path}: {limit + 1} bad rows exceed --max-errors {limit}; nothing was committed"
        assert state(store, name) == (1, [100])
    ok = invoke("ingest", name, str(path), "--on-error", "quarantine", "--max-errors", "2",
                "--rejects", str(tmp_path / "r.jsonl"))
    assert ok.exit_code == 0 and ", 2 rejected" in ok.stdout
    assert state(store, name) == (2, [1, 2, 4, 100])


UNREADABLE = [
    (MALFORMED / "truncated.parquet", "not a readable Parquet file"),
    (MALFORMED / "truncated.arrow", "not a readable Arrow IPC file"),
    (MALFORMED / "truncated.arrows", "corrupt Arrow IPC data after 0 rows"),
    (EXTRA / "cut_short.csv.gz", "cannot read: Compressed file ended before the end-of-stream marker"),
]


def test_unreadable_files_commit_nothing(store: Store, invoke: Any, good: Path, name: str) -> None:
    assert invoke("ingest", name, str(good), "--schema", str(SCHEMA)).exit_code == 0
    for file, reason in UNREADABLE:
        message = one_line_error(invoke("ingest", name, str(file)))
        assert message.startswith(f"{file}: {reason}"), message
        assert state(store, name) == (1, [100])
        message = one_line_error(invoke("ingest", name, str(file), "--on-error", "quarantine",
                                        "--rejects", str(good.with_name("r.jsonl"))))
        assert message.startswith(f"{file}: {reason}"), message
        assert state(store, name) == (1, [100])


def test_empty_and_header_only_files_add_nothing(store: Store, invoke: Any, good: Path, name: str) -> None:
    for path, why in ((MALFORMED / "empty.csv", "empty file"), (MALFORMED / "header_only.csv", "no rows")):
        new = invoke("ingest", name + "new", str(path))
        assert new.exit_code == 0, new.output
        assert new.stdout == f"{path}: {why}, 0 rows added; the dataset was not created\n"
        assert name + "new" not in store
    assert invoke("ingest", name, str(good), "--schema", str(SCHEMA)).exit_code == 0
    for path, why in ((MALFORMED / "empty.csv", "empty file"), (MALFORMED / "header_only.csv", "no rows")):
        result = invoke("ingest", name, str(path))
        assert result.exit_code == 0 and result.stdout == f"{path}: {why}, 0 rows added\n"
        assert state(store, name) == (1, [100])


def test_a_binary_file_fails_in_one_clean_line(zygote: Zygote, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 's.db'}"
    path = EXTRA / "binary.csv"
    strict = zygote.run(["--store", store, "ingest", "t", str(path), "--schema", str(SCHEMA)])
    assert strict.status == 1, strict
    quarantine = zygote.run(["--store", store, "ingest", "t", str(path), "--schema", str(SCHEMA),
                             "--on-error", "quarantine", "--rejects", str(tmp_path / "r.jsonl")])
    assert quarantine.status == 0, quarantine
    assert "Exception ignored" not in strict.stderr + quarantine.stderr  # no traceback noise
    assert strict.stderr == f"error: {path}:2: expected 5 fields, found 1\n"
    assert quarantine.stdout == f"{path}: no rows, 0 rows added\n"  # every line was rejected
    assert quarantine.stderr == ""
    rejects = (tmp_path / "r.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(rejects) == path.read_bytes().count(b"\n")  # every record after the header (the last has no newline)
