"""A process that imports Colonnade once and forks a child per command-line run.

The crash tests kill dozens of ``colonnade`` runs; starting a fresh interpreter for each would
spend seconds importing pyarrow, DuckDB and the Cassandra driver every time. This helper imports
them once (starting no threads of its own) and then, for each request on stdin, forks a child
that runs ``colonnade.cli.main.main(argv)`` — the real command line, in a real OS process with its
own connections and files — with stdout/stderr redirected to files and extra environment
variables (``COLONNADE_FAULTS``...). Requests and replies are JSON lines:

    {"op": "spawn", "argv": [...], "env": {...}, "stdout": P, "stderr": P, "start_at": T}
        -> {"pid": N}     the child waits until time.time() >= T (a common start line), then runs
    {"op": "wait", "pid": N, "timeout": S}
        -> {"status": C, "timed_out": bool, "maxrss_kb": K}   C < 0: killed by signal -C
    {"op": "exit"}

A child is reaped only on "wait", so its pid can't be reused while the parent may still signal it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from typing import Any

# Everything the command line imports lazily, imported once here.
import cassandra.cluster  # noqa: F401
import duckdb  # noqa: F401
import pyarrow.csv  # noqa: F401
import pyarrow.ipc  # noqa: F401
import pyarrow.parquet  # noqa: F401

import colonnade.cli.commands  # noqa: F401
import colonnade.cli.main
import colonnade.cli.progress  # noqa: F401
import colonnade.faults
import colonnade.ingest.pipeline  # noqa: F401
import colonnade.ingest.progress  # noqa: F401
import colonnade.storage.cassandra  # noqa: F401
import colonnade.storage.sqlite  # noqa: F401


def _child(req: dict[str, Any]) -> None:
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    for fd, path in ((1, req["stdout"]), (2, req["stderr"])):
        out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(out, fd)
        os.close(out)
    for key, value in (req.get("env") or {}).items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = str(value)
    colonnade.faults.reset()
    start_at = req.get("start_at")
    if start_at:
        time.sleep(max(0.0, start_at - time.time()))
    code = 0
    try:
        colonnade.cli.main.main(list(req["argv"]))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - reported through the exit code and stderr
        traceback.print_exc()
        code = 99
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _wait(pid: int, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    timed_out = False
    while True:
        got, status, usage = os.wait4(pid, os.WNOHANG)
        if got == pid:
            break
        if time.monotonic() > deadline and not timed_out:
            timed_out = True
            os.kill(pid, signal.SIGKILL)
            os.kill(pid, signal.SIGCONT)
        time.sleep(0.01)
    return {"status": os.waitstatus_to_exitcode(status), "timed_out": timed_out,
            "maxrss_kb": usage.ru_maxrss}


def main() -> None:
    print(json.dumps({"ready": os.getpid()}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        reply: dict[str, object]
        if req["op"] == "spawn":
            pid = os.fork()
            if pid == 0:
                _child(req)
            reply = {"pid": pid}
        elif req["op"] == "wait":
            reply = _wait(int(req["pid"]), float(req.get("timeout", 300)))
        elif req["op"] == "exit":
            return
        else:
            reply = {"error": f"unknown op {req['op']!r}"}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
