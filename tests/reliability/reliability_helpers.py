"""Helpers of the reliability suite: child processes, test data, dataset fingerprints.

(A plain module rather than conftest: conftest names clash across test folders.)
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from click.testing import CliRunner, Result

from colonnade.cli.main import cli
from colonnade.store import Store

Invoke = Callable[..., Result]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PYTHON = sys.executable
COLONNADE = str(Path(PYTHON).with_name("colonnade"))

#: Columns of every generated events file.
EVENTS_SCHEMA = pa.schema([("id", pa.int64()), ("cat", pa.string()), ("v", pa.float64()),
                           ("day", pa.date32()), ("note", pa.string())])
CATS = ("red", "green", "blue")


_names = itertools.count(1)


def unique_name(prefix: str = "d") -> str:
    """A dataset name unique in this test session."""
    return f"{prefix}{next(_names)}"


def _events(ids: range, seed: int) -> list[tuple[int, str, float, dt.date, str]]:
    rng = random.Random(seed)
    day0 = dt.date(2024, 1, 1)
    return [(i, CATS[i % 3], i * 0.25, day0 + dt.timedelta(days=i % 365),
             "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(24))) for i in ids]


def write_events(path: Path, ids: range, seed: int = 0) -> Path:
    """A CSV file of events with the given ids (3 categories; text that compresses poorly)."""
    lines = ["id,cat,v,day,note"] + [f"{i},{c},{v},{d},{n}" for i, c, v, d, n in _events(ids, seed)]
    path.write_text("\n".join(lines) + "\n")
    return path


def events_table(ids: range, seed: int = 0) -> pa.Table:
    """The rows ``write_events`` writes, as an Arrow table."""
    rows = _events(ids, seed)
    return pa.Table.from_pylist([dict(zip(EVENTS_SCHEMA.names, r, strict=True)) for r in rows],
                                schema=EVENTS_SCHEMA)


def fingerprint(store: Store, dataset: str) -> tuple[int, str]:
    """(rows, SHA-256 of every row in id order) of a dataset, read through SQL."""
    table = store.sql(f"SELECT id, cat, v, day, note FROM {dataset} ORDER BY id, cat, v, day, note")
    digest = hashlib.sha256(repr(table.to_pylist()).encode()).hexdigest()
    return table.num_rows, digest


def version_of(store: Store, dataset: str) -> int:
    return store.dataset(dataset).version


def orphan_count(store: Store, dataset: str) -> int:
    """Segment-index rows no commit names (what ``vacuum`` would remove with no grace)."""
    return store.dataset(dataset).vacuum(grace_seconds=0, dry_run=True).segments


# -- child processes ------------------------------------------------------------------------------
@dataclass
class Run:
    """The outcome of one ``colonnade`` child process."""

    argv: list[str]
    status: int  # exit code; -N when killed by signal N
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False
    maxrss_kb: int = 0

    @property
    def killed(self) -> bool:
        return self.status == -signal.SIGKILL

    def __str__(self) -> str:
        return (f"colonnade {' '.join(self.argv)} -> {self.status} in {self.seconds:.2f}s\n"
                f"stdout: {self.stdout}\nstderr: {self.stderr}")


def _clean_env() -> dict[str, str | None]:
    """Settings of the test process that must not leak into a child."""
    return {k: None for k in os.environ if k.startswith("COLONNADE_") and k not in (
        "COLONNADE_CASSANDRA_DIR",)}


class Zygote:
    """Parent side of ``zygote.py``: forks real ``colonnade`` command-line runs cheaply."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self._n = 0
        self._lock = threading.Lock()
        self.proc = subprocess.Popen([PYTHON, str(HERE / "zygote.py")], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, cwd=str(ROOT))
        ready = self._read()
        assert "ready" in ready, ready

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"zygote died (exit {self.proc.poll()})")
        return json.loads(line)  # type: ignore[no-any-return]

    def _ask(self, req: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        with self._lock:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
            return self._read()

    def spawn(self, argv: list[str], env: Mapping[str, str | None] | None = None,
              start_at: float | None = None) -> Spawned:
        with self._lock:
            self._n += 1
            n = self._n
        out, err = self.workdir / f"run{n}.out", self.workdir / f"run{n}.err"
        reply = self._ask({"op": "spawn", "argv": argv, "env": {**_clean_env(), **(env or {})},
                           "stdout": str(out), "stderr": str(err), "start_at": start_at})
        return Spawned(self, argv, reply["pid"], out, err, time.monotonic())

    def run(self, argv: list[str], env: Mapping[str, str | None] | None = None,
            timeout: float = 300) -> Run:
        return self.spawn(argv, env).wait(timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self._ask({"op": "exit"})
            except (RuntimeError, BrokenPipeError, ValueError):
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@dataclass
class Spawned:
    zygote: Zygote
    argv: list[str]
    pid: int
    out: Path
    err: Path
    started: float

    def signal(self, sig: int) -> None:
        os.kill(self.pid, sig)  # safe: the zygote reaps it only in wait()

    def wait(self, timeout: float = 300) -> Run:
        reply = self.zygote._ask({"op": "wait", "pid": self.pid, "timeout": timeout})
        return Run(self.argv, reply["status"], self.out.read_text(errors="replace"),
                   self.err.read_text(errors="replace"), time.monotonic() - self.started,
                   reply["timed_out"], reply["maxrss_kb"])


def run_cli(argv: list[str], env: Mapping[str, str | None] | None = None, timeout: float = 300,
            kill_after: float | None = None, stdin: str | None = None) -> Run:
    """``colonnade ARGV`` as a fresh process (the installed console script) reading ``stdin``
    from a pipe (default: /dev/null); optionally SIGKILLed after ``kill_after`` seconds."""
    full_env = {k: v for k, v in os.environ.items() if v is not None}
    for k, v in {**_clean_env(), **(env or {})}.items():
        if v is None:
            full_env.pop(k, None)
        else:
            full_env[k] = v
    started = time.monotonic()
    proc = subprocess.Popen([COLONNADE, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                            text=True, env=full_env, cwd=str(ROOT))
    try:
        out, err = proc.communicate(input=stdin,
                                    timeout=kill_after if kill_after is not None else timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate()
        timed_out = kill_after is None
    return Run(argv, proc.returncode, out, err, time.monotonic() - started, timed_out)


def make_invoke(uri: str) -> Invoke:
    """``colonnade --store URI ARGS...`` in this process (click's runner)."""
    runner = CliRunner()

    def run(*args: str, env: Mapping[str, str | None] | None = None) -> Result:
        return runner.invoke(cli, ["--store", uri, *args], env=env, catch_exceptions=False)

    return run
