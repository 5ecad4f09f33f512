"""Arrow IPC on standard input (``colonnade ingest DATASET - --format arrow``) streamed into one
commit, and ``Dataset.append`` of a generator or a RecordBatchReader in bounded memory (both
stores)."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow as pa
import pytest
from parallel_helpers import cli

from colonnade.store import Store

SCHEMA = pa.schema([("id", pa.int64()), ("cat", pa.string()), ("v", pa.float64())])


def _stream(rows: int, batch_rows: int = 10_000) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, SCHEMA) as writer:
        for start in range(0, rows, batch_rows):
            ids = list(range(start, min(start + batch_rows, rows)))
            writer.write_batch(pa.record_batch({
                "id": pa.array(ids, pa.int64()), "cat": [("a", "b", "c")[i % 3] for i in ids],
                "v": pa.array([i / 8 for i in ids], pa.float64())}, schema=SCHEMA))
    return sink.getvalue().to_pybytes()


def test_an_arrow_stream_on_stdin_is_one_commit_and_piping_it_again_adds_nothing(
        store: Store) -> None:
    data = _stream(200_000)
    args = ["--store", store.uri, "ingest", "s", "-", "--format", "arrow"]
    run = cli(args, stdin=data)
    assert run.returncode == 0, run.stderr
    assert run.stdout.decode().startswith("ingested 200,000 rows from 1 file into s (v1) in ")
    got = store.sql("SELECT count(*) AS n, sum(id) AS s, sum(v) AS v, count(DISTINCT cat) AS c FROM s")
    assert got.to_pylist() == [{"n": 200_000, "s": 199_999 * 100_000, "v": 199_999 * 100_000 / 8, "c": 3}]
    assert store.dataset("s").schema == SCHEMA
    again = cli(args, stdin=data)
    assert again.returncode == 0, again.stderr
    assert again.stdout.decode() == "<stdin>: already ingested, 0 rows added; use --force to append again\n"
    forced = cli([*args, "--force", "--json"], stdin=data)
    assert json.loads(forced.stdout)["version"] == 2
    assert store.dataset("s").version == 2
    assert store.dataset("s").vacuum(grace_seconds=0, dry_run=True).segments == 0


def test_a_broken_arrow_stream_commits_nothing(store: Store) -> None:
    data = _stream(50_000)
    run = cli(["--store", store.uri, "ingest", "s", "-", "--format", "arrow"], stdin=data[:-5000])
    assert run.returncode == 1
    err = run.stderr.decode()
    assert err.startswith("error: <stdin>: corrupt Arrow IPC data after ") and err.count("\n") == 1
    assert "s" not in store
    run = cli(["--store", store.uri, "ingest", "s", "-", "--format", "arrow"], stdin=b"not arrow")
    assert run.returncode == 1
    assert run.stderr.decode().startswith("error: <stdin>: not a readable Arrow IPC stream")


#: Appends 3,000,000 rows of 320 bytes (960 MB of Arrow data) from a generator or a
#: RecordBatchReader; prints the rows, the bytes made and the process's peak RSS (about 330 MB
#: when measured: a third of the data; 290 MB for a third of the rows).
APPEND = """
import json, sys
import numpy as np, pyarrow as pa, pyarrow.compute as pc
import colonnade
uri, kind = sys.argv[1], sys.argv[2]
ROWS, BATCH = 3_000_000, 50_000
schema = pa.schema([("id", pa.int64()), ("text", pa.string()), ("v", pa.float64())])
made = 0
def batches():
    global made
    for start in range(0, ROWS, BATCH):
        ids = np.arange(start, start + BATCH, dtype=np.int64)
        text = pc.utf8_lpad(pa.array(ids.astype(str)), width=300, padding="x")
        batch = pa.record_batch([pa.array(ids), text, pa.array(ids * 0.5)], schema=schema)
        made += batch.nbytes
        yield batch
data = batches() if kind == "generator" else pa.RecordBatchReader.from_batches(schema, batches())
with colonnade.connect(uri) as store:
    result = store.create_dataset("m", schema).append(data)
# VmHWM: this program's own peak (ru_maxrss carries the forking process's peak across exec)
peak = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"rows": result.rows, "made": made, "peak": peak}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["generator", "reader"])
def test_append_streams_a_generator_or_a_reader_in_bounded_memory(store: Store, kind: str) -> None:
    run = subprocess.run([sys.executable, "-c", APPEND, store.uri, kind], capture_output=True,
                         text=True, timeout=900)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["rows"] == 3_000_000 and out["made"] > 900e6
    assert out["peak"] < out["made"] / 2, out  # the data never was in memory at once
    assert store.sql("SELECT count(*) AS n, max(id) AS m FROM m").to_pylist() == [
        {"n": 3_000_000, "m": 2_999_999}]


def test_a_column_type_a_dataset_cannot_keep_is_one_line_and_creates_nothing(store: Store, tmp_path) -> None:
    """A Parquet file or an Arrow stream with a list column: one line naming the column, and no
    dataset left behind (it could never have been opened again)."""
    table = pa.table({"id": pa.array([1, 2], pa.int64()), "tags": pa.array([[1], [2, 3]], pa.list_(pa.int64()))})
    import pyarrow.parquet as pq

    pq.write_table(table, tmp_path / "t.parquet")
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    for args, stdin in ((["p", str(tmp_path / "t.parquet")], None), (["a", "-", "--format", "arrow"],
                                                                       sink.getvalue().to_pybytes())):
        run = cli(["--store", store.uri, "ingest", *args], stdin=stdin)
        err = run.stderr.decode().strip()
        assert run.returncode != 0 and len(err.splitlines()) == 1, err
        assert "column type(s) a dataset cannot keep: tags (list<" in err, err
        assert args[0] not in store
