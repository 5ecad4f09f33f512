"""``colonnade ingest ... --workers N`` as a user runs it (the real console script, both stores):
one commit for the whole input, one line on stderr when it fails, nothing committed after a bad
row, a worker or coordinator killed, Ctrl-C or SIGTERM — and everything committed once by the
rerun after ``vacuum``."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from parallel_helpers import (
    cli,
    dataset_rows,
    descendants,
    duckdb_rows,
    popen,
    state,
    write_csv,
    write_parquet,
)

from colonnade.store import Store


def _files(tmp_path: Path, n: int = 3, rows: int = 1000, bad: dict[int, str] | None = None) -> list[Path]:
    files = [write_csv(tmp_path / f"f{k}.csv", range(k * rows, (k + 1) * rows), crlf=k % 2 == 1,
                       bad=bad) for k in range(n)]
    return [*files, write_parquet(tmp_path / "g.parquet", range(n * rows, (n + 1) * rows), 200)]


def _orphans(store: Store, name: str) -> int:
    return store.dataset(name).vacuum(grace_seconds=0, dry_run=True).segments


def _vacuum(store: Store, name: str) -> None:
    run = cli(["--store", store.uri, "vacuum", name, "--grace", "0"])
    assert run.returncode == 0, run.stderr
    assert _orphans(store, name) == 0


def test_the_whole_input_is_one_commit_and_a_rerun_adds_nothing(store: Store, tmp_path: Path) -> None:
    files = _files(tmp_path)
    args = ["--store", store.uri, "ingest", "t", *map(str, files), "--workers", "2"]
    run = cli(args)
    assert run.returncode == 0, run.stderr
    assert run.stdout.decode().startswith("ingested 4,000 rows from 4 files into t (v1) in ")
    assert store.dataset("t").version == 1
    assert dataset_rows(store, "t") == duckdb_rows(files[:3], files[3:])
    again = cli(args)
    assert again.returncode == 0, again.stderr
    assert again.stdout.decode() == ("nothing ingested into t: 4 files skipped (4 already ingested), "
                                     "0 rows added; use --force to append again\n")
    assert store.dataset("t").version == 1


def test_a_bad_row_is_one_line_naming_file_and_line_and_nothing_is_committed(
        store: Store, tmp_path: Path) -> None:
    good = write_csv(tmp_path / "good.csv", range(10_000, 10_010))
    assert cli(["--store", store.uri, "ingest", "t", str(good)]).returncode == 0
    files = _files(tmp_path, bad={2990: "oops"})  # in the last CSV file, near its end
    one = cli(["--store", store.uri, "ingest", "t", str(files[2])])
    run = cli(["--store", store.uri, "ingest", "t", *map(str, files), "--workers", "2"])
    assert run.returncode == 1
    err = run.stderr.decode()
    assert err == one.stderr.decode() and err.count("\n") == 1
    line = files[2].read_bytes().count(b"\n", 0, files[2].read_bytes().index(b"\n2990,")) + 2
    assert err == f"error: {files[2]}:{line}: column x: cannot parse 'oops' as float64\n"
    assert store.dataset("t").version == 1 and len(dataset_rows(store, "t")) == 10
    _vacuum(store, "t")


@pytest.mark.parametrize("fault", ["worker_task:2", "after_chunks:2"])
def test_a_worker_killed_commits_nothing_and_the_rerun_commits_everything_once(
        store: Store, tmp_path: Path, fault: str) -> None:
    good = write_csv(tmp_path / "good.csv", range(10_000, 10_010))
    assert cli(["--store", store.uri, "ingest", "t", str(good)]).returncode == 0
    files = _files(tmp_path, n=5)
    args = ["--store", store.uri, "ingest", "t", *map(str, files), "--workers", "2"]
    run = cli(args, env={"COLONNADE_FAULTS": fault})
    assert run.returncode == 1, run.stderr
    err = run.stderr.decode()
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("error: worker process ") and " was killed by SIGKILL while ingesting " in err
    assert err.rstrip().endswith("nothing was committed (what it had written is left for vacuum)")
    assert any(f"while ingesting {p}" in err for p in map(str, files))
    assert store.dataset("t").version == 1 and len(dataset_rows(store, "t")) == 10
    if fault.startswith("after_chunks"):
        assert _orphans(store, "t") >= 1  # the segment the worker was killed writing
    _vacuum(store, "t")
    rerun = cli(args)
    assert rerun.returncode == 0, rerun.stderr
    assert rerun.stdout.decode().startswith("ingested 6,000 rows from 6 files into t (v2)")
    assert len(dataset_rows(store, "t")) == 6010
    assert cli(args).stdout.decode().startswith("nothing ingested")


def test_a_coordinator_killed_before_its_commit_commits_nothing(store: Store, tmp_path: Path) -> None:
    good = write_csv(tmp_path / "good.csv", range(10_000, 10_010))
    assert cli(["--store", store.uri, "ingest", "t", str(good)]).returncode == 0
    files = _files(tmp_path)
    args = ["--store", store.uri, "ingest", "t", *map(str, files), "--workers", "2"]
    run = cli(args, env={"COLONNADE_FAULTS": "before_commit:1"})
    assert run.returncode == -signal.SIGKILL, run.stderr
    assert store.dataset("t").version == 1 and len(dataset_rows(store, "t")) == 10
    assert _orphans(store, "t") >= 4  # every part written, none committed
    _vacuum(store, "t")
    rerun = cli(args)
    assert rerun.returncode == 0, rerun.stderr
    assert store.dataset("t").version == 2 and len(dataset_rows(store, "t")) == 4010


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_stops_the_workers_and_commits_nothing(
        store: Store, tmp_path: Path, sig: signal.Signals) -> None:
    files = _files(tmp_path, n=5)
    # each worker freezes as it is handed its second task: the ingest is surely under way
    proc = popen(["--store", store.uri, "ingest", "t", *map(str, files), "--workers", "2"],
                 env={"COLONNADE_FAULTS": "worker_task:2:stop"})
    try:
        deadline = time.monotonic() + 120
        stopped: list[int] = []
        while len(stopped) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
            stopped = [c for c in descendants(proc.pid) if state(c) == "T"]
        assert len(stopped) == 2, proc.poll()
        proc.send_signal(sig)
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert err.decode() == "interrupted: nothing committed to t\n"
    assert out == b""
    assert "t" not in store
    deadline = time.monotonic() + 10
    while any(state(pid) not in ("X", "Z") for pid in stopped) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(state(pid) in ("X", "Z") for pid in stopped)  # the workers are gone
