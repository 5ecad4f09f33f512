"""The stream of ``colonnade bench adimpressions``, as a process of its own.

A stream and the queries beside it are two programs in practice (``colonnade stream`` as a
service, a dashboard querying the store); in one Python process they would also share one
interpreter lock, and the stream's per-message work would hold up the queries' Python steps.
So the bench runs :func:`colonnade.stream.run_stream` here, in a child process
(``python -m colonnade.bench.adimpressions_stream SETTINGS_JSON``), which writes one JSON line
on stdout per commit (``{"commit": ...}``) and per status (``{"status": {"lag": ...}}``), and at
the end ``{"report": ...}`` with its CPU seconds; SIGTERM or SIGINT stop it after the buffered
events are committed. A failure is one ``{"error": "..."}`` line and exit status 1.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from typing import Any


def _line(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def run(settings: dict[str, Any]) -> int:
    import colonnade
    from colonnade.bench import adimpressions_data as data
    from colonnade.stream import StreamOptions, run_stream

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    options = StreamOptions(topic=settings["topic"], bootstrap=settings["bootstrap"], format="csv",
                            schema=data.SCHEMA, commit_interval=float(settings["commit_interval"]),
                            on_error="strict", consumer=dict(settings.get("consumer") or {}))

    def on_commit(c: Any) -> None:
        _line({"commit": {"version": c.version, "rows": c.rows, "at": c.at,
                          "oldest_ms": c.oldest_produced_ms, "newest_ms": c.newest_produced_ms}})

    def on_status(s: Any) -> None:
        _line({"status": {"lag": {str(k): v for k, v in s.lag.items()}}})

    try:
        with colonnade.connect(settings["uri"]) as store:
            report = run_stream(store, settings["dataset"], options, on_status=on_status,
                                on_commit=on_commit, stop=stop)
    except Exception as exc:  # the parent reports it
        _line({"error": f"{type(exc).__name__}: {exc}"})
        return 1
    _line({"report": {**report.to_dict(), "cpu_s": time.process_time()}})
    return 0


if __name__ == "__main__":
    sys.exit(run(json.loads(sys.argv[1])))
