"""Fixtures of the ingest tests: a scratch SQLite store and the malformed input files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from ingest_helpers import FIXTURES

import colonnade
from colonnade.store import Store


@pytest.fixture
def fixtures() -> Path:
    """The directory of the malformed input files (``tests/fixtures/malformed``)."""
    return FIXTURES


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Store]:
    """An empty SQLite store."""
    with colonnade.connect(str(tmp_path / "store.db")) as store:
        yield store
