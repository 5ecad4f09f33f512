"""The error funnel: one line on stderr, exit 1 (2 for usage, 130 for Ctrl-C), no traceback
unless --debug; checked through click's runner and through the installed console script."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from colonnade.store import Store

pytestmark = pytest.mark.unit

Invoke = Callable[..., Result]
SCRIPT = Path(sys.executable).parent / "colonnade"
needs_script = pytest.mark.skipif(not SCRIPT.exists(), reason="console script not installed (uv sync)")


def one_error_line(result: Result) -> str:
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def test_unknown_dataset(invoke: Invoke, events: Path) -> None:
    for args in (["describe", "nope"], ["verify", "nope"], ["vacuum", "nope"], ["drop", "nope"]):
        assert one_error_line(invoke(*args)) == "error: dataset 'nope' does not exist"


def test_bad_sql(invoke: Invoke, events: Path) -> None:
    line = one_error_line(invoke("sql", "SELEC count(*) FROM events"))
    assert "syntax error" in line


def test_sql_on_a_table_that_does_not_exist(invoke: Invoke, events: Path) -> None:
    line = one_error_line(invoke("sql", "SELECT * FROM nope"))
    assert "nope" in line


def test_explain_bad_sql(invoke: Invoke, events: Path) -> None:
    one_error_line(invoke("explain", "SELECT FROM WHERE", "--json"))


def test_version_that_does_not_exist(invoke: Invoke, events: Path) -> None:
    line = one_error_line(invoke("sql", "SELECT count(*) FROM events", "--version", "7"))
    assert "no version 7" in line


def test_read_commands_do_not_create_a_missing_store(invoke: Invoke, store_path: Path) -> None:
    for args in (["sql", "SELECT 1"], ["datasets"], ["describe", "x"], ["explain", "SELECT 1"],
                 ["verify", "x"], ["drop", "x", "--yes"]):
        line = one_error_line(invoke(*args))
        assert "does not exist" in line and str(store_path) in line
    assert not store_path.exists()


def test_usage_errors_exit_2(invoke: Invoke, events: Path) -> None:
    assert invoke("sql", "SELECT 1", "--format", "xml").exit_code == 2
    assert invoke("no-such-command").exit_code == 2
    assert invoke("ingest", "events").exit_code == 2


def test_ctrl_c_exits_130(invoke: Invoke, events: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(Store, "sql_reader", interrupted)
    result = invoke("sql", "SELECT 1")
    assert result.exit_code == 130
    assert result.stderr.strip() == "interrupted"


def test_unexpected_errors_are_one_line_with_a_hint(invoke: Invoke, events: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(Store, "sql_reader", broken)
    line = one_error_line(invoke("sql", "SELECT 1"))
    assert line == "error: unexpected RuntimeError: boom (rerun with --debug for the traceback)"
    debug = invoke("--debug", "sql", "SELECT 1")
    assert debug.exit_code == 1
    assert "Traceback" in debug.stderr and "RuntimeError: boom" in debug.stderr
    assert debug.stderr.rstrip().splitlines()[-1].startswith("error: unexpected RuntimeError: boom")


def test_passwords_never_appear(invoke: Invoke) -> None:
    line = one_error_line(invoke("--store", "cassandra://admin:s3cret@127.0.0.1/ks", "datasets",
                                 store=False))
    assert "s3cret" not in line
    assert "password" in line


@needs_script
def test_console_script(tmp_path: Path, events: Path) -> None:
    env = {**os.environ, "COLONNADE_STORE": str(events)}
    ok = subprocess.run([SCRIPT, "sql", "SELECT count(*) AS n FROM events", "--format", "csv"],
                        capture_output=True, text=True, env=env, timeout=120)
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, "n\n6\n", "")
    bad = subprocess.run([SCRIPT, "describe", "nope"], capture_output=True, text=True, env=env,
                         timeout=120)
    assert bad.returncode == 1
    assert bad.stderr == "error: dataset 'nope' does not exist\n"
    assert bad.stdout == ""
    version = subprocess.run([SCRIPT, "--version"], capture_output=True, text=True, timeout=120)
    assert version.returncode == 0 and version.stdout.startswith("colonnade ")
