"""The chunk: one column of one segment as self-describing, versioned, checksummed bytes.

Layout (all integers little-endian)::

    offset  size  field
    0       4     magic b"COLC"
    4       1     format version (currently 1)
    5       1     flags: bit 0 = dictionary-encoded column
    6       2     reserved, zero
    8       4     CRC-32 of the payload (zlib.crc32)
    12      4     payload length in bytes
    16      n     payload: an Arrow IPC stream holding one record batch of one column,
                  its buffers compressed with LZ4_FRAME or ZSTD (named inside the IPC stream)

Worked example: the int32 column ``[1, 2, 2]`` encoded with ZSTD starts with
``43 4f 4c 43 01 00 00 00`` ("COLC", version 1, no flags), then the CRC-32 of the payload,
then the payload length, then an Arrow IPC stream whose schema is ``{"v": int32}``.
A reader accepts every format version up to :data:`CHUNK_FORMAT_VERSION`; a newer one is an
explicit error, never a guess.

Statistics (rows, nulls, min, max) are computed while encoding and kept beside the chunk in
the segment index, so pruning never has to fetch a chunk.
"""

from __future__ import annotations

import math
import struct
import zlib
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

CHUNK_FORMAT_VERSION = 1
MAGIC = b"COLC"
_HEADER = struct.Struct("<4sBBHII")
HEADER_SIZE = _HEADER.size
FLAG_DICTIONARY = 1

#: A string column is stored dictionary-encoded when distinct values ≤ this fraction of rows.
DICTIONARY_RATIO = 0.5
_SAMPLE = 1024
#: String min/max longer than this are not kept (pruning then treats them as unknown).
MAX_STAT_STRING = 256
_FIELD = "v"
#: zstd level 3 is ~10% smaller than Arrow's default level 1 for a third more encode time.
COMPRESSION_LEVELS: dict[str, int | None] = {"zstd": 3, "lz4": None}


class ChunkFormatError(ValueError):
    """Bytes are not a valid chunk; the caller adds dataset/column/segment context."""


@dataclass(frozen=True)
class ChunkStats:
    """Statistics of one chunk, stored in the segment index.

    ``min``/``max`` are plain JSON values in the column's physical representation (dates as
    days since the epoch, timestamps as integers of their unit); ``None`` means unknown.
    """

    rows: int
    nulls: int
    min: Any
    max: Any
    dictionary: bool
    nbytes: int

    def to_json(self) -> list[Any]:
        return [self.rows, self.nulls, self.min, self.max, int(self.dictionary), self.nbytes]

    @classmethod
    def from_json(cls, value: list[Any]) -> ChunkStats:
        rows, nulls, lo, hi, dictionary, nbytes = value
        return cls(rows, nulls, lo, hi, bool(dictionary), nbytes)


def physical_value(scalar: pa.Scalar) -> Any:
    """A scalar as the plain value kept in statistics, or None when it can't be compared."""
    if not scalar.is_valid:
        return None
    t = scalar.type
    if pa.types.is_dictionary(t):
        return physical_value(scalar.value)
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        return scalar.as_py()
    if pa.types.is_floating(t):
        v = scalar.as_py()
        return None if v is None or math.isnan(v) or math.isinf(v) else v
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        v = scalar.as_py()
        return v if len(v) <= MAX_STAT_STRING else None
    if pa.types.is_date32(t):
        return scalar.cast(pa.int32()).as_py()
    if pa.types.is_date64(t) or pa.types.is_timestamp(t) or pa.types.is_time(t):
        return scalar.cast(pa.int64()).as_py()
    return None


def _min_max(array: pa.Array) -> tuple[Any, Any]:
    t = array.type
    values = array.dictionary if pa.types.is_dictionary(t) else array
    if len(values) == 0 or array.null_count == len(array):
        return None, None
    if pa.types.is_floating(values.type) and pc.any(pc.is_nan(values)).as_py():
        return None, None  # NaN orders differently in SQL and Arrow: don't prune on it
    try:
        mm = pc.min_max(values)
    except pa.ArrowNotImplementedError:
        return None, None
    lo, hi = physical_value(mm["min"]), physical_value(mm["max"])
    if lo is None or hi is None:
        return None, None
    return lo, hi


def _narrow(array: pa.DictionaryArray) -> pa.DictionaryArray:
    """Dictionary indices as small as the dictionary allows (compresses far better)."""
    n = len(array.dictionary)
    index_type = pa.int8() if n <= 127 else pa.int16() if n <= 32767 else pa.int32()
    if array.type.index_type == index_type:
        return array
    return pa.DictionaryArray.from_arrays(array.indices.cast(index_type), array.dictionary)


def _maybe_dictionary(array: pa.Array) -> pa.Array:
    """Dictionary-encode when distinct values are few enough to pay off.

    Strings stay dictionary arrays for readers; numbers are only stored that way and decoded
    back on read (see :func:`decode_chunk`)."""
    t = array.type
    if len(array) == 0 or not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t)
                               or pa.types.is_floating(t) or pa.types.is_date(t)
                               or pa.types.is_timestamp(t) or pa.types.is_binary(t)):
        return array
    n = len(array)
    if n > 4 * _SAMPLE:
        # a cheap look first: a column whose sample is mostly distinct isn't worth hashing whole
        step = n // _SAMPLE
        sample = array.slice(0, step * _SAMPLE).take(pa.array(range(0, step * _SAMPLE, step)))
        if pc.count_distinct(sample).as_py() > 0.9 * _SAMPLE:
            return array
    encoded = pc.dictionary_encode(array)
    if len(encoded.dictionary) <= DICTIONARY_RATIO * n:
        return _narrow(encoded)
    return array


def is_dictionary_presented(t: pa.DataType) -> bool:
    """Whether a dictionary-stored column of this value type is read as a dictionary array."""
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def encode_chunk(array: pa.Array | pa.ChunkedArray, compression: str = "zstd",
                 dictionary: bool | None = None, level: int | None = None) -> tuple[bytes, ChunkStats]:
    """Encode one column of one segment; returns the chunk bytes and its statistics."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    if pa.types.is_dictionary(array.type):
        array = _narrow(array)
    elif dictionary is None:
        array = _maybe_dictionary(array)
    elif dictionary:
        array = _narrow(pc.dictionary_encode(array))
    lo, hi = _min_max(array)
    batch = pa.record_batch([array], names=[_FIELD])
    sink = pa.BufferOutputStream()
    if compression == "none":
        codec = None
    else:
        codec = pa.Codec(compression, compression_level=level or COMPRESSION_LEVELS.get(compression))
    options = pa.ipc.IpcWriteOptions(compression=codec)
    with pa.ipc.new_stream(sink, batch.schema, options=options) as writer:
        writer.write_batch(batch)
    payload = sink.getvalue()
    is_dict = pa.types.is_dictionary(array.type)
    header = _HEADER.pack(MAGIC, CHUNK_FORMAT_VERSION, FLAG_DICTIONARY if is_dict else 0, 0,
                          zlib.crc32(payload), payload.size)
    data = header + payload.to_pybytes()
    stats = ChunkStats(len(array), array.null_count, lo, hi,
                       is_dict and is_dictionary_presented(array.type.value_type), len(data))
    return data, stats


def _check_header(data: bytes | memoryview | pa.Buffer) -> tuple[int, int, int]:
    if len(data) < HEADER_SIZE:
        raise ChunkFormatError(f"chunk is {len(data)} bytes, shorter than its header")
    magic, version, flags, reserved, crc, length = _HEADER.unpack_from(memoryview(data)[:HEADER_SIZE])
    if magic != MAGIC:
        raise ChunkFormatError("bad magic: not a chunk")
    if version > CHUNK_FORMAT_VERSION or version < 1:
        raise ChunkFormatError(
            f"chunk format version {version} is not supported (this build reads 1..{CHUNK_FORMAT_VERSION})"
        )
    # The CRC covers the payload only, so header bits version 1 leaves unused must be zero.
    if flags & ~FLAG_DICTIONARY or reserved:
        raise ChunkFormatError(f"unknown header flags {flags:#04x}, reserved {reserved:#06x}")
    if length != len(data) - HEADER_SIZE:
        raise ChunkFormatError(f"payload is {len(data) - HEADER_SIZE} bytes, header says {length}")
    return flags, crc, length


def verify_chunk(data: bytes | memoryview) -> None:
    """Raise ChunkFormatError unless the header is valid and the checksum holds."""
    _, crc, _ = _check_header(data)
    if zlib.crc32(memoryview(data)[HEADER_SIZE:]) != crc:
        raise ChunkFormatError("checksum mismatch")


_READ_OPTIONS = pa.ipc.IpcReadOptions(use_threads=False)


def decode_chunk(data: bytes | memoryview) -> pa.Array:
    """Verify and decode one chunk to an Arrow array (dictionary arrays stay dictionary)."""
    flags, _, _ = _check_header(data)
    verify_chunk(data)
    buf = pa.py_buffer(data).slice(HEADER_SIZE)
    try:
        # one chunk is small and callers decode many at once in their own threads: Arrow's
        # thread pool per buffer costs more than it saves (about half of the decode time)
        reader = pa.ipc.open_stream(buf, options=_READ_OPTIONS)
        batches = list(reader)
    except (pa.ArrowInvalid, OSError) as exc:
        raise ChunkFormatError(f"undecodable payload: {exc}") from exc
    if len(batches) != 1 or batches[0].num_columns != 1:
        raise ChunkFormatError("payload must hold exactly one batch of one column")
    array = batches[0].column(0)
    if bool(flags & FLAG_DICTIONARY) != pa.types.is_dictionary(array.type):
        raise ChunkFormatError("the header's dictionary flag does not match the payload")
    if pa.types.is_dictionary(array.type):
        if not is_dictionary_presented(array.type.value_type):
            # numbers were dictionary-stored only to be small (take is ~5x faster than
            # dictionary_decode here)
            return pc.take(array.dictionary, array.indices)
        if array.type.index_type != pa.int32():
            # indices were range-checked when written and the checksum holds: skip re-validation
            array = pa.DictionaryArray.from_arrays(array.indices.cast(pa.int32()), array.dictionary,
                                                   safe=False)
    return array
