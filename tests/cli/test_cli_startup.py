"""Start-up of the real console script: what it imports, and Ctrl-C while it loads.

Wall-clock limits would be flaky on a shared machine, so these tests check the mechanism: the
modules a run imports (``python -X importtime`` lists every one), and that an interrupt at any
point of loading ends quietly.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

PYTHON = sys.executable
COLONNADE = str(Path(PYTHON).with_name("colonnade"))
HEAVY = ("pyarrow", "duckdb", "pandas", "numpy", "cassandra", "rich", "matplotlib")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLONNADE_")}
    env.pop("COLUMNS", None)
    return env


#: Runs the console script as it is installed, then writes the names of the modules it loaded.
_RUN_AND_LIST_MODULES = """
import atexit, runpy, sys
listing, script = sys.argv[1], sys.argv[2]
def dump():
    with open(listing, "w") as f:
        f.write("\\n".join(sorted(sys.modules)))
atexit.register(dump)
sys.argv = sys.argv[2:]
runpy.run_path(script, run_name="__main__")
"""


def imported_by(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``colonnade ARGS`` (stdout a pipe); its result and the top-level packages it loaded."""
    listing = tmp_path / "modules.txt"
    proc = subprocess.run([PYTHON, "-c", _RUN_AND_LIST_MODULES, str(listing), COLONNADE, *args],
                          capture_output=True, text=True, env=_env(), timeout=120)
    modules = {name.split(".")[0] for name in listing.read_text().split()}
    return proc, modules


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["sql", "--help"], ["ingest", "--help"]])
def test_version_and_help_import_nothing_heavy(tmp_path: Path, args: list[str]) -> None:
    proc, modules = imported_by(tmp_path, *args)
    assert proc.returncode == 0, proc.stderr
    assert "colonnade" in modules and "click" in modules
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))


def test_import_colonnade_imports_no_pyarrow() -> None:
    code = ("import sys, colonnade; heavy = [m for m in sys.modules if m.split('.')[0] in "
            f"{HEAVY!r}]; print(heavy); assert colonnade.Store.__name__ == 'Store'")
    proc = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_sql_on_sqlite_imports_no_pandas_cassandra_or_rich(tmp_path: Path, events: Path) -> None:
    proc, modules = imported_by(tmp_path, "--store", str(events), "sql", "SELECT region, count(*) AS n "
                                "FROM events WHERE amount > 2 GROUP BY region ORDER BY region")
    assert proc.returncode == 0, proc.stderr
    assert "north" in proc.stdout and "south" in proc.stdout
    assert {"pyarrow", "duckdb"} <= modules  # it did run the query
    assert not modules & {"pandas", "cassandra", "rich", "matplotlib"}, modules


def test_pandas_works_fully_after_a_query_that_did_not_load_it(events: Path) -> None:
    """The query path keeps pandas out, yet pyarrow's pandas support is intact afterwards
    (a categorical keeps its dictionary type, a DataFrame is recognised)."""
    code = f"""
import sys, colonnade
store = colonnade.connect({str(events)!r})
n = store.sql("SELECT count(*) AS n FROM events").column("n")[0].as_py()
assert "pandas" not in sys.modules
import pandas as pd, pyarrow as pa
assert pa.array(pd.Series(pd.Categorical(["a", "b", "a"]))).type.value_type in (pa.string(), pa.large_string())
assert pa.types.is_dictionary(pa.array(pd.Series(pd.Categorical(["a"]))).type)
assert pa.table(pd.DataFrame({{"x": [1, 2]}})).num_rows == 2
assert store.dataset("events").scan().to_pandas().shape == (6, 5)
print(n)
"""
    proc = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "6"


def _interrupt_when_loaded(module: str, args: list[str]) -> subprocess.CompletedProcess[str]:
    """Run ``colonnade ARGS``, sending SIGINT as soon as ``module`` has been imported."""
    proc = subprocess.Popen([PYTHON, "-X", "importtime", COLONNADE, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=_env())
    assert proc.stderr is not None and proc.stdout is not None
    lines: list[str] = []
    sent = threading.Event()

    def watch() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            loaded = line.startswith("import time:") and line.rsplit("|", 1)[-1].strip() == module
            if loaded and not sent.is_set():
                proc.send_signal(signal.SIGINT)
                sent.set()

    reader = threading.Thread(target=watch)
    reader.start()
    stdout = proc.stdout.read()
    proc.wait(timeout=120)
    reader.join(timeout=30)
    assert sent.is_set(), f"{module} was never imported"
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, "".join(lines))


# From the first module the console script loads inside its guard (colonnade.errors) to the
# heavy ones a query loads. Python's own start-up and the two tiny package __init__ files run
# before any Python code can catch an interrupt: a Ctrl-C there is Python's business.
@pytest.mark.parametrize("module", ["colonnade.errors", "click.core", "click",
                                    "colonnade.cli.context", "colonnade.cli.output",
                                    "colonnade.cli.commands", "pyarrow", "duckdb"])
def test_ctrl_c_while_loading_prints_no_traceback(events: Path, module: str) -> None:
    started = time.monotonic()
    result = _interrupt_when_loaded(module, ["--store", str(events), "sql", "SELECT count(*) FROM events"])
    errors = [line for line in result.stderr.splitlines() if not line.startswith("import time:")]
    assert "Traceback" not in result.stderr, "\n".join(errors)
    assert result.returncode in (0, 130), (result.returncode, errors)
    if result.returncode == 130:
        assert errors in ([], ["interrupted"], ["", "interrupted"]), errors
    assert time.monotonic() - started < 60


# Python turns an exception raised while a class is built (a dataclass field's __set_name__,
# where a Ctrl-C once landed) into a RuntimeError caused by it: still an interrupt.
WRAPPED_INTERRUPT = """
import sys, colonnade.cli as cli
class Interrupting:
    def find_spec(self, name, path, target=None):
        if name == "colonnade.cli.main":
            class Field:
                def __set_name__(self, owner, name):
                    raise KeyboardInterrupt
            type("StoreURI", (), {"password": Field()})
        return None
sys.meta_path.insert(0, Interrupting())
cli.run()
"""


def test_ctrl_c_wrapped_by_class_creation_ends_quietly() -> None:
    proc = subprocess.run([PYTHON, "-c", WRAPPED_INTERRUPT], capture_output=True, text=True,
                          timeout=60, env=_env())
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 130, (proc.returncode, proc.stderr)


def test_is_interrupt_follows_causes_only() -> None:
    from colonnade.cli import is_interrupt

    wrapped = RuntimeError("Error calling __set_name__")
    wrapped.__cause__ = KeyboardInterrupt()
    twice = ValueError("outer")
    twice.__cause__ = wrapped
    assert is_interrupt(KeyboardInterrupt()) and is_interrupt(wrapped) and is_interrupt(twice)
    handled = RuntimeError("raised while handling a Ctrl-C, not because of it")
    handled.__context__ = KeyboardInterrupt()
    assert not is_interrupt(handled) and not is_interrupt(RuntimeError("plain"))
    loop = RuntimeError("a cycle of causes")
    loop.__cause__ = loop
    assert not is_interrupt(loop)
