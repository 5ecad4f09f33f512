"""``colonnade expire`` and ``colonnade vacuum`` as people and scripts run them (the installed
console script, as a child process, on every backend): what they say and remove, --dry-run,
--json, one-line errors, and ``verify`` naming a damaged checkpoint after expire."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from colonnade.store import Store

COLONNADE = Path(sys.executable).with_name("colonnade")


@dataclass
class Run:
    status: int
    stdout: str
    stderr: str


def run_cli(argv: list[str]) -> Run:
    """``colonnade ARGV``: the installed console script, as a child process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLONNADE_")}
    done = subprocess.run([str(COLONNADE), *argv], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, timeout=300)
    return Run(done.returncode, done.stdout, done.stderr)

SCHEMA = pa.schema([("id", pa.int64()), ("cat", pa.string())])


def build(store: Store) -> set[str]:
    """``t``: v1-v3 append, v4 overwrites, v5 appends; the segments v4 replaced."""
    ds = store.create_dataset("t", SCHEMA, partition_by="cat")
    for i in range(3):
        ds.append(pa.table({"id": [i, i + 10], "cat": ["a", "b"]}, schema=SCHEMA))
    replaced = {s.segment for s in ds.snapshot().segments}
    ds.overwrite(pa.table({"id": [100], "cat": ["c"]}, schema=SCHEMA))
    ds.append(pa.table({"id": [101], "cat": ["c"]}, schema=SCHEMA))
    return replaced


def test_expire_then_vacuum_from_the_command_line(store: Store) -> None:
    replaced = build(store)
    cli = ["--store", store.uri]
    plan = run_cli([*cli, "expire", "t", "--retain-last", "2", "--dry-run"])
    assert plan.status == 0 and plan.stderr == "", plan
    assert plan.stdout.splitlines() == [
        "would expire versions 1-3 of dataset 't': the oldest version kept is 4, the latest 5",
        "would remove 3 commit records; would write the checkpoint of versions 3-4; checkpoint 3 is "
        "kept as the fallback",
        "the data only expired versions read stays until 'colonnade vacuum'"]
    assert store.chunk_store.oldest_version("t") == 0  # nothing changed

    done = run_cli([*cli, "expire", "t", "--retain-last", "2", "--json"])
    assert done.status == 0, done
    assert json.loads(done.stdout) == {
        "dataset": "t", "dry_run": False, "latest": 5, "oldest_before": 0, "oldest": 4,
        "versions_expired": 3, "expired": [1, 3], "commits_removed": 3, "checkpoints_removed": [],
        "checkpoints_written": [3, 4], "fallback": 3, "retention": None}
    again = run_cli([*cli, "expire", "t", "--retain-last", "2"])
    assert again.stdout == "nothing to expire in dataset 't': versions 4-5 kept\n", again

    old = run_cli([*cli, "sql", "SELECT count(*) FROM t", "--version", "2"])
    assert (old.status, old.stderr) == (1, "error: dataset 't' has no version 2: it was expired (the "
                                           "oldest version kept is 4, the latest 5)\n"), old
    described = json.loads(run_cli([*cli, "describe", "t", "--json"]).stdout)
    assert [v["version"] for v in described["versions"]] == [4, 5]

    listed = run_cli([*cli, "vacuum", "t", "--dry-run", "--json"])
    assert listed.status == 0, listed
    report = json.loads(listed.stdout)
    assert report["dry_run"] and report["freed_bytes"] is None
    (only,) = report["datasets"]
    assert {r["segment"] for r in only["removed"]} == replaced
    assert (only["segments"], only["expired"], only["orphans"], only["partitions"], only["rows"]) == (
        len(replaced), len(replaced), 0, 2, 6)
    assert len(store.chunk_store.get_segments("t")) == len(replaced) + 2  # a dry run removes nothing

    human = run_cli([*cli, "vacuum", "t", "--dry-run"])
    lines = human.stdout.splitlines()
    assert lines[:2] == ["would remove 0 orphan segments of dataset 't'",
                         f"would remove {len(replaced)} expired segments of dataset 't' (only versions "
                         f"before 4 read them)"], human
    assert lines[2].startswith(f"  in all: {len(replaced)} segments in 2 partitions, 6 rows, ")
    assert any(line.split()[:2] == ["cat=a", "expired"] for line in lines[3:]), human

    vacuumed = run_cli([*cli, "vacuum", "t"])
    assert vacuumed.status == 0 and vacuumed.stdout.startswith("removed 0 orphan segments of dataset 't'\n"
                                                              f"removed {len(replaced)} expired"), vacuumed
    assert {r.segment for r in store.chunk_store.get_segments("t")} & replaced == set()
    answer = run_cli([*cli, "sql", "SELECT id FROM t ORDER BY id", "--version", "4", "--format", "csv"])
    assert answer.stdout == "id\n100\n", answer


def test_expire_errors_are_one_line(store: Store) -> None:
    build(store)
    cli = ["--store", store.uri]
    for args, status, message in [
        (["expire", "t", "--retain-last", "0"], 2,
         "error: --retain-last must be at least 1, got 0 (the latest version is never expired)"),
        (["expire", "t", "--older-than", "7x"], 2,
         "error: --older-than: invalid duration '7x': write a number and a unit (s, m, h, d or w), "
         "e.g. 7d or 12h"),
        (["expire", "nope"], 1, "error: dataset 'nope' does not exist"),
        (["vacuum", "nope", "--json"], 1, "error: dataset 'nope' does not exist"),
        (["vacuum", "t", "--grace", "soon"], 2, "error: --grace: invalid duration 'soon': write a number "
         "and a unit (s, m, h, d or w), e.g. 7d or 12h"),
        (["vacuum", "t", "--grace", "-5"], 2, "error: --grace must be at least 0, got -5"),
    ]:
        run = run_cli([*cli, *args])
        assert (run.status, run.stdout, run.stderr) == (status, "", message + "\n"), run
    assert store.chunk_store.oldest_version("t") == 0
    for grace in ("30m", "1800", "0.5h"):
        assert run_cli([*cli, "vacuum", "t", "--grace", grace, "--dry-run"]).status == 0
    helped = run_cli(["expire", "--help"])
    assert helped.status == 0 and "--older-than DURATION" in helped.stdout and "--retain-last N" in helped.stdout


def test_verify_names_a_damaged_checkpoint_after_expire(store: Store) -> None:
    build(store)
    store.dataset("t").expire(retain_last=2)  # starts from the checkpoint of 4, fallback 3
    cli = ["--store", store.uri]
    for version in (4, 3):
        data = bytearray(store.chunk_store.get_checkpoint("t", version) or b"")
        data[len(data) // 2] ^= 0xFF
        store.chunk_store.put_checkpoint("t", version, bytes(data))
        verified = run_cli([*cli, "verify", "t"])
        assert verified.status == 1, verified
        if version == 4:  # the fallback stands in
            assert verified.stdout.splitlines()[-1] == (
                "dataset 't': checkpoint of version 4 is unreadable: checksum mismatch (the log is read instead)")
            assert verified.stderr == "error: 1 of 2 checkpoints of dataset 't' failed verification\n"
            assert run_cli([*cli, "sql", "SELECT count(*) AS n FROM t", "--format", "csv"]).stdout == "n\n2\n"
    assert verified.stdout.splitlines()[-1] == (
        "dataset 't': checkpoint of version 4 is unreadable: checksum mismatch; fallback checkpoint of "
        "version 3: checksum mismatch; the log before version 4 was expired, so no older state can "
        "stand in for it")
    read = run_cli([*cli, "sql", "SELECT count(*) FROM t"])
    assert read.status == 1 and read.stderr.startswith("error: dataset 't': checkpoint of version 4 is "
                                                       "unreadable: checksum mismatch;"), read
