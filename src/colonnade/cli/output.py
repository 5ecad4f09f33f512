"""How the command line prints: answers on stdout, notes and progress on stderr.

Tables are drawn with rich when stdout is a terminal (fitted to its width) and as aligned plain
text otherwise (so pipes and files get stable, greppable output); ``--json`` output is plain
JSON in which dates, times, decimals, intervals and binary values are strings and non-finite
floats are ``null``. Query answers are written by ``answers.py``.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
import sys
import unicodedata
import uuid
from collections.abc import Iterable, Sequence
from typing import IO, Any

import click

#: What ``sql --format`` writes; the binary ones go to a file or a pipe, never a terminal.
ANSWER_FORMATS = ("table", "csv", "json", "jsonl", "parquet", "arrow")
BINARY_FORMATS = frozenset({"parquet", "arrow"})


def stdout_is_tty() -> bool:
    return sys.stdout.isatty()


def stderr_is_tty() -> bool:
    return sys.stderr.isatty()


def note(message: str) -> None:
    """A log line for people: stderr, so stdout stays data."""
    click.echo(message, err=True)


def plural(n: int, word: str) -> str:
    """``1 row``, ``2 rows``, ``1,000 rows``."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


# -- JSON -----------------------------------------------------------------------------------
def iso_duration(months: int, days: int, nanoseconds: int) -> str:
    """An interval as an ISO 8601 duration: ``P1Y2M3DT4H5M6.5S``; each part carries its own
    sign, as PostgreSQL's ``iso_8601`` style writes them (``P-1M3D``); zero is ``PT0S``."""
    years = int(months / 12)  # toward zero
    parts = [f"{v}{unit}" for v, unit in ((years, "Y"), (months - 12 * years, "M"), (days, "D")) if v]
    sign = "-" if nanoseconds < 0 else ""
    hours, rest = divmod(abs(nanoseconds), 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    seconds, fraction = divmod(rest, 1_000_000_000)
    clock = [f"{sign}{v}{unit}" for v, unit in ((hours, "H"), (minutes, "M")) if v]
    if seconds or fraction:
        text = f"{seconds}.{fraction:09d}".rstrip("0").rstrip(".")
        clock.append(f"{sign}{text}S")
    if not parts and not clock:
        return "PT0S"
    return "P" + "".join(parts) + ("T" + "".join(clock) if clock else "")


def _interval(value: Any) -> str | None:
    """``value`` as an ISO 8601 duration if it is an interval (``timedelta`` or Arrow's
    ``MonthDayNano``), else None."""
    if isinstance(value, dt.timedelta):
        micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
        days = int(micros / 86_400_000_000)
        return iso_duration(0, days, (micros - days * 86_400_000_000) * 1000)
    if type(value).__name__ == "MonthDayNano":
        return iso_duration(value.months, value.days, value.nanoseconds)
    return None


def jsonable(value: Any) -> Any:
    """``value`` with every leaf turned into something ``json.dumps`` writes as valid JSON."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    interval = _interval(value)
    if interval is not None:
        return interval
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    return str(value)


def echo_json(value: Any) -> None:
    click.echo(json.dumps(jsonable(value), indent=2, ensure_ascii=False))


# -- cells and tables -----------------------------------------------------------------------
def cell(value: Any) -> str:
    """One value as table text (NULL for nulls, ISO dates, shortest round-trip floats)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat(sep=" ") if isinstance(value, dt.datetime) else value.isoformat()
    if isinstance(value, bytes | bytearray):
        return "0x" + bytes(value).hex()
    interval = _interval(value)
    if interval is not None:
        return interval
    return str(value)


def _numeric(values: Iterable[Any]) -> bool:
    seen = False
    for v in values:
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int | float | decimal.Decimal):
            return False
        seen = True
    return seen


def print_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None) -> None:
    """A table of values: rich on a terminal, aligned plain text otherwise."""
    right = [_numeric(r[i] for r in rows) for i in range(len(columns))]
    print_text_table(columns, [[cell(v) for v in row] for row in rows], right, title=title)


def print_text_table(columns: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool],
                     title: str | None = None, out: IO[str] | None = None) -> None:
    """A table of cells already turned into text, ``right`` saying which columns are right-aligned.

    On a terminal (``out`` None and stdout a TTY) rich draws it to the terminal's width: a cell
    that doesn't fit is cut with an ellipsis, never folded onto more lines. Otherwise the text is
    complete and aligned by display width (a CJK character takes two columns)."""
    if out is None and stdout_is_tty():
        _print_rich_table(columns, rows, right, title)
        return
    widths = [max([display_width(c)] + [display_width(r[i]) for r in rows]) for i, c in enumerate(columns)]

    def line(values: Sequence[str]) -> str:
        parts = [_pad(v, w, r) for v, w, r in zip(values, widths, right, strict=True)]
        return "  ".join(parts).rstrip()

    lines = [title] if title else []
    lines.append(line(list(columns)))
    lines.append("  ".join("-" * w for w in widths))
    lines.extend(line(values) for values in rows)
    if out is None:
        for text in lines:
            click.echo(text)
    else:
        out.write("".join(text + "\n" for text in lines))


def _print_rich_table(columns: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool],
                      title: str | None) -> None:
    from rich import box
    from rich.cells import cell_len
    from rich.console import Console
    from rich.table import Table

    console = Console()
    values = [max([0] + [cell_len(r[i]) for r in rows]) for i in range(len(columns))]
    natural = [max(cell_len(c), v) for c, v in zip(columns, values, strict=True)]
    # a number cut short would read as another number: numbers keep their width, text is cut
    least = [v if r else min(n, 3) for n, v, r in zip(natural, values, right, strict=True)]
    shown = _columns_that_fit([max(m, min(n, 6)) for n, m in zip(natural, least, strict=True)],
                              console.width)
    widths = fit_widths(natural[:shown], console.width - _around(shown), least[:shown])
    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
    for name, r, width in zip(columns, right, widths, strict=False):
        table.add_column(name, justify="right" if r else "left", width=width, overflow="ellipsis",
                         no_wrap=True)
    for row in rows:
        table.add_row(*row[:shown])
    console.print(table)
    if shown < len(columns):
        note(f"({shown} of {len(columns)} columns shown: the others don't fit the terminal's "
             f"{console.width} columns)")


def _around(ncolumns: int) -> int:
    """What a table's box takes besides its cells: both edges, a separator between columns and
    one space of padding either side of every cell."""
    return 2 + max(ncolumns - 1, 0) + 2 * ncolumns


def _columns_that_fit(readable: Sequence[int], width: int) -> int:
    """How many columns, from the left, fit ``width`` at their ``readable`` widths; at least one."""
    used = 0
    for n, w in enumerate(readable):
        used += w
        if used + _around(n + 1) > width:
            return max(n, 1)
    return len(readable)


def fit_widths(natural: Sequence[int], available: int, least: Sequence[int] | None = None) -> list[int]:
    """Column widths that fit ``available`` columns of text: the widest columns give way first
    (all of them are cut to one common width, the largest that fits), none below its ``least``
    width (default: 3, or its natural width if smaller). When even that doesn't fit, the
    terminal cuts the right end."""
    widths = list(natural)
    if sum(widths) <= available:
        return widths
    floor = list(least) if least is not None else [min(w, 3) for w in widths]
    if sum(floor) >= available:
        return floor
    lo, hi = 0, max(widths)  # the largest cap whose total fits
    while lo < hi:
        cap = (lo + hi + 1) // 2
        if sum(max(f, min(w, cap)) for w, f in zip(widths, floor, strict=True)) <= available:
            lo = cap
        else:
            hi = cap - 1
    fitted = [max(f, min(w, lo)) for w, f in zip(widths, floor, strict=True)]
    spare = available - sum(fitted)
    for i, w in enumerate(widths):  # what is left goes to the cut columns, left to right
        if spare <= 0:
            break
        if fitted[i] < w:
            fitted[i] += 1
            spare -= 1
    return fitted


def display_width(text: str) -> int:
    """Terminal columns ``text`` takes: 2 for East Asian wide characters, 0 for combining marks."""
    if text.isascii():
        return len(text)
    width = 0
    for ch in text:
        if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
            continue
        width += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return width


def _pad(text: str, width: int, right: bool) -> str:
    fill = " " * (width - display_width(text))
    return fill + text if right else text + fill


def print_pairs(pairs: Sequence[tuple[str, Any]]) -> None:
    """``key: value`` lines, keys aligned."""
    width = max((len(k) for k, _ in pairs), default=0)
    for k, v in pairs:
        click.echo(f"{k + ':':<{width + 1}} {cell(v)}")


# -- sizes ------------------------------------------------------------------------------------
def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError


def human_time(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch).strftime("%Y-%m-%d %H:%M:%S")
