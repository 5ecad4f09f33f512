"""Fixtures of the command-line tests: a scratch SQLite store, a small dataset written through
the Python API (so these tests don't depend on the ingest pipeline), and a runner."""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner, Result

import colonnade
from colonnade.cli.main import cli

Invoke = Callable[..., Result]

EVENTS_SCHEMA = pa.schema([
    ("id", pa.int64()), ("region", pa.string()), ("day", pa.date32()),
    ("amount", pa.float64()), ("price", pa.decimal128(6, 2)),
])


def events_table() -> pa.Table:
    """Six rows in three regions (partitions): north 3, south 2, west 1."""
    return pa.table({
        "id": [1, 2, 3, 4, 5, 6],
        "region": ["north", "north", "north", "south", "south", "west"],
        "day": [dt.date(2024, 1, d) for d in (1, 2, 3, 4, 5, 6)],
        "amount": [1.5, 2.5, None, 10.0, 20.0, 100.25],
        "price": pa.array([Decimal(f"{i}.00") for i in range(1, 7)], pa.decimal128(6, 2)),
    }, schema=EVENTS_SCHEMA)


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


@pytest.fixture
def invoke(store_path: Path) -> Invoke:
    """Run ``colonnade --store <tmp store> ARGS...``; exceptions the CLI lets escape fail the test."""
    runner = CliRunner()

    def run(*args: str, input: str | None = None, store: bool = True,
            env: dict[str, str | None] | None = None) -> Result:
        argv = (["--store", str(store_path)] if store else []) + list(args)
        return runner.invoke(cli, argv, input=input, env=env, catch_exceptions=False)

    return run


@pytest.fixture
def events(store_path: Path) -> Path:
    """Dataset ``events`` (partitioned by region) at version 1 in the scratch store."""
    with colonnade.connect(str(store_path)) as store:
        ds = store.create_dataset("events", EVENTS_SCHEMA, partition_by="region")
        ds.append(events_table())
    return store_path


@pytest.fixture
def new_events() -> Callable[[], pa.Table]:
    """The rows of ``events`` again, for tests that append them."""
    return events_table


@pytest.fixture
def corrupt() -> Callable[[Path, str], str]:
    return corrupt_one_chunk


def corrupt_one_chunk(path: Path, column: str) -> str:
    """Flip one byte in the middle of one stored chunk of ``column``; returns its segment id."""
    con = sqlite3.connect(path)
    try:
        segment, data = con.execute(
            "SELECT segment, data FROM chunks WHERE column_name = ? ORDER BY segment LIMIT 1",
            (column,)).fetchone()
        damaged = bytearray(data)
        damaged[len(damaged) // 2] ^= 0xFF
        con.execute("UPDATE chunks SET data = ? WHERE segment = ? AND column_name = ?",
                    (bytes(damaged), segment, column))
        con.commit()
    finally:
        con.close()
    return str(segment)
