"""Invariant 1 under real crashes: a ``colonnade ingest`` process is SIGKILLed at every injected
fault point of the write path (several occurrences each) and after random delays; whatever the
moment, the dataset then equals exactly the state before or after the append, ``verify`` passes,
``vacuum --grace 0`` removes the orphans (and only them), and re-running the ingest completes it.

Runs are forked from a zygote (see ``zygote.py``) so that dozens of crashes stay cheap; one crash
per store goes through a freshly started ``colonnade`` console script as well.
"""

from __future__ import annotations

import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from reliability_helpers import (
    EVENTS_SCHEMA,
    Run,
    Zygote,
    fingerprint,
    orphan_count,
    run_cli,
    unique_name,
    version_of,
    write_events,
)

from colonnade.ingest import ingest
from colonnade.store import Store

A_ROWS = range(0, 1500)  # committed before the crash (version 1)
B_ROWS = range(10_000, 34_000)  # the append that is killed: 3 partitions x 16 segments of 500
SEGMENTS_OF_B = 48

#: (fault point, occurrence): every point, at its first, a middle and its last occurrence
FAULTS = [("after_segment_row", 1), ("after_segment_row", 24), ("after_segment_row", SEGMENTS_OF_B),
          ("after_chunks", 1), ("after_chunks", 24), ("after_chunks", SEGMENTS_OF_B),
          ("before_commit", 1), ("after_commit", 1)]
TIMED_KILLS = 10  # per store, at random moments of the append (seeded)


def stored_keys(store: Store, dataset: str, admin: Any) -> tuple[set[str], set[tuple[str, str]]]:
    """Segment ids of the segment index and (segment, column) of every stored chunk, read around
    Colonnade (so that a vacuum that forgot chunks would show)."""
    cs = store.chunk_store
    if store.uri.startswith("sqlite"):
        import sqlite3

        con = sqlite3.connect(cs.path)  # type: ignore[attr-defined]
        try:
            segs = {r[0] for r in con.execute("SELECT segment FROM segments WHERE dataset = ?", (dataset,))}
            chunks = {(r[0], r[1]) for r in con.execute(
                "SELECT segment, column_name FROM chunks WHERE dataset = ?", (dataset,))}
        finally:
            con.close()
        return segs, chunks
    ks = cs.keyspace  # type: ignore[attr-defined]
    segs = {r[1] for r in admin.execute(f"SELECT dataset, segment FROM {ks}.segments") if r[0] == dataset}
    chunks = {(r[1], r[2]) for r in admin.execute(f"SELECT dataset, segment, column FROM {ks}.{cs.chunk_table}")
              if r[0] == dataset}
    index = {(r[1], r[2]) for r in admin.execute(f"SELECT dataset, segment, column FROM {ks}.chunk_index")
             if r[0] == dataset}
    return segs, chunks | index


class Crashes:
    """One store's crash campaign: fresh dataset per crash, the same files, the same checks."""

    def __init__(self, store: Store, zygote: Zygote, invoke: Any, tmp: Path, admin: Any) -> None:
        self.store, self.zygote, self.invoke, self.admin = store, zygote, invoke, admin
        self.a = write_events(tmp / "a.csv", A_ROWS, seed=1)
        self.b = write_events(tmp / "b.csv", B_ROWS, seed=2)
        self.before = self.after = (0, "")
        self.last_orphans = 0

    def fresh(self) -> str:
        name = unique_name("c")
        self.store.create_dataset(name, EVENTS_SCHEMA, partition_by="cat", sort_by="id", segment_rows=500)
        assert ingest(self.store, name, self.a).version == 1
        return name

    def argv(self, name: str) -> list[str]:
        return ["--store", self.store.uri, "ingest", name, str(self.b)]

    def baseline(self) -> float:
        """An append that is not killed: the 'after' state, and how long an append takes."""
        name = self.fresh()
        self.before = fingerprint(self.store, name)
        assert self.before[0] == len(A_ROWS)
        run = self.zygote.run(self.argv(name))
        assert run.status == 0, run
        assert run.stdout.startswith(f"ingested {len(B_ROWS):,} rows from 1 file into {name} (v2)"), run
        self.after = fingerprint(self.store, name)
        assert self.after[0] == len(A_ROWS) + len(B_ROWS)
        assert len(self.store.dataset(name).snapshot().segments) == 3 + SEGMENTS_OF_B
        assert orphan_count(self.store, name) == 0
        return run.seconds

    def check(self, name: str, run: Run, expect: str | None) -> str:
        """After a crash: before-or-after, verify, vacuum, recovery. Returns the state found."""
        assert run.killed, run
        found = fingerprint(self.store, name)
        state = {self.before: "before", self.after: "after"}.get(found)
        assert state is not None, f"{run}\npartial state after the crash: {found[0]} rows"
        if expect is not None:
            assert state == expect, run
        assert version_of(self.store, name) == (1 if state == "before" else 2)

        verified = self.invoke("verify", name)
        assert verified.exit_code == 0, verified.output

        live = {s.segment for s in self.store.dataset(name).snapshot().segments}
        segs, chunks = stored_keys(self.store, name, self.admin)
        orphans = segs - live
        assert live <= segs and {(s, c) for s in live for c in EVENTS_SCHEMA.names} <= chunks
        if expect == "before":
            assert orphans, "a crash after a segment was written must leave an orphan"
        if expect == "after":
            assert not orphans
        assert orphan_count(self.store, name) == len(orphans)
        self.last_orphans = len(orphans)

        vacuumed = self.invoke("vacuum", name, "--grace", "0")
        plural = "" if len(orphans) == 1 else "s"
        # then how much space went back to the disk, on the embedded store
        assert vacuumed.output.splitlines()[0] == f"removed {len(orphans)} orphan segment{plural} of dataset {name!r}"
        segs, chunks = stored_keys(self.store, name, self.admin)
        assert segs == live  # every orphan row is gone, and nothing committed
        assert chunks == {(s, c) for s in live for c in EVENTS_SCHEMA.names}  # ... nor any chunk
        assert fingerprint(self.store, name) == found
        assert self.invoke("verify", name).exit_code == 0

        # recovery: running the same ingest again completes it exactly once
        again = ingest(self.store, name, self.b)
        assert (again.version is None) == (state == "after")
        assert fingerprint(self.store, name) == self.after
        return state


@pytest.fixture
def crashes(module_store: Store, zygote: Zygote, invoke: Any, tmp_path: Path,
            request: pytest.FixtureRequest) -> Crashes:
    admin = None if module_store.uri.startswith("sqlite") else request.getfixturevalue("cassandra_admin")
    return Crashes(module_store, zygote, invoke, tmp_path, admin)


@pytest.mark.slow
def test_a_killed_ingest_leaves_the_state_before_or_after(crashes: Crashes, crash_tally: Any) -> None:
    store = crashes.store
    kind = store.uri.split(":", 1)[0]
    duration = crashes.baseline()

    # 1. every fault point, at several occurrences: the outcome is known exactly
    for point, nth in FAULTS:
        name = crashes.fresh()
        run = crashes.zygote.run(crashes.argv(name), env={"COLONNADE_FAULTS": f"{point}:{nth}"})
        crashes.check(name, run, "after" if point == "after_commit" else "before")
        crash_tally(kind, "fault points", 1)

    # 2. SIGKILL at random moments of the append: either outcome, never anything in between
    rng = random.Random(20240501)
    states = []
    for _ in range(TIMED_KILLS):
        name = crashes.fresh()
        child = crashes.zygote.spawn(crashes.argv(name))
        time.sleep(rng.uniform(0.02, duration * 0.9))
        child.signal(signal.SIGKILL)
        run = child.wait()
        if run.status == 0:  # finished before the signal: not a crash
            assert fingerprint(store, name) == crashes.after
            states.append("finished")
            continue
        state = crashes.check(name, run, None)
        states.append(f"{state} ({crashes.last_orphans} orphans)" if state == "before" else state)
        crash_tally(kind, "random SIGKILL", 1)
    print(f"{kind}: append takes {duration:.2f}s; random kills found {states}")

    # 3. one crash through a freshly started console script (the real entry point end to end)
    name = crashes.fresh()
    run = run_cli(crashes.argv(name), env={"COLONNADE_FAULTS": "after_chunks:5"})
    crashes.check(name, run, "before")
    crash_tally(kind, "fault points (console script)", 1)


def test_vacuum_spares_the_segments_of_an_append_in_flight(crashes: Crashes) -> None:
    """A writer frozen mid-append (SIGSTOP at a fault point: half its segments written, or all
    of them but not the commit) while ``vacuum`` runs with the default grace: its segments
    survive, and once it resumes its commit is whole and readable."""
    store = crashes.store
    for pause_at, at_least in (("after_chunks:6", 6), ("before_commit:1", SEGMENTS_OF_B)):
        name = crashes.fresh()
        child = crashes.zygote.spawn(crashes.argv(name), env={"COLONNADE_FAULTS": f"{pause_at}:stop"})
        deadline = time.monotonic() + 120
        while _state(child.pid) != "T":
            assert time.monotonic() < deadline, "the writer never reached its pause point"
            time.sleep(0.02)
        try:
            # segments are stored a few at a time: the pause may come after a batch beyond the 6th
            written = orphan_count(store, name)
            assert at_least <= written <= SEGMENTS_OF_B
            vacuumed = crashes.invoke("vacuum", name)
            assert vacuumed.output.splitlines()[0] == f"removed 0 orphan segments of dataset {name!r}"
            assert orphan_count(store, name) == written
            assert fingerprint(store, name)[0] == len(A_ROWS)  # still invisible
        finally:
            child.signal(signal.SIGCONT)
        run = child.wait()
        assert run.status == 0, run
        assert run.stdout.startswith(f"ingested {len(B_ROWS):,} rows from 1 file into {name} (v2)"), run
        ids = store.sql(f"SELECT id FROM {name} ORDER BY id").column("id").to_pylist()
        assert ids == list(A_ROWS) + list(B_ROWS)
        assert crashes.invoke("verify", name).exit_code == 0
        assert orphan_count(store, name) == 0


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]
