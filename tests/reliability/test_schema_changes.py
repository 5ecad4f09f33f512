"""Schema changes from the command line, on both stores: data with another schema is refused by
default with a readable diff and nothing committed; ``--schema-mode merge`` adds the new columns
(nullable) and segments written before read them as nulls through SQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from colonnade.store import Store


def csv(invoke: Any, query: str) -> str:
    result = invoke("sql", query, "--format", "csv")
    assert result.exit_code == 0, result.output
    return str(result.stdout)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_other_columns_are_refused_with_a_diff_unless_merged(
        module_store: Store, invoke: Any, name: str, tmp_path: Path) -> None:
    first = write(tmp_path / "v1.csv", "id,name\n1,a\n2,b\n")
    wider = write(tmp_path / "v2.csv", "id,name,score,tag\n3,c,30,x\n4,d,,y\n")
    assert invoke("ingest", name, str(first)).exit_code == 0

    refused = invoke("ingest", name, str(wider))
    assert refused.exit_code == 1
    assert refused.stderr == (f"error: schema of the data differs from dataset {name!r}:\n"
                              "  + score: int64 (not in the dataset)\n"
                              "  + tag: string (not in the dataset)\n")
    assert refused.stdout == ""
    assert module_store.dataset(name).version == 1
    assert csv(invoke, f"SELECT count(*) AS n FROM {name}") == "n\n2\n"

    merged = invoke("ingest", name, str(wider), "--schema-mode", "merge")
    assert merged.exit_code == 0, merged.output
    assert merged.stdout.startswith(f"ingested 2 rows from 1 file into {name} (v2)")
    assert [f.name for f in module_store.dataset(name).schema] == ["id", "name", "score", "tag"]
    assert all(f.nullable for f in module_store.dataset(name).schema)
    assert csv(invoke, f"SELECT id, name, score, tag FROM {name} ORDER BY id") == \
        "id,name,score,tag\n1,a,,\n2,b,,\n3,c,30,x\n4,d,,y\n"
    assert csv(invoke, f"SELECT count(*) AS n, count(score) AS s FROM {name} WHERE tag IS NULL") == "n,s\n2,0\n"
    assert csv(invoke, f"SELECT id FROM {name} WHERE score = 30") == "id\n3\n"  # pruning sees nulls
    # an older version reads in its own schema: the columns added later are not there
    old = invoke("sql", f"SELECT * FROM {name} ORDER BY id", "--version", "1", "--format", "csv")
    assert old.exit_code == 0 and old.stdout == "id,name\n1,a\n2,b\n"
    missing = invoke("sql", f"SELECT score FROM {name}", "--version", "1")
    assert missing.exit_code == 1 and "score" in missing.stderr and missing.stdout == ""
    assert invoke("verify", name).exit_code == 0


def test_a_type_that_cannot_be_stored_is_refused_naming_the_column(
        module_store: Store, invoke: Any, name: str, tmp_path: Path) -> None:
    first = tmp_path / "v1.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64()), "n": pa.array([10, 20], pa.int64())}), first)
    assert invoke("ingest", name, str(first)).exit_code == 0
    other = tmp_path / "v2.parquet"
    pq.write_table(pa.table({"id": pa.array([3], pa.int64()), "n": pa.array(["ten"])}), other)
    for mode in ("strict", "merge"):
        refused = invoke("ingest", name, str(other), "--schema-mode", mode)
        assert refused.exit_code == 1
        assert refused.stderr.startswith("error: column 'n': cannot store string values in a int64 "
                                         f"column of dataset {name!r}"), refused.stderr
        assert module_store.dataset(name).version == 1


def test_data_missing_a_column_is_refused_by_default(module_store: Store, invoke: Any, name: str,
                                                      tmp_path: Path) -> None:
    assert invoke("ingest", name, str(write(tmp_path / "v1.csv", "id,name\n1,a\n"))).exit_code == 0
    narrower = invoke("ingest", name, str(write(tmp_path / "v2.csv", "id\n2\n")))
    assert narrower.exit_code == 1
    assert narrower.stderr == (f"error: schema of the data differs from dataset {name!r}:\n"
                               "  - name: string (missing from the data)\n")
    assert module_store.dataset(name).version == 1
    merged = invoke("ingest", name, str(tmp_path / "v2.csv"), "--schema-mode", "merge")
    assert merged.exit_code == 0, merged.output  # merge accepts it: the missing column is null
    assert invoke("sql", f"SELECT id, name FROM {name} ORDER BY id", "--format", "csv").stdout == \
        "id,name\n1,a\n2,\n"
