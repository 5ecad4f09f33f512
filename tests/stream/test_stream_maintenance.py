"""A stream's positions outlive the commits that recorded them: after ``colonnade compact`` merged
the stream's segments and ``colonnade expire --retain-last 1`` removed every earlier commit record
(the positions live on in the checkpoint expire writes) and ``colonnade vacuum`` removed what only
those versions read, the stream started again continues from exactly where it stopped: it
consumes only the new events, and every event is stored once.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from stream_helpers import (
    Colonnade,
    assert_exactly_once,
    new_topic,
    positions,
    stream_argv,
)

from colonnade.store import Store

pytestmark = pytest.mark.kafka


def _cli(args: list[str], workdir: Path) -> str:
    run = Colonnade(args, workdir).wait(timeout=120)
    assert run.status == 0, run
    return run.stdout


def test_a_stream_resumes_after_compact_and_expire(module_store: Store, store_uri: str,
                                                    kafka_bootstrap: str, workdir: Path) -> None:
    store, name = module_store, f"m_{uuid.uuid4().hex[:8]}"
    topic = new_topic(kafka_bootstrap, "maint")
    topic.produce_events(range(1, 40_001), note_bytes=120, bad_every=5_000)
    argv = stream_argv(store_uri, name, topic, "--stop-when-idle", "1", "--memory-limit", "1",
                       rejects=workdir / "rejects.jsonl")
    first = Colonnade(argv, workdir).wait()
    assert first.status == 0 and first.report()["commits"] >= 3, first
    assert_exactly_once(store, name, topic)
    before = positions(store, name, topic)
    ds = store.dataset(name)
    segments = len(ds.snapshot().segments)
    assert segments >= 3

    compacted = _cli(["--store", store_uri, "compact", name], workdir)
    assert compacted.startswith(f"compacted {name}: {segments} segments → 1, 40,000 rows"), compacted
    expired = _cli(["--store", store_uri, "expire", name, "--retain-last", "1"], workdir)
    latest = store.dataset(name).version
    assert f"the oldest version kept is {latest}, the latest {latest}" in expired, expired
    assert "removed" in expired and "commit record" in expired, expired
    vacuumed = _cli(["--store", store_uri, "vacuum", name, "--grace", "0"], workdir)
    assert f"removed 0 orphan segments of dataset '{name}'" in vacuumed, vacuumed
    # no kept commit records a position: they are all in the checkpoint
    kept = store.dataset(name).history()
    assert [c.kind for c in kept] == ["compact"] and not kept[0].positions, kept
    assert positions(store, name, topic) == before
    assert_exactly_once(store, name, topic)

    topic.produce_events(range(40_001, 50_001), note_bytes=120, bad_every=5_000)
    again = Colonnade(argv, workdir).wait()
    assert again.status == 0, again
    report = again.report()
    assert (report["events"], report["rows"], report["rejected"]) == (10_002, 10_000, 2), report
    assert_exactly_once(store, name, topic)
