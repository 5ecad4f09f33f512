"""Four ``colonnade ingest`` processes append to one dataset at the same moment (on Cassandra the
commit is a lightweight transaction): every row lands exactly once, versions are contiguous, and
what each process reports is what the log and the data say."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from reliability_helpers import EVENTS_SCHEMA, Run, Zygote, orphan_count, write_events

from colonnade.ingest import ingest
from colonnade.store import Store
from colonnade.table.dataset import file_identity

WRITERS = 4
ROWS = 12_000
INGESTED = re.compile(r"^ingested ([\d,]+) rows from 1 file into t \(v(\d+)\)")


def run_together(zygote: Zygote, store: Store, paths: list[Path]) -> list[Run]:
    start = time.time() + 1.0  # every child waits for the same moment
    children = [zygote.spawn(["--store", store.uri, "ingest", "t", str(p), "--partition-by", "cat",
                              "--segment-rows", "1000"], start_at=start) for p in paths]
    runs = [c.wait(timeout=300) for c in children]
    for run in runs:
        assert run.status == 0, run
        # the process that created the dataset says so, with its types; nothing else
        assert run.stderr == "" or (run.stderr.startswith("created dataset t; column types")
                                    and run.stderr.count("\n") == 2), run
    if not any("ingested 0 rows" in r.stdout or "0 rows added" in r.stdout for r in runs):
        assert sum(bool(r.stderr) for r in runs) == 1, [r.stderr for r in runs]
    return runs


def check_log_and_rows(store: Store, expected_ids: list[int]) -> list[Any]:
    history = store.dataset("t").history()
    assert [c.version for c in history] == list(range(1, len(history) + 1))  # contiguous
    dup = store.sql("SELECT id, count(*) AS n FROM t GROUP BY id HAVING count(*) > 1")
    assert dup.num_rows == 0, f"rows stored twice: {dup.to_pylist()[:5]}"
    ids = store.sql("SELECT id FROM t ORDER BY id").column("id").to_pylist()
    assert ids == sorted(expected_ids)
    assert store.dataset("t").verify()[1] == []
    return history


@pytest.mark.slow
def test_four_processes_append_different_files(store: Store, zygote: Zygote, tmp_path: Path) -> None:
    """The dataset doesn't exist yet either: the four race to create it, then to commit."""
    paths = [write_events(tmp_path / f"f{i}.csv", range(i * ROWS, (i + 1) * ROWS), seed=i)
             for i in range(WRITERS)]
    runs = run_together(zygote, store, paths)
    reported = {}
    for path, run in zip(paths, runs, strict=True):
        m = INGESTED.match(run.stdout)
        assert m, run
        assert int(m.group(1).replace(",", "")) == ROWS
        reported[path] = int(m.group(2))
    assert sorted(reported.values()) == list(range(1, WRITERS + 1))
    history = check_log_and_rows(store, list(range(WRITERS * ROWS)))
    assert len(history) == WRITERS
    for path, version in reported.items():  # each process's success is its own commit
        commit = history[version - 1]
        assert commit.source == file_identity(path) and commit.rows_added == ROWS
        lo = paths.index(path) * ROWS
        n = store.sql(f"SELECT count(*) AS n FROM t WHERE id >= {lo} AND id < {lo + ROWS}",
                      version=version).column("n")[0].as_py()
        assert n == ROWS
    assert orphan_count(store, "t") == 0


@pytest.mark.slow
def test_four_processes_append_the_same_file(store: Store, zygote: Zygote, tmp_path: Path) -> None:
    path = write_events(tmp_path / "same.csv", range(ROWS), seed=7)
    first = write_events(tmp_path / "first.csv", range(100_000, 100_010))
    store.create_dataset("t", EVENTS_SCHEMA, partition_by="cat",
                         segment_rows=1000)
    assert ingest(store, "t", first).version == 1
    runs = run_together(zygote, store, [path] * WRITERS)
    winners = [r for r in runs if INGESTED.match(r.stdout)]
    losers = [r for r in runs if not INGESTED.match(r.stdout)]
    assert len(winners) == 1, "\n".join(map(str, runs))
    assert INGESTED.match(winners[0].stdout).group(2) == "2"  # type: ignore[union-attr]
    for run in losers:  # told that nothing was added, and why
        assert run.stdout.startswith(f"{path}: ") and ", 0 rows added" in run.stdout, run
        assert ("already ingested" in run.stdout
                or "was ingested concurrently by another writer" in run.stdout), run
    history = check_log_and_rows(store, list(range(100_000, 100_010)) + list(range(ROWS)))
    assert len(history) == 2 and history[1].source == file_identity(path)
    # the losers' segments, if they wrote any before losing, are orphans that vacuum removes
    orphans = orphan_count(store, "t")
    assert store.dataset("t").vacuum(grace_seconds=0).segments == orphans
    assert orphan_count(store, "t") == 0
    print(f"{store.uri.split(':')[0]}: losers' messages: "
          f"{sorted(r.stdout.split(': ', 1)[1].strip() for r in losers)}; orphans {orphans}")
