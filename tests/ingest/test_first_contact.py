"""What a first ingest of an unknown file must get right, through the Python API (on both stores
where it is about what gets stored): an unterminated quote is one bad row, never the rest of the
file as one value; a column made text by a few values is reported with its first odd line; the
progress events a renderer is driven by; the summary line's wording; and what Ctrl-C reports."""

from __future__ import annotations

import gzip
import os
import signal
import time
from pathlib import Path

import pyarrow as pa
import pytest

from colonnade.errors import BadRowError
from colonnade.ingest import IngestInterrupted, Progress, ingest, summary_line
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
    result = ingest(store, "t", path, schema=text, on_error="quarantine", rejects=tmp_path / "r.jsonl")
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


# -- columns made text by a few values ------------------------------------------------------------
def events_csv(path: Path, rows: int = 1500, odd: dict[int, str] | None = None) -> Path:
    """GDELT-like rows; ``odd`` replaces NumArticles on some rows (by row index)."""
    lines = ["GLOBALEVENTID,Actor1Name,NumArticles,SQLDATE"]
    for i in range(rows):
        articles = (odd or {}).get(i, str(i % 50 + 1))
        lines.append(f"{i},actor{i},{articles},2024-01-{i % 28 + 1:02d}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_column_made_text_by_one_value_is_reported_with_its_line(store: Store,
                                                                    tmp_path: Path) -> None:
    path = events_csv(tmp_path / "events.csv", odd={1400: "many"})
    result = ingest(store, "t", path)
    assert store.dataset("t").schema.field("NumArticles").type == pa.string()
    assert result.created and result.inferred == ["GLOBALEVENTID", "Actor1Name", "NumArticles",
                                                  "SQLDATE"]
    assert (result.inferred_rows, result.inferred_from) == (1500, str(path))
    [warning] = result.schema_warnings
    assert (warning.column, warning.type, warning.values, warning.rows) == ("NumArticles", "int64",
                                                                            1500, 1500)
    assert (warning.line, warning.value, warning.matching) == (1402, "many", 1499)
    assert warning.share == pytest.approx(1499 / 1500)
    assert result.to_dict()["schema_warnings"][0]["line"] == 1402
    # the fix the warning names: the column typed by a partial schema, the odd row set aside
    again = ingest(store, "fixed", path, schema=pa.schema([("NumArticles", pa.int64())]),
                   on_error="quarantine", rejects=tmp_path / "r.jsonl")
    assert again.rows == 1499 and again.schema_warnings == []
    assert store.dataset("fixed").schema.field("NumArticles").type == pa.int64()
    assert again.inferred == ["GLOBALEVENTID", "Actor1Name", "SQLDATE"]


def test_dates_made_text_by_a_placeholder_are_reported(db: Store, tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    days = [f"2024-02-{i % 28 + 1:02d}" for i in range(300)]
    days[7] = "unknown"
    path.write_text("id,day,note\n" + "".join(f"{i},{d},x{i}\n" for i, d in enumerate(days)))
    result = ingest(db, "t", path)
    assert [(w.column, w.type, w.line, w.value) for w in result.schema_warnings] == [
        ("day", "date32", 9, "unknown")]


@pytest.mark.parametrize("odd, warned", [
    ({i: "n/a" for i in range(0, 1500, 94)}, False),  # 16 of 1,500 odd: 98.9% typed, below...
    ({i: "n/a" for i in range(0, 1500, 100)}, True),  # ...15 of 1,500: 99.0% typed, reported
    ({}, False),  # every value a number: the column is int64, nothing to say
])
def test_only_columns_at_least_99_percent_typed_are_reported(
        db: Store, tmp_path: Path, odd: dict[int, str], warned: bool) -> None:
    result = ingest(db, "t", events_csv(tmp_path / "e.csv", odd=odd))
    assert bool(result.schema_warnings) == warned


def test_the_share_is_measured_over_the_rows_the_types_came_from(db: Store, tmp_path: Path) -> None:
    # blank lines and a quoted multi-line value before the odd one: its line is still exact
    path = tmp_path / "e.csv"
    rows = [f'{i},"a\nb",{i}' if i == 3 else f"{i},n{i},{i}" for i in range(150_000)]
    rows[250] = "250,n250,lots"
    path.write_text("id,name,n\n\n" + "\n".join(rows) + "\n")  # 2.5 MB
    result = ingest(db, "t", path)
    [warning] = result.schema_warnings
    assert warning.line == 254 and warning.value == "lots"  # header, blank, 250 rows, 1 extra line
    # measured over the first MiB of rows, those the types were inferred from
    assert warning.rows == warning.values == result.inferred_rows
    assert 50_000 < result.inferred_rows < 100_000 and result.rows == 150_000


def test_no_report_for_an_existing_dataset_or_given_types(db: Store, tmp_path: Path) -> None:
    path = events_csv(tmp_path / "e.csv", odd={3: "many"})
    first = ingest(db, "t", path)
    assert first.created and [w.column for w in first.schema_warnings] == ["NumArticles"]
    again = ingest(db, "t", events_csv(tmp_path / "f.csv", rows=1600, odd={3: "many"}))
    assert again.version == 2 and not again.created and again.schema_warnings == []  # it existed
    text = pa.schema([("NumArticles", pa.string())])
    given = ingest(db, "u", path, schema=text)
    assert given.created and given.schema_warnings == []  # made text on purpose


# -- progress events -------------------------------------------------------------------------------
class Recorder(Progress):
    def __init__(self) -> None:
        self.events: list[tuple[str, int, int]] = []

    def start(self, files: int, total_bytes: int) -> None:
        self.events.append(("start", files, total_bytes))

    def start_file(self, path: str, total_bytes: int) -> None:
        self.events.append(("start_file", total_bytes, 0))

    def identify(self, bytes_done: int) -> None:
        self.events.append(("identify", bytes_done, 0))

    def update(self, bytes_done: int, rows: int) -> None:
        self.events.append(("update", bytes_done, rows))

    def skip_file(self, path: str, total_bytes: int) -> None:
        self.events.append(("skip_file", total_bytes, 0))

    def end_file(self) -> None:
        self.events.append(("end_file", 0, 0))


def big_csv(path: Path, rows: int) -> Path:
    with open(path, "w") as f:
        f.write("id,name,v\n")
        for start in range(0, rows, 10_000):
            f.write("".join(f"{i},name{i},{i * 0.5}\n" for i in range(start, min(start + 10_000, rows))))
    return path


def test_progress_moves_by_bytes_parsed_from_the_first_block_to_the_total_once(
        db: Store, tmp_path: Path) -> None:
    path = big_csv(tmp_path / "a.csv", 600_000)  # about 14 MB: less than one 16 MiB block
    size = path.stat().st_size
    recorder = Recorder()
    ingest(db, "t", path, progress=recorder)
    events = recorder.events
    assert events[0] == ("start", 1, size) and events[1] == ("start_file", size, 0)
    assert events[-1][0] == "end_file"
    # first the file is read for its digest, then parsed
    kinds = [kind for kind, _, _ in events]
    assert kinds[2] == "identify" and kinds.index("update") > max(
        i for i, kind in enumerate(kinds) if kind == "identify")
    digest = [b for kind, b, _ in events if kind == "identify"]
    assert digest == sorted(digest) and digest[-1] == size
    updates = [(b, r) for kind, b, r in events if kind == "update"]
    assert [b for b, _ in updates] == sorted(b for b, _ in updates)
    assert [r for _, r in updates] == sorted(r for _, r in updates)
    assert [b for b, _ in updates].count(size) == 1 and updates[-1] == (size, 600_000)
    # the file is one block: the bar moves inside it (it used to jump to the end at once)
    assert updates[0][0] < size / 8 and len(updates) > 8


def test_progress_reaches_the_total_once_when_the_last_rows_were_rejected(
        db: Store, tmp_path: Path) -> None:
    path = tmp_path / "u.csv"
    path.write_text(UNTERMINATED)
    for name, progress in (("a", Recorder()), ("b", Recorder())):
        ingest(db, name, path, on_error="quarantine", rejects=tmp_path / "r.jsonl",
               progress=progress)
        updates = [b for kind, b, _ in progress.events if kind == "update"]
        assert updates.count(path.stat().st_size) == 1 and updates[-1] == path.stat().st_size


def test_a_skipped_file_is_an_event_of_its_own(db: Store, tmp_path: Path) -> None:
    a = big_csv(tmp_path / "a.csv", 100)
    ingest(db, "t", a)
    recorder = Recorder()
    ingest(db, "t", [a, big_csv(tmp_path / "b.csv", 50)], progress=recorder)
    kinds = [e[0] for e in recorder.events if e[0] != "identify"]
    assert kinds[:4] == ["start", "start_file", "skip_file", "end_file"]
    assert kinds[4] == "start_file" and kinds[-1] == "end_file" and "update" in kinds[4:]


def test_the_digest_read_with_progress_is_the_file_identity(tmp_path: Path) -> None:
    from colonnade.ingest.pipeline import _identity
    from colonnade.table.dataset import file_identity

    path = big_csv(tmp_path / "a.csv", 400_000)
    recorder = Recorder()
    assert _identity(path, recorder, chunk=1 << 20) == file_identity(path)
    assert len(recorder.events) > 5 and recorder.events[-1] == ("identify", path.stat().st_size, 0)


# -- the summary line -----------------------------------------------------------------------------
def test_the_summary_counts_in_the_singular_and_plural(db: Store, tmp_path: Path) -> None:
    one = tmp_path / "one.csv"
    one.write_text("id\n1\n")
    assert summary_line(ingest(db, "t", one)).startswith("ingested 1 row from 1 file into t (v1)")
    two = tmp_path / "two.csv"
    two.write_text("id\n2\n3\n")
    assert summary_line(ingest(db, "t", two)).startswith("ingested 2 rows from 1 file into t (v2)")
    skipped = ingest(db, "t", [one, two])
    assert summary_line(skipped) == ("nothing ingested into t: 2 files skipped (2 already "
                                     "ingested), 0 rows added")


# -- Ctrl-C -----------------------------------------------------------------------------------------
def test_ctrl_c_while_the_commit_record_is_written_is_held_until_the_store_answers(
        store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = [big_csv(tmp_path / f"{i}.csv", 1000) for i in range(3)]
    real = store.chunk_store.commit
    calls = []

    def interrupted_commit(dataset: str, version: int, payload: bytes) -> None:
        calls.append(version)
        if len(calls) == 2:  # the second file: Ctrl-C arrives in the middle of the store call
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.2)  # a handler would run here, before the record is written
        real(dataset, version, payload)

    monkeypatch.setattr(store.chunk_store, "commit", interrupted_commit)
    with pytest.raises(IngestInterrupted) as info:
        ingest(store, "t", paths)
    # the store call completed, then the interrupt was raised: the log has v2, and so does the
    # report; the third file was not read
    assert str(info.value) == ("interrupted after committing t v1-v2 (2,000 rows from 2 files); "
                               f"the rest was not ingested ({paths[2]})")
    assert [f.version for f in info.value.result.files] == [1, 2]
    assert info.value.pending == [str(paths[2])]
    assert store.dataset("t").version == 2 and rows_of(store, "t") == 2000
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_before_any_commit_says_nothing_was_committed(
        db: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = big_csv(tmp_path / "a.csv", 50_000)

    class Interrupting(Progress):
        def update(self, bytes_done: int, rows: int) -> None:
            raise KeyboardInterrupt  # as Ctrl-C would, while the file is being read

    with pytest.raises(IngestInterrupted, match="^interrupted: nothing committed to t$") as info:
        ingest(db, "t", path, progress=Interrupting(), block_size=64 * 1024)
    assert info.value.result.files == [] and info.value.pending == [str(path)]
    assert rows_of(db, "t") == 0


def test_blocks_start_small_then_keep_the_block_size(tmp_path: Path) -> None:
    from colonnade.ingest.blocks import BlockReader
    from colonnade.ingest.records import Dialect

    path = big_csv(tmp_path / "a.csv", 400_000)  # about 9 MB
    for block_size in (1 << 20, 2 << 20, 4 << 20):
        with open(path, "rb") as f:
            reader = BlockReader(f, Dialect.of(",", '"'), str(path), block_size=block_size)
            sizes = [len(block.data) for block in reader]
        assert sum(sizes) == path.stat().st_size
        # the first block is 1 MiB at most, the next twice that (up to the block size, plus the
        # end of a record read with it), and no small block is left over after each read
        assert sizes[0] <= 1 << 20 and sizes[1] <= min(2 << 20, block_size) + (64 << 10)
        assert min(sizes[:-1]) > 512 << 10, sizes
