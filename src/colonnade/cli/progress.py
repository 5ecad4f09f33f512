"""Progress on a terminal (stderr) and the one summary line of an ingest.

The ingest pipeline owns its reporter (rows, MB, rows/s, ETA) and summary wording; this module
only decides when to show it, and draws the data generator's bar for ``demo``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def ingest_progress(enabled: bool) -> Iterator[Any]:
    """The pipeline's reporter while an ingest runs: its bar on stderr when ``enabled``, else
    one that prints nothing."""
    from colonnade.ingest.progress import make_progress

    with make_progress(enabled=enabled) as progress:
        yield progress


def summary(result: Any) -> str:
    from colonnade.ingest.progress import summary_line

    return str(summary_line(result))


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
