"""Progress on a terminal (stderr): the ingest bar, the data generator's bar, the summary line.

The ingest pipeline emits events (:class:`colonnade.ingest.progress.Progress`); this module
renders them when stderr is a terminal: one bar for the whole ingest, driven by the bytes of
input parsed (not read ahead) out of the bytes of every file, with the rows handed to the
writer, rows/s, and an ETA from the rate bytes have been parsed at so far; and, while a file is
read for its digest before it is parsed, a second line with that read's own progress and ETA.
It is drawn from the start and refreshed ten times a second (~5 ms of CPU a second), and removed
when the ingest ends, before the summary line is printed on stdout.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from colonnade.ingest.progress import NullProgress, Progress

#: How often the bar is redrawn, per second.
REFRESH_PER_SECOND = 10


class ConsoleProgress(Progress):
    """A rich bar on stderr for the whole ingest: file, %, MB parsed of MB, rows, rows/s, ETA;
    and, while a file is read for its digest (before it is parsed), a line for that."""

    def __init__(self, stream: TextIO | None = None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, TextColumn
        from rich.progress import Progress as RichProgress

        console = Console(file=stream or sys.stderr)
        self._bar = RichProgress(
            TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
            TextColumn("{task.fields[detail]}"),
            console=console, transient=True, refresh_per_second=REFRESH_PER_SECOND)
        self._bar.start()
        self._task: Any = None
        self._digest: Any = None  # the line of the file being read for its digest
        self._digest_started = 0.0
        self._files = 0
        self._total = 0  # bytes of every file
        self._done = 0  # bytes of the files finished
        self._file_total = 0
        self._file_bytes = 0
        self._file_name = ""
        self._file_index = 0
        self._parsed = 0  # bytes parsed by this run (files skipped and digests not counted)
        self._rows = 0  # rows of the files finished
        self._file_rows = 0
        self._started: float | None = None  # when parsing started
        self._ready = 0.0  # when the current file was ready to be parsed (its digest read)

    def start(self, files: int, total_bytes: int) -> None:
        self._files, self._total = files, total_bytes
        self._task = self._bar.add_task("", total=max(total_bytes, 1), detail="")
        self._draw()

    def start_file(self, path: str, total_bytes: int) -> None:
        if self._task is None:  # a caller that did not announce the whole ingest
            self.start(1, total_bytes)
        self._file_index += 1
        self._file_name = path if len(path) <= 40 else "…" + path[-39:]
        self._file_total, self._file_bytes, self._file_rows = total_bytes, 0, 0
        self._ready = time.perf_counter()
        self._draw()

    def identify(self, bytes_done: int) -> None:
        now = self._ready = time.perf_counter()
        if self._digest is None:
            self._digest_started = now
            self._digest = self._bar.add_task(f"digest of {self._file_name}",
                                              total=max(self._file_total, 1), detail="")
        elapsed = now - self._digest_started
        eta = (self._file_total - bytes_done) / (bytes_done / elapsed) if elapsed > 0 else None
        self._bar.update(self._digest, completed=bytes_done, detail=(
            f"{bytes_done / 1e6:,.1f}/{self._file_total / 1e6:,.1f} MB read  {_eta(eta)}"))

    def update(self, bytes_done: int, rows: int) -> None:
        self._end_digest()
        if self._started is None:
            self._started = self._ready
        self._parsed += bytes_done - self._file_bytes
        self._file_bytes, self._file_rows = bytes_done, rows
        self._draw()

    def skip_file(self, path: str, total_bytes: int) -> None:
        self._end_digest()

    def end_file(self) -> None:
        self._end_digest()
        self._done += self._file_total
        self._rows += self._file_rows
        self._file_total = self._file_bytes = self._file_rows = 0
        self._draw()

    def _end_digest(self) -> None:
        if self._digest is not None:
            self._bar.remove_task(self._digest)
            self._digest = None

    def _draw(self) -> None:
        if self._task is None:
            return
        completed = min(self._done + self._file_bytes, self._total)
        elapsed = time.perf_counter() - self._started if self._started is not None else 0.0
        rows = self._rows + self._file_rows
        eta = None
        if self._parsed > 0 and elapsed > 0:
            eta = (self._total - completed) / (self._parsed / elapsed)
        name = self._file_name
        if self._file_total and self._file_bytes >= self._file_total:
            name = f"committing {name}"
        if self._files > 1:
            name += f" ({self._file_index}/{self._files})"
        rate = int(rows / elapsed) if elapsed > 0 else 0
        self._bar.update(self._task, completed=completed, description=name, detail=(
            f"{completed / 1e6:,.1f}/{self._total / 1e6:,.1f} MB {rows:>12,} rows "
            f"{rate:>10,} rows/s {_eta(eta)}"))

    def close(self) -> None:
        self._bar.stop()


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return "ETA -:--:--"
    s = int(round(seconds))
    return f"ETA {s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def make_progress(enabled: bool | None = None, stream: TextIO | None = None) -> Progress:
    """The console bar when ``enabled`` (default: when the stream, stderr, is a terminal)."""
    stream = stream or sys.stderr
    if enabled is None:
        enabled = stream.isatty()
    return ConsoleProgress(stream) if enabled else NullProgress()


@contextmanager
def ingest_progress(enabled: bool) -> Iterator[Progress]:
    """The pipeline's reporter while an ingest runs: the bar on stderr when ``enabled``, else
    one that prints nothing."""
    with make_progress(enabled=enabled) as progress:
        yield progress


def summary(result: Any) -> str:
    """The ingest's summary line, with the flag that appends already ingested files again."""
    from colonnade.ingest.pipeline import ALREADY_INGESTED
    from colonnade.ingest.progress import summary_line

    line = str(summary_line(result))
    if any(f.skipped == ALREADY_INGESTED for f in result.files):
        line += "; use --force to append again"
    return line


@contextmanager
def row_bar(enabled: bool, total: int, label: str) -> Iterator[Callable[[int], None]]:
    """A bar on stderr counting rows up to ``total``; yields ``update(rows_done)``."""
    if not enabled:
        yield lambda done: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda done: bar.update(task, completed=done)
