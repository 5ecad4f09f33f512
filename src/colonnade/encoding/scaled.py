"""Decimal-scaled floats (format version 4 on, header flag ``scaled``): a floating-point column
whose values are all short decimals (GDELT's tone ``1.724138``, a latitude ``38.8951``, a price
``12.5``) is stored as the integers ``round(value * 10**e)`` for the smallest scale ``e`` that
gives every value back, int32 when they fit, else int64, in an Arrow IPC stream whose field
metadata ``colonnade.scaled_of`` holds the column's type and scale (``double:6``).

Exact by construction: a value is read back as ``integer / 10**e``, one correctly rounded IEEE
division of two exactly representable numbers (|integer| < 2**53, 10**e for e <= 22), and the
encoder stores a column this way only when that division gives every value back bit for bit
(so -0.0, NaN and infinities, which it can't give back, keep a column plain). For float32
columns the division is done in double and rounded to float32, by the encoder's check too.

From format version 5 on (header flags ``scaled`` and ``packed``) the integers are stored in
sections, as packed dictionaries are (:mod:`colonnade.encoding.packed`), not in an Arrow IPC
stream::

    offset  size  field
    0       1     codec: 0 none, 1 LZ4 frame, 2 ZSTD
    1       1     integer width w: 4 or 8 bytes
    2       1     scale e: 0 to 12
    3       1     value type: 0 double, 1 float
    4       4     rows n
    8       4     rows with a value v (the others are null)
    12      4     reserved, zero
    16            two sections, each: raw length (4), stored length (4), then the stored bytes
                  (compressed by the codec unless stored length == raw length)

    section 0  validity: n bits, least significant first (empty when v == n)
    section 1  the v integers of the rows with a value, zigzag-encoded (0, -1, 1, -2, ... as
               0, 1, 2, 3, ...) and split into w byte planes: every integer's lowest byte, then
               every integer's next byte, ...

Zigzag planes make the high bytes of small integers of either sign zeros (GDELT's tone column
takes 4% fewer bytes under ZSTD than as plain int32), and a ZSTD payload is decoded by one
compiled call without the GIL (``_packed.c``: decompressed, joined, divided and put at its
rows), where the IPC stream took a Python reader and a separate division.

Why: under ZSTD, GDELT's tone column (six decimals, 4,037,539 rows in 96 chunks) takes 12.9 MB
as integers against 20.0 MB as doubles, and reads back in the same time (54-55 ms on one
thread: what the smaller decompression saves, the division back costs); encoding a chunk takes
about 0.3 ms more (the scale is found and checked).
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pyarrow as pa

from colonnade.encoding import kernels
from colonnade.encoding.packed import CODECS, PackedFormatError, _compiled, read_sections, section

SCALED_OF = b"colonnade.scaled_of"
#: Scales tried: 10**0 .. 10**MAX_SCALE (beyond, integers of a double's 15-17 significant digits
#: overflow 2**53 for any value above 1e-3 or so).
MAX_SCALE = 12
#: Values checked to choose the scale before checking every value with it.
_PROBE = 256
_EXACT = float(1 << 53)
_TYPES = {"double": pa.float64(), "float": pa.float32()}


def _floats(array: pa.Array) -> np.ndarray:
    """The values of a float array as float64 (nulls hold 0)."""
    values = kernels.values_of(array)
    if array.null_count:
        values = np.where(kernels.valid(array), values, 0)
    return values.astype(np.float64, copy=False)


def _back(integers: np.ndarray, scale: int, t: pa.DataType) -> np.ndarray:
    """The values integers at ``scale`` stand for, as ``t`` (float32 or float64)."""
    values = kernels.unscale(integers, 10.0 ** scale)
    return values if t == pa.float64() else values.astype(np.float32)


def _gives_back(values: np.ndarray, original: np.ndarray, scale: int, t: pa.DataType) -> np.ndarray | None:
    """The integers standing for ``values`` (float64 of ``original``) at ``scale`` if they give
    every one of ``original`` back bit for bit, else None."""
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = np.rint(values * (10.0 ** scale))
        if not np.all(np.abs(scaled) < _EXACT):  # also NaN and infinities
            return None
        integers = scaled.astype(np.int64)
    if _back(integers, scale, t).tobytes() != original.tobytes():
        return None
    return integers


def scaled(array: pa.Array) -> tuple[pa.Array, dict[bytes, bytes]] | None:
    """``array`` (float32 or float64) as its decimal-scaled integers (int32 if they fit, else
    int64; nulls where it has them) and the field metadata naming its type and scale; None
    when some value is not a short decimal (see the module docstring)."""
    t = array.type
    name = "double" if t == pa.float64() else "float" if t == pa.float32() else None
    if name is None or len(array) == array.null_count:
        return None
    values = _floats(array)
    original = values if t == pa.float64() else values.astype(np.float32)
    present = np.flatnonzero(kernels.valid(array)) if array.null_count else None
    probe = (present[:_PROBE] if present is not None else np.arange(min(_PROBE, len(values))))
    for e in range(MAX_SCALE + 1):
        if _gives_back(values[probe], original[probe], e, t) is not None:
            integers = _gives_back(values, original, e, t)
            if integers is None:
                return None  # the first values are short decimals, others are not: stored plain
            break
    else:
        return None
    narrow = integers.min() >= -(1 << 31) and integers.max() < (1 << 31)
    out = pa.array(integers.astype(np.int32) if narrow else integers,
                   mask=None if present is None else ~kernels.valid(array))
    return out, {SCALED_OF: f"{name}:{e}".encode()}


_HEAD = struct.Struct("<BBBBIII")
_WIDTHS = {pa.int32(): 4, pa.int64(): 8}
_UNSIGNED: dict[int, np.dtype[Any]] = {4: np.dtype("<u4"), 8: np.dtype("<u8")}
_TYPE_CODES = {"double": 0, "float": 1}


def _scale_of(scaled_of: bytes, integers: pa.DataType) -> tuple[pa.DataType, int]:
    """The float type and scale the field metadata names; ValueError unless it is one the
    encoder writes, over integers it writes."""
    name, _, digits = scaled_of.decode(errors="replace").partition(":")
    t = _TYPES.get(name)
    if t is None or not digits.isdigit() or int(digits) > MAX_SCALE or integers not in _WIDTHS:
        raise ValueError(f"invalid decimal-scaled column: {scaled_of!r} over {integers}")
    return t, int(digits)


def pack_scaled(integers: pa.Array, scaled_of: bytes, compression: str, codec: pa.Codec | None) -> bytes:
    """The payload (format version 5) of the decimal-scaled column :func:`scaled` gave:
    ``integers`` and its metadata ``scaled_of``."""
    t, scale = _scale_of(scaled_of, integers.type)
    w = _WIDTHS[integers.type]
    n, nulls = len(integers), integers.null_count
    values = kernels.values_of(integers).astype(np.int64)
    if nulls:
        valid = kernels.valid(integers)
        values = values[valid]
    zigzag = ((values << 1) ^ (values >> 63)).view(np.uint64).astype(_UNSIGNED[w])
    planes = zigzag.view(np.uint8).reshape(-1, w).T.tobytes()
    validity = np.packbits(valid, bitorder="little").tobytes() if nulls else b""
    head = _HEAD.pack(CODECS.index(compression), w, scale, _TYPE_CODES["double" if t == pa.float64() else "float"],
                      n, n - nulls, 0)
    return head + section(codec, validity) + section(codec, planes)


def unpack_scaled(payload: pa.Buffer, compiled: bool = True) -> pa.Array:
    """The float column of a decimal-scaled payload (format version 5). PackedFormatError if
    it is malformed. A ZSTD or uncompressed payload is decoded by one compiled call when the
    extension was built (``compiled=False``: never); others by the Python code below, which
    the compiled call reproduces exactly."""
    if payload.size < _HEAD.size:
        raise PackedFormatError("scaled payload shorter than its header")
    codec_id, w, scale, code, n, v, reserved = _HEAD.unpack_from(payload)
    if codec_id >= len(CODECS) or w not in _UNSIGNED or scale > MAX_SCALE or code > 1 or reserved or v > n:
        raise PackedFormatError("scaled payload header is invalid")
    t = pa.float64() if code == 0 else pa.float32()
    if compiled and _compiled is not None:
        try:
            found = _compiled.unscale(payload)
        except ValueError as exc:
            raise PackedFormatError(str(exc)) from None
        if found is not None:
            n, v, validity, values = found
            return pa.Array.from_buffers(t, n, [None if validity is None else pa.py_buffer(validity),
                                                pa.py_buffer(values)], null_count=n - v)
    bits, planes = read_sections(payload, _HEAD.size, 2, CODECS[codec_id])
    if bits.size != ((n + 7) // 8 if v < n else 0) or planes.size != v * w:
        raise PackedFormatError("scaled payload sections disagree with its row counts")
    raw = np.frombuffer(planes, dtype=np.uint8).reshape(w, v)
    zigzag = np.zeros(v, dtype=np.uint64)
    for k in range(w):
        zigzag |= raw[k].astype(np.uint64) << np.uint64(8 * k)
    integers = (zigzag >> np.uint64(1)).view(np.int64) ^ -(zigzag & np.uint64(1)).view(np.int64)
    present = _back(integers, scale, t)
    if v == n:
        return pa.Array.from_buffers(t, n, [None, pa.py_buffer(present)], null_count=0)
    rows = np.flatnonzero(np.unpackbits(np.frombuffer(bits, dtype=np.uint8), count=n, bitorder="little"))
    if len(rows) != v:
        raise PackedFormatError("the validity bitmap disagrees with the rows with a value")
    out = np.zeros(n, dtype=present.dtype)
    out[rows] = present
    return pa.Array.from_buffers(t, n, [bits, pa.py_buffer(out)], null_count=n - v)


def unscaled(integers: pa.Array, scaled_of: bytes) -> pa.Array:
    """The float column ``integers`` stand for (``scaled_of``: the field metadata the encoder
    wrote). ValueError if the metadata or the integers' type is not one the encoder writes."""
    t, scale = _scale_of(scaled_of, integers.type)
    data = kernels.values_of(integers)
    values = _back(data, scale, t)
    validity = integers.buffers()[0] if integers.null_count else None
    if validity is not None and integers.offset:
        validity = pa.py_buffer(np.packbits(kernels.valid(integers), bitorder="little"))
    return pa.Array.from_buffers(t, len(integers), [validity, pa.py_buffer(values)], integers.null_count)


__all__ = ["MAX_SCALE", "SCALED_OF", "pack_scaled", "scaled", "unpack_scaled", "unscaled"]
