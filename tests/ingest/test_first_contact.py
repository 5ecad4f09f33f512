"""What a first ingest of an unknown file must get right, through the Python API, on both stores:
an unterminated quote is one bad row (never the rest of the file as one value), the progress
events a renderer is driven by, and the summary line's wording."""

from __future__ import annotations

import gzip
from pathlib import Path

import pyarrow as pa
import pytest

from colonnade.errors import BadRowError
from colonnade.ingest import ingest
from colonnade.ingest.delimited import CsvOptions, DelimitedSource
from colonnade.ingest.rejects import read_rejects
from colonnade.store import Store

UNTERMINATED = 'id,name,v\n1,a,1.5\n2,b,"unterminated\n3,c,2.5\n'


def ids(store: Store, name: str) -> list[int]:
    return store.sql(f"SELECT id FROM {name} ORDER BY id").column("id").to_pylist()


def rows_of(store: Store, name: str) -> int:
    return store.dataset(name).snapshot().rows if name in store else 0


# -- an unterminated quote is one bad row -------------------------------------------------------
def test_an_unterminated_quote_fails_strict_on_its_line_and_commits_nothing(
        store: Store, tmp_path: Path) -> None:
    path = tmp_path / "u.csv"
    path.write_text(UNTERMINATED)
    with pytest.raises(BadRowError) as info:
        ingest(store, "t", path)
    assert (info.value.line, info.value.column) == (3, None)
    assert str(info.value).startswith(f"{path}:3: unterminated quoted field")
    assert rows_of(store, "t") == 0


def test_quarantine_rejects_the_line_of_an_unterminated_quote_and_keeps_the_next(
        store: Store, tmp_path: Path) -> None:
    path = tmp_path / "u.csv"
    path.write_text(UNTERMINATED)
    rejects = tmp_path / "r.jsonl"
    result = ingest(store, "t", path, on_error="quarantine", rejects=rejects)
    assert (result.rows, result.rejected, result.version) == (2, 1, 1)
    assert ids(store, "t") == [1, 3]
    # v is typed by the good rows, not turned into text by the row that swallowed the rest
    assert store.dataset("t").schema.field("v").type == pa.float64()
    assert store.sql("SELECT v FROM t ORDER BY id").column("v").to_pylist() == [1.5, 2.5]
    [reject] = read_rejects(rejects)
    assert (reject["line"], reject["column"], reject["raw"]) == (3, None, '2,b,"unterminated')
    assert str(reject["reason"]).startswith("unterminated quoted field")


def test_an_unterminated_quote_is_bad_in_a_text_column_too(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "u.csv"
    path.write_text(UNTERMINATED)
    text = pa.schema([("id", pa.int64()), ("name", pa.string()), ("v", pa.string())])
    with pytest.raises(BadRowError, match=f"^{path}:3: unterminated quoted field"):
        ingest(store, "t", path, schema=text)
    assert rows_of(store, "t") == 0
    result = ingest(store, "t", path, on_error="quarantine", rejects=tmp_path / "r.jsonl")
    assert result.rows == 2
    assert store.sql("SELECT v FROM t ORDER BY id").column("v").to_pylist() == ["1.5", "2.5"]


def test_every_line_of_a_file_full_of_unterminated_quotes_is_judged_alone(
        store: Store, tmp_path: Path) -> None:
    path = tmp_path / "u.csv"
    # with CRLF, a multi-line quoted field that does close before it, and no newline at the end
    path.write_bytes(b'id,name\r\n1,"two\r\nlines"\r\n2,"open\r\n3,ok\r\n4,"open again\r\n5,last')
    result = ingest(store, "t", path, on_error="quarantine", rejects=tmp_path / "r.jsonl",
                    block_size=8)
    assert ids(store, "t") == [1, 3, 5]
    rejects = read_rejects(tmp_path / "r.jsonl")
    assert [(r["line"], r["raw"]) for r in rejects] == [(4, '2,"open'), (6, '4,"open again')]
    # the quote of line 4 would have been closed by the one opening a field on line 6
    assert rejects[0]["reason"] == ("unterminated quoted field (the next quote, on line 6, is "
                                    "followed by text, not by a delimiter)")
    assert rejects[1]["reason"] == ("unterminated quoted field (no closing quote before the end "
                                    "of the file)")
    assert result.rejected == 2


def test_a_quoted_field_must_end_at_its_closing_quote(db: Store, tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_text('id,name\n1,"a ""b"" c"\n2,"x"y\n3,""\n4,"d,e"\n')
    with pytest.raises(BadRowError, match=f"^{path}:3: unterminated quoted field"):
        ingest(db, "t", path)
    ingest(db, "t", path, on_error="quarantine", rejects=tmp_path / "r.jsonl")
    assert db.sql("SELECT name FROM t ORDER BY id").column("name").to_pylist() == [
        'a "b" c', None, "d,e"]


def test_a_quote_still_open_after_the_longest_record_costs_one_row(tmp_path: Path) -> None:
    path = tmp_path / "u.csv"
    lines = [f"{i},n{i}" for i in range(20_000)]
    lines[10] = '10,"never closed'
    path.write_text("id,name\n" + "\n".join(lines) + "\n")
    rejects: list[object] = []
    options = CsvOptions(block_size=256, max_record_bytes=1024)
    with DelimitedSource(path, options, on_reject=rejects.append) as source:
        got = [i for batch, _ in source.read() for i in batch.column(0).to_pylist()]
    assert got == [i for i in range(20_000) if i != 10]
    [reject] = rejects
    assert reject.line == 12 and "no closing quote within" in reject.reason  # type: ignore[attr-defined]


def test_an_unterminated_quote_in_the_header_is_an_error_on_line_1(tmp_path: Path,
                                                                    db: Store) -> None:
    path = tmp_path / "u.csv"
    path.write_text('id,"name\n1,a\n')
    with pytest.raises(BadRowError, match=f"^{path}:1: unterminated quoted field"):
        ingest(db, "t", path)


def test_gzip_input_positions_end_at_the_compressed_size(tmp_path: Path) -> None:
    path = tmp_path / "a.csv.gz"
    with gzip.open(path, "wt") as f:
        f.write("id,name\n" + "".join(f"{i},n{i}\n" for i in range(50_000)))
    with DelimitedSource(path, CsvOptions(compression="gzip", block_size=16 * 1024)) as source:
        positions = [p for _, p in source.read()]
    assert positions == sorted(positions) and len(positions) > 10
    assert positions[-1] == path.stat().st_size and positions[0] < path.stat().st_size / 4
