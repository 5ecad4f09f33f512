"""Fixtures of the stream's fault tests (``store``, ``module_store`` and ``kafka_bootstrap`` come
from ``tests/conftest.py``): the store's URI for command-line runs and a working directory for
the processes' output and rejects files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from stream_helpers import kill_leftovers

from colonnade.store import Store


@pytest.fixture
def store_uri(module_store: Store) -> str:
    """The URI of the module's store (one SQLite file or Cassandra keyspace per module and
    backend: a keyspace costs seconds to create); tests use datasets of their own in it."""
    return module_store.uri


@pytest.fixture(autouse=True)
def _no_leftover_processes() -> Iterator[None]:
    """A test that failed half-way leaves no stream running."""
    yield
    kill_leftovers()


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """Where a test's processes run: their stdout/stderr files and rejects files."""
    d = tmp_path / "runs"
    d.mkdir()
    return d
