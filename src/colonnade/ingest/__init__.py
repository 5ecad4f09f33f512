"""Ingest: files (CSV/TSV, Parquet, Arrow IPC) into datasets, with bad rows caught by line.

``ingest(store, name, paths)`` creates the dataset if needed and appends each file in one commit;
``ingest_files(dataset, paths)`` appends to an existing dataset. See :mod:`.pipeline` for the
commit and idempotency rules, :mod:`.delimited` for how CSV rows are validated and located, and
:mod:`.rejects` for the quarantine file format.
"""

from colonnade.ingest.base import Reject, Source
from colonnade.ingest.pipeline import FileResult, IngestResult, ingest, ingest_files, load_schema
from colonnade.ingest.progress import NullProgress, Progress, make_progress, summary_line
from colonnade.ingest.sources import detect_format, open_source

__all__ = ["FileResult", "IngestResult", "NullProgress", "Progress", "Reject", "Source",
           "detect_format", "ingest", "ingest_files", "load_schema", "make_progress",
           "open_source", "summary_line"]
