"""Progress of an ingest: a live bar on a terminal, silence elsewhere, one summary line at the end.

The pipeline tells a :class:`Progress` when a file starts, how many bytes of it have been consumed
and how many rows produced, and when it ends. :func:`make_progress` picks the console bar when
stderr is a terminal (rows, MB of input read, rows/s, and an ETA by bytes of input consumed) and
:class:`NullProgress` otherwise, so logs and pipes stay clean. Either way the caller prints
:func:`summary_line` once the ingest returns; that line is data about the run, not a log line.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from colonnade.ingest.pipeline import FileResult, IngestResult


class Progress:
    """What the pipeline reports to; this base class reports nowhere."""

    def start_file(self, path: str, total_bytes: int) -> None:
        """A file of ``total_bytes`` bytes starts."""

    def update(self, bytes_done: int, rows: int) -> None:
        """So far, ``bytes_done`` bytes of the current file consumed and ``rows`` rows read."""

    def end_file(self) -> None:
        """The current file is done (committed, skipped or failed)."""

    def close(self) -> None:
        """The ingest is over."""

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class NullProgress(Progress):
    """No output while running (stderr is not a terminal, or progress was turned off)."""


class ConsoleProgress(Progress):
    """A rich progress bar on stderr: rows, MB read, rows/s and ETA by bytes of input."""

    def __init__(self, stream: TextIO | None = None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, TextColumn, TimeRemainingColumn
        from rich.progress import Progress as RichProgress

        console = Console(file=stream or sys.stderr)
        self._bar = RichProgress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(binary_units=False),
            TextColumn("{task.fields[rows]:>13,} rows"),
            TextColumn("{task.fields[rate]:>11,} rows/s"),
            TimeRemainingColumn(),
            console=console, transient=True)
        self._bar.start()
        self._task: int | None = None
        self._started = 0.0

    def start_file(self, path: str, total_bytes: int) -> None:
        name = path if len(path) <= 40 else "…" + path[-39:]
        self._task = self._bar.add_task(name, total=max(total_bytes, 1), rows=0, rate=0)
        self._started = time.perf_counter()

    def update(self, bytes_done: int, rows: int) -> None:
        if self._task is None:
            return
        elapsed = time.perf_counter() - self._started
        rate = int(rows / elapsed) if elapsed > 0 else 0
        self._bar.update(self._task, completed=bytes_done, rows=rows, rate=rate)  # type: ignore[arg-type]

    def end_file(self) -> None:
        if self._task is not None:
            self._bar.remove_task(self._task)  # type: ignore[arg-type]
            self._task = None

    def close(self) -> None:
        self._bar.stop()


def make_progress(enabled: bool | None = None, stream: TextIO | None = None) -> Progress:
    """The console bar when ``enabled`` (default: when the stream, stderr, is a terminal)."""
    stream = stream or sys.stderr
    if enabled is None:
        enabled = stream.isatty()
    return ConsoleProgress(stream) if enabled else NullProgress()


def summary_line(result: IngestResult) -> str:
    """One line on what an ingest did, e.g. ``ingested 1,000,000 rows from 1 file into gdelt
    (v3) in 4.2 s: 238,095 rows/s, 0 rejected``."""
    committed = [f for f in result.files if f.version is not None]
    skipped = [f for f in result.files if f.skipped]
    nfiles = len(committed)
    if not committed:
        if len(skipped) == 1:
            return f"{skipped[0].path}: {skipped[0].skipped}"
        return (f"nothing ingested into {result.dataset}: {len(skipped)} files skipped "
                f"({_reasons(skipped)}), 0 rows added")
    versions = [f.version for f in committed if f.version is not None]
    at = f"v{versions[0]}" if len(versions) == 1 else f"v{min(versions)}-v{max(versions)}"
    line = (f"ingested {result.rows:,} rows from {nfiles} file{'s' if nfiles != 1 else ''} "
            f"into {result.dataset} ({at}) in {result.seconds:.1f} s: "
            f"{result.rows_per_second:,.0f} rows/s, {result.rejected:,} rejected")
    rejects = sorted({f.rejects for f in result.files if f.rejects})
    if rejects:
        line += f" (see {', '.join(rejects)})"
    if skipped:
        line += f"; {len(skipped)} skipped ({_reasons(skipped)})"
    return line


def _reasons(skipped: list[FileResult]) -> str:
    reasons: dict[str, int] = {}
    for f in skipped:
        key = str(f.skipped).split(",")[0]
        reasons[key] = reasons.get(key, 0) + 1
    return ", ".join(f"{n} {r}" if n > 1 else r for r, n in reasons.items())
