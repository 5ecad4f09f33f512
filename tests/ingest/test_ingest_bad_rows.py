"""Bad rows: strict mode names file:line:column and commits nothing; quarantine keeps the good."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from ingest_helpers import EVENTS_SCHEMA, table_of, version_of

from colonnade.errors import BadRowError, SchemaError, TooManyErrorsError
from colonnade.ingest import ingest, ingest_files
from colonnade.ingest.rejects import read_rejects
from colonnade.store import Store

pytestmark = pytest.mark.unit

GOOD = "id,name,amount,day,ok\n100,z,0.5,2023-12-31,false\n"

STRICT_CASES = [
    # fixture, line, column, reason
    ("field_count.csv", 4, None, "expected 5 fields, found 4"),
    ("bad_number.csv", 5, "amount", "cannot parse 'abc' as float64"),
    ("bad_id.csv", 3, "id", "cannot parse '2x' as int64"),
    ("bad_date.csv", 3, "day", "cannot parse '2024-02-30' as date32"),
    ("bad_bool.csv", 3, "ok", "cannot parse 'maybe' as bool"),
    ("bad_utf8.csv", 5, "name", "invalid UTF-8"),
    ("quoted.csv", 6, "amount", "cannot parse 'oops' as float64"),
    ("crlf_bom.csv", 5, "amount", "cannot parse 'x' as float64"),
    ("stray_quote.csv", 5, "ok", "cannot parse 'bad' as bool"),
    ("unterminated.csv", 3, None, "unterminated quoted field"),
]


def _message(path: Path, line: int, column: str | None, reason: str) -> str:
    where = f"{path}:{line}" + (f": column {column}" if column else "")
    return f"{where}: {reason}"


@pytest.mark.parametrize("name, line, column, reason", STRICT_CASES,
                         ids=[c[0] for c in STRICT_CASES])
def test_strict_names_the_first_bad_row_and_commits_nothing(
        db: Store, tmp_path: Path, fixtures: Path, name: str, line: int, column: str | None,
        reason: str) -> None:
    good = tmp_path / "good.csv"
    good.write_text(GOOD)
    ingest(db, "t", good, schema=EVENTS_SCHEMA)
    path = fixtures / name
    with pytest.raises(BadRowError) as info:
        ingest(db, "t", path)  # the dataset's types validate every column
    error = info.value
    assert (error.path, error.line, error.column) == (str(path), line, column)
    assert str(error).startswith(_message(path, line, column, reason))
    assert version_of(db, "t") == 1
    assert table_of(db, "t").column("id").to_pylist() == [100]


@pytest.mark.parametrize("name, line, column, reason", STRICT_CASES[:6],
                         ids=[c[0] for c in STRICT_CASES[:6]])
def test_strict_into_a_new_dataset_leaves_it_empty(
        db: Store, fixtures: Path, name: str, line: int, column: str | None, reason: str) -> None:
    path = fixtures / name
    with pytest.raises(BadRowError, match=f"^{path}:{line}"):
        ingest(db, "t", path, schema=fixtures / "events.schema")
    assert version_of(db, "t") in (None, 0)


QUARANTINE_CASES = [
    # fixture, good ids, [(line, column, reason fragment)]
    ("field_count.csv", [1, 2, 4], [(4, None, "expected 5 fields, found 4"),
                                    (6, None, "expected 5 fields, found 6")]),
    ("bad_utf8.csv", [1, 2, 3, 5], [(5, "name", "invalid UTF-8")]),
    ("quoted.csv", [1, 2, 3, 5, 7], [(6, "amount", "'oops'"), (10, "day", "'2024-13-01'")]),
    ("crlf_bom.csv", [1, 2, 4], [(5, "amount", "'x'")]),
    ("stray_quote.csv", [1, 2, 3], [(5, "ok", "'bad'")]),
]


@pytest.mark.parametrize("name, good_ids, bad", QUARANTINE_CASES, ids=[c[0] for c in QUARANTINE_CASES])
def test_quarantine_commits_the_good_rows_and_lists_the_bad(
        db: Store, tmp_path: Path, fixtures: Path, name: str, good_ids: list[int],
        bad: list[tuple[int, str | None, str]]) -> None:
    path = fixtures / name
    rejects = tmp_path / "rejects.jsonl"
    result = ingest(db, "t", path, schema=fixtures / "events.schema", on_error="quarantine",
                    rejects=rejects)
    assert result.rows == len(good_ids) and result.rejected == len(bad)
    assert result.version == 1 and result.files[0].rejects == str(rejects)
    assert table_of(db, "t").column("id").to_pylist() == good_ids
    rows = read_rejects(rejects)
    assert [(r["line"], r["column"]) for r in rows] == [(line, column) for line, column, _ in bad]
    for row, (_, _, fragment) in zip(rows, bad, strict=True):
        assert row["file"] == str(path) and fragment in str(row["reason"])


def test_rejects_keep_the_raw_text_of_the_row(db: Store, tmp_path: Path, fixtures: Path) -> None:
    rejects = tmp_path / "r.jsonl"
    ingest(db, "t", fixtures / "bad_utf8.csv", schema=fixtures / "events.schema",
           on_error="quarantine", rejects=rejects)
    ingest(db, "t", fixtures / "quoted.csv", on_error="quarantine", rejects=rejects)
    rows = read_rejects(rejects)  # a rejects file per call: the second one replaced the first
    assert [r["raw"] for r in rows] == ['4,"x",oops,2024-01-04,true', '6,"z",6.5,2024-13-01,true']
    for line in rejects.read_text(encoding="utf-8").splitlines():
        assert set(json.loads(line)) == {"file", "line", "column", "reason", "raw"}


def test_default_rejects_file_is_beside_the_input(db: Store, tmp_path: Path, fixtures: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_bytes((fixtures / "bad_number.csv").read_bytes())
    result = ingest(db, "t", path, schema=EVENTS_SCHEMA, on_error="quarantine")
    default = tmp_path / "bad.csv.rejects.jsonl"
    assert result.files[0].rejects == str(default)
    assert [r["line"] for r in read_rejects(default)] == [5]


def test_clean_quarantine_ingest_writes_no_rejects_file(db: Store, tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text(GOOD)
    result = ingest(db, "t", path, on_error="quarantine")
    assert result.rejected == 0 and result.files[0].rejects is None
    assert not list(tmp_path.glob("*.rejects.jsonl"))


@pytest.mark.parametrize("max_errors, committed", [(0, False), (1, False), (2, True)])
def test_max_errors(db: Store, tmp_path: Path, fixtures: Path, max_errors: int, committed: bool) -> None:
    good = tmp_path / "good.csv"
    good.write_text(GOOD)
    ingest(db, "t", good, schema=EVENTS_SCHEMA)
    path = fixtures / "field_count.csv"  # two bad rows
    if committed:
        result = ingest(db, "t", path, on_error="quarantine", max_errors=max_errors,
                        rejects=tmp_path / "r.jsonl")
        assert result.rows == 3 and version_of(db, "t") == 2
        return
    with pytest.raises(TooManyErrorsError, match="nothing was committed") as info:
        ingest(db, "t", path, on_error="quarantine", max_errors=max_errors,
               rejects=tmp_path / "r.jsonl")
    assert info.value.limit == max_errors and info.value.count == max_errors + 1
    assert version_of(db, "t") == 1
    assert table_of(db, "t").num_rows == 1


def test_inferred_types_are_fixed_for_the_rest_of_the_file(db: Store, tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    lines = ["id,x"] + [f"{i},{i}" for i in range(100_000)] + ["100000,1.5"]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(BadRowError) as info:
        ingest(db, "t", path)  # x is int64 from the first MiB: 1.5 on the last line is bad
    assert (info.value.line, info.value.column) == (100_002, "x")
    assert "t" not in db, "a failed first ingest creates no dataset"


def test_dataset_types_validate_a_file_without_a_schema(db: Store, tmp_path: Path) -> None:
    first = tmp_path / "g.csv"
    first.write_text("id,v\n1,2\n")
    ingest(db, "t", first, schema=pa.schema([("id", pa.int32()), ("v", pa.int8())]))
    path = tmp_path / "b.csv"
    path.write_text("id,v\n2,127\n3,128\n")
    with pytest.raises(BadRowError, match=f"^{path}:3: column v: cannot parse '128' as int8"):
        ingest(db, "t", path)


def test_ingest_files_strict_failure_keeps_the_earlier_files(db: Store, tmp_path: Path,
                                                              fixtures: Path) -> None:
    good = tmp_path / "good.csv"
    good.write_text(GOOD)
    ds = db.create_dataset("t", EVENTS_SCHEMA)
    with pytest.raises(BadRowError):
        ingest_files(ds, [good, fixtures / "bad_date.csv"])
    assert version_of(db, "t") == 1  # one commit per file: the good file's


def _reading_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "colonnade-ingest-read" and t.is_alive()]


def test_a_late_bad_row_in_a_many_block_file(db: Store, tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    lines = ["id,v"] + [f"{i},{i}" for i in range(50_000)]
    lines[40_000] = "39999,not a number"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(BadRowError, match=f"^{path}:40001: column v"):
        ingest(db, "t", path, schema=pa.schema([("id", pa.int64()), ("v", pa.int64())]),
               block_size=8192)
    assert version_of(db, "t") is None and not _reading_threads()  # nothing, not even the dataset
    with pytest.raises(TooManyErrorsError):
        ingest(db, "t", path, on_error="quarantine", max_errors=0, block_size=8192,
               rejects=tmp_path / "r.jsonl")
    assert version_of(db, "t") is None and not _reading_threads()  # nothing, not even the dataset
    result = ingest(db, "t", path, on_error="quarantine", block_size=8192,
                    rejects=tmp_path / "r.jsonl")
    assert result.rows == 49_999 and version_of(db, "t") == 1
    assert [r["line"] for r in read_rejects(tmp_path / "r.jsonl")] == [40_001]


def test_a_failing_write_stops_the_reader(db: Store, tmp_path: Path) -> None:
    db.create_dataset("t", pa.schema([("id", pa.int64())]))
    path = tmp_path / "a.csv"
    path.write_text("id,extra\n" + "".join(f"{i},{i}\n" for i in range(20_000)))
    with pytest.raises(SchemaError):
        ingest(db, "t", path, block_size=4096)
    assert version_of(db, "t") == 0 and not _reading_threads()


def test_binary_garbage_is_reported_in_one_printable_line(
        db: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    unraisable: list[object] = []
    monkeypatch.setattr("sys.unraisablehook", unraisable.append)
    path = tmp_path / "bin.csv"
    path.write_bytes(b"id,v\n1,2\n\x00\xff\xfe,\x01\n3,\"4\n\x07\"\n5,6\n")
    schema = pa.schema([("id", pa.int64()), ("v", pa.int64())])
    with pytest.raises(BadRowError) as info:
        ingest(db, "t", path, schema=schema)
    message = str(info.value)
    assert info.value.line == 3 and message.isprintable()
    result = ingest(db, "t", path, schema=schema, on_error="quarantine", rejects=tmp_path / "r.jsonl")
    assert result.rows == 2
    rows = read_rejects(tmp_path / "r.jsonl")
    assert [(r["line"], r["column"]) for r in rows] == [(3, "id"), (4, "v")]
    assert all(str(r["reason"]).isprintable() for r in rows)
    assert rows[1]["raw"] == '3,"4\n\x07"'
    assert not unraisable


def test_a_wrong_field_count_in_the_inference_sample(db: Store, tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text("id,name\n1,a\n2,b,extra\n3,c\n")
    with pytest.raises(BadRowError, match=f"^{path}:3: expected 2 fields, found 3"):
        ingest(db, "t", path)
    assert "t" not in db
    result = ingest(db, "t", path, on_error="quarantine", rejects=tmp_path / "r.jsonl")
    assert result.rows == 2 and result.rejected == 1
    assert db.dataset("t").schema == pa.schema([("id", pa.int64()), ("name", pa.string())])
