"""Scans are lazy: a query that stops early (LIMIT without ORDER BY) stops the reads.

DuckDB pulls batches from the scan one at a time and stops pulling once a LIMIT is met; the scan
fetches chunks only as batches are pulled (the first windows hold one segment each), so
``SELECT * FROM t LIMIT 5`` reads the chunks of one segment, not of every segment. Full scans
still read everything, ahead of the consumer. Answers are checked against DuckDB over the same
rows as a plain Arrow table.
"""

from __future__ import annotations

import threading

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from colonnade.store import Store
from colonnade.table.scan import (
    EAGER_WINDOWS,
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
