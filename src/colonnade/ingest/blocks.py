"""Reading delimited text in blocks of whole records, with the line number of each block.

:class:`BlockReader` reads a byte stream (a file, or a gzip stream) ``block_size`` bytes at a
time and hands out blocks that end on a record boundary (see :mod:`colonnade.ingest.records`),
so that pyarrow can parse each block on its own, in parallel threads, and every row of a block
can be traced back to its physical line: a block knows the line its first byte is on. The UTF-8
byte order mark is dropped, the line terminator is detected, and a record that does not end
within ``max_record_bytes`` (an unterminated quote, a binary file) is an error rather than a
reason to read the whole file into memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import BinaryIO

import numpy as np

from colonnade.errors import BadRowError
from colonnade.ingest.records import UTF8_BOM, Dialect, detect_newline, is_blank, last_record_end

#: Bytes read from the input per block (pyarrow then parses a block in parallel sub-blocks).
DEFAULT_BLOCK_SIZE = 16 * 1024 * 1024

#: The longest record accepted: past this without a record end, the input is refused.
DEFAULT_MAX_RECORD_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class Block:
    """Whole records of the input, starting on line ``first_line`` (1-based)."""

    data: bytearray
    first_line: int
    position: int  # bytes of input consumed once this block was read


class BlockReader:
    """Cuts a byte stream into blocks of whole records and counts their lines."""

    def __init__(self, stream: BinaryIO, dialect: Dialect, path: str,
                 position: Callable[[], int], block_size: int = DEFAULT_BLOCK_SIZE,
                 max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> None:
        self._stream = stream
        self._position = position
        self.path = path
        self.block_size = block_size
        self.max_record_bytes = max(max_record_bytes, block_size)
        self._buf = bytearray()
        self._eof = False
        self.line = 1  # the line of the first byte not yet handed out
        self._fill()
        if self._buf.startswith(UTF8_BOM):
            del self._buf[:len(UTF8_BOM)]
        self.dialect = replace(dialect, newline=detect_newline(bytes(self._buf[:1 << 20])))

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
        return filled > kept

    def _whole_records(self) -> int:
        """Length of the buffered whole records, reading on until there is one (0 at the end)."""
        while True:
            end = len(self._buf) if self._eof else last_record_end(self._buf, self.dialect)
            if end:
                return end
            if len(self._buf) > self.max_record_bytes:
                raise BadRowError(self.path, self.line, None,
                                  f"no end of record within {self.max_record_bytes >> 20} MiB "
                                  "(an unterminated quoted field?)")
            if not self._fill() and not self._buf:
                return 0

    def _take(self, end: int) -> Block:
        data, self._buf = self._buf, self._buf[end:]
        del data[end:]
        block = Block(data, self.line, self._position())
        self.line += int(np.count_nonzero(np.frombuffer(data, dtype=np.uint8) == self.dialect.newline))
        return block

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
        newline = bytes((self.dialect.newline,))
        start = 0
        while True:
            nl = self._buf.find(newline, start)
            if nl < 0:
                if self._fill():
                    continue
                return len(self._buf)
            if last_record_end(self._buf[:nl + 1], self.dialect) == nl + 1:
                return nl + 1
            start = nl + 1
            if start > self.max_record_bytes:
                raise BadRowError(self.path, self.line, None,
                                  f"no end of record within {self.max_record_bytes >> 20} MiB "
                                  "(an unterminated quoted field?)")

    def sample(self, nbytes: int) -> bytes:
        """Whole records from the start of the unread input, about ``nbytes`` of them."""
        end = last_record_end(self._buf[:nbytes], self.dialect) if len(self._buf) > nbytes else 0
        if not end:
            end = self._whole_records()
        return bytes(self._buf[:end])

    def __iter__(self) -> Iterator[Block]:
        while True:
            end = self._whole_records()
            if not end:
                return
            yield self._take(end)
