"""A stream far behind its topic keeps its memory bounded by ``--memory-limit``, not by the lag.

A backlog of 50,000 events of about 2 KB (about 100 MB of rows, 12 times the limit) consumed
with ``--memory-limit 8`` and a commit interval longer than the whole run: time alone would make
one commit at the end; the stream commits whenever its buffered rows pass the limit instead, so
at least backlog / (1.25 × limit) times (a micro-batch passes the limit by at most one poll, and
a poll decodes to at most a quarter of the limit).

Its peak RSS (``wait4`` of the real console script, forked from a small parent so that the test
process's own memory is not counted) stays below the same stream's on a 1,000-event topic plus
10 × limit + 48 MB:

* the buffered micro-batch: up to 1.25 × limit;
* the micro-batch filled while the previous one is committed (commits run in a thread of their
  own, one in flight): up to 1.25 × limit more, rounded to 2 × limit;
* while it is committed: its concatenation and the writer's sorted and encoded copies, up to
  about 2.5 × limit more;
* a poll: up to a quarter of the limit as Python payloads, the joined buffer, the parsed rows
  and the JSON parser's scratch, about 1 × limit;
* the consumer's prefetch queue (a quarter of the limit) and freed buffers the allocators keep
  for a moment (Arrow's jemalloc, glibc's arenas): the rest of the 10 × limit;
* 48 MB fixed: librdkafka's fetch responses (up to 1 MB per partition in flight) and what the
  first commits allocate once (schema, statements, writer threads), measured at about 40 MB.

Measured: 1,000-event baseline about 135 MB, the backlog about 210-240 MB (+75-105 MB, the bound
is +112 MB); before polls were capped at a quarter of the limit, the backlog peaked at 375-390 MB
in 3-4 commits (each a 20,000-message poll, about 40 MB of rows). Holding the backlog would take
more than +200 MB (the rows and their JSON).

The backlog stays under 16 micro-batches: after 16 small segments in a partition the stream
compacts them, and a compaction's memory is bounded by the dataset's segment size (up to 65,536
rows), not by ``--memory-limit``.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from stream_helpers import (
    Colonnade,
    Finished,
    Topic,
    assert_exactly_once,
    event,
    new_topic,
    stream_argv,
)

from colonnade.store import Store

pytestmark = pytest.mark.kafka

EVENTS = 50_000
NOTE_BYTES = 2_000
LIMIT_MB = 8
FIXED_MB = 48


@pytest.fixture(scope="module")
def backlogs(kafka_bootstrap: str) -> tuple[Topic, Topic]:
    """(a 1,000-event topic, the 50,000-event backlog), events of the same size."""
    small = new_topic(kafka_bootstrap, "mem-small")
    small.produce_events(range(1, 1_001), note_bytes=NOTE_BYTES)
    big = new_topic(kafka_bootstrap, "mem-big")
    big.produce_events(range(1, EVENTS + 1), note_bytes=NOTE_BYTES)
    return small, big


def _stream(uri: str, topic: Topic, workdir: Path) -> tuple[str, Finished]:
    name = f"mem_{uuid.uuid4().hex[:8]}"
    argv = stream_argv(uri, name, topic, "--stop-when-idle", "1", "--memory-limit", str(LIMIT_MB),
                       "--commit-interval", "600")
    run = Colonnade(argv, workdir, measure_rss=True).wait(timeout=300)
    assert run.status == 0, run
    return name, run


def test_memory_is_bounded_by_the_limit_not_by_the_lag(module_store: Store, store_uri: str,
                                                       backlogs: tuple[Topic, Topic], workdir: Path) -> None:
    small, big = backlogs
    _, baseline = _stream(store_uri, small, workdir)
    name, run = _stream(store_uri, big, workdir)
    report = run.report()
    assert_exactly_once(module_store, name, big)

    limit = LIMIT_MB * 2**20
    message = (len(event(1, NOTE_BYTES)) + len(event(EVENTS, NOTE_BYTES))) / 2
    rows_bytes = 0.9 * message * EVENTS  # rows decode to at least 90% of their JSON
    assert report["commits"] >= int(rows_bytes / (1.25 * limit)), report  # early commits
    assert report["compactions"] == 0, report
    base_mb, peak_mb = baseline.maxrss_kb / 1024, run.maxrss_kb / 1024
    bound_mb = base_mb + 10 * LIMIT_MB + FIXED_MB
    print(f"{store_uri.split(':')[0]}: baseline {base_mb:.0f} MB, backlog of {rows_bytes / 2**20:.0f} MB "
          f"of rows: peak {peak_mb:.0f} MB (+{peak_mb - base_mb:.0f}, bound +{bound_mb - base_mb:.0f}) "
          f"in {report['commits']} commits, {run.seconds:.1f} s")
    assert peak_mb <= bound_mb, (base_mb, peak_mb, bound_mb)

