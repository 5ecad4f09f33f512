"""The rejects file: every row a quarantine-mode ingest left out, with where it was and why.

Format: JSON Lines, one object per rejected row, in input order::

    {"file": "events.csv", "line": 17, "column": "price", "reason": "cannot parse 'abc' as int32", "raw": "17,abc,2024-01-02"}

``line`` is the 1-based physical line the row starts on (the header is line 1); ``column`` is
null when the row as a whole is wrong (a wrong number of fields); ``raw`` is the row's text
without its line terminator (bytes that are not UTF-8 appear as ``\\xNN``). JSON rather than
TSV because the raw text may itself hold tabs, quotes and line breaks. By default the file is
``<input>.rejects.jsonl`` beside each input; it is created (or overwritten) only when a row is
rejected, so a clean ingest leaves no file behind.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TextIO

from colonnade.ingest.base import Reject

REJECTS_SUFFIX = ".rejects.jsonl"


def default_rejects_path(input_path: Path) -> Path:
    """``<input>.rejects.jsonl`` beside the input file."""
    return input_path.with_name(input_path.name + REJECTS_SUFFIX)


class RejectsFile:
    """Appends rejected rows to one JSON Lines file, opened (truncated) at the first row."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.count = 0
        self._file: TextIO | None = None

    def write(self, reject: Reject) -> None:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 - closed by close()
        self._file.write(json.dumps(reject.to_dict(), ensure_ascii=False) + "\n")
        self.count += 1

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def read_rejects(path: Path) -> list[dict[str, object]]:
    """The rows of a rejects file (for tests and tools)."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
