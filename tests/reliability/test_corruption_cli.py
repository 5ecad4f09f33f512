"""Invariant 3 from the command line, on both stores (``tests/storage/test_behaviour.py`` covers the
Python API; ``tests/cli`` covers one corrupt chunk on SQLite): damaged bytes — flipped in a
chunk's header, middle or end, or cut short — make ``colonnade sql`` fail naming dataset, column
and segment without printing any rows; ``colonnade verify`` lists every bad chunk, not just the
first; corrupt or unknown-format commit records are explicit errors for every command."""

from __future__ import annotations

import json
from typing import Any

import pytest
from reliability_helpers import EVENTS_SCHEMA, Invoke, events_table, make_invoke

from colonnade.store import Store
from colonnade.table.commits import SegmentEntry


@pytest.fixture
def invoke(store: Store) -> Invoke:
    return make_invoke(store.uri)


@pytest.fixture
def segments(store: Store) -> list[SegmentEntry]:
    """``t``: 300 rows, 3 partitions x 2 segments x 5 columns = 30 chunks, in 3 commits."""
    ds = store.create_dataset("t", EVENTS_SCHEMA, partition_by="cat", segment_rows=50)
    for lo in (0, 150, 240):
        ds.append(events_table(range(lo, {0: 150, 150: 240, 240: 300}[lo])))
    segs = list(ds.snapshot().segments)  # in commit order: per partition ids <150, <240, <300
    assert len(segs) == 9
    return segs


def one_line_error(result: Any) -> str:
    assert result.exit_code == 1, result.output
    assert result.stdout == ""  # no partial answer
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    return str(result.stderr)


def test_corrupt_chunks_name_themselves_and_verify_lists_them_all(
        store: Store, raw_store: Any, invoke: Any, segments: list[SegmentEntry]) -> None:
    chunks = len(segments) * len(EVENTS_SCHEMA)
    clean = invoke("verify", "t")
    assert clean.stdout == f"ok: {chunks} chunks of dataset 't' verified\n"
    by_part: dict[str, list[SegmentEntry]] = {}
    for s in segments:
        by_part.setdefault(s.partition, []).append(s)
    red, green, blue = by_part["cat=red"], by_part["cat=green"], by_part["cat=blue"]
    damage = {  # (segment, column): what was done
        (red[0].segment, "v"): "flip a byte in the middle",
        (green[-1].segment, "note"): "flip the first byte",
        (blue[0].segment, "day"): "flip the last byte",
        (blue[-1].segment, "id"): "cut the chunk short",
    }
    raw_store.flip_chunk_byte("t", red[0], "v", position=len(raw_store.read_chunk("t", red[0], "v")) // 2)
    raw_store.flip_chunk_byte("t", green[-1], "note", position=0)
    raw_store.flip_chunk_byte("t", blue[0], "day", position=-1)
    data = raw_store.read_chunk("t", blue[-1], "id")
    raw_store.write_chunk("t", blue[-1], "id", data[: len(data) // 2])

    # a query touching a damaged chunk fails and names it (DuckDB reads some column even for
    # count(*): in 'blue' both damaged chunks are touched, either may be met first)
    for query, touched in [
        ("SELECT sum(v) FROM t WHERE cat = 'red'", {(red[0].segment, "v")}),
        ("SELECT max(length(note)) FROM t WHERE cat = 'green'", {(green[-1].segment, "note")}),  # not from statistics
        ("SELECT min(day) FROM t WHERE cat = 'blue' AND id < 150", {(blue[0].segment, "day")}),
        ("SELECT count(*) FROM t WHERE day > DATE '2023-01-01' AND cat = 'blue'",
         {(blue[0].segment, "day"), (blue[-1].segment, "id")}),
        ("SELECT sum(id) FROM t WHERE cat = 'blue' AND id >= 240", {(blue[-1].segment, "id")}),
    ]:
        err = one_line_error(invoke("sql", query))
        assert any(f"corrupt chunk: dataset 't', column {c!r}, segment {s}: " in err
                   for s, c in touched), (query, err)

    # queries that don't touch a damaged chunk still answer, exactly
    ok = invoke("sql", "SELECT count(*) AS n, sum(v) AS s FROM t WHERE cat = 'red' AND id >= 150",
                "--format", "csv")
    assert ok.exit_code == 0, ok.output
    ids = [i for i in range(150, 300) if i % 3 == 0]
    assert ok.stdout == f"n,s\n{len(ids)},{sum(i * 0.25 for i in ids)}\n"

    result = invoke("verify", "t")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert len(lines) == len(damage), result.stdout
    for segment, column in damage:
        assert any(f"dataset 't', column {column!r}, segment {segment}" in line for line in lines), lines
    assert result.stderr == f"error: {len(damage)} of {chunks} chunks of dataset 't' failed verification\n"
    report = json.loads(invoke("verify", "t", "--json").stdout)
    assert report["ok"] is False and report["chunks_checked"] == chunks
    assert {(p["segment"], p["column"]) for p in report["problems"]} == set(damage)


BAD_COMMITS = [
    (b'{"format": 1, "id": "x", "kind": "app', "not valid JSON"),  # cut short
    (json.dumps({"format": 3, "actions": []}).encode(),
     "commit format 3 is unknown to this build (it reads formats 1, 2)"),  # written by a newer build
]


def test_a_bad_commit_record_is_an_explicit_error_for_every_command(
        store: Store, raw_store: Any, invoke: Any, segments: list[SegmentEntry], tmp_path: Any) -> None:
    good = store.chunk_store.list_commits("t")[1][1]
    csv = tmp_path / "more.csv"
    csv.write_text("id,cat,v,day,note\n1000,red,1.0,2024-01-01,x\n")
    for payload, reason in BAD_COMMITS:
        raw_store.write_commit("t", 2, payload)  # the middle one of three
        expected = f"error: dataset 't': commit 2 is unreadable: {reason}"
        for args in (["sql", "SELECT count(*) FROM t"], ["sql", "SELECT count(*) FROM t", "--version", "2"],
                     ["sql", "SELECT count(*) FROM t", "--version", "3"],
                     ["describe", "t"], ["verify", "t"], ["datasets"], ["vacuum", "t", "--grace", "0"],
                     ["ingest", "t", str(csv)]):
            err = one_line_error(invoke(*args))
            assert err.startswith(expected), (args, err)
        # version 1 does not need commit 2, and reads exactly as before
        v1 = invoke("sql", "SELECT count(*) AS n FROM t", "--version", "1", "--format", "csv")
        assert v1.exit_code == 0 and v1.stdout == "n\n150\n", v1.output
        # nothing was written meanwhile (no commit, and vacuum removed nothing)
        assert [v for v, _ in store.chunk_store.list_commits("t")] == [1, 2, 3]
        assert len(store.chunk_store.get_segments("t")) == len(segments)
    raw_store.write_commit("t", 2, good)  # repaired: the dataset is whole again
    assert invoke("verify", "t").exit_code == 0
    assert invoke("sql", "SELECT count(*) AS n FROM t", "--format", "csv").stdout == "n\n300\n"
