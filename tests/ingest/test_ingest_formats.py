"""Reading every input format: CSV/TSV variants, Parquet, Arrow IPC (file and stream)."""

from __future__ import annotations

import datetime as dt
import gzip
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
from ingest_helpers import EVENTS_SCHEMA, table_of, version_of

from colonnade.errors import IngestError, SchemaError
from colonnade.ingest import detect_format, ingest, ingest_files, open_source
from colonnade.store import Store

pytestmark = pytest.mark.unit

CSV = "id,name,amount\n1,a,1.5\n2,b,\n3,,2.5\n"
ROWS = [{"id": 1, "name": "a", "amount": 1.5}, {"id": 2, "name": "b", "amount": None},
        {"id": 3, "name": None, "amount": 2.5}]


def test_csv_with_header_infers_types(db: Store, tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text(CSV)
    result = ingest(db, "t", path)
    assert result.rows == 3 and result.version == 1 and result.rejected == 0
    assert db.dataset("t").schema == pa.schema([("id", pa.int64()), ("name", pa.string()),
                                                ("amount", pa.float64())])
    assert table_of(db, "t").to_pylist() == ROWS


def test_csv_without_header_with_columns(db: Store, tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text(CSV.split("\n", 1)[1])
    ingest(db, "t", path, header=False, columns=["id", "name", "amount"])
    assert table_of(db, "t").to_pylist() == ROWS


def test_csv_without_header_or_names_is_refused(db: Store, tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text("1,2\n")
    with pytest.raises(IngestError, match="needs column names"):
        ingest(db, "t", path, header=False)


def test_csv_with_a_schema_file(db: Store, tmp_path: Path, fixtures: Path) -> None:
    path = tmp_path / "e.csv"
    path.write_text("id,name,amount,day,ok\n1,a,1.5,2024-01-01,true\n2,b,,,\n")
    ingest(db, "t", path, schema=fixtures / "events.schema")
    assert db.dataset("t").schema == EVENTS_SCHEMA
    assert table_of(db, "t").to_pylist() == [
        {"id": 1, "name": "a", "amount": 1.5, "day": dt.date(2024, 1, 1), "ok": True},
        {"id": 2, "name": "b", "amount": None, "day": None, "ok": None}]


def test_schema_names_the_columns_of_a_headerless_file(db: Store, tmp_path: Path) -> None:
    path = tmp_path / "e.tsv"
    path.write_text("1\ta\t1.5\t2024-01-01\ttrue\n")
    ingest(db, "t", path, header=False, schema=EVENTS_SCHEMA)
    assert table_of(db, "t").num_rows == 1
    assert db.dataset("t").schema == EVENTS_SCHEMA


def test_a_schema_may_type_some_columns_but_not_name_others(db: Store, tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text("id,other\n1,2\n")
    with pytest.raises(SchemaError, match="column.s. idd of the schema are not in the file"):
        ingest(db, "t", path, schema=pa.schema([("idd", pa.int32())]))  # a misspelt column
    ingest(db, "t", path, schema=pa.schema([("id", pa.int32())]))  # other is inferred
    assert db.dataset("t").schema == pa.schema([("id", pa.int32()), ("other", pa.int64())])


def test_tsv_by_extension(db: Store, tmp_path: Path) -> None:
    path = tmp_path / "a.tsv"
    path.write_text(CSV.replace(",", "\t"))
    ingest(db, "t", path)
    assert table_of(db, "t").to_pylist() == ROWS


@pytest.mark.parametrize("delimiter", [";", "|"])
def test_custom_delimiter(db: Store, tmp_path: Path, delimiter: str) -> None:
    path = tmp_path / "a.csv"
    path.write_text(CSV.replace(",", delimiter))
    ingest(db, "t", path, delimiter=delimiter)
    assert table_of(db, "t").to_pylist() == ROWS


def test_txt_sniffs_its_delimiter(db: Store, tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text(CSV.replace(",", ";"))
    ingest(db, "t", path)
    assert table_of(db, "t").to_pylist() == ROWS


def test_gzip_compressed_csv(db: Store, tmp_path: Path) -> None:
    path = tmp_path / "a.csv.gz"
    path.write_bytes(gzip.compress(CSV.encode()))
    ingest(db, "t", path)
    assert table_of(db, "t").to_pylist() == ROWS


def test_quoted_fields_with_delimiters_quotes_and_newlines(db: Store, tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_text('id,name\n1,"Smith, John"\n2,"two\nlines"\n3,"say ""hi"""\n4,""\n')
    ingest(db, "t", path)
    assert table_of(db, "t").column("name").to_pylist() == [
        "Smith, John", "two\nlines", 'say "hi"', None]


def test_quoting_can_be_turned_off(db: Store, tmp_path: Path) -> None:
    path = tmp_path / "q.tsv"
    path.write_text('id\tname\n1\t"a\n2\tb"\n')
    ingest(db, "t", path, quote_char=None)
    assert table_of(db, "t").column("name").to_pylist() == ['"a', 'b"']


def test_crlf_and_byte_order_mark(db: Store, tmp_path: Path) -> None:
    path = tmp_path / "w.csv"
    path.write_bytes(b"\xef\xbb\xbf" + CSV.replace("\n", "\r\n").encode())
    ingest(db, "t", path)
    assert db.dataset("t").schema.names == ["id", "name", "amount"]
    assert table_of(db, "t").to_pylist() == ROWS


def test_old_mac_line_ends(db: Store, tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    path.write_bytes(CSV.replace("\n", "\r").encode())
    ingest(db, "t", path)
    assert table_of(db, "t").to_pylist() == ROWS


def test_blank_lines_are_skipped(db: Store, tmp_path: Path) -> None:
    path = tmp_path / "b.csv"
    path.write_text("\n" + CSV.replace("\n2,", "\n\n\n2,") + "\n\n")
    ingest(db, "t", path)
    assert table_of(db, "t").to_pylist() == ROWS


def test_empty_file_adds_nothing_and_creates_nothing(db: Store, fixtures: Path) -> None:
    result = ingest(db, "t", fixtures / "empty.csv")
    assert result.rows == 0 and result.version is None
    assert result.files[0].skipped is not None and "empty file" in result.files[0].skipped
    assert "t" not in db


def test_header_only_file_adds_nothing(db: Store, fixtures: Path) -> None:
    result = ingest(db, "t", fixtures / "header_only.csv")
    assert result.rows == 0 and result.version is None
    assert "t" not in db  # no row tells the column types
    result = ingest(db, "t", fixtures / "header_only.csv", schema=fixtures / "events.schema")
    assert result.version is None and "t" not in db  # a dataset is created by its first commit


def test_empty_file_into_an_existing_dataset(db: Store, fixtures: Path, tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text(CSV)
    ingest(db, "t", path)
    for name in ("empty.csv", "header_only.csv"):
        result = ingest(db, "t", fixtures / name)
        assert result.rows == 0 and result.version is None
    assert version_of(db, "t") == 1


def test_parquet(db: Store, tmp_path: Path) -> None:
    table = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", None]})
    pq.write_table(table, tmp_path / "p.parquet", row_group_size=2)
    result = ingest(db, "t", tmp_path / "p.parquet")
    assert result.rows == 3
    assert table_of(db, "t").equals(table)


@pytest.mark.parametrize("kind", ["file", "stream"])
def test_arrow_ipc(db: Store, tmp_path: Path, kind: str) -> None:
    table = pa.table({"id": pa.array([1, 2, 3], pa.int64()),
                      "name": pa.array(["a", "b", "a"]).dictionary_encode()})
    path = tmp_path / "a.arrow"
    opener = ipc.new_file if kind == "file" else ipc.new_stream
    with opener(path, table.schema) as writer:
        writer.write_table(table, max_chunksize=2)
    ingest(db, "t", path)
    assert table_of(db, "t").column("name").to_pylist() == ["a", "b", "a"]


def test_format_option_overrides_the_extension(db: Store, tmp_path: Path) -> None:
    path = tmp_path / "data.bin"
    pq.write_table(pa.table({"id": [1, 2]}), path)
    with pytest.raises(IngestError, match="cannot tell the format"):
        ingest(db, "t", path)
    assert ingest(db, "t", path, fmt="parquet").rows == 2


@pytest.mark.parametrize("name, reason", [
    ("truncated.parquet", "not a readable Parquet file"),
    ("truncated.arrow", "not a readable Arrow IPC file"),
    ("truncated.arrows", "corrupt Arrow IPC data"),
])
def test_truncated_binary_files_are_clear_errors(db: Store, fixtures: Path, name: str,
                                                 reason: str) -> None:
    path = fixtures / name
    with pytest.raises(IngestError, match=reason) as info:
        ingest(db, "t", path)
    assert str(info.value).startswith(f"{path}: ")
    assert version_of(db, "t") in (None, 0)


def test_truncated_parquet_into_an_existing_dataset_commits_nothing(
        db: Store, fixtures: Path, tmp_path: Path) -> None:
    pq.write_table(pa.table({"id": pa.array([1], pa.int64()), "name": ["x"]}), tmp_path / "ok.parquet")
    ingest(db, "t", tmp_path / "ok.parquet")
    with pytest.raises(IngestError):
        ingest_files(db.dataset("t"), [fixtures / "truncated.parquet"])
    assert version_of(db, "t") == 1


def test_detect_format() -> None:
    assert detect_format(Path("a.CSV")).delimiter == ","
    assert detect_format(Path("a.tab")).delimiter == "\t"
    assert detect_format(Path("a.tsv.gz")).compression == "gzip"
    assert detect_format(Path("a.pq")).name == "parquet"
    assert detect_format(Path("a.feather")).name == "arrow"
    assert detect_format(Path("a.x"), "tsv").delimiter == "\t"
    with pytest.raises(IngestError, match="unknown format"):
        detect_format(Path("a.csv"), "xml")


def test_source_reports_input_consumed(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text("id\n" + "".join(f"{i}\n" for i in range(20_000)))
    with open_source(path, block_size=4096) as source:
        positions = [position for _, position in source.read()]
        assert positions == sorted(positions) and positions[-1] == path.stat().st_size
        assert len(positions) > 10


def test_records_longer_than_a_parse_block(db: Store, tmp_path: Path) -> None:
    path = tmp_path / "long.csv"
    long_value = "x" * (3 << 20)
    path.write_text(f'id,text\n1,"{long_value}\n{long_value}"\n2,short\n3,{long_value}\n')
    result = ingest(db, "t", path, block_size=1 << 20)
    assert result.rows == 3
    assert table_of(db, "t").column("text").to_pylist() == [
        f"{long_value}\n{long_value}", "short", long_value]
