"""A ``colonnade stream`` process (the real console script) SIGKILLed at every fault point of a
micro-batch — some at the first micro-batch, some at a later one — and at random moments, then
started again in the same consumer group with ``--stop-when-idle``: the dataset ends holding
every produced event exactly once (count, distinct ids, sum of ids), its log's positions are the
topic's ends, and the rejects file lists every bad message (one whose micro-batch was not
committed may be listed twice, never missing).

Right after each kill the dataset is checked too: its rows are exactly the good messages below
the positions its log recorded (rows and positions are committed together), and the second
run consumes exactly the messages from those positions on.

One topic serves every kill (a fresh dataset, and so a fresh consumer group, consumes it from the
start each time): 80,000 events and a bad message of each kind every 10,000. With
``--memory-limit 2`` a micro-batch commits every 2 MB of rows (about 20,000 events in 4 polls):
4 micro-batches in all.
"""

from __future__ import annotations

import random
import re
import signal
import time
import uuid
from pathlib import Path

import pytest
from stream_helpers import (
    Colonnade,
    Finished,
    Topic,
    assert_exactly_once,
    assert_rejects,
    assert_rows_match_positions,
    new_topic,
    stream_argv,
    wait_for,
)

from colonnade.store import Store

pytestmark = pytest.mark.kafka

EVENTS = 80_000
BAD_EVERY = 10_000
NOTE_BYTES = 40
OPTIONS = ("--memory-limit", "2")
#: (fault point, occurrence, stream commits in the log when it kills: None if it depends on timing)
FAULTS = (
    ("after_poll", 1, 0),
    ("after_poll", 5, None),
    ("after_rejects", 1, None),
    ("after_rejects", 2, None),  # a fast stream may hold the rejects in two micro-batches only
    ("after_segment_row", 2, 1),  # a micro-batch is one segment (< 65,536 rows)
    ("after_chunks", 1, 0),
    ("before_commit", 2, 1),
    ("after_commit", 1, 1),
    ("after_commit", 3, 3),
    ("after_stream_commit", 2, 2),
)
RANDOM_KILLS = 2
SEED = 20240611
AT_ONCE = 5  # killed runs started together (each its own dataset and group)


@pytest.fixture(scope="module")
def crash_topic(kafka_bootstrap: str) -> Topic:
    topic = new_topic(kafka_bootstrap, "crash")
    topic.produce_events(range(1, EVENTS + 1), note_bytes=NOTE_BYTES, bad_every=BAD_EVERY)
    assert len(topic.bad) == EVENTS // BAD_EVERY
    return topic


class Kill:
    """One killed stream: its dataset, how it was killed, and what the log held afterwards."""

    def __init__(self, how: str, expect_commits: int | None, workdir: Path) -> None:
        self.how, self.expect_commits = how, expect_commits
        self.name = "k_" + re.sub(r"\W", "_", how) + f"_{uuid.uuid4().hex[:6]}"
        self.rejects = workdir / f"{self.name}.rejects.jsonl"
        self.positions: dict[int, int] = {}
        self.run: Finished | None = None

    def argv(self, uri: str, topic: Topic) -> list[str]:
        return stream_argv(uri, self.name, topic, "--stop-when-idle", "1", *OPTIONS, rejects=self.rejects)


def _check_after_kill(store: Store, topic: Topic, kill: Kill) -> None:
    run = kill.run
    assert run is not None
    assert run.killed, f"{kill.how}: the stream was not killed\n{run}"
    kill.positions = assert_rows_match_positions(store, kill.name, topic)
    made = kill.name in store  # a run killed early (a busy machine) may not have made it yet
    commits = [c for c in store.dataset(kill.name).history() if c.kind == "stream"] if made else []
    if kill.expect_commits is not None:
        assert len(commits) == kill.expect_commits, f"{kill.how}: {len(commits)} commits"
    assert_rejects(kill.rejects, topic, below=kill.positions)  # committed ones were written first


def test_a_killed_stream_resumes_from_its_log_exactly_once(module_store: Store, store_uri: str,
                                                           crash_topic: Topic, workdir: Path) -> None:
    store, topic = module_store, crash_topic
    started = time.monotonic()
    kills = [Kill(f"{point}:{n}", commits, workdir) for point, n, commits in FAULTS]

    # 1. a fault point kills each run; a few runs at once
    for i in range(0, len(kills), AT_ONCE):
        group = kills[i:i + AT_ONCE]
        procs = [Colonnade(k.argv(store_uri, topic), workdir, {"COLONNADE_FAULTS": k.how}) for k in group]
        for k, proc in zip(group, procs, strict=True):
            k.run = proc.wait(timeout=120)
            _check_after_kill(store, topic, k)

    # 2. SIGKILL from outside at random moments of a run, once it has opened its dataset
    rng = random.Random(SEED)
    for _ in range(RANDOM_KILLS):
        delay = rng.uniform(0.1, 1.0)
        k = Kill(f"random_{delay:.2f}s", None, workdir)
        proc = Colonnade(k.argv(store_uri, topic), workdir)
        wait_for("the stream opens its dataset", lambda k=k: k.name in store, timeout=60)
        time.sleep(delay)
        proc.signal(signal.SIGKILL)
        k.run = proc.wait(timeout=60)
        _check_after_kill(store, topic, k)
        kills.append(k)
    killed_at = time.monotonic()

    # 3. every one started again in its consumer group (whose dead member holds its partitions
    # until the session times out): each ends with every event once
    procs = [Colonnade(k.argv(store_uri, topic), workdir) for k in kills]
    summary = []
    for k, proc in zip(kills, procs, strict=True):
        run = proc.wait(timeout=120)
        assert run.status == 0, f"{k.how}\n{run}"
        report = run.report()
        consumed = sum(k.positions.values())
        assert report["events"] == topic.messages - consumed, f"{k.how}: {report}"  # from the log's offsets
        assert report["rejected"] == sum(1 for (p, o) in topic.bad if o >= k.positions.get(p, 0)), report
        assert_exactly_once(store, k.name, topic)
        seen = assert_rejects(k.rejects, topic)
        twice = sum(1 for n in seen.values() if n > 1)
        assert max(seen.values()) <= 2, f"{k.how}: {seen}"
        if k.how.startswith("after_rejects"):  # written before the kill, again after it
            assert twice >= 1, f"{k.how}: {seen}"
        summary.append(f"{k.how}: {consumed} consumed before, {report['events']} after, {twice} rejects twice")
    print(f"{store.uri.split(':')[0]}: kills {killed_at - started:.1f} s, restarts "
          f"{time.monotonic() - killed_at:.1f} s\n  " + "\n  ".join(summary))
