"""``cassandra`` (status/logs/stop on an empty directory, start without Java) and ``bench``
(options handed to the benchmark module); no server is started and no benchmark is run."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

pytestmark = pytest.mark.unit

Invoke = Callable[..., Result]
SCRIPT = Path(sys.executable).parent / "colonnade"
needs_script = pytest.mark.skipif(not SCRIPT.exists(), reason="console script not installed (uv sync)")


def test_cassandra_status_of_an_empty_directory(invoke: Invoke, tmp_path: Path) -> None:
    result = invoke("cassandra", "status", "--dir", str(tmp_path / "cluster"), store=False)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["node", "address", "pid", "state"]
    assert lines[2].split() == ["node1", "127.0.0.1", "-", "down"]
    three = invoke("cassandra", "status", "--dir", str(tmp_path / "cluster"), "--nodes", "3",
                   store=False)
    assert [line.split()[-1] for line in three.stdout.splitlines()[2:]] == ["down"] * 3
    assert three.stdout.splitlines()[4].split()[:2] == ["node3", "127.0.0.3"]


def test_cassandra_logs_and_stop_of_an_empty_directory(invoke: Invoke, tmp_path: Path) -> None:
    logs = invoke("cassandra", "logs", "--dir", str(tmp_path), store=False)
    assert logs.exit_code == 0
    assert logs.stdout == "" and "no log" in logs.stderr
    stop = invoke("cassandra", "stop", "--dir", str(tmp_path), store=False)
    assert stop.exit_code == 0
    bad_node = invoke("cassandra", "logs", "--dir", str(tmp_path), "--node", "4", store=False)
    assert bad_node.exit_code == 1
    assert bad_node.stderr == "error: no node 4: this cluster has nodes 1..1\n"


@needs_script
def test_cassandra_start_without_java(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = ""
    env["COLONNADE_CASSANDRA_DIR"] = str(tmp_path / "cache")
    result = subprocess.run([SCRIPT, "cassandra", "start", "--dir", str(tmp_path / "cluster")],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 1
    assert result.stderr.startswith("error: java not found: install a Java 17 JDK")
    assert result.stderr.count("\n") == 1
    assert not (tmp_path / "cache").exists()  # nothing was downloaded


def test_bench_gdelt_hands_its_options_to_the_benchmark(invoke: Invoke, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import colonnade.bench.gdelt as study

    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(study, "main", lambda **kwargs: calls.append(kwargs))
    result = invoke("bench", "gdelt", "--rows", "1000", "--out", str(tmp_path / "out"),
                    "--baseline-rows", "10", "--layouts", "colonnade, reference", "--repeats", "2",
                    "--warmup", "1.5", "--rounds", "3", "--store", "sqlite:///b.db", store=False)
    assert result.exit_code == 0, result.stderr
    assert calls == [{"rows": 1000, "store": "sqlite:///b.db", "out": tmp_path / "out",
                      "baseline_rows": 10, "layouts": ["colonnade", "reference"], "repeats": 2,
                      "warmup_s": 1.5, "rounds": 3}]
    calls.clear()
    invoke("bench", "gdelt", store=False, env={"COLONNADE_STORE": None})
    assert calls == [{}]  # the benchmark's own defaults
    calls.clear()
    invoke("bench", "gdelt")  # an explicit group --store is the store benchmarked
    assert set(calls[0]) == {"store"}


def test_bench_errors_are_one_line(invoke: Invoke, monkeypatch: pytest.MonkeyPatch) -> None:
    import colonnade.bench.gdelt as study

    def disagree(**kwargs: Any) -> None:
        raise study.BenchError("colonnade answers Q1 differently from the reference")

    monkeypatch.setattr(study, "main", disagree)
    result = invoke("bench", "gdelt", "--rows", "10", store=False)
    assert result.exit_code == 1
    assert result.stderr == "error: colonnade answers Q1 differently from the reference\n"
