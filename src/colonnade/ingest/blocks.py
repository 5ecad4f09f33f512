"""Reading delimited text in blocks of whole records, with the line number of each block.

:class:`BlockReader` reads a byte stream (a file, or a gzip stream) ``block_size`` bytes at a
time and hands out blocks that end on a record boundary (see :mod:`colonnade.ingest.records`),
so that pyarrow can parse each block on its own, in parallel threads, and every row of a block
can be traced back to its physical line (the first blocks are smaller, 1 MiB doubling up to the
block size, so that the first rows come early): a block knows the line its first byte is on, and where
it starts and ends in the input (for progress by bytes parsed, not bytes read ahead). The UTF-8
byte order mark is dropped and the line terminator is detected. A record whose quote never
closes is handed out alone as a *bad* block (its reason set): the line the quote opens on, when
the input ends inside the quote or when ``max_record_bytes`` pass without a record end; reading
then resumes on the next line, so one stray quote costs one row, never the rest of the file nor
more memory than ``max_record_bytes``.

A reader can also read one byte range of a file (a parallel ingest cuts files into ranges that
start on record boundaries, found by counting quotes): it is then told the range's first line
and the line terminator, and says afterwards (:attr:`BlockReader.by_parity`) whether every
record it cut ended where counting quotes says records end — if not, the cut points that
counting chose after this range may be wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import BinaryIO

import numpy as np

from colonnade.errors import BadRowError
from colonnade.ingest.records import (
    UNTERMINATED,
    UTF8_BOM,
    Cut,
    Dialect,
    cut_records,
    detect_newline,
    is_blank,
    last_record_end,
    quoted_spans,
    record_ends,
)

#: Bytes read from the input per block (pyarrow then parses a block in parallel sub-blocks).
DEFAULT_BLOCK_SIZE = 16 * 1024 * 1024

#: Bytes of the first block handed out; each next block is twice as large, up to the block size.
FIRST_BLOCK_SIZE = 1024 * 1024

#: Bytes of text the line terminator is told from.
NEWLINE_SAMPLE = 1 << 16

#: The longest record accepted: past this without a record end, its first line is a bad row.
DEFAULT_MAX_RECORD_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class Block:
    """Whole records of the input, starting on line ``first_line`` (1-based).

    ``start`` and ``stop`` are where the block begins and ends in the input file, in bytes (for
    a compressed input, an estimate proportional to the text handed out). ``bad`` is set when
    the block is one bad record (an unterminated quote), and says why."""

    data: bytearray
    first_line: int
    start: int
    stop: int
    bad: str | None = None


class BlockReader:
    """Cuts a byte stream into blocks of whole records and counts their lines.

    ``position`` tells how many bytes of the input file the stream has consumed; give it for a
    compressed stream (block positions are then estimated from it), leave it out when the stream
    is the file itself (positions are exact). For a stream that is a byte range of a file (not
    its start), give ``first_line`` (the line the range starts on), ``newline`` (the file's line
    terminator byte) and ``at_start=False`` (a byte order mark is only one at the file's start)."""

    def __init__(self, stream: BinaryIO, dialect: Dialect, path: str,
                 position: Callable[[], int] | None = None, block_size: int = DEFAULT_BLOCK_SIZE,
                 max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES, first_line: int = 1,
                 newline: int | None = None, at_start: bool = True) -> None:
        self._stream = stream
        self._position = position
        self.path = path
        self.block_size = block_size
        self.max_record_bytes = max(max_record_bytes, block_size)
        self._buf = bytearray()
        self._eof = False
        self._read = 0  # bytes of the stream read into buffers
        self.offset = 0  # bytes of the stream handed out
        self.line = first_line  # the line of the first byte not yet handed out
        #: every record so far ended where counting quotes says (no quote replayed, no bad record)
        self.by_parity = True
        self._at_start = at_start
        while len(self._buf) < NEWLINE_SAMPLE and self._fill():
            pass  # enough text to tell the line terminator (blocks can be tiny)
        if at_start and self._buf.startswith(UTF8_BOM):
            del self._buf[:len(UTF8_BOM)]
            self.offset = len(UTF8_BOM)
        if newline is None:
            newline = detect_newline(bytes(self._buf[:NEWLINE_SAMPLE]))
        self.dialect = replace(dialect, newline=newline)
        self._last_position = 0

    def _fill(self) -> bool:
        """Read one more block into the buffer; False at the end of the input.

        The block is read straight behind the buffered bytes, into a new buffer that becomes the
        data of the blocks handed out: no copy of the input but the partial record carried over."""
        if self._eof:
            return False
        kept = len(self._buf)
        buf = bytearray(kept + self.block_size)
        buf[:kept] = self._buf
        view = memoryview(buf)
        filled = kept
        while filled < len(buf):
            n = self._stream.readinto(view[filled:])  # type: ignore[attr-defined]
            if not n:
                self._eof = True
                break
            filled += n
        view.release()
        del buf[filled:]
        self._buf = buf
        self._read += filled - kept
        return filled > kept

    def _cut(self, pos: int = 0, read: bool = True) -> tuple[int, int, str | None]:
        """``(good, bad, reason)``: the buffer, from ``pos`` (a record start), holds ``good``
        bytes of whole records, then (when ``bad`` > 0) one bad record of ``bad`` bytes; reads
        on as needed (unless not ``read``). (0, 0, None) at the end of the input."""
        while True:
            buf = self._buf if pos == 0 else self._buf[pos:]
            cut = cut_records(buf, self.dialect, at_end=self._eof)
            self.by_parity = self.by_parity and cut.by_parity
            if cut.good or cut.bad or self._eof:
                return cut.good, cut.bad, self._why(buf, cut) if cut.bad else None
            if len(buf) > self.max_record_bytes:
                return 0, self._first_line(buf), (
                    f"unterminated quoted field (no closing quote within "
                    f"{self.max_record_bytes >> 20} MiB)")
            if not read:
                return 0, 0, None
            self._fill()

    def _why(self, buf: bytearray, cut: Cut) -> str:
        if cut.close < 0:
            return UNTERMINATED
        line = self.line + int(np.count_nonzero(
            np.frombuffer(buf, dtype=np.uint8, count=cut.close) == self.dialect.newline))
        return (f"unterminated quoted field (the next quote, on line {line}, is followed by text, "
                "not by a delimiter)")

    def _first_line(self, buf: bytearray) -> int:
        """Length of the first line of a record that does not end within ``max_record_bytes``."""
        newline = buf.find(bytes((self.dialect.newline,)))
        if newline < 0:
            raise BadRowError(self.path, self.line, None,
                              f"no end of line within {self.max_record_bytes >> 20} MiB")
        return newline + 1

    def _take(self, end: int, bad: str | None = None) -> Block:
        if 2 * end < len(self._buf):
            # a small block off a large buffer (the first ones, a bad record): copy the block,
            # not the rest (deleting from the front of a bytearray does not move the rest)
            data = self._buf[:end]
            del self._buf[:end]
        else:
            data, self._buf = self._buf, self._buf[end:]
            del data[end:]
        start = self._last_position
        self.offset += end
        block = Block(data, self.line, start, self._input_position(), bad)
        self._last_position = block.stop
        self.line += int(np.count_nonzero(np.frombuffer(data, dtype=np.uint8) == self.dialect.newline))
        return block

    def _input_position(self) -> int:
        """Bytes of the input file up to the end of what was handed out (never decreasing)."""
        if self._position is None:
            return self.offset
        consumed = self._position()
        if not (self._eof and not self._buf):
            # the stream read ahead of what was handed out: scale by the text handed out
            consumed = consumed * self.offset // max(self._read, 1)
        return max(self._last_position, consumed)

    def next_record(self) -> Block | None:
        """The next non-blank record on its own (for a header line); None at the end."""
        while True:
            end = self._first_record_end()
            if not end:
                return None
            block = self._take(end)
            if not is_blank(block.data):
                return block

    def _first_record_end(self) -> int:
        """Length of the first buffered record, reading on as needed (0 at the end)."""
        while True:
            ends = record_ends(self._buf, self.dialect)
            if len(ends):
                return int(ends[0]) + 1
            if len(self._buf) > self.max_record_bytes:
                raise BadRowError(self.path, self.line, None,
                                  f"no end of record within {self.max_record_bytes >> 20} MiB "
                                  "(an unterminated quoted field?)")
            if not self._fill():
                if self._buf and quoted_spans(self._buf, self.dialect).unterminated:
                    raise BadRowError(self.path, self.line, None, UNTERMINATED)
                return len(self._buf)

    def sample(self, nbytes: int) -> bytes:
        """Whole records from the start of the unread input: about ``nbytes`` of them, or fewer
        when the first block is smaller, or the first record if it is longer; without the bad
        ones (they are reported when the input is read). Nothing is consumed."""
        return b"".join(data for _, data in self.sample_parts(nbytes))

    def sample_parts(self, nbytes: int) -> list[tuple[int, bytes]]:
        """:meth:`sample` as its runs of good records, each with the line it starts on."""
        parts: list[tuple[int, bytes]] = []
        pos = size = 0
        line = self.line
        while size < nbytes:
            good, bad, _ = self._cut(pos, read=not parts)
            if not good and not bad:
                break
            take = good
            if size + good > nbytes:
                window = self._buf[pos:pos + nbytes - size]
                take = last_record_end(window, self.dialect)
                if not take:
                    ends = record_ends(self._buf[pos:pos + good], self.dialect)
                    take = int(ends[0]) + 1 if len(ends) else good
            if take:
                parts.append((line, bytes(self._buf[pos:pos + take])))
            size += take
            if take < good:
                break
            line += self._newlines(pos, pos + good + bad)
            pos += good + bad
        return parts

    def _newlines(self, start: int, stop: int) -> int:
        view = np.frombuffer(self._buf, dtype=np.uint8)[start:stop]
        return int(np.count_nonzero(view == self.dialect.newline))

    def __iter__(self) -> Iterator[Block]:
        # a range of a file (not its start) comes after others: no need for early first rows
        limit = min(FIRST_BLOCK_SIZE if self._at_start else self.block_size, self.block_size)
        while True:
            good = bad = 0
            reason: str | None = None
            if limit < self.block_size and len(self._buf) > limit:
                # blocks start small and double up to block_size: the first rows (and the first
                # progress) come after a MiB is parsed, not after the first whole block
                head = self._buf[:limit]
                cut = cut_records(head, self.dialect, at_end=False)
                self.by_parity = self.by_parity and cut.by_parity
                good, bad, reason = cut.good, cut.bad, self._why(head, cut) if cut.bad else None
            limit = min(2 * limit, self.block_size)
            if not good and not bad:
                good, bad, reason = self._cut()
            if good:
                yield self._take(good)
            if bad:
                self.by_parity = False  # reading resumes on the next line, not where parity says
                yield self._take(bad, reason)
            if not good and not bad:
                return
