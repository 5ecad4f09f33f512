"""Inputs and checks of the parallel ingest tests (a plain module: ``conftest`` names clash).

The CSV files are made to be cut badly: a third of their records hold a quoted field with line
breaks, delimiters and doubled quotes, so that many of the points a file is cut near fall
inside a quoted field."""

from __future__ import annotations

import datetime as dt
import gzip
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from colonnade.store import Store

PYTHON = sys.executable
COLONNADE = str(Path(PYTHON).with_name("colonnade"))
ROOT = Path(__file__).resolve().parent.parent.parent

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("x", pa.float64()),
                    ("day", pa.date32())])

#: DuckDB's reading of the files, the same columns.
DUCK_COLUMNS = "{'id': 'BIGINT', 'name': 'VARCHAR', 'x': 'DOUBLE', 'day': 'DATE'}"

#: Small ranges: the test files (tens of KB) are cut into dozens of tasks.
TASK_BYTES = 1500


def name_of(i: int, nl: str) -> str:
    """The ``name`` field of row ``i`` as CSV text."""
    if i % 3 == 0:
        return f'"line one, {i}{nl}line ""two""{nl}three"'
    if i % 3 == 1:
        return f'"a,b;{i}"'
    return f"plain{i}"


def name_value(i: int, nl: str) -> str:
    """The ``name`` of row ``i`` as stored."""
    if i % 3 == 0:
        return f'line one, {i}{nl}line "two"{nl}three'
    if i % 3 == 1:
        return f"a,b;{i}"
    return f"plain{i}"


def write_csv(path: Path, ids: Iterable[int], crlf: bool = False,
              bad: Mapping[int, str] | None = None, compress: bool = False) -> Path:
    """Rows ``id,name,x,day`` under a header; ``bad`` replaces the x field of some rows."""
    nl = "\r\n" if crlf else "\n"
    lines = ["id,name,x,day"]
    for i in ids:
        x = (bad or {}).get(i, f"{i * 0.25}")
        lines.append(f"{i},{name_of(i, nl)},{x},{dt.date(2024, 1, 1) + dt.timedelta(days=i % 300)}")
    data = (nl.join(lines) + nl).encode()
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def rows_table(ids: Iterable[int], nl: str = "\n") -> pa.Table:
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [name_value(i, nl) for i in ids],
                     "x": pa.array([i * 0.25 for i in ids], pa.float64()),
                     "day": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i % 300) for i in ids],
                                     pa.date32())}, schema=SCHEMA)


def write_parquet(path: Path, ids: Iterable[int], row_group_rows: int = 300) -> Path:
    pq.write_table(rows_table(ids), path, row_group_size=row_group_rows)
    return path


def dataset_rows(store: Store, name: str) -> list[dict[str, object]]:
    return store.sql(f"SELECT id, name, x, day FROM {name} ORDER BY id").to_pylist()


def duckdb_rows(csvs: Iterable[Path], parquets: Iterable[Path] = ()) -> list[dict[str, object]]:
    """The files' rows as DuckDB's own readers read them."""
    parts = [f"SELECT id, name, x, day FROM read_csv('{p}', header = true, columns = {DUCK_COLUMNS})"
             for p in csvs]
    parts += [f"SELECT id, name, x, day FROM read_parquet('{p}')" for p in parquets]
    con = duckdb.connect()
    return con.sql(" UNION ALL ".join(parts) + " ORDER BY id").to_arrow_table().to_pylist()


def cli(argv: list[str], env: Mapping[str, str] | None = None, timeout: float = 300,
        stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """The real console script, with the test process's COLONNADE_* settings left out."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("COLONNADE_")}
    full.update(env or {})
    return subprocess.run([COLONNADE, *argv], capture_output=True, env=full, timeout=timeout,
                          input=stdin, cwd=str(ROOT))


def popen(argv: list[str], env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("COLONNADE_")}
    full.update(env or {})
    return subprocess.Popen([COLONNADE, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=full, cwd=str(ROOT))


def descendants(pid: int) -> list[int]:
    """The processes ``pid`` started, and those they started (Linux; the workers of a parallel
    ingest are children of its fork server)."""
    found: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return found
    for task in tasks:
        try:
            kids = [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
        for kid in kids:
            found += [kid, *descendants(kid)]
    return found


def state(pid: int) -> str:
    """A process's state letter (``T`` stopped, ``S`` sleeping, ...); ``X`` when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "X"
