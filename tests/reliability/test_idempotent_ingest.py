"""Invariant 2: re-running an ingest adds nothing unless forced, from the command line; and a
commit whose outcome the store could not report (a timeout after the write landed, or before it)
is resolved by reading the log back, never by appending twice."""

from __future__ import annotations

import json
import shutil
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from reliability_helpers import EVENTS_SCHEMA, events_table, fingerprint, orphan_count, write_events

from colonnade.errors import StoreError
from colonnade.storage.base import ChunkRef, ChunkStore, SegmentRow
from colonnade.store import Store
from colonnade.table.dataset import Dataset


def csv_count(invoke: Any, dataset: str) -> int:
    result = invoke("sql", f"SELECT count(*) AS n FROM {dataset}", "--format", "csv")
    assert result.exit_code == 0, result.output
    return int(result.stdout.splitlines()[1])


def history(invoke: Any, dataset: str) -> list[dict[str, Any]]:
    result = invoke("describe", dataset, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["versions"]  # type: ignore[no-any-return]


def test_rerunning_an_ingest_adds_nothing_and_says_so(invoke: Any, name: str, tmp_path: Path) -> None:
    path = write_events(tmp_path / "a.csv", range(100))
    first = invoke("ingest", name, str(path))
    assert first.exit_code == 0, first.output
    assert first.stdout.startswith(f"ingested 100 rows from 1 file into {name} (v1)")

    again = invoke("ingest", name, str(path))
    assert again.exit_code == 0, again.output
    assert again.stdout == f"{path}: already ingested, 0 rows added; use --force to append again\n"
    report = json.loads(invoke("ingest", name, str(path), "--json").stdout)
    assert report["rows"] == 0 and report["version"] is None
    assert csv_count(invoke, name) == 100 and len(history(invoke, name)) == 1

    # the same content under another path is another source (the identity includes the path)
    copy = tmp_path / "copy.csv"
    shutil.copy(path, copy)
    assert invoke("ingest", name, str(copy)).stdout.startswith("ingested 100 rows")
    assert csv_count(invoke, name) == 200

    forced = invoke("ingest", name, str(path), "--force")
    assert forced.exit_code == 0, forced.output
    assert forced.stdout.startswith(f"ingested 100 rows from 1 file into {name} (v3)")
    assert csv_count(invoke, name) == 300
    assert [v["source"] for v in history(invoke, name)][0] == [v["source"] for v in history(invoke, name)][2]


def test_source_id_is_the_identity_when_given(invoke: Any, name: str, tmp_path: Path) -> None:
    a = write_events(tmp_path / "a.csv", range(0, 10))
    b = write_events(tmp_path / "b.csv", range(10, 30))
    assert invoke("ingest", name, str(a), "--source-id", "kafka:events:0:0-9").exit_code == 0
    # other content, same id: nothing added
    same_id = invoke("ingest", name, str(b), "--source-id", "kafka:events:0:0-9")
    assert same_id.exit_code == 0, same_id.output
    assert "already ingested, 0 rows added" in same_id.stdout
    # same content, other id: appended (the id replaces the digest)
    other_id = invoke("ingest", name, str(a), "--source-id", "kafka:events:0:10-19")
    assert other_id.stdout.startswith(f"ingested 10 rows from 1 file into {name} (v2)")
    # the file's own digest is a third identity
    assert invoke("ingest", name, str(a)).stdout.startswith("ingested 10 rows")
    assert csv_count(invoke, name) == 30
    assert [v["source"] for v in history(invoke, name)][:2] == ["kafka:events:0:0-9", "kafka:events:0:10-19"]
    forced = invoke("ingest", name, str(b), "--source-id", "kafka:events:0:0-9", "--force")
    assert forced.stdout.startswith(f"ingested 20 rows from 1 file into {name} (v4)")
    # one id cannot name several files
    both = invoke("ingest", name, str(a), str(b), "--source-id", "x")
    assert both.exit_code == 1 and both.stderr == "error: a source id names one input; got 2 files\n"
    assert csv_count(invoke, name) == 50


# -- a commit whose outcome is unknown ---------------------------------------------------------------
class Delegating(ChunkStore):
    """A ChunkStore that forwards every call to a real store underneath."""

    def __init__(self, inner: ChunkStore) -> None:
        self.inner = inner
        self.uri = inner.uri
        self.commit_calls = 0

    def create_dataset(self, name: str, spec: str) -> None:
        self.inner.create_dataset(name, spec)

    def get_dataset(self, name: str) -> str:
        return self.inner.get_dataset(name)

    def update_dataset(self, name: str, spec: str) -> None:
        self.inner.update_dataset(name, spec)

    def list_datasets(self) -> list[str]:
        return self.inner.list_datasets()

    def drop_dataset(self, name: str) -> None:
        self.inner.drop_dataset(name)

    def put_chunks(self, dataset: str, chunks: Sequence[tuple[ChunkRef, bytes]]) -> None:
        self.inner.put_chunks(dataset, chunks)

    def get_chunks(self, dataset: str, refs: Sequence[ChunkRef]) -> Iterator[tuple[ChunkRef, bytes]]:
        return self.inner.get_chunks(dataset, refs)

    def put_segments(self, dataset: str, segments: Sequence[SegmentRow]) -> None:
        self.inner.put_segments(dataset, segments)

    def get_segments(self, dataset: str, partitions: Collection[str] | None = None) -> list[SegmentRow]:
        return self.inner.get_segments(dataset, partitions)

    def delete_segments(self, dataset: str, segments: Sequence[SegmentRow], columns: Sequence[str]) -> None:
        self.inner.delete_segments(dataset, segments, columns)

    def commit(self, dataset: str, version: int, payload: bytes) -> None:
        self.commit_calls += 1
        self.inner.commit(dataset, version, payload)

    def list_commits(self, dataset: str, after: int = 0, upto: int | None = None) -> list[tuple[int, bytes]]:
        return self.inner.list_commits(dataset, after, upto)

    def latest_version(self, dataset: str) -> int:
        return self.inner.latest_version(dataset)

    def put_checkpoint(self, dataset: str, version: int, payload: bytes) -> None:
        self.inner.put_checkpoint(dataset, version, payload)

    def list_checkpoints(self, dataset: str) -> list[int]:
        return self.inner.list_checkpoints(dataset)

    def get_checkpoint(self, dataset: str, version: int) -> bytes | None:
        return self.inner.get_checkpoint(dataset, version)

    def delete_checkpoints(self, dataset: str, versions: Collection[int]) -> None:
        self.inner.delete_checkpoints(dataset, versions)

    def oldest_version(self, dataset: str) -> int:
        return self.inner.oldest_version(dataset)

    def set_oldest_version(self, dataset: str, version: int) -> None:
        self.inner.set_oldest_version(dataset, version)

    def delete_commits(self, dataset: str, upto: int) -> int:
        return self.inner.delete_commits(dataset, upto)


class LandedThenTimedOut(Delegating):
    """The commit reaches the store, but the caller hears a timeout (a lost acknowledgement)."""

    def commit(self, dataset: str, version: int, payload: bytes) -> None:
        super().commit(dataset, version, payload)
        raise StoreError(f"commit version {version} of dataset {dataset!r} failed: write timed out "
                         "(the commit may or may not have been applied)")


class TimedOutBeforeWriting(Delegating):
    """The commit never reaches the store, and the caller hears a timeout."""

    def commit(self, dataset: str, version: int, payload: bytes) -> None:
        self.commit_calls += 1
        raise StoreError(f"commit version {version} of dataset {dataset!r} failed: no answer "
                         "within 30 s (client timeout)")


@pytest.fixture
def store(module_store: Store) -> Store:
    return module_store


@pytest.fixture
def events(store: Store, name: str) -> Dataset:
    ds = store.create_dataset(name, EVENTS_SCHEMA, partition_by="cat", segment_rows=50)
    assert ds.append(events_table(range(0, 90)), source="first").version == 1
    return ds


def test_a_commit_that_landed_but_timed_out_is_reported_once(store: Store, events: Dataset) -> None:
    flaky = LandedThenTimedOut(store.chunk_store)
    result = Dataset(flaky, events.spec).append(events_table(range(100, 160)), source="second")
    assert result.version == 2 and result.rows == 60 and not result.skipped
    assert flaky.commit_calls == 1  # resolved from the log, not retried
    assert [c.version for c in events.history()] == [1, 2]
    assert events.history()[1].source == "second"
    assert fingerprint(store, events.name)[0] == 150
    assert orphan_count(store, events.name) == 0 and events.verify()[1] == []
    # and once more without a source identity (nothing to deduplicate on: only the commit id)
    again = Dataset(LandedThenTimedOut(store.chunk_store), events.spec).append(events_table(range(200, 210)))
    assert again.version == 3 and fingerprint(store, events.name)[0] == 160


def test_a_commit_that_timed_out_before_writing_raises_and_shows_nothing(store: Store,
                                                                          events: Dataset) -> None:
    before = fingerprint(store, events.name)
    flaky = TimedOutBeforeWriting(store.chunk_store)
    with pytest.raises(StoreError, match="client timeout"):
        Dataset(flaky, events.spec).append(events_table(range(100, 160)), source="second")
    assert flaky.commit_calls == 1
    assert [c.version for c in events.history()] == [1]
    assert fingerprint(store, events.name) == before
    assert events.verify()[1] == []
    # what it wrote is an orphan, removed by vacuum; the same source can then be ingested
    assert orphan_count(store, events.name) == 3  # 20 rows in each of 3 partitions
    assert events.vacuum(grace_seconds=0).segments == 3 and orphan_count(store, events.name) == 0
    assert events.append(events_table(range(100, 160)), source="second").version == 2
    assert fingerprint(store, events.name)[0] == 150
