"""Bad messages in a stream (``colonnade stream``, the real console script).

``--on-error quarantine`` (the default): each bad message — not JSON, a value of the wrong type,
a required column missing or null, invalid UTF-8, empty, a tombstone — is written to the rejects
file with its topic, partition, offset, reason and raw value, once; the good ones are rows, once;
the offsets of a micro-batch holding only bad messages are committed too (also the first
micro-batch of a new dataset), so a restart rejects none of them again.

``--on-error strict``: the first bad message stops the stream with one line naming the topic,
partition and offset, a non-zero exit status, and nothing committed past the last good
micro-batch: the log's positions stop before the bad message and the rows are exactly the good
messages before them. A restart stops at the same message.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from stream_helpers import (
    BAD_KINDS,
    PARTITIONS,
    Colonnade,
    assert_exactly_once,
    assert_rejects,
    assert_rows_match_positions,
    new_topic,
    positions,
    read_rejects,
    stream_argv,
    table_stats,
)

from colonnade.store import Store

pytestmark = pytest.mark.kafka


def _name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def test_quarantine_lists_every_bad_message_with_its_offset(module_store: Store, store_uri: str,
                                                            kafka_bootstrap: str, workdir: Path) -> None:
    store, name = module_store, _name("q")
    rejects = workdir / "q.rejects.jsonl"
    topic = new_topic(kafka_bootstrap, "rejects")
    # 1. only bad messages, every kind in every partition: a new dataset's first micro-batch
    bad = [(raw, p) for p in range(PARTITIONS) for raw, _ in BAD_KINDS]
    topic.produce(bad, [None] * len(bad))
    argv = stream_argv(store_uri, name, topic, "--stop-when-idle", "1", rejects=rejects)
    run = Colonnade(argv, workdir).wait()
    assert run.status == 0, run
    report = run.report()
    assert (report["events"], report["rows"], report["rejected"]) == (len(bad), 0, len(bad)), report
    assert report["rejects"] == str(rejects)
    assert positions(store, name, topic) == topic.ends  # committed: not consumed again
    assert table_stats(store, name) == (0, 0, 0)
    assert set(assert_rejects(rejects, topic).values()) == {1}

    # 2. a restart consumes nothing and rejects nothing again
    again = Colonnade(argv, workdir).wait()
    assert again.status == 0 and again.report()["events"] == 0, again
    assert len(read_rejects(rejects)) == len(bad)

    # 3. good and bad messages mixed: the good ones are rows, the bad ones listed with offsets
    ids = range(1, 20_001)
    topic.produce_events(ids, bad_every=1_000)
    human = [a for a in argv if a != "--json"]
    mixed = Colonnade(human, workdir).wait()
    assert mixed.status == 0, mixed
    new_bad = 20_000 // 1_000
    assert mixed.stdout.startswith(f"streamed {20_000 + new_bad:,} events from {topic.name} into {name}"), mixed
    assert f", {new_bad} rejected messages in {rejects};" in mixed.stdout, mixed
    assert_exactly_once(store, name, topic)
    listed = assert_rejects(rejects, topic)
    assert set(listed.values()) == {1} and len(listed) == len(bad) + new_bad
    for r in read_rejects(rejects):
        assert set(r) == {"topic", "partition", "offset", "reason", "raw"}
        assert 0 <= r["partition"] < PARTITIONS and r["offset"] < topic.ends[r["partition"]]


def test_strict_stops_at_the_first_bad_message_and_commits_nothing_after(
        module_store: Store, store_uri: str, kafka_bootstrap: str, workdir: Path) -> None:
    store, name = module_store, _name("strict")
    rejects = workdir / "strict.rejects.jsonl"
    topic = new_topic(kafka_bootstrap, "strict")
    topic.produce_events(range(1, 10_001))  # good micro-batches, committed
    argv = stream_argv(store_uri, name, topic, "--stop-when-idle", "1", "--on-error", "strict",
                       rejects=rejects)
    first = Colonnade(argv, workdir).wait()
    assert first.status == 0 and first.report()["rows"] == 10_000, first
    before = positions(store, name, topic)

    # then, in partition 2: good, one bad (a string for the int64 id), good; the others: good
    topic.produce_events(range(10_001, 13_001), partition=2)
    bad_value = b'{"id": "ten", "cat": "red"}'
    topic.produce([(bad_value, 2)], [None])
    (where,) = topic.bad
    topic.produce_events(range(13_001, 16_001), partition=2)
    for p in (0, 1, 3):
        topic.produce_events(range(20_000 + 10_000 * p, 22_000 + 10_000 * p), partition=p)

    for attempt in (1, 2):  # a restart stops at the same message
        run = Colonnade(argv, workdir).wait()
        assert run.status == 1, run
        assert run.stdout == "", run
        errors = [line for line in run.stderr.splitlines() if line.startswith("error:")]
        assert errors == [run.stderr.splitlines()[-1]], run  # one line, the last
        assert "Traceback" not in run.stderr
        version = store.dataset(name).version
        assert errors[0].startswith(f"error: bad message in {topic.name} partition {where[0]} at offset "
                                    f"{where[1]}: column id"), errors
        assert f"nothing after version {version} of {name} was committed" in errors[0], errors
        # nothing past the last good micro-batch: the positions stop before the bad message
        at = assert_rows_match_positions(store, name, topic)
        assert at[where[0]] <= where[1], (attempt, at)
        assert all(at[p] >= before[p] for p in before)
        assert not rejects.exists()  # strict mode quarantines nothing
