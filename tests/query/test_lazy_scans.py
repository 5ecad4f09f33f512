"""Scans are lazy: a query that stops early (LIMIT without ORDER BY) stops the reads.

DuckDB pulls batches from the scan one at a time and stops pulling once a LIMIT is met; the scan
fetches chunks only as batches are pulled (the first windows hold one segment each), so
``SELECT * FROM t LIMIT 5`` reads the chunks of one segment, not of every segment. Full scans
still read everything, ahead of the consumer. Answers are checked against DuckDB over the same
rows as a plain Arrow table.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import colonnade.table.scan as scan_module
from colonnade.store import Store
from colonnade.table.scan import (
    EAGER_WINDOWS,
    FETCH_THREADS,
    READ_AHEAD,
    READ_FIRST,
    WINDOW_SEGMENTS,
    PlannedSegment,
    _read_segments,
    _windows,
)

ROWS = 6000
SEGMENT_ROWS = 200  # 30 segments


def events() -> pa.Table:
    ids = pa.array(range(ROWS), pa.int64())
    return pa.table({
        "id": ids,
        "cat": pa.array([["red", "green", "blue"][i % 3] for i in range(ROWS)]),
        "x": pc.multiply(ids.cast(pa.float64()), 0.5),
        "n": pa.array([None if i % 7 == 0 else i % 50 for i in range(ROWS)], pa.int32()),
        "note": pa.array([f"note {i:06d} " * 3 for i in range(ROWS)]),
    })


@pytest.fixture(scope="module")
def loaded(module_store: Store) -> tuple[Store, pa.Table]:
    table = events()
    ds = module_store.create_dataset("ev", table.schema, segment_rows=SEGMENT_ROWS)
    ds.append(table)
    assert ds.describe()["segments"] == ROWS // SEGMENT_ROWS
    return module_store, table


def _is_subset(got: pa.Table, table: pa.Table) -> bool:
    rows = {tuple(r.values()) for r in table.select(got.column_names).to_pylist()}
    return all(tuple(r.values()) in rows for r in got.to_pylist())


def test_limit_reads_one_segment(loaded: tuple[Store, pa.Table]) -> None:
    store, table = loaded
    report = store.explain("SELECT * FROM ev LIMIT 5")
    t = report.totals()
    assert report.rows == 5
    assert 1 <= t["segments_read"] <= 2, t
    assert t["chunks_read"] <= 2 * len(table.column_names), t
    answer = store.sql("SELECT * FROM ev LIMIT 5")
    assert answer.num_rows == 5 and _is_subset(answer, table)


def test_limit_with_a_filter_duckdb_applies_reads_few_segments(loaded: tuple[Store, pa.Table]) -> None:
    store, table = loaded
    query = "SELECT id, note FROM ev WHERE note LIKE '%0%' LIMIT 3"
    t = store.explain(query).totals()
    assert t["segments_read"] <= 4, t
    answer = store.sql(query)
    assert answer.num_rows == 3 and _is_subset(answer, table)


def test_limit_after_pruning_reads_the_first_matching_segment(loaded: tuple[Store, pa.Table]) -> None:
    store, table = loaded
    t = store.explain("SELECT id, cat FROM ev WHERE id >= 3000 LIMIT 10").totals()
    assert t["segments_scanned"] == 15 and t["segments_read"] <= 2, t
    got = store.sql("SELECT id FROM ev WHERE id >= 3000 LIMIT 10").column("id").to_pylist()
    assert len(got) == 10 and all(i >= 3000 for i in got)


def test_full_scans_still_read_everything(loaded: tuple[Store, pa.Table]) -> None:
    store, table = loaded
    t = store.explain("SELECT sum(x), count(n), count(DISTINCT note) FROM ev").totals()
    assert t["segments_read"] == t["segments_total"] == ROWS // SEGMENT_ROWS
    assert t["rows_scanned"] == ROWS
    answer = store.sql("SELECT sum(x) AS sx, count(n) AS cn FROM ev").to_pylist()[0]
    assert answer == {"sx": pc.sum(table["x"]).as_py(), "cn": table["n"].length() - table["n"].null_count}
    ordered = store.sql("SELECT id FROM ev ORDER BY id DESC LIMIT 3").column("id").to_pylist()
    assert ordered == [ROWS - 1, ROWS - 2, ROWS - 3]


def test_python_scans_fetch_as_batches_are_pulled(loaded: tuple[Store, pa.Table]) -> None:
    store, table = loaded
    scan = store.dataset("ev").scan().select("id", "cat")
    plan = scan.plan()
    batches = scan.to_batches(plan)
    first = next(batches)
    assert plan.metrics.segments_read == 1 and plan.metrics.chunks_read == 2
    assert first.to_pylist() == table.select(["id", "cat"]).slice(0, first.num_rows).to_pylist()
    rest = list(batches)
    assert plan.metrics.segments_read == ROWS // SEGMENT_ROWS
    assert sum(b.num_rows for b in [first, *rest]) == ROWS


def test_closing_a_scan_early_stops_the_reads(loaded: tuple[Store, pa.Table]) -> None:
    store, _ = loaded
    scan = store.dataset("ev").scan().where(pc.field("n") > 10)
    plan = scan.plan()
    batches = scan.to_batches(plan)
    for _ in range(EAGER_WINDOWS + 2):
        next(batches)
    batches.close()  # waits for the window being read ahead: metrics are final
    read = plan.metrics.segments_read
    assert EAGER_WINDOWS + 2 <= read < ROWS // SEGMENT_ROWS


def test_windows_start_small_and_grow() -> None:
    class Stats:
        nbytes = 10

    segments = tuple(PlannedSegment(None, {"c": Stats()}) for _ in range(300))  # type: ignore[arg-type, dict-item]
    sizes = [len(w) for w in _windows(segments, ("c",))]
    assert sizes[:EAGER_WINDOWS] == [1] * EAGER_WINDOWS
    assert sizes[EAGER_WINDOWS:EAGER_WINDOWS + 4] == [2, 4, 8, 16]
    assert max(sizes) == WINDOW_SEGMENTS and sum(sizes) == 300


def test_eager_windows_start_at_read_first_and_grow() -> None:
    class Stats:
        nbytes = 10

    segments = tuple(PlannedSegment(None, {"c": Stats()}) for _ in range(300))  # type: ignore[arg-type, dict-item]
    sizes = [len(w) for w in _windows(segments, ("c",), eager=True)]
    assert sizes[:4] == [READ_FIRST, 2 * READ_FIRST, 4 * READ_FIRST, 8 * READ_FIRST]
    assert max(sizes) == WINDOW_SEGMENTS and sum(sizes) == 300


def test_windows_are_read_ahead_together(loaded: tuple[Store, pa.Table], monkeypatch: pytest.MonkeyPatch) -> None:
    """READ_AHEAD windows are fetched at once: the fetches of the first two meet at a barrier
    (a store that served one window after the other would break it), and every row arrives."""
    store, table = loaded
    ds = store.dataset("ev")
    inner = type(ds.store).get_chunks
    meet = threading.Barrier(READ_AHEAD, timeout=10)
    calls: list[int] = []

    def get_chunks(self, dataset, refs):  # type: ignore[no-untyped-def]
        calls.append(len(refs))
        if len(calls) <= READ_AHEAD:
            meet.wait()
        return inner(self, dataset, refs)

    monkeypatch.setattr(type(ds.store), "get_chunks", get_chunks)
    scan = ds.scan().select("id", "n")
    plan = scan.plan()
    got = pa.Table.from_batches(list(_read_segments(ds, plan, None, eager=True)))
    assert len(calls) >= READ_AHEAD and not meet.broken
    assert sorted(got.column("id").to_pylist()) == table.column("id").to_pylist()
    assert plan.metrics.segments_read == ROWS // SEGMENT_ROWS


def test_a_window_hands_on_each_segment_once_it_is_decoded(loaded: tuple[Store, pa.Table],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A segment's batch reaches the consumer once its own chunks are decoded and finished, not
    once the whole window is: here the finish of the first window's last segment waits until the
    consumer holds the window's first batch (a scan that handed on whole windows would keep it
    waiting), and every row still arrives once."""
    store, table = loaded
    ds = store.dataset("ev")
    inner = scan_module._decode_group

    def decode_group(*args: Any) -> Any:  # decoded after the fetch thread has handed the window on
        time.sleep(0.05)
        return inner(*args)

    monkeypatch.setattr(scan_module, "_decode_group", decode_group)
    plan = ds.scan().select("id", "n").plan()
    last_first = plan.segments[READ_FIRST - 1].stats["id"].min
    handed = threading.Event()
    waited: list[bool] = []

    def finish(batch: pa.RecordBatch) -> pa.RecordBatch:
        if pc.min(batch.column("id")).as_py() == last_first:
            waited.append(handed.wait(10))
        return batch

    batches = _read_segments(ds, plan, finish, eager=True)
    first = next(batches)
    handed.set()
    got = pa.Table.from_batches([first, *batches])
    assert waited == [True]
    assert sorted(got.column("id").to_pylist()) == table.column("id").to_pylist()


def _scan_threads() -> dict[str, set[int]]:
    found: dict[str, set[int]] = {"colonnade-decode": set(), "colonnade-fetch": set()}
    for t in threading.enumerate():
        for prefix, idents in found.items():
            if t.name.startswith(prefix) and t.ident is not None:
                idents.add(t.ident)
    return found


def test_scans_share_threads_kept_for_the_process(loaded: tuple[Store, pa.Table]) -> None:
    """Scans don't start threads of their own: after the first, later scans (and concurrent
    ones) run on the same decode and fetch threads, at most the pools' sizes of them."""
    store, table = loaded
    ds = store.dataset("ev")
    assert ds.scan().to_arrow().num_rows == ROWS
    first = _scan_threads()
    assert first["colonnade-decode"] and first["colonnade-fetch"]
    for _ in range(3):
        assert ds.scan().select("id", "x").to_arrow().num_rows == ROWS
    later = _scan_threads()
    assert later["colonnade-decode"] == first["colonnade-decode"]
    assert len(later["colonnade-decode"]) <= max(2, os.cpu_count() or 2)
    assert len(later["colonnade-fetch"]) <= FETCH_THREADS


def test_more_concurrent_scans_than_fetch_threads_all_finish(loaded: tuple[Store, pa.Table]) -> None:
    """Scans share the fetch threads, whose tasks wait for decode tasks (which wait for
    nothing): more scans at once than there are fetch threads, some closed early, still all
    finish with every row."""
    store, table = loaded
    ds = store.dataset("ev")
    want = table.column("id").to_pylist()
    errors: list[BaseException] = []

    def full() -> None:
        try:
            got = ds.scan().select("id", "note").to_arrow()
            assert sorted(got.column("id").to_pylist()) == want
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    def early() -> None:
        try:
            batches = ds.scan().select("id").to_batches()
            assert next(iter(batches)).num_rows > 0
            batches.close()  # type: ignore[attr-defined]
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=full if i % 3 else early) for i in range(3 * FETCH_THREADS // READ_AHEAD)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a scan never finished"
    assert not errors, errors


def test_a_failed_fetch_leaves_no_decoding_behind(loaded: tuple[Store, pa.Table],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The pools outlive a scan: one whose store fails midway has waited for the decode tasks
    it started before its error reaches the caller."""
    from colonnade.table import scan as scan_module

    store, _ = loaded
    ds = store.dataset("ev")
    inner_get, inner_decode = type(ds.store).get_chunks, scan_module._decode_group
    running, most = [0], [0]
    lock = threading.Lock()

    def get_chunks(self, dataset, refs):  # type: ignore[no-untyped-def]
        for i, found in enumerate(inner_get(self, dataset, refs)):
            if i == len(refs) // 2 and len(refs) > 8:
                raise OSError("the store went away")
            yield found

    def decode_group(*args):  # type: ignore[no-untyped-def]
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            time.sleep(0.05)
            return inner_decode(*args)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(type(ds.store), "get_chunks", get_chunks)
    monkeypatch.setattr(scan_module, "DECODE_GROUP_BYTES", 1)  # a decode task per chunk
    monkeypatch.setattr(scan_module, "_decode_group", decode_group)
    with pytest.raises(Exception, match="the store went away"):
        ds.scan().to_arrow()
    assert most[0] > 0, "no decode task ran"
    assert running[0] == 0


def test_a_forked_child_scans_on_threads_of_its_own(tmp_path: Path) -> None:
    """A child forked after its parent scanned has none of the parent's threads: it starts its
    own pools instead of queueing work for threads that aren't there."""
    import multiprocessing

    import colonnade

    store = colonnade.connect(str(tmp_path / "fork.db"))
    table = events()
    ds = store.create_dataset("ev", table.schema, segment_rows=SEGMENT_ROWS)
    ds.append(table)
    assert ds.scan().to_arrow().num_rows == ROWS  # the parent's pools exist now

    def child(out: Any) -> None:
        out.put(store.dataset("ev").scan().select("id").to_arrow().num_rows)

    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    proc = ctx.Process(target=child, args=(out,))
    proc.start()
    proc.join(timeout=60)
    alive = proc.is_alive()
    if alive:
        proc.kill()
    assert not alive, "the child's scan never finished"
    assert proc.exitcode == 0 and out.get(timeout=5) == ROWS
    store.close()
