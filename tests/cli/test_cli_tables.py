"""Tables of ``colonnade sql``: fitted to a real terminal (a pseudo-terminal of a set width) with
cells cut by an ellipsis, and aligned by display width (CJK) in plain output."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import unicodedata
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

PYTHON = sys.executable
COLONNADE = str(Path(PYTHON).with_name("colonnade"))
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

WIDE = ("SELECT 1 AS id, 'a fairly long text that does not fit in sixty columns at all' AS long_text, "
        "TIMESTAMP '2024-01-31 12:34:56.123456' AS a_timestamp_column, '中文字符中文字符中文字符' AS cjk, "
        "3.5 AS amount UNION ALL SELECT 22, 'short', NULL, 'ab', 10.25 ORDER BY id")


def width(text: str) -> int:
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
               for c in text)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLONNADE_")}
    for name in ("COLUMNS", "LINES", "NO_COLOR"):
        env.pop(name, None)
    env["TERM"] = "xterm-256color"
    return env


def on_terminal(*args: str, columns: int = 60, stderr_too: bool = False) -> tuple[int, str, str]:
    """Run ``colonnade ARGS`` with stdout (and stderr, if asked) on a terminal ``columns`` wide;
    returns (status, terminal text without colours, stderr)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    proc = subprocess.Popen([COLONNADE, *args], stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=slave if stderr_too else subprocess.PIPE, env=_env())
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the terminal closed: the program is done
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    err = proc.stderr.read().decode() if proc.stderr else ""
    proc.wait(timeout=120)
    return proc.returncode, ANSI.sub("", b"".join(chunks).decode().replace("\r\n", "\n")), err


@pytest.mark.parametrize("columns", [60, 45, 120])
def test_terminal_tables_fit_the_width_and_cut_cells_with_an_ellipsis(events: Path, columns: int) -> None:
    status, text, err = on_terminal("--store", str(events), "sql", WIDE, columns=columns)
    assert status == 0, err
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    assert all(width(line) <= columns for line in lines), lines
    # header, rule, two rows: nothing folded onto extra lines, no column dropped
    assert len(lines) == 4, lines
    header, _, first, second = lines
    assert header.split()[0] == "id" and first.split()[0] == "1" and second.split()[0] == "22"
    assert "…" in text
    assert first.rstrip().endswith("3.50") and second.rstrip().endswith("10.25")  # last column shown
    assert err == "(2 rows)\n"


def test_terminal_tables_align_columns_after_wide_characters(events: Path) -> None:
    query = "SELECT * FROM (VALUES ('中文', 1), ('abc', 22), ('한국어텍스트', 333)) t(name, n)"
    status, text, err = on_terminal("--store", str(events), "sql", query, columns=80)
    assert status == 0, err
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    ends = {width(line) for line in lines[2:]}  # right-aligned numbers end in one column
    assert len(ends) == 1, lines


def test_terminal_tables_show_the_columns_that_fit_and_never_cut_numbers(events: Path) -> None:
    numbers = ", ".join(f"{1234567 * (i + 1)} AS column_number_{i}" for i in range(30))
    status, text, err = on_terminal("--store", str(events), "sql", f"SELECT {numbers}, 'text' AS t",
                                    columns=60)
    assert status == 0, err
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    assert all(width(line) <= 60 for line in lines), lines
    assert len(lines) == 3
    values = lines[2].split()
    assert values == [str(1234567 * (i + 1)) for i in range(len(values))]  # whole numbers only
    assert 2 <= len(values) < 31
    assert err == f"({len(values)} of 31 columns shown: the others don't fit the terminal's 60 columns)\n(1 row)\n"


def test_plain_tables_align_by_display_width(events: Path) -> None:
    query = "SELECT * FROM (VALUES ('中文', 1, 'x'), ('abc', 22, 'y'), ('한국어텍스트', 333, 'z')) t(name, n, tag)"
    env = _env()
    env["COLUMNS"] = "20"  # plain output is complete whatever the width
    result = subprocess.run([COLONNADE, "--store", str(events), "sql", query], capture_output=True,
                            text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "name            n  tag",
        "------------  ---  ---",
        "中文            1  x",
        "abc            22  y",
        "한국어텍스트  333  z",
    ]


def test_one_row_is_one_row(events: Path, tmp_path: Path) -> None:
    status, text, _ = on_terminal("--store", str(events), "sql", "SELECT 1 AS a", stderr_too=True)
    assert status == 0
    assert "(1 row)" in text and "rows" not in text
    out = tmp_path / "one.csv"
    status, text, _ = on_terminal("--store", str(events), "sql", "--format", "csv", "--output", str(out),
                                  "SELECT 1 AS a", stderr_too=True)
    assert status == 0
    assert text.strip() == f"wrote 1 row to {out}"
    assert out.read_text() == "a\n1\n"


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
def test_binary_formats_refuse_a_terminal(events: Path, fmt: str) -> None:
    status, text, err = on_terminal("--store", str(events), "sql", "--format", fmt, "SELECT 1 AS a")
    assert status == 1
    assert text == ""
    assert err == f"error: {fmt} is binary: write it to a file with --output FILE (or redirect stdout)\n"


@pytest.mark.parametrize(("natural", "available", "fitted"), [
    ([2, 10, 30], 60, [2, 10, 30]),  # fits: unchanged
    ([2, 59, 26, 24, 4], 60, [2, 18, 18, 18, 4]),  # the widest give way first, to one width
    ([10, 10, 10], 6, [3, 3, 3]),  # never below 3 characters (the terminal cuts the rest)
    ([1, 40], 20, [1, 19]),
    ([10, 10, 11], 25, [9, 8, 8]),
])
def test_fit_widths(natural: list[int], available: int, fitted: list[int]) -> None:
    from colonnade.cli.output import fit_widths

    assert fit_widths(natural, available) == fitted
    assert fit_widths([10, 40], 20, least=[10, 3]) == [10, 10]  # a number keeps its width
    if sum(natural) > available and sum(min(n, 3) for n in natural) < available:
        assert sum(fitted) == available
