"""The pipeline: one commit per file, idempotent re-runs, results, progress and summary line."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from ingest_helpers import table_of, version_of

from colonnade.cli.progress import ConsoleProgress, make_progress
from colonnade.errors import IngestError, SchemaError
from colonnade.ingest import (
    NullProgress,
    Progress,
    ingest,
    ingest_files,
    summary_line,
)
from colonnade.ingest.pipeline import ALREADY_INGESTED, read_ahead
from colonnade.store import Store

pytestmark = pytest.mark.unit


def write(path: Path, first: int, n: int) -> Path:
    path.write_text("id,region\n" + "".join(f"{i},r{i % 3}\n" for i in range(first, first + n)))
    return path


def test_rerun_adds_nothing_and_force_appends_again(db: Store, tmp_path: Path) -> None:
    path = write(tmp_path / "a.csv", 0, 10)
    assert ingest(db, "t", path).rows == 10
    again = ingest(db, "t", path)
    assert again.rows == 0 and again.version is None
    assert again.files[0].skipped == ALREADY_INGESTED
    assert "already ingested, 0 rows added" in summary_line(again)
    assert "--force" not in summary_line(again)  # the library names no command-line flag
    assert version_of(db, "t") == 1
    forced = ingest(db, "t", path, force=True)
    assert forced.rows == 10 and forced.version == 2
    assert table_of(db, "t").num_rows == 20


def test_identity_is_the_content_not_the_name(db: Store, tmp_path: Path) -> None:
    ingest(db, "t", write(tmp_path / "a.csv", 0, 10))
    write(tmp_path / "a.csv", 100, 10)  # same name, new content
    assert ingest(db, "t", tmp_path / "a.csv").rows == 10


def test_source_id_replaces_the_file_identity(db: Store, tmp_path: Path) -> None:
    ingest(db, "t", write(tmp_path / "a.csv", 0, 10), source_id="batch-1")
    assert ingest(db, "t", write(tmp_path / "b.csv", 10, 10), source_id="batch-1").rows == 0
    assert db.dataset("t").history()[-1].source == "batch-1"
    with pytest.raises(IngestError, match="one input"):
        ingest(db, "t", [tmp_path / "a.csv", tmp_path / "b.csv"], source_id="x")


def test_one_commit_per_file(db: Store, tmp_path: Path) -> None:
    paths = [write(tmp_path / f"{i}.csv", i * 10, 10) for i in range(3)]
    result = ingest(db, "t", paths, partition_by="region")
    assert [f.version for f in result.files] == [1, 2, 3]
    assert [f.rows for f in result.files] == [10, 10, 10]
    assert result.rows == 30 and result.version == 3
    history = db.dataset("t").history()
    assert [c.rows_added for c in history] == [10, 10, 10]
    assert all(c.source is not None and c.source.startswith("file:") for c in history)
    # run again with one new file: only it is added
    paths.append(write(tmp_path / "3.csv", 30, 5))
    again = ingest(db, "t", paths)
    assert [f.rows for f in again.files] == [0, 0, 0, 5]
    assert "1 file into t (v4)" in summary_line(again) and "3 skipped" in summary_line(again)


def test_dataset_is_created_with_partitioning_and_sort_key(db: Store, tmp_path: Path) -> None:
    ingest(db, "t", write(tmp_path / "a.csv", 0, 30), partition_by="region", sort_by="id",
           segment_rows=4)
    info = db.dataset("t").describe()
    assert info["partitions"] == 3 and info["partition_by"] == ["identity(region)"]
    assert info["sort_by"] == ["id"] and info["segment_rows"] == 4


def test_result_to_dict_and_summary_line(db: Store, tmp_path: Path) -> None:
    result = ingest(db, "t", write(tmp_path / "a.csv", 0, 1000))
    report = result.to_dict()
    json.dumps(report)
    assert report["dataset"] == "t" and report["rows"] == 1000 and report["version"] == 1
    assert report["rejected"] == 0 and report["rows_per_second"] > 0
    assert report["files"][0]["bytes_in"] == (tmp_path / "a.csv").stat().st_size
    line = summary_line(result)
    assert line.startswith("ingested 1,000 rows from 1 file into t (v1) in ")
    assert line.endswith(" rows/s, 0 rejected")


def test_files_are_ingested_through_the_store_and_append_takes_arrow_data(db: Store, tmp_path: Path) -> None:
    ds = db.create_dataset("t", pa.schema([("id", pa.int64()), ("region", pa.string())]))
    with pytest.raises(SchemaError, match=r"append takes Arrow data.*store.ingest\('t', paths\)"):
        ds.append(write(tmp_path / "a.csv", 0, 5))
    assert ds.version == 0
    result = db.ingest("t", tmp_path / "a.csv")
    assert result.rows == 5 and result.version == 1
    again = db.ingest("t", [tmp_path / "a.csv"])
    assert again.rows == 0 and again.files[0].skipped == "already ingested, 0 rows added"
    assert db.ingest("t", [str(tmp_path / "a.csv")], force=True).version == 2


def test_schema_mode_merge_adds_new_columns(db: Store, tmp_path: Path) -> None:
    ingest(db, "t", write(tmp_path / "a.csv", 0, 3))
    extra = tmp_path / "b.csv"
    extra.write_text("id,region,score\n10,r1,0.5\n")
    with pytest.raises(SchemaError, match="score"):
        ingest(db, "t", extra)
    ingest(db, "t", extra, schema_mode="merge")
    assert db.dataset("t").schema.field("score").type == pa.float64()
    assert table_of(db, "t").column("score").to_pylist() == [None, None, None, 0.5]


def test_missing_file(db: Store, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        ingest(db, "t", tmp_path / "nope.csv")


def test_bad_options(db: Store, tmp_path: Path) -> None:
    path = write(tmp_path / "a.csv", 0, 3)
    ingest(db, "t", path)
    with pytest.raises(IngestError, match="on_error"):
        ingest_files(db.dataset("t"), [path], on_error="ignore")
    with pytest.raises(IngestError, match="delimiter"):
        ingest_files(db.dataset("t"), [path], delimiter="ab", force=True)


class Recorder(Progress):
    def __init__(self) -> None:
        self.events: list[tuple[str, int, int]] = []

    def start_file(self, path: str, total_bytes: int) -> None:
        self.events.append(("start", total_bytes, 0))

    def update(self, bytes_done: int, rows: int) -> None:
        self.events.append(("update", bytes_done, rows))

    def end_file(self) -> None:
        self.events.append(("end", 0, 0))


def test_progress_reports_bytes_and_rows(db: Store, tmp_path: Path) -> None:
    path = write(tmp_path / "a.csv", 0, 50_000)
    recorder = Recorder()
    ingest(db, "t", path, progress=recorder, block_size=64 * 1024)
    kinds = [e[0] for e in recorder.events]
    assert kinds[0] == "start" and kinds[-1] == "end" and kinds.count("update") > 5
    updates = [e for e in recorder.events if e[0] == "update"]
    assert updates[-1][1:] == (path.stat().st_size, 50_000)
    assert [u[1] for u in updates] == sorted(u[1] for u in updates)


def test_make_progress_is_silent_off_a_terminal(db: Store, tmp_path: Path) -> None:
    assert isinstance(make_progress(stream=io.StringIO()), NullProgress)
    out = io.StringIO()
    with make_progress(enabled=True, stream=out) as progress:
        assert isinstance(progress, ConsoleProgress)
        ingest(db, "t", write(tmp_path / "a.csv", 0, 100), progress=progress)


def test_read_ahead_keeps_order_raises_in_place_and_stops_early() -> None:
    assert list(read_ahead(iter(range(100)), 2)) == list(range(100))

    def failing() -> Iterator[int]:
        yield 1
        raise ValueError("boom")

    got = []
    with pytest.raises(ValueError, match="boom"):
        for item in read_ahead(failing(), 1):
            got.append(item)
    assert got == [1]

    closed = threading.Event()

    def endless() -> Iterator[int]:
        try:
            i = 0
            while True:
                yield i
                i += 1
        finally:
            closed.set()

    reader = read_ahead(endless(), 1)
    assert next(reader) == 0
    reader.close()
    assert closed.is_set()
