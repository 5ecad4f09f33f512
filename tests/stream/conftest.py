"""Fixtures of the stream's fault tests (``store``, ``module_store`` and ``kafka_bootstrap`` come
from ``tests/conftest.py``): the store's URI for command-line runs and a working directory for
the processes' output and rejects files."""

from __future__ import annotations

from pathlib import Path

import pytest

from colonnade.store import Store


@pytest.fixture
def store_uri(module_store: Store) -> str:
    """The URI of the module's store (one SQLite file or Cassandra keyspace per module and
    backend: a keyspace costs seconds to create); tests use datasets of their own in it."""
    return module_store.uri


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """Where a test's processes run: their stdout/stderr files and rejects files."""
    d = tmp_path / "runs"
    d.mkdir()
    return d
