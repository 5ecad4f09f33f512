"""Fixtures of the reliability suite (the ``store``/``raw_store`` fixtures come from
``tests/conftest.py``): a zygote that forks ``colonnade`` runs, the store's URI for command-line
runs, a click runner, and a tally of the crash points exercised, printed at the end."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from reliability_helpers import Invoke, Zygote, make_invoke, unique_name

from colonnade.store import Store

#: store kind -> crash kind -> crash points exercised (filled by the crash tests)
CRASHES: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))


@pytest.fixture(scope="session")
def zygote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Zygote]:
    z = Zygote(tmp_path_factory.mktemp("runs"))
    try:
        yield z
    finally:
        z.close()


@pytest.fixture
def store_uri(module_store: Store) -> str:
    """The URI of the module's store (one SQLite file or Cassandra keyspace per module and
    backend: a keyspace costs seconds to create), for command-line runs."""
    return module_store.uri


@pytest.fixture
def invoke(store_uri: str) -> Invoke:
    """``colonnade --store <the module's store> ARGS...`` in this process."""
    return make_invoke(store_uri)


@pytest.fixture
def name() -> str:
    """A dataset name no other test of the session uses (tests share their module's store)."""
    return unique_name()


@pytest.fixture
def crash_tally() -> Callable[[str, str, int], None]:
    def add(store_kind: str, crash_kind: str, n: int = 1) -> None:
        CRASHES[store_kind][crash_kind] += n

    return add


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not CRASHES:
        return
    terminalreporter.section("crash points exercised")
    for kind, counts in sorted(CRASHES.items()):
        total = sum(counts.values())
        detail = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
        terminalreporter.write_line(f"{kind}: {total} ({detail})")
    out = os.environ.get("COLONNADE_CRASH_REPORT")
    if out:
        Path(out).write_text(json.dumps({k: dict(v) for k, v in CRASHES.items()}, indent=2))
