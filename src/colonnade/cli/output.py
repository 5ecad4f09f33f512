"""How the command line prints: answers on stdout, notes and progress on stderr.

Tables are drawn with rich when stdout is a terminal and as aligned plain text otherwise (so
pipes and files get stable, greppable output); ``--json`` output is plain JSON in which dates,
times, decimals and binary values are strings and non-finite floats are ``null``.
"""

from __future__ import annotations

import base64
import csv
import datetime as dt
import decimal
import json
import math
import sys
import uuid
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    import pyarrow as pa


def stdout_is_tty() -> bool:
    return sys.stdout.isatty()


def stderr_is_tty() -> bool:
    return sys.stderr.isatty()


def note(message: str) -> None:
    """A log line for people: stderr, so stdout stays data."""
    click.echo(message, err=True)


# -- JSON -----------------------------------------------------------------------------------
def jsonable(value: Any) -> Any:
    """``value`` with every leaf turned into something ``json.dumps`` writes as valid JSON."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID | dt.timedelta):
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
    if stdout_is_tty():
        from rich import box
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
        for name, r in zip(columns, right, strict=True):
            table.add_column(name, justify="right" if r else "left", overflow="fold")
        for row in rows:
            table.add_row(*(cell(v) for v in row))
        Console().print(table)
        return
    text = [[cell(v) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in text]) for i, c in enumerate(columns)]

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, widths, right, strict=True)]
        return "  ".join(parts).rstrip()

    if title:
        click.echo(title)
    click.echo(line(list(columns)))
    click.echo("  ".join("-" * w for w in widths))
    for values in text:
        click.echo(line(values))


def print_pairs(pairs: Sequence[tuple[str, Any]]) -> None:
    """``key: value`` lines, keys aligned."""
    width = max((len(k) for k, _ in pairs), default=0)
    for k, v in pairs:
        click.echo(f"{k + ':':<{width + 1}} {cell(v)}")


# -- Arrow answers ----------------------------------------------------------------------------
def print_arrow(table: pa.Table, fmt: str) -> None:
    """An answer in ``table``, ``csv`` or ``json`` form."""
    names = list(table.column_names)
    if fmt == "json":
        echo_json(table.to_pylist())
        return
    # by position, not by name: an answer may repeat a column name
    rows = list(zip(*(c.to_pylist() for c in table.columns), strict=True)) if names else []
    if fmt == "csv":
        out = sys.stdout
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(names)
        for row in rows:
            writer.writerow([_csv_value(v) for v in row])
        out.flush()
    else:
        print_table(names, rows)
        if stdout_is_tty():
            note(f"({table.num_rows} row{'s' if table.num_rows != 1 else ''})")


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return cell(value)
    if isinstance(value, dict | list):
        return json.dumps(jsonable(value))
    return value


# -- sizes ------------------------------------------------------------------------------------
def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError


def human_time(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch).strftime("%Y-%m-%d %H:%M:%S")
