"""Helpers of the stream's fault tests: topics with known contents, ``colonnade stream`` runs as
real console-script processes, and the checks that every message is stored exactly once.

(A plain module rather than conftest: conftest names clash across test folders.)

Every produced event is a JSON object with a unique int64 ``id``; a topic remembers where each
message landed (partition, offset), so a check can say exactly which rows a commit must hold:
the good messages below each partition's recorded position, once each.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from colonnade.errors import DatasetNotFoundError
from colonnade.store import Store
from colonnade.table.commits import position_id

COLONNADE = str(Path(sys.executable).with_name("colonnade"))
PARTITIONS = 4
#: The message columns every test streams (``id`` required).
COLUMNS = "id:int64 not null,cat:string,v:float64,note:string"
CATS = ("red", "green", "blue")

#: One bad message of each kind a JSON stream rejects, and a word of the reason it must give.
BAD_KINDS: tuple[tuple[bytes | None, str], ...] = (
    (b"this is not json", "not valid JSON"),
    (b'{"id": "seven", "cat": "red"}', "column id"),  # a string where an int64 belongs
    (b'{"cat": "green", "v": 1.5}', "required column id is missing"),
    (b'{"id": 1, "note": "caf\xe9 \xff"}', "not valid UTF-8"),
    (b"", "empty message"),
    (None, "empty message"),  # a tombstone: no value at all
    (b'{"id": null, "cat": "blue"}', "required column id is null"),
)


def event(i: int, note_bytes: int = 40) -> bytes:
    """Event ``i`` as JSON (a ``note`` of ``note_bytes`` characters pads it to a chosen size)."""
    unit = f"n{i}-"
    note = (unit * (note_bytes // len(unit) + 1))[:note_bytes]
    return json.dumps({"id": i, "cat": CATS[i % 3], "v": i * 0.25, "note": note}).encode()


@dataclass
class Topic:
    """A topic and what was produced into it: good messages by (partition, offset) → id, bad
    ones → their raw value."""

    bootstrap: str
    name: str
    good: dict[tuple[int, int], int] = field(default_factory=dict)
    bad: dict[tuple[int, int], bytes | None] = field(default_factory=dict)

    @property
    def messages(self) -> int:
        return len(self.good) + len(self.bad)

    @property
    def ends(self) -> dict[int, int]:
        """Partition → the offset after its last message."""
        out: dict[int, int] = {}
        for p, o in [*self.good, *self.bad]:
            out[p] = max(out.get(p, 0), o + 1)
        return out

    def expected(self) -> tuple[int, int, int]:
        """(count, distinct ids, sum of ids) a table holding every good message once has."""
        ids = self.good.values()
        return len(ids), len(set(ids)), sum(ids)

    def good_below(self, positions: Mapping[int, int]) -> list[int]:
        """The ids of the good messages before each partition's position, sorted."""
        return sorted(i for (p, o), i in self.good.items() if o < positions.get(p, 0))

    def producer(self) -> Any:
        from confluent_kafka import Producer

        return Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 20, "enable.idempotence": True,
                         "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
                         "log_level": 2})  # a broker stopped on purpose: no connection errors on stderr

    def on_delivery(self, ident: int | None, value: bytes | None, failed: list[Any]) -> Any:
        """A delivery callback recording where message ``ident`` (None: a bad one) landed."""
        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                failed.append(err)
            elif ident is None:
                self.bad[(msg.partition(), msg.offset())] = value
            else:
                self.good[(msg.partition(), msg.offset())] = ident
        return delivered

    def produce(self, items: Iterable[tuple[bytes | None, int | None]], ids: Iterable[int | None]) -> None:
        """Send ``(value, partition or None)`` items; ``ids`` says which event each good one is
        (None: a bad message). Waits until every one is acknowledged."""
        failed: list[Any] = []
        producer = self.producer()
        for n, ((value, partition), ident) in enumerate(zip(items, ids, strict=True)):
            key = str(ident if ident is not None else f"bad-{uuid.uuid4().hex[:6]}").encode()
            kwargs: dict[str, Any] = {} if partition is None else {"partition": partition}
            producer.produce(self.name, value=value, key=key,
                             on_delivery=self.on_delivery(ident, value, failed), **kwargs)
            if n % 5_000 == 4_999:
                producer.poll(0)
        assert producer.flush(60) == 0, "messages still unacknowledged after 60 s"
        assert not failed, failed

    def produce_events(self, ids: Iterable[int], note_bytes: int = 40,
                       bad_every: int = 0, partition: int | None = None) -> None:
        """Events with ``ids``; with ``bad_every`` one bad message (cycling through every kind)
        follows each ``bad_every``-th event."""
        items: list[tuple[bytes | None, int | None]] = []
        idents: list[int | None] = []
        k = 0
        for n, i in enumerate(ids, 1):
            items.append((event(i, note_bytes), partition))
            idents.append(i)
            if bad_every and n % bad_every == 0:
                items.append((BAD_KINDS[k % len(BAD_KINDS)][0], partition))
                idents.append(None)
                k += 1
        self.produce(items, idents)


class Feeder(threading.Thread):
    """Produces events ``first_id``, ``first_id + 1``, ... into a topic, ``rate`` a second, until
    ``stop()`` (which waits until every one is acknowledged)."""

    def __init__(self, topic: Topic, first_id: int, rate: int = 2_000, note_bytes: int = 40) -> None:
        super().__init__(daemon=True)
        self.topic, self.next_id, self.rate, self.note_bytes = topic, first_id, rate, note_bytes
        self.failed: list[Any] = []
        self._stop_asked = threading.Event()

    def run(self) -> None:
        producer = self.topic.producer()
        tick = 0.05
        while not self._stop_asked.is_set():
            for _ in range(max(1, int(self.rate * tick))):
                i = self.next_id
                producer.produce(self.topic.name, value=event(i, self.note_bytes), key=str(i).encode(),
                                 on_delivery=self.topic.on_delivery(i, None, self.failed))
                self.next_id += 1
            producer.poll(0)
            self._stop_asked.wait(tick)
        while producer.flush(1) and not self.failed:  # a broker away for a while: keep trying
            pass

    def stop(self) -> None:
        self._stop_asked.set()
        self.join(120)
        assert not self.is_alive(), "the producer did not finish"
        assert not self.failed, self.failed


def new_topic(bootstrap: str, prefix: str = "s", partitions: int = PARTITIONS) -> Topic:
    """A fresh topic of ``partitions`` partitions."""
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    for future in admin.create_topics([NewTopic(name, num_partitions=partitions,
                                                replication_factor=1)]).values():
        future.result(60)
    return Topic(bootstrap, name)


# -- what a dataset holds ----------------------------------------------------------------------
def table_stats(store: Store, name: str) -> tuple[int, int, int]:
    """(count(*), count(distinct id), sum(id)) of a dataset."""
    row = store.sql(f"SELECT count(*) AS n, count(DISTINCT id) AS d, coalesce(sum(id), 0) AS s "
                    f"FROM {name}").to_pylist()[0]
    return int(row["n"]), int(row["d"]), int(row["s"])


def positions(store: Store, name: str, topic: Topic) -> dict[int, int]:
    """Partition → the next offset the dataset's log recorded for ``topic`` (none: a stream
    killed before it made the dataset)."""
    try:
        recorded = store.dataset(name).positions()
    except DatasetNotFoundError:
        return {}
    return {p: recorded[position_id(topic.name, p)] for p in range(PARTITIONS)
            if position_id(topic.name, p) in recorded}


def assert_exactly_once(store: Store, name: str, topic: Topic) -> None:
    """Every good message of the topic is a row, once; the log's positions are the topic's ends."""
    assert table_stats(store, name) == topic.expected(), (table_stats(store, name), topic.expected())
    assert positions(store, name, topic) == topic.ends


def assert_rows_match_positions(store: Store, name: str, topic: Topic) -> dict[int, int]:
    """The rows are exactly the good messages before the recorded positions, once each (rows
    and positions were committed together). Returns the positions."""
    at = positions(store, name, topic)
    ids = store.sql(f"SELECT id FROM {name} ORDER BY id").column("id").to_pylist() if at else []
    assert ids == topic.good_below(at), f"{len(ids)} rows, positions {at}"
    return at


def read_rejects(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def assert_rejects(path: Path, topic: Topic, below: Mapping[int, int] | None = None) -> Counter[tuple[int, int]]:
    """The rejects file lists every bad message of ``topic`` (those before ``below`` if given)
    at least once, with its topic, partition, offset, a reason and the raw value, and nothing
    else. Returns how often each (partition, offset) is listed."""
    expect = {k for k in topic.bad if below is None or k[1] < below.get(k[0], 0)}
    seen: Counter[tuple[int, int]] = Counter()
    for r in read_rejects(path):
        key = (r["partition"], r["offset"])
        assert r["topic"] == topic.name, r
        assert key in topic.bad, f"a message that is not bad was rejected: {r}"
        raw = topic.bad[key]
        assert r["raw"] == (None if raw is None else raw.decode("utf-8", "backslashreplace")), r
        reason = dict(BAD_KINDS)[raw] if raw in dict(BAD_KINDS) else ""
        assert r["reason"] and reason in r["reason"], r
        seen[key] += 1
    assert set(seen) >= expect, f"bad messages missing from {path}: {sorted(expect - set(seen))}"
    return seen


# -- ``colonnade stream`` processes ------------------------------------------------------------
def child_env(extra: Mapping[str, str | None] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLONNADE_")}
    for k, v in (extra or {}).items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


@dataclass
class Finished:
    """A finished ``colonnade`` process."""

    argv: list[str]
    status: int  # exit code; -N when killed by signal N
    stdout: str
    stderr: str
    seconds: float
    maxrss_kb: int

    @property
    def killed(self) -> bool:
        return self.status == -signal.SIGKILL

    def report(self) -> dict[str, Any]:
        """The ``--json`` summary of a stream that ended."""
        return json.loads(self.stdout)  # type: ignore[no-any-return]

    def __str__(self) -> str:
        return (f"colonnade {' '.join(self.argv)} -> {self.status} in {self.seconds:.1f} s\n"
                f"stdout: {self.stdout[-2000:]}\nstderr: {self.stderr[-4000:]}")


_started: list[Colonnade] = []


def kill_leftovers() -> None:
    """SIGKILL and reap the processes a test started and did not wait for (it failed)."""
    while _started:
        proc = _started.pop()
        if proc.finished is None:
            try:
                proc.signal(signal.SIGCONT)
                proc.signal(signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=30)


#: Runs a command as its child and writes the child's exit status and peak RSS (``wait4``) to a
#: file. A process forked from the test process would count the test's own memory in its peak
#: (Linux keeps the high-water mark of the memory a process had before exec); forked from this
#: small interpreter (no site packages), it counts a few MB of it.
_MEASURE = """
import json, os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    json.dump({"status": os.waitstatus_to_exitcode(status), "maxrss_kb": usage.ru_maxrss}, f)
"""


class Colonnade:
    """``colonnade ARGV`` as a process of the installed console script, its output in files.
    With ``measure_rss`` its peak RSS is measured (``Finished.maxrss_kb``) through a small
    parent process; otherwise ``maxrss_kb`` includes the test process's memory at the fork."""

    def __init__(self, argv: list[str], cwd: Path, env: Mapping[str, str | None] | None = None,
                 measure_rss: bool = False) -> None:
        import subprocess

        self.argv = argv
        self.started = time.monotonic()
        tag = uuid.uuid4().hex[:8]
        self.out, self.err = cwd / f"{tag}.out", cwd / f"{tag}.err"
        self.measured = cwd / f"{tag}.rss" if measure_rss else None
        command = [COLONNADE, *argv]
        if self.measured is not None:
            command = [sys.executable, "-S", "-c", _MEASURE, str(self.measured), *command]
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=err, cwd=str(cwd), env=child_env(env))
        self.pid = self.proc.pid
        self.finished: Finished | None = None
        _started.append(self)

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    def running(self) -> bool:
        if self.finished is not None:
            return False
        got, status, usage = os.wait4(self.pid, os.WNOHANG)
        if got == 0:
            return True
        self._reaped(status, usage)
        raise AssertionError(f"colonnade {' '.join(self.argv)} ended early: {self.stderr()[-2000:]}")

    def signal(self, sig: int) -> None:
        os.kill(self.pid, sig)  # safe: only wait() reaps it

    def wait(self, timeout: float = 120) -> Finished:
        """Wait for the process (SIGKILL it after ``timeout``: the test fails)."""
        if self.finished is not None:
            return self.finished
        deadline = time.monotonic() + timeout
        while True:
            got, status, usage = os.wait4(self.pid, os.WNOHANG)
            if got == self.pid:
                break
            if time.monotonic() > deadline:
                os.kill(self.pid, signal.SIGKILL)
                os.wait4(self.pid, 0)
                self.proc.returncode = -signal.SIGKILL
                raise AssertionError(f"colonnade {' '.join(self.argv)} still ran after {timeout:g} s; "
                                     f"stderr: {self.stderr()[-3000:]}")
            time.sleep(0.02)
        return self._reaped(status, usage)

    def _reaped(self, status: int, usage: Any) -> Finished:
        code = os.waitstatus_to_exitcode(status)
        self.proc.returncode = code  # reaped here: Popen must not wait for it again
        maxrss = usage.ru_maxrss
        if self.measured is not None:
            assert code == 0, f"the measuring parent failed: {self.stderr()[-2000:]}"
            child = json.loads(self.measured.read_text())
            code, maxrss = child["status"], child["maxrss_kb"]
        self.finished = Finished(self.argv, code, self.out.read_text(errors="replace"), self.stderr(),
                                 time.monotonic() - self.started, maxrss)
        return self.finished


_STATUS = re.compile(r"^(\w+): ([\d,]+) events \(([\d,]+) rejected\), [\d,]+/s, lag (.*?), last commit (.*)$")


@dataclass
class Status:
    """A plain status line of ``colonnade stream`` (stderr, one per status interval)."""

    events: int
    partitions: set[int]  # assigned when the line was printed (those whose lag was known)
    problem: str | None  # what the line says after "; " (e.g. the broker or the store is away)
    line: str


def status_lines(stderr: str) -> list[Status]:
    out = []
    for line in stderr.splitlines():
        m = _STATUS.match(line)
        if m is None:
            continue
        lag, rest = m.group(4), m.group(5)
        parts = {int(item.split(":")[0]) for item in lag.split()} if lag != "-" else set()
        problem = rest.split("; ", 1)[1] if "; " in rest else None
        out.append(Status(int(m.group(2).replace(",", "")), parts, problem, line))
    return out


def stream_argv(uri: str, dataset: str, topic: Topic, *extra: str, rejects: Path | None = None) -> list[str]:
    """``colonnade --store URI stream DATASET`` of ``topic`` with the test columns, committing
    every 0.2 s, its summary as JSON."""
    argv = ["--store", uri, "stream", dataset, "--topic", topic.name, "--bootstrap", topic.bootstrap,
            "--columns", COLUMNS, "--commit-interval", "0.2", "--json"]
    if rejects is not None:
        argv += ["--rejects", str(rejects)]
    return [*argv, *extra]


def process_state(pid: int) -> str:
    """The state letter of a process (R, S, T: stopped, Z...)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def wait_for(what: str, check: Any, timeout: float = 60, every: float = 0.1) -> Any:
    """Poll ``check()`` until it returns something true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(every)
