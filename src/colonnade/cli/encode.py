"""Arrow columns as text, a whole column at a time: the cells of CSV, JSON and table output.

Each column of a record batch becomes one string array of ready-to-write fields, computed with
Arrow's kernels (casts, regex replaces), and a row is a join of those fields: no Python object
per value, so a large answer is written at the speed of Arrow's own CSV writer. Only rare types
(lists, structs, maps, binary, intervals) go through Python, one value at a time.

The conventions, shared by every format:

- dates ``2024-01-31``; timestamps ``2024-01-31 12:00:00`` (``T`` in JSON), with a fraction
  only when it isn't zero and ``+01:00`` when the type has a time zone; times ``12:00:00``;
- floats in shortest round-trip form with a ``.0`` on whole numbers (``4.0``, ``0.1``,
  ``1e+20``); non-finite floats ``nan``/``inf`` in CSV and tables, ``null`` in JSON;
- decimals exactly (strings in JSON); booleans ``true``/``false``;
- intervals and durations as ISO 8601 durations (``P1DT2H``, ``PT0.5S``, ``P-1M3D``);
- binary as ``0x`` + hex in CSV and tables, base64 in JSON; lists, structs and maps as JSON;
- nulls: empty CSV fields (an empty string is ``""``), ``null`` in JSON, ``NULL`` in tables.

This module imports pyarrow at its top: only commands that print an answer import it.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Iterator
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from colonnade.cli.output import cell, iso_duration, jsonable

Style = Literal["csv", "json", "text"]

#: Rows encoded at once (a slice of a batch): bounds the memory of one encoded piece.
SLICE_BYTES = 8 * 1024 * 1024
MAX_SLICE_ROWS = 16_384

_NULL_TEXT = {"csv": "", "json": "null", "text": "NULL"}


def column_text(array: pa.Array, style: Style) -> pa.Array:
    """``array`` as a string array: each value as it is written in ``style``; nulls stay null
    (:func:`join_rows` writes them as ``null_text(style)``)."""
    return _text(_plain(array), style)


def null_text(style: Style) -> str:
    return _NULL_TEXT[style]


def cells(array: pa.Array) -> list[str]:
    """``array``'s values as table cells."""
    return column_text(array, "text").fill_null(_NULL_TEXT["text"]).to_pylist()  # type: ignore[no-any-return]


def is_numeric(type_: pa.DataType) -> bool:
    """Whether a column is right-aligned in a table."""
    if pa.types.is_dictionary(type_):
        type_ = type_.value_type
    return pa.types.is_integer(type_) or pa.types.is_floating(type_) or pa.types.is_decimal(type_)


def _plain(array: pa.Array) -> pa.Array:
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    if isinstance(array.type, pa.ExtensionType):
        return array  # formatted from its Python values (e.g. UUID objects)
    if pa.types.is_large_string(array.type) or pa.types.is_string_view(array.type):
        array = array.cast(pa.string())
    return array


def _text(array: pa.Array, style: Style) -> pa.Array:
    t = array.type
    if isinstance(t, pa.ExtensionType):
        return _python(array, style)
    if pa.types.is_null(t):
        return pa.nulls(len(array), pa.string())
    if pa.types.is_string(t):
        if style == "json":
            return _json_strings(array)
        return _csv_quoted(array) if style == "csv" else array
    if pa.types.is_boolean(t) or pa.types.is_integer(t):
        return array.cast(pa.string())
    if pa.types.is_floating(t):
        return _floats(array, style)
    if pa.types.is_decimal(t):
        text = array.cast(pa.string())
        return _quoted(text) if style == "json" else text
    if pa.types.is_date(t):
        text = array.cast(pa.string())
        return _quoted(text) if style == "json" else text
    if pa.types.is_timestamp(t) or pa.types.is_time(t):
        text = _iso_time(array, t, style)
        return _quoted(text) if style == "json" else text
    if pa.types.is_duration(t):
        return _durations(array, style)
    return _python(array, style)


# -- strings ---------------------------------------------------------------------------------
def _quoted(text: pa.Array) -> pa.Array:
    """``"value"`` (text already escaped); nulls stay null."""
    return pc.binary_join_element_wise(pa.scalar('"'), text, pa.scalar('"'), "")


def _value_bytes(text: pa.Array) -> bytes:
    """The characters of every value of a string array, one after the other: searching them
    once tells whether a rare character occurs at all, before any per-value work."""
    _, offsets, data = text.buffers()
    if data is None or len(text) == 0:
        return b""
    at = memoryview(offsets).cast("i")
    return memoryview(data)[at[text.offset]:at[text.offset + len(text)]].tobytes()


def _csv_quoted(text: pa.Array) -> pa.Array:
    """Fields quoted as Python's csv module quotes them (only when they hold a delimiter, a quote
    or a line break), and an empty string as ``""`` so that it differs from a null."""
    chars = _value_bytes(text)
    special = [c for c in (",", '"', "\n", "\r") if c.encode() in chars]
    needs = pc.equal(pc.binary_length(text), 0)
    for c in special:
        needs = pc.or_(needs, pc.match_substring(text, c))
    if not special and not pc.any(needs).as_py():
        return text
    escaped = pc.replace_substring(text, '"', '""') if '"' in special else text
    return pc.if_else(needs, _quoted(escaped), text)


_CONTROL = re.compile(rb"[\x00-\x1f]")


def _json_strings(text: pa.Array) -> pa.Array:
    chars = _value_bytes(text)
    if _CONTROL.search(chars):
        return _per_value(text, lambda v: json.dumps(v, ensure_ascii=False))
    if b'"' in chars or b"\\" in chars:
        text = pc.replace_substring_regex(text, r'(["\\])', r"\\\1")
    return _quoted(text)


# -- numbers and times -------------------------------------------------------------------------
def _floats(array: pa.Array, style: Style) -> pa.Array:
    if pa.types.is_float16(array.type):
        array = array.cast(pa.float32())
    text = array.cast(pa.string())
    text = pc.replace_substring_regex(text, r"^(-?\d+)$", r"\1.0")  # 4 -> 4.0, as Python writes it
    if style == "json":
        text = pc.if_else(pc.is_finite(array), text, pa.scalar(None, pa.string()))
    return text


def _iso_time(array: pa.Array, t: pa.DataType, style: Style) -> pa.Array:
    """Arrow's text of a timestamp or time (``2024-01-31 12:00:00.000000+0100``) in
    ``isoformat`` form: no all-zero fraction, ``+01:00`` offsets, ``T`` in JSON."""
    text = array.cast(pa.string())
    text = pc.replace_substring_regex(text, r"\.0+([+-]\d{4}|Z)?$", r"\1")
    if pa.types.is_timestamp(t) and t.tz is not None:
        text = pc.replace_substring_regex(text, r"Z$", "+00:00")
        text = pc.replace_substring_regex(text, r"([+-]\d\d)(\d\d)$", r"\1:\2")
    if style == "json" and pa.types.is_timestamp(t):
        text = pc.replace_substring(text, " ", "T", max_replacements=1)
    return text


_NANOS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
_DAY_NANOS = 86_400 * 1_000_000_000


def _durations(array: pa.Array, style: Style) -> pa.Array:
    per = _NANOS[array.type.unit]

    def iso(count: int) -> str:
        nanos = count * per
        days = int(nanos / _DAY_NANOS)  # toward zero, like the other parts
        return iso_duration(0, days, nanos - days * _DAY_NANOS)

    return _per_value(array.cast(pa.int64()), lambda v: _json_text(iso(v), style))


# -- everything else: one Python value at a time ------------------------------------------------
def _python(array: pa.Array, style: Style) -> pa.Array:
    if style == "json":
        if pa.types.is_binary(array.type) or pa.types.is_large_binary(array.type) or \
                pa.types.is_fixed_size_binary(array.type) or pa.types.is_binary_view(array.type):
            return _per_value(array, lambda v: '"' + base64.b64encode(v).decode("ascii") + '"')
        return _per_value(array, lambda v: json.dumps(jsonable(v), ensure_ascii=False))
    text = _per_value(array, _nested_json_or_cell)
    return _csv_quoted(text) if style == "csv" else text


def _nested_json_or_cell(value: Any) -> str:
    if isinstance(value, dict | list):
        return json.dumps(jsonable(value), ensure_ascii=False)
    return cell(value)


def _json_text(text: str, style: Style) -> str:
    return json.dumps(text) if style == "json" else text


def _per_value(array: pa.Array, fmt: Callable[[Any], str]) -> pa.Array:
    return pa.array([None if v is None else fmt(v) for v in array.to_pylist()], pa.string())


# -- rows --------------------------------------------------------------------------------------
def slices(batch: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
    """``batch`` in pieces small enough to encode at once."""
    if batch.num_rows == 0:
        return
    per_row = max(1, batch.nbytes // batch.num_rows) * 2  # text is about twice Arrow's size
    step = max(1, min(MAX_SLICE_ROWS, SLICE_BYTES // per_row))
    for start in range(0, batch.num_rows, step):
        yield batch.slice(start, step)


def join_rows(pieces: list[pa.Array | str], style: Style) -> memoryview:
    """The concatenation, row by row, of ``pieces`` (string arrays from :func:`column_text`, and
    literal text repeated on every row): the bytes of all rows, one after the other."""
    args = [p if isinstance(p, pa.Array) else pa.scalar(p, pa.string()) for p in pieces]
    rows = pc.binary_join_element_wise(*args, "", null_handling="replace",
                                       null_replacement=_NULL_TEXT[style])
    if not isinstance(rows, pa.Array):  # only literals: one row's text, repeated
        raise ValueError("join_rows needs at least one column")
    return _data(rows)


def _data(rows: pa.Array) -> memoryview:
    _, offsets, data = rows.buffers()
    at = memoryview(offsets).cast("i")
    start, end = at[rows.offset], at[rows.offset + len(rows)]
    return memoryview(data)[start:end] if data is not None else memoryview(b"")
