"""``store.ingest(..., workers=N)``: worker processes write CSV byte ranges, Parquet row groups and
whole files, and the whole input set is one commit — the same rows, bad rows and rejects as a
one-process ingest, on both stores."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
from parallel_helpers import (
    SCHEMA,
    TASK_BYTES,
    dataset_rows,
    duckdb_rows,
    rows_table,
    write_csv,
    write_parquet,
)

from colonnade.cli.progress import ConsoleProgress, make_progress
from colonnade.errors import BadRowError, IngestError, TooManyErrorsError
from colonnade.ingest.progress import Progress
from colonnade.ingest.records import Dialect, quoted_spans, record_ends
from colonnade.ingest.tasks import scan_csv
from colonnade.store import Store


def _inputs(tmp_path: Path) -> tuple[list[Path], list[Path]]:
    """Three CSV files (LF, CRLF, gzip) and a Parquet file of several row groups."""
    csvs = [write_csv(tmp_path / "a.csv", range(0, 900)),
            write_csv(tmp_path / "b.csv", range(900, 1800), crlf=True),
            write_csv(tmp_path / "c.csv.gz", range(1800, 2100), compress=True)]
    parquets = [write_parquet(tmp_path / "d.parquet", range(2100, 4000), row_group_rows=250)]
    return csvs, parquets


def test_a_parallel_ingest_gives_the_rows_of_one_process_and_of_duckdb_in_one_commit(
        store: Store, tmp_path: Path) -> None:
    csvs, parquets = _inputs(tmp_path)
    files = [*csvs, *parquets]
    result = store.ingest("par", files, workers=2, min_task_bytes=TASK_BYTES)
    assert result.version == 1 and result.rows == 4000 and result.created
    assert [f.version for f in result.files] == [1, 1, 1, 1]
    assert [f.rows for f in result.files] == [900, 900, 300, 1900]
    ds = store.dataset("par")
    assert ds.version == 1 and len(ds.history()) == 1  # exactly one new version
    store.ingest("one", files)  # one process, one commit per file
    got = dataset_rows(store, "par")
    assert got == dataset_rows(store, "one")
    assert got == duckdb_rows(csvs, parquets)  # DuckDB's own readers
    assert got == rows_table(range(900)).to_pylist() + rows_table(range(900, 1800), "\r\n").to_pylist() \
        + rows_table(range(1800, 4000)).to_pylist()
    # the whole set is one source: again, in any order, it adds nothing
    again = store.ingest("par", list(reversed(files)), workers=2, min_task_bytes=TASK_BYTES)
    assert again.version is None and again.rows == 0
    assert all(f.skipped == "already ingested, 0 rows added" for f in again.files)
    assert store.dataset("par").version == 1
    forced = store.ingest("par", files, workers=2, force=True)
    assert forced.version == 2 and forced.rows == 4000
    assert store.dataset("par").vacuum(grace_seconds=0, dry_run=True).segments == 0


def test_a_file_is_cut_on_record_boundaries_with_its_true_line_numbers(tmp_path: Path) -> None:
    for crlf in (False, True):
        path = write_csv(tmp_path / f"cut{crlf}.csv", range(3000), crlf=crlf)
        data = path.read_bytes()
        header = data.index(b"\n") + 1
        scanned = scan_csv(path, header, 2, 2000, ord('"'), ord("\n"))
        ends = {int(e) + 1 for e in record_ends(data[header:], Dialect(ord(",")))}
        n = (len(data) - header) // 2000
        assert len(scanned.ranges) > 20
        assert scanned.ranges[0][:2] == (header, scanned.ranges[1][0])
        assert scanned.ranges[-1][1] == len(data)
        for (start, _, line), (nxt, _, _) in zip(scanned.ranges, scanned.ranges[1:], strict=False):
            assert nxt - header in ends  # each cut is a record boundary
            assert line == data.count(b"\n", 0, start) + 1
        # and many of the points aimed at were inside quoted fields
        spans = quoted_spans(data[header:], Dialect(ord(",")))
        aims = np.array([(len(data) - header) * k // n for k in range(1, n)])
        assert spans.inside(aims).sum() >= 5


def test_a_bad_row_in_a_late_range_names_its_file_and_line_and_commits_nothing(
        store: Store, tmp_path: Path) -> None:
    store.create_dataset("t", rows_table([]).schema)
    late = write_csv(tmp_path / "late.csv", range(3000), bad={2950: "oops"})
    first = write_csv(tmp_path / "first.csv", range(3000, 4000))
    with pytest.raises(BadRowError) as one:
        store.ingest("t", [late])
    with pytest.raises(BadRowError) as par:
        store.ingest("t", [first, late], workers=2, min_task_bytes=TASK_BYTES)
    assert str(par.value) == str(one.value)
    assert (par.value.path, par.value.line) == (str(late), one.value.line)
    assert one.value.line == late.read_bytes().count(b"\n", 0, late.read_bytes().index(b"\n2950,")) + 2
    ds = store.dataset("t")
    assert ds.version == 0 and dataset_rows(store, "t") == []
    ds.vacuum(grace_seconds=0)
    assert ds.vacuum(grace_seconds=0, dry_run=True).segments == 0


def test_quarantine_writes_the_rejects_of_one_process_in_order(store: Store, tmp_path: Path) -> None:
    bad = {5: "x5", 1200: "nope", 2999: "7,extra", 2400: "\xff"}
    a = write_csv(tmp_path / "a.csv", range(3000), bad=bad)
    b = write_csv(tmp_path / "b.csv", range(3000, 4500), crlf=True, bad={3001: "bad", 4499: "bad"})
    one = store.ingest("one", [a, b], on_error="quarantine", rejects=tmp_path / "one.jsonl",
                       schema=SCHEMA)
    par = store.ingest("par", [a, b], workers=2, min_task_bytes=TASK_BYTES, on_error="quarantine",
                       rejects=tmp_path / "par.jsonl", schema=SCHEMA)
    assert (par.rows, par.rejected) == (one.rows, one.rejected) == (4500 - 6, 6)
    assert [f.rejected for f in par.files] == [4, 2]
    assert (tmp_path / "par.jsonl").read_text() == (tmp_path / "one.jsonl").read_text()
    lines = [json.loads(r)["line"] for r in (tmp_path / "par.jsonl").read_text().splitlines()]
    assert lines[:4] == sorted(lines[:4]) and lines[4:] == sorted(lines[4:])
    assert dataset_rows(store, "par") == dataset_rows(store, "one")
    # each input's own rejects file beside it, as one process writes it
    for path in (a, b):
        Path(f"{path}.rejects.jsonl").unlink(missing_ok=True)
    store.ingest("one2", [a, b], on_error="quarantine", schema=SCHEMA)
    want = [Path(f"{p}.rejects.jsonl").read_text() for p in (a, b)]
    store.ingest("par2", [a, b], on_error="quarantine", workers=2, min_task_bytes=TASK_BYTES,
                 schema=SCHEMA)
    assert [Path(f"{p}.rejects.jsonl").read_text() for p in (a, b)] == want
    assert par.files[0].rejects == str(tmp_path / "par.jsonl")


def test_max_errors_counts_the_bad_rows_of_a_file_across_its_ranges(store: Store, tmp_path: Path) -> None:
    a = write_csv(tmp_path / "a.csv", range(3000), bad={10: "x", 1500: "x", 2900: "x"})
    with pytest.raises(TooManyErrorsError, match=re.escape(f"{a}: 3 bad rows exceed")):
        store.ingest("t", [a], workers=2, min_task_bytes=TASK_BYTES, on_error="quarantine",
                     max_errors=2, rejects=tmp_path / "r.jsonl", schema=SCHEMA)
    assert "t" not in store
    ok = store.ingest("t", [a], workers=2, min_task_bytes=TASK_BYTES, on_error="quarantine",
                      max_errors=3, rejects=tmp_path / "r.jsonl", schema=SCHEMA)
    assert (ok.rows, ok.rejected, ok.version) == (2997, 3, 1)


def test_a_quote_inside_an_unquoted_field_has_the_rest_of_its_file_read_as_one_task(
        store: Store, tmp_path: Path) -> None:
    """Counting quotes goes wrong after ``5" screen`` (pyarrow reads that quote as a character):
    the ranges after it are set aside and the file is read on from there as one task."""
    path = write_csv(tmp_path / "stray.csv", range(3000))
    text = path.read_text().replace("\n1301,plain1301,", '\n1301,5" screen,', 1)
    assert '5" screen' in text
    path.write_text(text)
    one = store.ingest("one", [path])
    par = store.ingest("par", [path], workers=2, min_task_bytes=TASK_BYTES)
    assert par.rows == one.rows == 3000 and par.version == 1
    assert dataset_rows(store, "par") == dataset_rows(store, "one")
    assert store.dataset("par").vacuum(grace_seconds=0, dry_run=True).segments == 0
    # and in strict mode a bad row after it is named as one process names it
    path.write_text(text.replace("\n2501,", "\n2501,oops,oops,", 1))
    with pytest.raises(BadRowError) as want:
        store.ingest("one", [path])
    with pytest.raises(BadRowError) as got:
        store.ingest("par", [path], workers=2, min_task_bytes=TASK_BYTES)
    assert str(got.value) == str(want.value)


class Recorder(Progress):
    def __init__(self) -> None:
        self.events: list[tuple[str, int, int]] = []

    def start(self, files: int, total_bytes: int) -> None:
        self.events.append(("start", files, total_bytes))

    def start_file(self, path: str, total_bytes: int) -> None:
        self.events.append(("file", 0, total_bytes))

    def update(self, bytes_done: int, rows: int) -> None:
        self.events.append(("update", bytes_done, rows))

    def end_file(self) -> None:
        self.events.append(("end", 0, 0))


def test_progress_of_every_worker_feeds_one_set_of_events(store: Store, tmp_path: Path) -> None:
    files = [write_csv(tmp_path / f"{n}.csv", range(k * 2000, (k + 1) * 2000))
             for k, n in enumerate("abc")]
    total = sum(p.stat().st_size for p in files)
    recorder = Recorder()
    store.ingest("t", files, workers=2, min_task_bytes=TASK_BYTES, progress=recorder)
    kinds = [e[0] for e in recorder.events]
    assert kinds[:2] == ["start", "file"] and kinds[-1] == "end"
    assert recorder.events[0][2] == recorder.events[1][2] == total
    updates = [e[1:] for e in recorder.events if e[0] == "update"]
    assert len(updates) > 3
    assert updates[-1] == (total, 6000)
    assert [u[0] for u in updates] == sorted(u[0] for u in updates)
    assert all(u[0] < total for u in updates[:-1])


def test_what_a_parallel_ingest_refuses(store: Store, tmp_path: Path) -> None:
    a = write_csv(tmp_path / "a.csv", range(10))
    with pytest.raises(IngestError, match="schema mode"):
        store.ingest("t", [a], workers=2, schema_mode="merge")
    with pytest.raises(IngestError, match="workers must be"):
        store.ingest("t", [a], workers=0)
    with pytest.raises(FileNotFoundError):
        store.ingest("t", [a, tmp_path / "missing.csv"], workers=2)
    assert "t" not in store


def test_the_console_bar_draws_a_parallel_ingest(store: Store, tmp_path: Path) -> None:
    files = [write_csv(tmp_path / f"{n}.csv", range(k * 500, (k + 1) * 500))
             for k, n in enumerate("ab")]
    out = io.StringIO()
    with make_progress(enabled=True, stream=out) as progress:
        assert isinstance(progress, ConsoleProgress)
        result = store.ingest("t", files, workers=2, min_task_bytes=TASK_BYTES, progress=progress)
    assert result.rows == 1000 and result.version == 1
