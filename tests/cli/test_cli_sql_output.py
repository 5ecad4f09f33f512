"""``colonnade sql`` answers through the real console script: CSV, JSON, JSON lines, Parquet and
Arrow streamed batch by batch, checked against DuckDB's own answer; a closed pipe; ``--output``.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import math
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from colonnade.store import Store

PYTHON = sys.executable
COLONNADE = str(Path(PYTHON).with_name("colonnade"))

MIXED_SCHEMA = pa.schema([
    ("id", pa.int64()), ("name", pa.string()), ("x", pa.float64()), ("day", pa.date32()),
    ("at", pa.timestamp("us")), ("ok", pa.bool_()), ("price", pa.decimal128(9, 3)), ("n", pa.int32()),
])
#: More rows than one streamed batch (65,536), so answers arrive in several batches.
MIXED_ROWS = 70_000
TEXT = ["plain", "comma, inside", 'quote " inside', "line\nbreak", "cr\rreturn", "", " spaced ",
        "héllo", "中文字符", "tab\there", "back\\slash", "'single'", ";semi;"]
FLOATS = [0.0, -0.0, 4.0, 2.5, 1e20, 1e-7, -123.456, 0.1, float("nan"), float("inf"), float("-inf")]


def mixed_table(rows: int = MIXED_ROWS, seed: int = 7) -> pa.Table:
    rng = random.Random(seed)
    day0 = dt.datetime(2024, 1, 1, 0, 0, 0)

    def maybe(value: Any) -> Any:
        return None if rng.random() < 0.1 else value

    return pa.table({
        "id": list(range(rows)),
        "name": [maybe(rng.choice(TEXT)) for _ in range(rows)],
        "x": [maybe(rng.choice(FLOATS) if rng.random() < 0.5 else rng.uniform(-1e6, 1e6)) for _ in range(rows)],
        "day": [maybe(dt.date(2000, 1, 1) + dt.timedelta(days=rng.randrange(20000))) for _ in range(rows)],
        "at": [maybe(day0 + dt.timedelta(seconds=rng.randrange(10**7),
                                         microseconds=rng.choice([0, 500, 123456]))) for _ in range(rows)],
        "ok": [maybe(rng.random() < 0.5) for _ in range(rows)],
        "price": [maybe(Decimal(rng.randrange(-10**8, 10**8)) / 1000) for _ in range(rows)],
        "n": [maybe(rng.randrange(-2**31, 2**31)) for _ in range(rows)],
    }, schema=MIXED_SCHEMA)


@pytest.fixture(scope="module")
def mixed(module_store: Store) -> Store:
    """Dataset ``mixed`` (every column type the conventions cover; nulls; awkward text)."""
    if "mixed" not in module_store:
        module_store.create_dataset("mixed", MIXED_SCHEMA).append(mixed_table())
    return module_store


def colonnade(store: Store | Path | str, *args: str, input: str | None = None) -> subprocess.CompletedProcess[bytes]:
    uri = store.uri if isinstance(store, Store) else str(store)
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLONNADE_")}
    return subprocess.run([COLONNADE, "--store", uri, *args], capture_output=True, env=env, timeout=300,
                          input=None if input is None else input.encode())


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b) and type(a) is type(b)


def assert_same_rows(got: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert g.keys() == e.keys()
        bad = {k: (g[k], e[k]) for k in g if not same(g[k], e[k])}
        assert not bad, (e["id"], bad)


QUERY = "SELECT * FROM mixed ORDER BY id"


# -- CSV ----------------------------------------------------------------------------------------
def test_csv_read_back_by_duckdb_equals_duckdbs_answer(mixed: Store, tmp_path: Path) -> None:
    result = colonnade(mixed, "sql", "--format", "csv", QUERY)
    assert result.returncode == 0, result.stderr
    assert result.stderr == b""
    path = tmp_path / "answer.csv"
    path.write_bytes(result.stdout)
    types = {"id": "BIGINT", "name": "VARCHAR", "x": "DOUBLE", "day": "DATE", "at": "TIMESTAMP",
             "ok": "BOOLEAN", "price": "DECIMAL(9,3)", "n": "INTEGER"}
    # quoted empty fields are empty strings, unquoted ones NULL: the convention of the output
    read = duckdb.sql(f"SELECT * FROM read_csv('{path}', header = true, columns = {types}, "
                      "allow_quoted_nulls = false, quote = '\"', escape = '\"', strict_mode = false)")
    assert read is not None
    expected = mixed.sql(QUERY).to_pylist()
    assert_same_rows(read.to_arrow_table().to_pylist(), expected)


def test_csv_fields_are_quoted_only_when_needed(events: Path) -> None:
    query = ("SELECT 'a,b' AS s, '' AS e, NULL AS n, 'x\"y' AS q, 'plain' AS p, 4.0::DOUBLE AS f, "
             "true AS b, DATE '2024-01-31' AS d, TIMESTAMP '2024-01-31 12:00:00' AS t, "
             "TIMESTAMP '2024-01-31 12:00:00.5' AS t2, 2.50::DECIMAL(5,2) AS m")
    result = colonnade(events, "sql", "--format", "csv", query)
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode() == ('s,e,n,q,p,f,b,d,t,t2,m\n'
                                      '"a,b","",,"x""y",plain,4.0,true,2024-01-31,2024-01-31 12:00:00,'
                                      '2024-01-31 12:00:00.500000,2.50\n')


# -- JSON ---------------------------------------------------------------------------------------
def _json_expected(value: Any) -> Any:
    """What the JSON conventions make of a Python value of DuckDB's answer."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    return value


def test_json_is_one_array_equal_to_duckdbs_answer(mixed: Store) -> None:
    result = colonnade(mixed, "sql", "--format", "json", QUERY)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(b"[\n{") and result.stdout.endswith(b"}\n]\n")
    got = json.loads(result.stdout)
    expected = [{k: _json_expected(v) for k, v in row.items()} for row in mixed.sql(QUERY).to_pylist()]
    assert_same_rows(got, expected)


def test_jsonl_is_one_object_a_line(mixed: Store) -> None:
    result = colonnade(mixed, "sql", "--format", "jsonl", QUERY)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().split("\n")
    assert lines[-1] == ""  # every line ends with a newline
    assert len(lines) - 1 == MIXED_ROWS
    rows = [json.loads(line) for line in lines[:-1]]
    assert [r["id"] for r in rows] == list(range(MIXED_ROWS))
    expected = [{k: _json_expected(v) for k, v in row.items()} for row in mixed.sql(QUERY).to_pylist()]
    assert_same_rows(rows, expected)


def test_empty_answers(events: Path) -> None:
    query = "SELECT id FROM events WHERE id < 0"
    for fmt, text in (("json", b"[]\n"), ("jsonl", b""), ("csv", b"id\n")):
        result = colonnade(events, "sql", "--format", fmt, query)
        assert (result.returncode, result.stdout, result.stderr) == (0, text, b"")


INTERVALS = ("SELECT INTERVAL '1 day 2 hours' AS a, INTERVAL '500 milliseconds' AS b, "
             "INTERVAL '-1 month 3 days' AS c, INTERVAL '0 seconds' AS d, "
             "INTERVAL '14 months 1 minute 1.25 seconds' AS e, [INTERVAL '1 hour'] AS l")


def test_intervals_are_iso_8601_durations(events: Path) -> None:
    want = {"a": "P1DT2H", "b": "PT0.5S", "c": "P-1M3D", "d": "PT0S", "e": "P1Y2MT1M1.25S",
            "l": ["PT1H"]}
    json_answer = colonnade(events, "sql", "--format", "json", INTERVALS)
    assert json_answer.returncode == 0, json_answer.stderr
    assert json.loads(json_answer.stdout) == [want]
    assert json.loads(colonnade(events, "sql", "--format", "jsonl", INTERVALS).stdout) == want
    csv_answer = colonnade(events, "sql", "--format", "csv", INTERVALS).stdout.decode()
    assert csv_answer == 'a,b,c,d,e,l\nP1DT2H,PT0.5S,P-1M3D,PT0S,P1Y2MT1M1.25S,"[""PT1H""]"\n'
    table = colonnade(events, "sql", INTERVALS).stdout.decode().splitlines()
    assert table[2].split() == ["P1DT2H", "PT0.5S", "P-1M3D", "PT0S", "P1Y2MT1M1.25S", '["PT1H"]']


# -- a closed pipe ------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["csv", "jsonl", "json", "table"])
def test_head_closing_the_pipe_ends_quietly_with_status_0(mixed: Store, fmt: str) -> None:
    line = f"{COLONNADE} --store '{mixed.uri}' sql --format {fmt} '{QUERY}' | head -1"
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLONNADE_")}
    result = subprocess.run(["bash", "-o", "pipefail", "-c", line], capture_output=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stderr == b""
    first = result.stdout.decode()
    assert first.count("\n") == 1
    assert first.lstrip().startswith({"csv": "id,name,x,", "jsonl": '{"id": 0, ', "json": "[", "table": "id"}[fmt])


# -- binary formats and --output ----------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
def test_binary_formats_round_trip_through_a_file(mixed: Store, tmp_path: Path, fmt: str) -> None:
    path = tmp_path / f"answer.{fmt}"
    result = colonnade(mixed, "sql", "--format", fmt, "--output", str(path), QUERY)
    assert result.returncode == 0, result.stderr
    assert result.stdout == b""
    got = pq.read_table(path) if fmt == "parquet" else pa.ipc.open_file(path).read_all()
    expected = mixed.sql(QUERY)
    assert got.schema == expected.schema
    assert_same_rows(got.to_pylist(), expected.to_pylist())  # (NaN: Table.equals says NaN != NaN)
    assert list(tmp_path.iterdir()) == [path]  # no partial file left beside it


def test_arrow_to_a_pipe(events: Path) -> None:
    result = colonnade(events, "sql", "--format", "arrow", "SELECT id, region FROM events ORDER BY id")
    assert result.returncode == 0, result.stderr
    table = pa.ipc.open_file(pa.BufferReader(result.stdout)).read_all()
    assert table.column("id").to_pylist() == [1, 2, 3, 4, 5, 6]


def test_a_binary_file_holds_one_answer(events: Path, tmp_path: Path) -> None:
    path = tmp_path / "two.parquet"
    result = colonnade(events, "sql", "--format", "parquet", "--output", str(path), "SELECT 1; SELECT 2")
    assert result.returncode == 1
    assert result.stderr.decode().startswith("error: a parquet file holds one answer")
    assert not path.exists()


@pytest.mark.parametrize("fmt", ["csv", "json", "table"])
def test_output_file_for_text_formats(events: Path, tmp_path: Path, fmt: str) -> None:
    path = tmp_path / f"answer.{fmt}"
    query = "SELECT region, count(*) AS n FROM events GROUP BY region ORDER BY region"
    to_file = colonnade(events, "sql", "--format", fmt, "--output", str(path), query)
    assert to_file.returncode == 0, to_file.stderr
    assert to_file.stdout == b""
    assert path.read_bytes() == colonnade(events, "sql", "--format", fmt, query).stdout


def test_a_failing_query_leaves_no_output_file(events: Path, tmp_path: Path, corrupt: Any) -> None:
    segment = corrupt(events, "amount")
    (tmp_path / "out").mkdir()
    path = tmp_path / "out" / "answer.csv"
    result = colonnade(events, "sql", "--format", "csv", "--output", str(path), "SELECT * FROM events")
    assert result.returncode == 1
    line = result.stderr.decode().strip()
    assert line.startswith("error: corrupt chunk") and segment in line and "\n" not in line
    assert list(path.parent.iterdir()) == []


# -- streaming: each batch is written before the next is read -----------------------------------
class _Sink(io.RawIOBase):
    """A binary output that records how many batches had been read when data arrived."""

    def __init__(self, pulled: list[int]) -> None:
        self.pulled = pulled
        self.seen: list[int] = []

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.seen.append(self.pulled[0])
        return len(memoryview(data))


@pytest.mark.parametrize("fmt", ["csv", "json", "jsonl", "parquet", "arrow"])
def test_answers_are_written_batch_by_batch(fmt: str) -> None:
    from colonnade.cli.answers import AnswerWriter

    table = mixed_table(rows=3000)
    pulled = [0]

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in table.to_batches(max_chunksize=1000):
            pulled[0] += 1
            yield batch

    sink = _Sink(pulled)
    writer = AnswerWriter(fmt, sink, to_terminal=False)  # type: ignore[arg-type]
    assert writer.write(pa.RecordBatchReader.from_batches(table.schema, batches())) == 3000
    # data of the first batch went out before the second batch was read, and so on
    assert 1 in sink.seen and 2 in sink.seen and sink.seen == sorted(sink.seen)
