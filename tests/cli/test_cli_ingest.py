"""``ingest`` of CSV, TSV, Parquet and Arrow files; strict and quarantine error handling."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
from click.testing import Result

pytestmark = pytest.mark.unit

Invoke = Callable[..., Result]

CSV = "id,name,x\n1,a,1.5\n2,b,\n3,c,2.5\n"
TABLE = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"],
                  "x": pa.array([1.5, None, 2.5], pa.float64())})


def csv_answer(invoke: Invoke, query: str) -> str:
    result = invoke("sql", query, "--format", "csv")
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_ingest_csv(invoke: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text(CSV)
    result = invoke("ingest", "t", str(path))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("ingested 3 rows from 1 file into t (v1)")
    assert result.stdout.count("\n") == 1
    assert csv_answer(invoke, "SELECT count(*) AS n, count(x) AS nx, sum(x) AS s FROM t") == "n,nx,s\n3,2,4.0\n"
    assert csv_answer(invoke, "SELECT name FROM t ORDER BY id") == "name\na\nb\nc\n"


def test_ingest_again_adds_nothing_unless_forced(invoke: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text(CSV)
    assert invoke("ingest", "t", str(path)).exit_code == 0
    again = invoke("ingest", "t", str(path), "--json")
    assert again.exit_code == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["rows"] == 0
    assert report["files"][0]["skipped"]
    assert csv_answer(invoke, "SELECT count(*) AS n FROM t") == "n\n3\n"
    forced = invoke("ingest", "t", str(path), "--force")
    assert forced.exit_code == 0, forced.stderr
    assert csv_answer(invoke, "SELECT count(*) AS n FROM t") == "n\n6\n"


def test_ingest_json_result(invoke: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text(CSV)
    result = invoke("ingest", "t", str(path), "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["dataset"] == "t"
    assert report["rows"] == 3
    assert len(report["files"]) == 1
    assert report["files"][0]["version"] == 1


def test_ingest_tsv_without_header_with_schema_and_partitioning(invoke: Invoke, tmp_path: Path) -> None:
    data = tmp_path / "b.tsv"
    data.write_text("1\tnorth\t1.5\n2\tnorth\t\n3\tsouth\t2.5\n4\twest\t4\n")
    schema = tmp_path / "b.schema"
    schema.write_text("id:int32\nregion:string\nx:float64\n")
    result = invoke("ingest", "b", str(data), "--no-header", "--schema", str(schema),
                    "--delimiter", "\\t", "--partition-by", "region", "--sort-by", "id",
                    "--segment-rows", "1000")
    assert result.exit_code == 0, result.stderr
    info = json.loads(invoke("describe", "b", "--json").stdout)
    assert [(c["name"], c["type"]) for c in info["columns"]] == [
        ("id", "int32"), ("region", "string"), ("x", "float64")]
    assert info["partition_by"] == ["identity(region)"]
    assert info["sort_by"] == ["id"]
    assert info["segment_rows"] == 1000
    assert info["rows"] == 4 and info["partitions"] == 3
    assert csv_answer(invoke, "SELECT region, count(*) AS n FROM b GROUP BY region ORDER BY region") == \
        "region,n\nnorth,2\nsouth,1\nwest,1\n"


def test_ingest_headerless_csv_with_columns(invoke: Invoke, tmp_path: Path) -> None:
    data = tmp_path / "c.txt"
    data.write_text("1;a\n2;b\n")
    result = invoke("ingest", "c", str(data), "--format", "csv", "--delimiter", ";", "--no-header",
                    "--columns", "id,name")
    assert result.exit_code == 0, result.stderr
    assert csv_answer(invoke, "SELECT id, name FROM c ORDER BY id") == "id,name\n1,a\n2,b\n"


def test_ingest_parquet_and_arrow(invoke: Invoke, tmp_path: Path) -> None:
    pq.write_table(TABLE, tmp_path / "p.parquet")
    with ipc.new_file(tmp_path / "p.arrow", TABLE.schema) as writer:
        writer.write_table(TABLE)
    result = invoke("ingest", "p", str(tmp_path / "p.parquet"), str(tmp_path / "p.arrow"))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("ingested 6 rows from 2 files into p")
    assert csv_answer(invoke, "SELECT count(*) AS n, sum(id) AS s, count(x) AS nx FROM p") == "n,s,nx\n6,12,4\n"


def test_ingest_of_a_missing_file(invoke: Invoke, tmp_path: Path, store_path: Path) -> None:
    result = invoke("ingest", "t", str(tmp_path / "nope.csv"))
    assert result.exit_code == 1
    assert result.stderr == f"error: No such file or directory: {tmp_path / 'nope.csv'}\n"


BAD_CSV = "id,name,x\n1,a,1.5\n2,b,oops\n3,c,2.5\n"


def test_strict_ingest_of_a_malformed_csv_commits_nothing(invoke: Invoke, tmp_path: Path) -> None:
    good = tmp_path / "good.csv"
    good.write_text(CSV)
    schema = tmp_path / "s.schema"
    schema.write_text("id:int64\nname:string\nx:float64\n")
    assert invoke("ingest", "t", str(good)).exit_code == 0
    bad = tmp_path / "bad.csv"
    bad.write_text(BAD_CSV)
    result = invoke("ingest", "t", str(bad), "--schema", str(schema))
    assert result.exit_code != 0
    assert "Traceback" not in result.stderr
    first = result.stderr.splitlines()[0]
    assert first.startswith("error: ") and f"{bad}:3" in first
    assert csv_answer(invoke, "SELECT count(*) AS n FROM t") == "n\n3\n"  # only the good file
    assert json.loads(invoke("describe", "t", "--json").stdout)["version"] == 1


def test_strict_ingest_into_a_new_dataset_leaves_no_rows(invoke: Invoke, tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("id,name\n1,a\n2,b,extra\n")
    result = invoke("ingest", "t", str(bad))
    assert result.exit_code == 1
    assert f"{bad}:3" in result.stderr.splitlines()[0]
    listed = {d["name"]: d for d in json.loads(invoke("datasets", "--json").stdout)}
    assert "t" not in listed or listed["t"]["rows"] == 0


def test_quarantine_writes_bad_rows_to_the_rejects_file(invoke: Invoke, tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(BAD_CSV)
    schema = tmp_path / "s.schema"
    schema.write_text("id:int64\nname:string\nx:float64\n")
    rejects = tmp_path / "rejects.jsonl"
    result = invoke("ingest", "t", str(bad), "--schema", str(schema), "--on-error", "quarantine",
                    "--rejects", str(rejects))
    assert result.exit_code == 0, result.stderr
    assert "1 rejected" in result.stdout
    lines = rejects.read_text().splitlines()
    assert len(lines) == 1
    row = json.loads(lines[0])
    assert row["line"] == 3 and row["column"] == "x" and row["raw"] == "2,b,oops"
    assert csv_answer(invoke, "SELECT id FROM t ORDER BY id") == "id\n1\n3\n"


def test_quarantine_with_too_many_errors_commits_nothing(invoke: Invoke, tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(BAD_CSV)
    schema = tmp_path / "s.schema"
    schema.write_text("id:int64\nname:string\nx:float64\n")
    result = invoke("ingest", "t", str(bad), "--schema", str(schema), "--on-error", "quarantine",
                    "--max-errors", "0", "--rejects", str(tmp_path / "r.jsonl"))
    assert result.exit_code == 1
    assert "--max-errors" in result.stderr
    listed = {d["name"]: d for d in json.loads(invoke("datasets", "--json").stdout)}
    assert "t" not in listed or listed["t"]["rows"] == 0


def test_bad_options(invoke: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text(CSV)
    assert invoke("ingest", "t", str(path), "--delimiter", "ab").exit_code == 2
    assert invoke("ingest", "t", str(path), "--on-error", "ignore").exit_code == 2
    schema = tmp_path / "bad.schema"
    schema.write_text("id:integer-ish\n")
    result = invoke("ingest", "t", str(path), "--schema", str(schema))
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: {schema}:1: unknown type")
