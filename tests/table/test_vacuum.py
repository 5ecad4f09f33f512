"""Vacuum of everything no kept version reads, on every backend: segments an overwrite
replaced go once every version before it is expired (their chunks gone from the store, the space
reclaimable), never before; readers of kept versions read on; a writer's segments not yet
committed survive."""

from __future__ import annotations

import random
import string
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import colonnade
from colonnade.store import Store
from colonnade.table.commits import AddSegments, Commit
from colonnade.table.dataset import Dataset
from colonnade.table.writer import SegmentWriter

SCHEMA = pa.schema([("id", pa.int64()), ("cat", pa.string()), ("note", pa.string())])


def table(ids: range, seed: int = 0) -> pa.Table:
    rng = random.Random(seed)
    return pa.table({"id": list(ids), "cat": [f"c{i % 3}" for i in ids],
                     "note": ["".join(rng.choices(string.ascii_letters, k=40)) for _ in ids]}, schema=SCHEMA)


def ids(ds: Dataset, **kwargs: Any) -> list[int]:
    return sorted(ds.scan(columns=["id"], **kwargs).to_arrow().column("id").to_pylist())


def stored_chunks(raw_store: Any, dataset: str, segments: set[str]) -> int:
    """Chunks of ``segments`` the backend holds, counted behind Colonnade's back."""
    if raw_store.kind == "sqlite":
        with raw_store._sqlite() as conn:
            found = conn.execute("SELECT segment FROM chunks WHERE dataset = ?", (dataset,)).fetchall()
        return sum(1 for (s,) in found if s in segments)
    found = raw_store.admin.execute(f"SELECT segment FROM {raw_store._ks}.{raw_store._chunks} WHERE dataset = %s "
                                    "ALLOW FILTERING", (dataset,))
    return sum(1 for row in found if row[0] in segments)


@pytest.fixture
def replaced(store: Store) -> tuple[Dataset, set[str]]:
    """``t``: v1 and v2 append, v3 overwrites both, v4 appends; the segments v3 replaced."""
    ds = store.create_dataset("t", SCHEMA, partition_by="cat", segment_rows=50)
    ds.append(table(range(0, 150)))
    ds.append(table(range(150, 300), seed=1))
    old = {s.segment for s in ds.snapshot().segments}
    ds.overwrite(table(range(1000, 1090), seed=2))
    ds.append(table(range(2000, 2030), seed=3))
    return store.dataset("t"), old


def test_replaced_segments_stay_while_a_version_before_the_overwrite_is_kept(
        store: Store, replaced: tuple[Dataset, set[str]], raw_store: Any) -> None:
    ds, old = replaced
    assert ds.vacuum(grace_seconds=0).segments == 0  # every version is still kept
    ds.expire(retain_last=2)  # keeps 3 and 4: v3 replaced them, so only versions < 3 read them
    ds.expire(retain_last=3)  # (a no-op: the mark never goes down)
    assert stored_chunks(raw_store, "t", old) == 3 * len(old)
    assert ids(ds, version=3) == list(range(1000, 1090))


def test_overwrite_expire_vacuum_removes_the_replaced_chunks(
        store: Store, replaced: tuple[Dataset, set[str]], raw_store: Any) -> None:
    ds, old = replaced
    v3 = ids(ds, version=3)
    v4 = ids(ds, version=4)
    ds.expire(retain_last=3)  # keeps 2, 3, 4: version 2 still reads the replaced segments
    assert ds.vacuum().segments == 0
    ds.expire(retain_last=2)  # now every version before the overwrite is expired
    pinned = store.dataset("t").scan(version=3)  # a reader pinned to a kept version, before vacuum
    plan = ds.vacuum(dry_run=True)
    assert {r.segment for r in plan.removed} == old and plan.expired == len(old) and plan.orphans == 0
    assert plan.partitions == 3 and plan.rows == 300 and plan.bytes > 0
    assert stored_chunks(raw_store, "t", old) == 3 * len(old)  # a dry run removes nothing
    done = ds.vacuum()  # default grace: expired segments do not wait for it
    assert [(r.segment, r.reason) for r in done.removed] == [(r.segment, r.reason) for r in plan.removed]
    assert stored_chunks(raw_store, "t", old) == 0
    assert not {r.segment for r in store.chunk_store.get_segments("t")} & old
    assert sorted(pinned.to_arrow().column("id").to_pylist()) == v3
    fresh = store.dataset("t")
    assert ids(fresh, version=3) == v3 and ids(fresh, version=4) == v4 and ids(fresh) == v4
    assert fresh.verify(3)[1] == [] and fresh.verify()[1] == []
    assert ds.vacuum(grace_seconds=0).segments == 0


def test_a_writers_uncommitted_segments_survive_vacuum(store: Store, replaced: tuple[Dataset, set[str]]) -> None:
    ds, old = replaced
    ds.expire(retain_last=1)
    commit = Commit.new("append")
    writer = SegmentWriter(store.chunk_store, ds.spec, commit.id)
    writer.write(ds.conform(table(range(5000, 5040), seed=4).to_batches()[0]))
    pending = writer.finish()  # written, not committed yet
    report = ds.vacuum()
    assert {r.segment for r in report.removed} == old  # the expired ones only
    assert ds.commit(commit.with_actions(AddSegments(tuple(pending)))).version == 5
    fresh = store.dataset("t")
    assert ids(fresh)[-40:] == list(range(5000, 5040)) and fresh.verify()[1] == []
    assert fresh.vacuum(grace_seconds=0).segments == 0


def test_orphans_wait_for_the_grace_period(store: Store, replaced: tuple[Dataset, set[str]]) -> None:
    ds, _ = replaced
    writer = SegmentWriter(store.chunk_store, ds.spec, str(uuid.uuid4()))
    writer.write(ds.conform(table(range(7000, 7010)).to_batches()[0]))
    orphans = {e.segment for e in writer.finish()}
    assert ds.vacuum().segments == 0
    report = ds.vacuum(grace_seconds=0)
    assert {r.segment for r in report.removed} == orphans and report.orphans == len(orphans)
    assert report.to_dict()["removed"][0]["reason"] == "orphan"


def test_vacuum_after_expire_makes_the_space_reclaimable(tmp_path: Path) -> None:
    with colonnade.connect(str(tmp_path / "s.db")) as store:
        ds = store.create_dataset("t", SCHEMA, partition_by="cat")
        for k in range(4):
            ds.append(table(range(k * 20_000, (k + 1) * 20_000), seed=k))
        ds.overwrite(table(range(100), seed=9))
        store.reclaim_space()
        before = store.disk_bytes()
        ds.expire(retain_last=1)
        report = ds.vacuum()
        assert report.rows == 80_000 and report.bytes > 2_000_000
        store.reclaim_space()
        after = store.disk_bytes()
        assert after is not None and before is not None
        assert before - after > 0.8 * report.bytes, (before, after, report.bytes)
        assert ids(ds) == list(range(100))
