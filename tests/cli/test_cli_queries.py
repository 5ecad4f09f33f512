"""sql, explain, datasets, describe, verify, vacuum and drop on a scratch SQLite store."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import Result

import colonnade
from colonnade.table.writer import SegmentWriter

Invoke = Callable[..., Result]
Corrupt = Callable[[Path, str], str]

pytestmark = pytest.mark.unit

GROUPED = "SELECT region, count(*) AS n, sum(amount) AS s FROM events GROUP BY region ORDER BY region"


# -- sql ----------------------------------------------------------------------------------------
def test_sql_table_is_aligned_plain_text_off_a_terminal(invoke: Invoke, events: Path) -> None:
    result = invoke("sql", GROUPED)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        "region  n       s\n"
        "------  -  ------\n"
        "north   3     4.0\n"
        "south   2    30.0\n"
        "west    1  100.25\n"
    )
    assert result.stderr == ""


def test_sql_csv(invoke: Invoke, events: Path) -> None:
    result = invoke("sql", GROUPED, "--format", "csv")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "region,n,s\nnorth,3,4.0\nsouth,2,30.0\nwest,1,100.25\n"


def test_sql_csv_writes_nulls_as_empty_fields(invoke: Invoke, events: Path) -> None:
    result = invoke("sql", "SELECT id, amount FROM events WHERE region = 'north' ORDER BY id",
                    "--format", "csv")
    assert result.stdout == "id,amount\n1,1.5\n2,2.5\n3,\n"


def test_sql_json_is_a_list_of_objects_with_dates_and_decimals_as_strings(invoke: Invoke, events: Path) -> None:
    result = invoke("sql", "SELECT id, day, price, amount FROM events WHERE id IN (3, 6) ORDER BY id",
                    "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == [
        {"id": 3, "day": "2024-01-03", "price": "3.00", "amount": None},
        {"id": 6, "day": "2024-01-06", "price": "6.00", "amount": 100.25},
    ]


def test_sql_json_of_grouped_answer(invoke: Invoke, events: Path) -> None:
    result = invoke("sql", GROUPED, "--format", "json")
    assert json.loads(result.stdout) == [
        {"region": "north", "n": 3, "s": 4.0},
        {"region": "south", "n": 2, "s": 30.0},
        {"region": "west", "n": 1, "s": 100.25},
    ]


def test_sql_version_pins_an_older_snapshot(invoke: Invoke, events: Path,
                                            new_events: Callable[[], pa.Table]) -> None:
    with colonnade.connect(str(events)) as store:
        store.dataset("events").append(new_events())
    latest = invoke("sql", "SELECT count(*) AS n FROM events", "--format", "csv")
    pinned = invoke("sql", "SELECT count(*) AS n FROM events", "--format", "csv", "--version", "1")
    assert latest.stdout == "n\n12\n"
    assert pinned.stdout == "n\n6\n"


def test_sql_reads_the_query_from_stdin(invoke: Invoke, events: Path) -> None:
    result = invoke("sql", "-", "--format", "csv", input="SELECT max(id) AS m FROM events")
    assert result.stdout == "m\n6\n"


def test_store_option_accepts_sqlite_uris(invoke: Invoke, events: Path) -> None:
    result = invoke("--store", f"sqlite:///{events}", "sql", "SELECT count(*) AS n FROM events",
                    "--format", "csv", store=False)
    assert result.stdout == "n\n6\n"


def test_store_defaults_to_the_environment(invoke: Invoke, events: Path) -> None:
    result = invoke("sql", "SELECT count(*) AS n FROM events", "--format", "csv", store=False,
                    env={"COLONNADE_STORE": str(events)})
    assert result.stdout == "n\n6\n"


# -- explain ------------------------------------------------------------------------------------
def test_explain_json_reports_pruning(invoke: Invoke, events: Path) -> None:
    result = invoke("explain", "SELECT sum(amount) FROM events WHERE region = 'south'", "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    for key in ("segments_total", "segments_scanned", "partitions_total", "partitions_scanned",
                "chunks_read", "bytes_read", "rows_scanned", "rows", "seconds", "scans", "plan"):
        assert key in report
    assert report["segments_total"] == 3
    assert report["segments_scanned"] == 1
    assert report["partitions_total"] == 3
    assert report["partitions_scanned"] == 1
    assert report["rows_scanned"] == 2
    assert 1 <= report["chunks_read"] <= 2
    assert report["bytes_read"] > 0
    assert report["rows"] == 1


def test_explain_without_filter_scans_everything(invoke: Invoke, events: Path) -> None:
    report = json.loads(invoke("explain", "SELECT sum(amount) FROM events", "--json").stdout)
    assert report["segments_scanned"] == report["segments_total"] == 3
    assert report["rows_scanned"] == 6


def test_explain_human_form(invoke: Invoke, events: Path) -> None:
    result = invoke("explain", "SELECT sum(amount) FROM events WHERE region = 'south'")
    assert result.exit_code == 0, result.stderr
    assert "segments scanned:   1 of 3" in result.stdout
    assert "partitions scanned: 1 of 3" in result.stdout
    assert "plan:" in result.stdout


# -- datasets and describe ------------------------------------------------------------------------
def test_datasets(invoke: Invoke, events: Path) -> None:
    text = invoke("datasets")
    assert text.exit_code == 0
    assert text.stdout.splitlines()[0].split() == ["dataset", "rows", "segments", "bytes", "version"]
    assert text.stdout.splitlines()[2].split()[:3] == ["events", "6", "3"]
    listed = json.loads(invoke("datasets", "--json").stdout)
    assert len(listed) == 1
    assert listed[0]["name"] == "events"
    assert listed[0]["rows"] == 6 and listed[0]["segments"] == 3 and listed[0]["version"] == 1
    assert listed[0]["bytes"] > 0


def test_datasets_of_an_empty_store(invoke: Invoke, store_path: Path) -> None:
    colonnade.connect(str(store_path)).close()
    result = invoke("datasets", "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == []


def test_describe_json(invoke: Invoke, events: Path) -> None:
    result = invoke("describe", "events", "--json")
    assert result.exit_code == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["name"] == "events"
    assert info["rows"] == 6
    assert info["segments"] == 3
    assert info["partitions"] == 3
    assert info["version"] == 1
    assert info["partition_by"] == ["identity(region)"]
    assert [(c["name"], c["type"]) for c in info["columns"]] == [
        ("id", "int64"), ("region", "string"), ("day", "date32"), ("amount", "float64"),
        ("price", "decimal(6,2)")]
    assert info["bytes"] == sum(c["bytes"] for c in info["columns"]) > 0
    assert len(info["versions"]) == 1
    assert info["versions"][0]["version"] == 1
    assert info["versions"][0]["rows_added"] == 6
    assert info["versions"][0]["segments_added"] == 3
    assert info["store"] == f"sqlite:///{events}"


def test_describe_human_form(invoke: Invoke, events: Path) -> None:
    result = invoke("describe", "events")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "rows:         6" in out
    assert "partition by: identity(region)" in out
    assert "\ncolumns\n" in out and "\nversions\n" in out
    assert any(line.split()[:2] == ["price", "decimal(6,2)"] for line in out.splitlines())


# -- verify, vacuum, drop ---------------------------------------------------------------------------
def test_verify_ok(invoke: Invoke, events: Path) -> None:
    result = invoke("verify", "events")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "ok: 15 chunks of dataset 'events' verified\n"


def test_verify_names_every_corrupt_chunk_and_exits_1(invoke: Invoke, events: Path, corrupt: Corrupt) -> None:
    segment = corrupt(events, "amount")
    result = invoke("verify", "events")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert len(lines) == 1
    assert "dataset 'events'" in lines[0] and "column 'amount'" in lines[0] and segment in lines[0]
    assert "checksum" in lines[0]
    assert result.stderr == "error: 1 of 15 chunks of dataset 'events' failed verification\n"
    report = json.loads(invoke("verify", "events", "--json").stdout)
    assert report["ok"] is False
    assert report["problems"] == [{"dataset": "events", "column": "amount", "segment": segment,
                                   "reason": report["problems"][0]["reason"]}]


def test_a_query_over_a_corrupt_chunk_fails_in_one_line(invoke: Invoke, events: Path,
                                                        corrupt: Corrupt) -> None:
    corrupt(events, "amount")
    result = invoke("sql", "SELECT sum(amount) FROM events")
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1
    assert "column 'amount'" in result.stderr
    assert "Traceback" not in result.stderr


def first_line(result: Result) -> str:
    return result.stdout.splitlines()[0]


def test_vacuum_removes_segments_no_commit_names(invoke: Invoke, events: Path,
                                                 new_events: Callable[[], pa.Table]) -> None:
    with colonnade.connect(str(events)) as store:
        ds = store.dataset("events")
        writer = SegmentWriter(store.chunk_store, ds.spec, uuid.uuid4().hex)
        for batch in new_events().to_batches():
            writer.write(ds.conform(batch))
        writer.finish()  # a writer that died before its commit record
    assert first_line(invoke("vacuum", "events")) == "removed 0 orphan segments of dataset 'events'"
    dry = invoke("vacuum", "events", "--grace", "0", "--dry-run").stdout.splitlines()
    assert dry[:2] == ["would remove 3 orphan segments of dataset 'events'",
                       "  in all: 3 segments in 3 partitions, 6 rows, " + dry[1].rsplit(", ", 1)[-1]]
    assert [line.split()[:4] for line in dry[-3:]] == [["region=north", "orphan", "1", "3"],
                                                       ["region=south", "orphan", "1", "2"],
                                                       ["region=west", "orphan", "1", "1"]]
    assert first_line(invoke("vacuum", "events", "--grace", "0")) == \
        "removed 3 orphan segments of dataset 'events'"
    assert first_line(invoke("vacuum", "events", "--grace", "0")) == \
        "removed 0 orphan segments of dataset 'events'"
    assert invoke("sql", "SELECT count(*) AS n FROM events", "--format", "csv").stdout == "n\n6\n"
    assert invoke("verify", "events").exit_code == 0


def test_drop_without_a_terminal_needs_yes(invoke: Invoke, events: Path) -> None:
    refused = invoke("drop", "events", input="y\n")  # a pipe is no terminal: its "y" is no answer
    assert refused.exit_code == 1 and "needs --yes when stdin is not a terminal" in refused.stderr
    result = invoke("drop", "events", "--yes")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"dropped dataset 'events' from sqlite:///{events}"
    assert json.loads(invoke("datasets", "--json").stdout) == []
    again = invoke("drop", "events", "--yes")
    assert again.exit_code == 1
    assert again.stderr == "error: dataset 'events' does not exist\n"
