"""Ingest: files (CSV/TSV, Parquet, Arrow IPC) into datasets, with bad rows caught by line.

``ingest(store, name, paths)`` creates the dataset if needed and appends each file in one commit;
``ingest_files(dataset, paths)`` appends to an existing dataset. ``ingest(..., workers=N)``
writes the files with N processes in one commit (:mod:`.parallel`: the plan in :mod:`.tasks`,
the processes in :mod:`.pool` and :mod:`.worker`); :mod:`.arrow_stream` appends an Arrow IPC
stream (standard input) in one commit. See :mod:`.pipeline` for the commit and idempotency rules, :mod:`.delimited` for how CSV rows are validated and located,
:mod:`.rejects` for the quarantine file format, :mod:`.progress` for the events a progress
display is driven by, and :mod:`.interrupts` for what Ctrl-C reports.

The names below are imported when first used, so that importing a light submodule (the
progress events, for the command line's bar) does not import pyarrow.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from colonnade.ingest.base import Reject, Source
    from colonnade.ingest.inference import SchemaWarning
    from colonnade.ingest.interrupts import IngestInterrupted
    from colonnade.ingest.pipeline import (
        FileResult,
        IngestResult,
        ingest,
        ingest_files,
        load_schema,
    )
    from colonnade.ingest.progress import NullProgress, Progress, summary_line
    from colonnade.ingest.sources import detect_format, open_source

_WHERE = {
    "Reject": "base", "Source": "base", "SchemaWarning": "inference",
    "IngestInterrupted": "interrupts", "FileResult": "pipeline", "IngestResult": "pipeline",
    "ingest": "pipeline", "ingest_files": "pipeline", "load_schema": "pipeline",
    "NullProgress": "progress", "Progress": "progress", "summary_line": "progress",
    "detect_format": "sources", "open_source": "sources",
}

__all__ = ["FileResult", "IngestInterrupted", "IngestResult", "NullProgress", "Progress",
           "Reject", "SchemaWarning", "Source", "detect_format", "ingest", "ingest_files",
           "load_schema", "open_source", "summary_line"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
