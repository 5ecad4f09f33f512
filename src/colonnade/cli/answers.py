"""Query answers written while they stream out of DuckDB, batch by batch.

``csv``, ``json``, ``jsonl``, ``parquet`` and ``arrow`` never hold more than a batch of the
answer (text is encoded a column at a time by ``encode.py``); ``table`` needs every row to
size its columns, so it collects the answer's text first. Several answers (a script of several
statements) follow one another: tables and CSV separated by a blank line, one JSON array each,
JSON lines simply continue; Parquet and Arrow files hold one answer.

This module imports pyarrow at its top: only the ``sql`` command imports it, when it runs.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import click
import pyarrow as pa

from colonnade.cli.encode import cells, column_text, is_numeric, join_rows, slices
from colonnade.cli.output import (
    BINARY_FORMATS,
    note,
    plural,
    print_text_table,
    stderr_is_tty,
    stdout_is_tty,
)
from colonnade.errors import ColonnadeError


class OutputError(ColonnadeError):
    """An answer can't be written in the format asked for."""


class AnswerWriter:
    """Writes the answers of one command, one after another, in one format to one output."""

    def __init__(self, fmt: str, out: IO[bytes], to_terminal: bool) -> None:
        self.fmt = fmt
        self.out = out
        self.to_terminal = to_terminal  # stdout is a terminal (rich tables, row counts)
        self.answers = 0

    def write(self, reader: pa.RecordBatchReader) -> int:
        """Write one answer; returns its number of rows."""
        first = self.answers == 0
        self.answers += 1
        if self.fmt == "table":
            return self._table(reader, first)
        if self.fmt == "csv":
            return _write_csv(reader, self.out, first)
        if self.fmt in ("json", "jsonl"):
            return _write_json(reader, self.out, lines=self.fmt == "jsonl")
        if not first:
            raise OutputError(f"a {self.fmt} file holds one answer; run one query at a time")
        return _write_binary(reader, self.out, self.fmt)

    def _table(self, reader: pa.RecordBatchReader, first: bool) -> int:
        names = list(reader.schema.names)
        right = [is_numeric(f.type) for f in reader.schema]
        columns: list[list[str]] = [[] for _ in names]
        for batch in reader:
            for values, array in zip(columns, batch.columns, strict=True):
                values.extend(cells(array))
        rows = list(zip(*columns, strict=True)) if names else []
        if self.to_terminal:
            if not first:
                click.echo()
            print_text_table(names, rows, right)
            note(f"({plural(len(rows), 'row')})")
        else:
            text = io.StringIO()
            if not first:
                text.write("\n")
            print_text_table(names, rows, right, out=text)
            self.out.write(text.getvalue().encode("utf-8"))
        return len(rows)


def _write_csv(reader: pa.RecordBatchReader, out: IO[bytes], first: bool) -> int:
    header = io.StringIO()
    if not first:
        header.write("\n")
    csv.writer(header, lineterminator="\n").writerow(reader.schema.names)
    out.write(header.getvalue().encode("utf-8"))
    rows = 0
    for batch in reader:
        for piece in slices(batch):
            fields: list[pa.Array | str] = []
            for i, array in enumerate(piece.columns):
                fields += [",", column_text(array, "csv")] if i else [column_text(array, "csv")]
            if fields:
                out.write(join_rows([*fields, "\n"], "csv"))
            rows += piece.num_rows
    return rows


def _write_json(reader: pa.RecordBatchReader, out: IO[bytes], lines: bool) -> int:
    """JSON lines (one object a line), or one JSON array of objects, one object a line."""
    keys = [json.dumps(name, ensure_ascii=False) + ": " for name in reader.schema.names]
    if not lines:
        out.write(b"[")
    rows = 0
    for batch in reader:
        for piece in slices(batch):
            parts: list[pa.Array | str] = ["{" if lines else ",\n{"]
            for i, (key, array) in enumerate(zip(keys, piece.columns, strict=True)):
                parts += [(", " if i else "") + key, column_text(array, "json")]
            parts.append("}\n" if lines else "}")
            text = join_rows(parts, "json") if keys else memoryview(((parts[0] + "}") * piece.num_rows).encode())
            out.write(text[1:] if not lines and rows == 0 else text)  # no comma before the first
            rows += piece.num_rows
    if not lines:
        out.write(b"\n]\n" if rows else b"]\n")
    return rows


def _write_binary(reader: pa.RecordBatchReader, out: IO[bytes], fmt: str) -> int:
    rows = 0
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            with pq.ParquetWriter(out, reader.schema) as parquet:
                for batch in reader:
                    parquet.write_batch(batch)
                    rows += batch.num_rows
        else:
            with pa.ipc.new_file(out, reader.schema) as arrow:
                for batch in reader:
                    arrow.write_batch(batch)
                    rows += batch.num_rows
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise OutputError(f"can't write this answer as {fmt}: {exc}") from None
    return rows


@contextlib.contextmanager
def answer_output(path: Path | None, fmt: str) -> Iterator[AnswerWriter]:
    """A writer to ``path``, or to stdout. A file appears only once every answer is written
    (a failed query leaves no truncated file behind); binary formats refuse a terminal."""
    if path is None:
        if fmt in BINARY_FORMATS and stdout_is_tty():
            raise OutputError(f"{fmt} is binary: write it to a file with --output FILE "
                              "(or redirect stdout)")
        sys.stdout.flush()
        writer = AnswerWriter(fmt, sys.stdout.buffer, to_terminal=stdout_is_tty())
        yield writer
        sys.stdout.buffer.flush()
        return
    path = path.expanduser()
    if path.exists() and not path.is_file():  # /dev/stdout, a FIFO: write in place
        with open(path, "wb") as out:
            yield AnswerWriter(fmt, out, to_terminal=False)
        return
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        with open(partial, "wb") as out:
            writer = AnswerWriter(fmt, out, to_terminal=False)
            yield writer
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def report_written(path: Path | None, rows: int, answers: int) -> None:
    """A note on stderr (on a terminal) of what went to ``--output``."""
    if path is not None and stderr_is_tty():
        what = plural(rows, "row") + (f" in {answers} answers" if answers > 1 else "")
        note(f"wrote {what} to {path}")
