"""One commit, many writers (:mod:`colonnade.table.operation`), on both stores: worker processes
write parts of one operation, one coordinator commits them all at one version or none; workers
and coordinators are SIGKILLed at the write path's fault points; two coordinators race on one
source identity."""

from __future__ import annotations

import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from colonnade.store import Store
from colonnade.table.operation import WriteOperation, WriteOperationError, WrittenPart

SCHEMA = pa.schema([("id", pa.int64()), ("cat", pa.string()), ("v", pa.float64())])

#: A worker: writes ids [lo, hi) for the operation and prints its part (JSON).
WORKER = """
import json, sys
import pyarrow as pa
import colonnade
from colonnade.table.operation import WriteOperation
uri, op_json, lo, hi = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
op = WriteOperation.from_json(op_json)
ids = list(range(lo, hi))
def batches():
    for s in range(0, len(ids), 700):
        part = ids[s:s + 700]
        yield pa.record_batch({"id": pa.array(part, pa.int64()),
                               "cat": pa.array([("red", "green", "blue")[i % 3] for i in part]),
                               "v": pa.array([i / 4 for i in part])})
with colonnade.connect(uri) as store:
    part = store.dataset(op.dataset).write_part(op, batches())
print(part.to_json())
"""

#: A coordinator: prepares, runs workers for the ranges in-process, commits (source identity).
COORDINATOR = """
import os, sys
import colonnade
uri, name, source, ranges = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
import subprocess
from colonnade.table.operation import WrittenPart
with colonnade.connect(uri) as store:
    ds = store.dataset(name)
    op = ds.prepare_write(source=source)
    parts = []
    for r in ranges.split(","):
        lo, hi = r.split("-")
        env = {k: v for k, v in os.environ.items() if k != "COLONNADE_FAULTS"}  # the coordinator's
        out = subprocess.run([sys.executable, "-c", WORKER, uri, op.to_json(), lo, hi],
                             capture_output=True, text=True, check=True, env=env).stdout
        parts.append(WrittenPart.from_json(out.strip().splitlines()[-1]))
    result = ds.commit_write(op, parts)
    print(result.version, result.rows, result.skipped)
"""


def _env(faults: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "COLONNADE_FAULTS"}
    if faults:
        env["COLONNADE_FAULTS"] = faults
    return env


def _worker(uri: str, op: WriteOperation, lo: int, hi: int, faults: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", WORKER, uri, op.to_json(), str(lo), str(hi)],
                          capture_output=True, text=True, env=_env(faults), timeout=300)


def _part(run: subprocess.CompletedProcess[str]) -> WrittenPart:
    assert run.returncode == 0, run.stderr
    return WrittenPart.from_json(run.stdout.strip().splitlines()[-1])


def _ids(store: Store, name: str) -> list[int]:
    return store.dataset(name).to_arrow(columns=["id"]).column("id").to_pylist()


def _new(store: Store, name: str = "t") -> None:
    store.create_dataset(name, SCHEMA, partition_by="cat", segment_rows=1000)


def test_parts_written_by_worker_processes_become_visible_in_one_commit(store: Store) -> None:
    _new(store)
    ds = store.dataset("t")
    ds.append(pa.table({"id": [-1], "cat": ["red"], "v": [0.0]}, schema=SCHEMA))
    op = ds.prepare_write(source="input-set-1")
    op = WriteOperation.from_json(op.to_json())  # what a worker gets is plain data
    parts = [_part(_worker(store.uri, op, lo, lo + 2500)) for lo in (0, 2500, 5000)]
    assert [p.rows for p in parts] == [2500, 2500, 2500]
    assert sum(len(p.entries) for p in parts) >= 9  # 3 partitions in each part
    # written, stored, not visible
    assert _ids(store, "t") == [-1] and ds.version == 1
    result = ds.commit_write(op, parts)
    assert (result.version, result.rows) == (2, 7500)
    assert sorted(_ids(store, "t")) == [-1, *range(7500)]
    # the same as DuckDB over the rows themselves
    got = store.sql("SELECT cat, count(*) AS n, sum(v) AS s FROM t WHERE id >= 0 GROUP BY cat ORDER BY cat")
    ids = pa.array(range(7500), pa.int64())
    cats = pa.array([("red", "green", "blue")[i % 3] for i in range(7500)])
    raw = pa.table({"cat": cats, "v": pc.divide(ids.cast(pa.float64()), 4.0)})
    import duckdb

    con = duckdb.connect()
    con.register("raw", raw)
    want = con.sql("SELECT cat, count(*) AS n, sum(v) AS s FROM raw GROUP BY cat ORDER BY cat").to_arrow_table()
    assert got.to_pylist() == want.to_pylist()
    commit = ds.history()[-1]
    assert commit.id == op.id and commit.source == "input-set-1"
    # the input set is committed once: a second operation with its identity commits nothing
    again = ds.prepare_write(source="input-set-1")
    skipped = ds.commit_write(again, [_part(_worker(store.uri, again, 0, 10))])
    assert skipped.skipped and skipped.version is None
    assert ds.version == 2 and len(_ids(store, "t")) == 7501
    assert ds.vacuum(grace_seconds=0).segments == 3  # the skipped operation's, one per partition


@pytest.mark.parametrize("point", ["after_segment_row:2", "after_chunks:3"])
def test_a_worker_killed_mid_write_commits_nothing_and_vacuum_cleans_up(store: Store, point: str) -> None:
    _new(store)
    ds = store.dataset("t")
    op = ds.prepare_write(source="s")
    done = _part(_worker(store.uri, op, 0, 3000))
    killed = _worker(store.uri, op, 3000, 6000, faults=point)
    assert killed.returncode == -9, killed.stderr
    assert ds.version == 0 and _ids(store, "t") == []
    # the coordinator gives up: what it was handed goes now, the killed worker's later
    assert ds.abort_write(op, [done]) == len(done.entries)
    assert ds.vacuum(grace_seconds=0, dry_run=True).segments >= 1  # the killed worker's
    ds.vacuum(grace_seconds=0)
    assert ds.vacuum(grace_seconds=0, dry_run=True).segments == 0
    # a rerun commits everything once
    op2 = ds.prepare_write(source="s")
    parts = [_part(_worker(store.uri, op2, lo, lo + 3000)) for lo in (0, 3000)]
    assert ds.commit_write(op2, parts).rows == 6000
    assert sorted(_ids(store, "t")) == list(range(6000))
    assert ds.vacuum(grace_seconds=0, dry_run=True).segments == 0


def _coordinate(uri: str, source: str, ranges: str, faults: str | None = None) -> subprocess.CompletedProcess[str]:
    script = f"WORKER = {WORKER!r}\n" + COORDINATOR
    return subprocess.run([sys.executable, "-c", script, uri, "t", source, ranges],
                          capture_output=True, text=True, env=_env(faults), timeout=300)


@pytest.mark.parametrize("point", ["before_commit:1", "after_commit:1"])
def test_a_coordinator_killed_around_its_commit_leaves_all_or_nothing(store: Store, point: str) -> None:
    _new(store)
    ds = store.dataset("t")
    run = _coordinate(store.uri, "files-1", "0-2000,2000-4000", faults=point)
    assert run.returncode == -9, run.stderr
    if point.startswith("before"):
        assert ds.version == 0 and _ids(store, "t") == []
        assert ds.vacuum(grace_seconds=0).segments >= 6  # both workers' segments, 3 partitions each
    else:
        assert ds.version == 1 and sorted(_ids(store, "t")) == list(range(4000))
    rerun = _coordinate(store.uri, "files-1", "0-2000,2000-4000")
    assert rerun.returncode == 0, rerun.stderr
    assert rerun.stdout.split() == (["1", "4000", "False"] if point.startswith("before") else ["None", "0", "True"])
    assert sorted(_ids(store, "t")) == list(range(4000))
    ds.vacuum(grace_seconds=0)  # the skipped rerun's segments, after a commit that landed
    assert ds.vacuum(grace_seconds=0, dry_run=True).segments == 0


def test_two_coordinators_with_one_source_identity_commit_it_once(store: Store) -> None:
    _new(store)
    script = f"WORKER = {WORKER!r}\n" + COORDINATOR
    procs = [subprocess.Popen([sys.executable, "-c", script, store.uri, "t", "same-input", "0-3000,3000-6000"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
             for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    results = sorted(o.split() for o, _ in outs)
    assert results == [["1", "6000", "False"], ["None", "0", "True"]]
    assert sorted(_ids(store, "t")) == list(range(6000))
    assert store.dataset("t").version == 1


def test_parts_of_another_operation_or_dataset_are_refused(store: Store) -> None:
    _new(store)
    _new(store, "u")
    ds = store.dataset("t")
    op, other = ds.prepare_write(), ds.prepare_write()
    part = ds.write_part(other, pa.table({"id": [1], "cat": ["red"], "v": [1.0]}, schema=SCHEMA))
    with pytest.raises(WriteOperationError, match="was handed to the commit of operation"):
        ds.commit_write(op, [part])
    with pytest.raises(WriteOperationError, match="is for dataset 't', not 'u'"):
        store.dataset("u").write_part(op, pa.table({"id": [1], "cat": ["red"], "v": [1.0]}, schema=SCHEMA))
    with pytest.raises(WriteOperationError, match="in two written parts"):
        ds.commit_write(other, [part, part])
    assert ds.version == 0
    assert ds.commit_write(other, [part]).rows == 1
    with pytest.raises(WriteOperationError, match="was committed"):
        ds.abort_write(other, [part])
    assert _ids(store, "t") == [1]


def test_parts_written_before_a_column_was_added_commit_with_it_null(store: Store) -> None:
    """As for any append: a schema change since the operation read is no conflict (the
    operation changes no schema), and its rows read the added column as null."""
    _new(store)
    ds = store.dataset("t")
    ds.append(pa.table({"id": [0], "cat": ["red"], "v": [0.0]}, schema=SCHEMA))
    op = ds.prepare_write()
    part = ds.write_part(op, pa.table({"id": [1], "cat": ["red"], "v": [1.0]}, schema=SCHEMA))
    ds.append(pa.table({"id": [2], "cat": ["red"], "v": [2.0], "extra": ["x"]}), schema_mode="merge")
    assert store.dataset("t").commit_write(op, [part]).version == 3
    rows = store.sql("SELECT id, extra FROM t ORDER BY id").to_pylist()
    assert rows == [{"id": 0, "extra": None}, {"id": 1, "extra": None}, {"id": 2, "extra": "x"}]
