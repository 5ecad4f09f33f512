"""A parallel ingest's plan: the input files cut into tasks that worker processes read alone.

An uncompressed CSV/TSV file is cut into byte ranges of whole records; a Parquet file into runs
of row groups; any other input (gzip text, Arrow IPC) is one task. Ranges are about
``total bytes / (4 × workers)`` long, never shorter than ``min_task_bytes``, so that the workers
stay busy to the end without paying for tiny tasks.

Cut points are found in the one pass over the file that also digests it for its source
identity: the pass counts the quote bytes and the line terminators before each point it aims at,
so it knows whether that point lies inside a quoted field (an odd number of quotes since the
rows started) and on which line; the cut is the first line terminator outside quotes from there.
Each range is then read on its own from its first line number, so errors and rejects name the
same FILE:LINE as a one-process ingest. Counting quotes is exact for RFC 4180 text; a quote that
is not where RFC 4180 puts it (``5" screen``) makes counting and reading disagree from there on,
which the reader of the range detects (``by_parity``); the coordinator then reads the rest of
that file as one task (:mod:`colonnade.ingest.parallel`).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

#: Bytes read at a time by the pass that digests a file and finds its cut points.
SCAN_CHUNK = 8 * 1024 * 1024

#: The shortest range a file is cut into (a task costs a few milliseconds to hand out and a
#: few segments more in the commit).
MIN_TASK_BYTES = 4 * 1024 * 1024

#: Tasks aimed at per worker: enough that a worker that finishes early finds more to do.
TASKS_PER_WORKER = 4


@dataclass(frozen=True)
class CsvLayout:
    """How every range of one CSV file is read: its columns (names, types) and dialect."""

    schema: pa.Schema
    delimiter: str
    quote_char: str | None
    newline: int


@dataclass(frozen=True)
class Task:
    """One piece of the input that a worker reads and writes as one part.

    ``kind``: ``range`` (bytes ``[start, stop)`` of a CSV file, rows from line ``first_line``),
    ``row_groups`` (of a Parquet file) or ``file`` (a whole file). ``nbytes``: the input bytes it
    covers (progress). ``part``: its number among its file's tasks. ``to_end``: a range that
    reads to the end of its file."""

    index: int
    file: int
    path: str
    name: str
    kind: str
    nbytes: int
    part: int = 0
    start: int = 0
    stop: int = 0
    first_line: int = 1
    to_end: bool = True
    row_groups: tuple[int, ...] = ()
    layout: CsvLayout | None = field(default=None, compare=False)

    def describe(self) -> str:
        """``a.csv bytes 1,024-2,047 (lines from 17)``, ``b.parquet row groups 2-3``, ``c.csv.gz``."""
        if self.kind == "range":
            return f"{self.name} bytes {self.start:,}-{self.stop - 1:,} (lines from {self.first_line:,})"
        if self.kind == "row_groups":
            first, last = self.row_groups[0], self.row_groups[-1]
            return f"{self.name} row group{'s' if last > first else ''} " \
                   f"{first}{f'-{last}' if last > first else ''}"
        return self.name


def task_bytes(total_bytes: int, workers: int, min_task_bytes: int = MIN_TASK_BYTES) -> int:
    """The bytes a task aims at for an input of ``total_bytes`` read by ``workers``."""
    return max(min_task_bytes, math.ceil(total_bytes / (TASKS_PER_WORKER * max(workers, 1))), 1)


@dataclass
class ScannedFile:
    """A CSV file after the scan: its digest (when asked) and its ranges
    ``(start, stop, first line)``."""

    digest: str | None
    size: int
    ranges: list[tuple[int, int, int]]


def scan_csv(path: Path, data_start: int, data_line: int, target: int, quote: int | None,
             newline: int, digest: bool = True,
             on_read: Callable[[int], None] | None = None) -> ScannedFile:
    """Read ``path`` once: its SHA-256 (when ``digest``) and its rows, from byte ``data_start``
    (on line ``data_line``), cut into ranges of about ``target`` bytes on record boundaries."""
    size = path.stat().st_size
    span = max(size - data_start, 0)
    n = max(1, min(span // max(target, 1), span))
    aims = [data_start + span * k // n for k in range(1, n)]
    h = hashlib.sha256() if digest else None
    quote_byte = bytes((quote,)) if quote is not None else None
    nl = bytes((newline,))
    cuts: list[tuple[int, int]] = []  # (offset, line)
    pos = 0  # file offset of the chunk
    quotes = 0  # quote bytes in [data_start, pos)
    lines = 1  # line of byte pos
    seeking: tuple[int, int] | None = None  # (offset to look from, quotes in [data_start, it))
    hashing: Future[None] | None = None  # the digest of the previous chunk, in a thread
    with open(path, "rb") as f, ThreadPoolExecutor(1, "colonnade-scan-digest") as digester:
        while chunk := f.read(SCAN_CHUNK):
            if h is not None:  # hashlib lets go of the GIL: digesting overlaps counting
                if hashing is not None:
                    hashing.result()
                hashing = digester.submit(h.update, chunk)
            end = pos + len(chunk)
            while True:
                if seeking is None:
                    while aims and aims[0] < max(pos, (cuts[-1][0] if cuts else data_start)):
                        aims.pop(0)  # inside a record already cut past
                    if not aims or aims[0] >= end:
                        break
                    aim = aims.pop(0)
                    seeking = (aim, quotes + _count(chunk, quote_byte, max(data_start - pos, 0),
                                                    aim - pos))
                offset, parity = seeking
                cut = _record_end(chunk, offset - pos, parity, quote_byte, nl)
                if cut is None:  # the record goes on in the next chunk
                    seeking = (end, parity + _count(chunk, quote_byte, offset - pos, len(chunk)))
                    break
                seeking = None
                if pos + cut < size:
                    cuts.append((pos + cut, lines + chunk.count(nl, 0, cut)))
            quotes += _count(chunk, quote_byte, max(data_start - pos, 0), len(chunk))
            lines += chunk.count(nl)
            pos = end
            if on_read is not None:
                on_read(pos)
        if hashing is not None:
            hashing.result()
    bounds = [(data_start, data_line), *cuts, (size, 0)]
    ranges = [(a, b, line) for (a, line), (b, _) in zip(bounds, bounds[1:], strict=False) if b > a]
    return ScannedFile(h.hexdigest() if h is not None else None, size, ranges)


def _count(chunk: bytes, quote: bytes | None, start: int, stop: int) -> int:
    if quote is None or stop <= start:
        return 0
    return chunk.count(quote, start, stop)


def _record_end(chunk: bytes, at: int, quotes: int, quote: bytes | None, nl: bytes) -> int | None:
    """One past the first line terminator at or after ``at`` outside quotes (``quotes``: quote
    bytes before ``at``); None when it is not in ``chunk``."""
    inside = quotes % 2 == 1
    i = at
    while True:
        q = chunk.find(quote, i) if quote is not None else -1
        if inside:
            if q < 0:
                return None
            inside, i = False, q + 1
            continue
        n = chunk.find(nl, i)
        if n >= 0 and (q < 0 or n < q):
            return n + 1
        if q < 0:
            return None
        inside, i = True, q + 1


def group_row_groups(sizes: list[int], target: int) -> list[tuple[int, ...]]:
    """Consecutive row groups in runs of about ``target`` bytes (at least one group each)."""
    runs: list[tuple[int, ...]] = []
    run: list[int] = []
    size = 0
    for i, nbytes in enumerate(sizes):
        run.append(i)
        size += nbytes
        if size >= target:
            runs.append(tuple(run))
            run, size = [], 0
    if run:
        runs.append(tuple(run))
    return runs


def set_identity(identities: list[str]) -> str:
    """The source identity of an input set: a digest of its files' identities, in sorted order
    (the same files given in another order are the same input)."""
    h = hashlib.sha256("\n".join(sorted(identities)).encode())
    return f"files:{len(identities)}:sha256:{h.hexdigest()}"
