"""Record boundaries in delimited text: where a CSV record ends, and on which line it starts.

pyarrow's CSV reader parses fast but reports neither the byte offset nor the line of a row, so
the CSV source cuts the input itself into blocks that end on record boundaries, counts the lines
of each block, and — only for a block that failed to parse — splits it into records to find the
bad ones. A newline ends a record unless it lies inside a quoted field. Quoted sections are found
by quote parity (the fast, vectorised way): it is exact whenever every quote that parity says
*opens* a field stands at the start of a field (after a delimiter, a line break or another
quote), which holds for RFC 4180 files. When some quote breaks that rule (a stray ``"`` inside
an unquoted field, which pyarrow reads as a literal character), the sections are found by
replaying pyarrow's state machine over the quote positions instead. Lines are counted by the
newline byte (``\\n``, or ``\\r`` for old Mac files), so CRLF files count as expected and a line
inside a quoted field counts as a line.

A quote that opens a field and is never closed would make the rest of the input one value, and a
quote that opens a field and is "closed" by the next stray quote would swallow every line in
between (pyarrow takes both, when the column is text). :func:`cut_records` makes either one bad
record instead: the line the quote opens on, after which reading resumes on the next line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

#: Bytes to find records in: the reader's buffers, their slices and views.
Buffer = bytes | bytearray | memoryview

LF = 0x0A
CR = 0x0D
UTF8_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class Dialect:
    """The bytes that shape records: delimiter, quote (None: no quoting) and line terminator."""

    delimiter: int
    quote: int | None = 0x22
    newline: int = LF

    @classmethod
    def of(cls, delimiter: str, quote: str | None, newline: int = LF) -> Dialect:
        return cls(ord(delimiter), ord(quote) if quote else None, newline)


class QuotedSpans:
    """Quoted sections of a buffer, as the sorted offsets of their opening and closing quotes
    (``open0, close0, open1, close1, ...``; an odd count means the last section is never
    closed). A byte is quoted when an odd number of these offsets lie before it. ``replayed``:
    the sections were found by replaying pyarrow's rules, not by quote parity (some quote does
    not stand where parity would put it: counting quotes does not tell these sections)."""

    def __init__(self, bounds: np.ndarray, replayed: bool = False) -> None:
        self.bounds = bounds
        self.replayed = replayed

    @property
    def unterminated(self) -> bool:
        """True when the last section has no closing quote (it runs to the end of the buffer)."""
        return len(self.bounds) % 2 == 1

    @property
    def last_open(self) -> int:
        """Offset of the opening quote of the last section (-1 when there is none)."""
        n = len(self.bounds)
        return int(self.bounds[n - 1 if n % 2 else n - 2]) if n else -1

    def inside(self, positions: np.ndarray) -> np.ndarray:
        """Which of the ``positions`` (offsets of non-quote bytes) fall inside a quoted section."""
        if not len(self.bounds):
            return np.zeros(len(positions), dtype=bool)
        return (np.searchsorted(self.bounds, positions, side="right") & 1).astype(bool)

    def opening(self, position: int) -> int:
        """Offset of the opening quote of the section that holds ``position`` (which is quoted)."""
        return int(self.bounds[int(np.searchsorted(self.bounds, position, side="right")) - 1])


_NO_SPANS = QuotedSpans(np.empty(0, dtype=np.intp))


def quoted_spans(buf: Buffer, dialect: Dialect) -> QuotedSpans:
    """The quoted sections of ``buf``, which must start on a record boundary."""
    if dialect.quote is None:
        return _NO_SPANS
    arr = np.frombuffer(buf, dtype=np.uint8)
    quotes = np.flatnonzero(arr == dialect.quote)
    if not len(quotes):
        return _NO_SPANS
    # parity is exact when every quote it takes for an opening one starts a field
    opens = quotes[0::2]
    if opens[0] == 0:
        opens = opens[1:]
    if bool(_bounding_bytes(dialect)[arr[opens - 1]].all()):
        return QuotedSpans(quotes)
    return _replayed_spans(buf, quotes.tolist(), dialect)


def scan_quotes(buf: Buffer, dialect: Dialect) -> tuple[QuotedSpans, int]:
    """The quoted sections of ``buf`` (as :func:`quoted_spans` finds them), and the number of
    the first one whose closing quote is followed by text rather than a delimiter, a line end or
    another quote (-1: none)."""
    spans = quoted_spans(buf, dialect)
    if not len(spans.bounds):
        return spans, -1
    arr = np.frombuffer(buf, dtype=np.uint8)
    closes = spans.bounds[1::2]
    if len(closes) and closes[-1] == len(arr) - 1:
        closes = closes[:-1]
    wrong = ~_bounding_bytes(dialect)[arr[closes + 1]]
    return spans, int(np.argmax(wrong)) if wrong.any() else -1


def _bounding_bytes(dialect: Dialect) -> np.ndarray:
    """Which bytes may stand before an opening quote and after a closing one."""
    table = np.zeros(256, dtype=bool)
    table[[dialect.delimiter, LF, CR]] = True
    if dialect.quote is not None:
        table[dialect.quote] = True
    return table


def _replayed_spans(buf: Buffer, quotes: list[int], dialect: Dialect) -> QuotedSpans:
    """pyarrow's quoting rules, replayed quote by quote: a quote opens a field only at the start
    of a field; inside, a doubled quote is a literal quote and a single one closes the field
    (what follows up to the delimiter is unquoted text, where quotes are literal)."""
    data = bytes(buf) if isinstance(buf, memoryview) else buf
    field_start = {dialect.delimiter, LF, CR}
    bounds: list[int] = []
    inside = False
    i, n = 0, len(quotes)
    while i < n:
        p = quotes[i]
        if inside:
            if i + 1 < n and quotes[i + 1] == p + 1:
                i += 2  # "" inside a quoted field: a literal quote
                continue
            bounds.append(p)
            inside = False
        elif p == 0 or data[p - 1] in field_start:
            bounds.append(p)
            inside = True
        i += 1
    return QuotedSpans(np.asarray(bounds, dtype=np.intp), replayed=True)


def record_ends(buf: Buffer, dialect: Dialect,
                spans: QuotedSpans | None = None) -> np.ndarray:
    """Offsets of the newline bytes that end records in ``buf`` (which starts a record)."""
    arr = np.frombuffer(buf, dtype=np.uint8)
    newlines = np.flatnonzero(arr == dialect.newline)
    spans = quoted_spans(buf, dialect) if spans is None else spans
    if not len(spans.bounds):
        return newlines
    return newlines[~spans.inside(newlines)]


def last_record_end(buf: bytes | bytearray, dialect: Dialect) -> int:
    """Length of the longest prefix of ``buf`` made of whole records (0 when there is none)."""
    newline = bytes((dialect.newline,))
    end = buf.rfind(newline)
    if end < 0:
        return 0
    if dialect.quote is None or buf.find(bytes((dialect.quote,)), 0, end) < 0:
        return end + 1
    spans = quoted_spans(buf, dialect)
    while end >= 0:
        if not bool(spans.inside(np.asarray([end]))[0]):
            return end + 1
        end = buf.rfind(newline, 0, spans.opening(end))
    return 0


#: Why the record of a quote that is never closed is bad.
UNTERMINATED = "unterminated quoted field (no closing quote before the end of the file)"


class Cut(NamedTuple):
    """Where :func:`cut_records` cuts a buffer: ``good`` bytes of whole records, then (when
    ``bad`` > 0) one bad record of ``bad`` bytes, whose field quote is closed by the quote at
    offset ``close`` — one followed by text, not by a delimiter — or never (``close`` -1).
    ``by_parity``: the records of the buffer (as far as it was looked at) end where counting
    quotes says they do (false when a quote was replayed, see :class:`QuotedSpans`)."""

    good: int
    bad: int = 0
    close: int = -1
    by_parity: bool = True


def cut_records(buf: bytes | bytearray, dialect: Dialect, at_end: bool) -> Cut:
    """Cut ``buf`` (which starts a record) into whole records and, at the first quoted field that
    is not properly closed, one bad record: the line its quote opens on (from the start of its
    record). The bad record is cut off so that reading resumes on the next line, as though the
    quote were not there: one stray quote costs one row, not every row up to the next quote.

    A field is not properly closed when its closing quote is followed by text rather than a
    delimiter, a line end or a doubled quote (RFC 4180; pyarrow would glue that text on and read
    on), or, at the end of the input (``at_end``), when no quote closes it. Before the end, the
    good part ends on the last whole record (0 when no record ends in ``buf``)."""
    newline = bytes((dialect.newline,))
    last = buf.rfind(newline)
    if dialect.quote is None or buf.find(bytes((dialect.quote,))) < 0:
        return Cut(len(buf) if at_end else last + 1)
    spans, broken = scan_quotes(buf, dialect)
    parity = not spans.replayed
    if broken >= 0:
        opening, close = int(spans.bounds[2 * broken]), int(spans.bounds[2 * broken + 1])
    elif at_end and spans.unterminated:
        opening, close = spans.last_open, -1
    else:
        opening = -1
    if opening < 0:
        return Cut(len(buf) if at_end else _last_end(buf, spans, last, newline), by_parity=parity)
    start = _last_end(buf, spans, buf.rfind(newline, 0, opening), newline)
    stop = buf.find(newline, opening)
    if stop < 0:
        if not at_end:
            return Cut(start, by_parity=parity)  # the line goes on past the buffer
        stop = len(buf) - 1
    return Cut(start, stop + 1 - start, close, by_parity=parity)


def _last_end(buf: bytes | bytearray, spans: QuotedSpans, end: int, newline: bytes) -> int:
    """One past the last newline at or before offset ``end`` (a newline) that ends a record;
    0 when there is none."""
    while end >= 0:
        if not bool(spans.inside(np.asarray([end]))[0]):
            return end + 1
        end = buf.rfind(newline, 0, spans.opening(end))
    return 0


def detect_newline(head: bytes) -> int:
    """The line terminator byte: ``\\n`` unless the text has none but has ``\\r`` (old Mac)."""
    if LF not in head and CR in head:
        return CR
    return LF


def is_blank(record: Buffer) -> bool:
    """A record that holds nothing but its line terminator (pyarrow skips those)."""
    return not bytes(record).strip(b"\r\n")
