"""The chunk: one column of one segment as self-describing, versioned, checksummed bytes.

Layout (all integers little-endian)::

    offset  size  field
    0       4     magic b"COLC"
    4       1     format version (currently 5)
    5       1     flags: bit 0 = dictionary, bit 1 = run-end encoded, bit 2 = delta runs,
                  bit 3 = packed (a payload of sections: with bit 0 a dictionary, from
                  version 5 on with bit 4 decimal-scaled floats), bit 4 = decimal-scaled
                  floats (bits 1 and 2: version 2 on; bit 3: version 3 on; bit 4: version 4 on)
    6       2     reserved, zero
    8       4     CRC-32 (zlib.crc32) of bytes 4-7 and then the payload; version 1: of the
                  payload only (verified by libdeflate's, several times faster, when the
                  compiled decoders found it: the same checksum)
    12      4     payload length in bytes
    16      n     payload: an Arrow IPC stream holding one record batch of one column,
                  its buffers compressed with LZ4_FRAME or ZSTD (named inside the IPC stream);
                  with the packed flag, sections: a packed dictionary's
                  (:mod:`colonnade.encoding.packed`) or, with the scaled flag (version 5 on),
                  decimal-scaled floats' (:mod:`colonnade.encoding.scaled`)

The payload column is, by the flags:

* none: the plain column;
* dictionary: a dictionary array (int8/16/32 indices). Strings are read back as dictionaries
  (int32 indices); other types were stored so only to be small and are read back plain. From
  version 3 on, a dictionary of strings, binaries or fixed-width values is packed (dictionary
  and packed flags, nothing else): no index for a null row, value lengths instead of offsets,
  indices split into byte planes, values ordered most frequent first (20-30% fewer bytes);
* run-end: ``run_end_encoded<int32, T>`` of plain values, one per run of equal consecutive
  rows. With the dictionary bit too (strings only) the column is read back as a dictionary,
  built from the run values (hashing one value per run, not per row).

When run ends are used (:mod:`colonnade.encoding.runs`): a column of at least 256 rows whose
runs number at most 1/32 of its rows, counted in one vectorised comparison of the column with
itself shifted by a row. The runs hold values, never dictionary indices: with one index per run
a dictionary spares little, and its IPC dictionary message costs more than it spares (~25% more
bytes per 65,536-row chunk).

In a compressed chunk, only where it pays. Strings read as dictionaries stay dictionaries: ZSTD
and LZ4 store their runs of repeated small indices in a few bytes already, so run ends would
save at most 25% of ~0.02 bytes a row and read back 1.2-2.2x slower (the dictionary rebuilt
from the run values). Bools and decimals stay plain: Arrow expands their runs slowly (bit by
bit, or with no fast path), so they would read back 1.1-2.2x slower. All other types (integers,
floats, dates, timestamps, strings read plain) use run ends under every codec: they read back
1.8-2.9x faster than as Arrow IPC dictionaries, in as many bytes under ZSTD (within 1%) and
1.2-1.3x fewer under LZ4 (against the packed dictionaries of format 3, which take ~20% fewer
bytes under ZSTD and as many under LZ4, run ends still read back 1.7-2.4x faster); strings
read plain are ~120x smaller and read back 3x faster. Uncompressed, every type uses run ends:
12-335x smaller. (Figures: a sorted 10M-row IP-range table, columns with runs of ~500 rows,
65,536-row chunks; ``tests/encoding/test_run_end.py`` keeps the sizes.)

* scaled (nothing else; version 4): a float column whose values are all short decimals, as
  the integers ``round(value * 10**e)`` with the type and scale in the field's metadata
  ``colonnade.scaled_of`` (:mod:`colonnade.encoding.scaled`); read back exactly, as floats.
  Chosen for a float column the run-end and dictionary rules leave plain. From version 5 on
  with the packed flag (and nothing else): the same integers zigzag-encoded in byte planes,
  in sections instead of an IPC stream (4% fewer bytes for GDELT's tone column, decoded
  without the GIL).
* delta (with run-end, nothing else): ``run_end_encoded<int32, int64>`` of an integer column's
  first value then its differences between consecutive rows; the field's metadata
  ``colonnade.delta_of`` names the column's type. Chosen, before run ends, for an integer
  column without nulls whose differences run long and whose values don't (consecutive ids or
  addresses: 65,536 of them in ~700 bytes, where ZSTD takes a byte or more per value).

Decoding gives every format version's chunk the same logical array: plain, or a dictionary for
strings stored as one.

Worked example: the int32 column ``[1, 2, 2]`` encoded with ZSTD starts with
``43 4f 4c 43 05 00 00 00`` ("COLC", version 5, no flags), then the CRC-32, then the payload
length, then an Arrow IPC stream whose schema is ``{"v": int32}``. The int32 column of 300
sevens, 200 nulls and 500 nines starts ``43 4f 4c 43 05 02 00 00`` (run-end), and its payload
column is ``run_end_encoded<int32, int32>`` with run ends ``[300, 500, 1000]`` and values
``[7, null, 9]``. A reader accepts every format version up to :data:`CHUNK_FORMAT_VERSION`; a
newer one is an explicit error, never a guess.

Statistics (rows, nulls, min, max) are computed while encoding and kept beside the chunk in
the segment index, so pruning never has to fetch a chunk; they are the same whichever way the
chunk stores the column.
"""

from __future__ import annotations

import math
import struct
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from colonnade.encoding.packed import (
    PackedFormatError,
    narrow_index_type,
    pack,
    pack_strings,
    packable,
    packs_compiled,
    unpack,
)
from colonnade.encoding.runs import (
    DELTA_OF,
    RUN_END_MIN_ROWS,
    RUN_END_RATIO,
    can_run_end,
    check_run_ends,
    count_runs,
    delta_decode,
    deltas,
    expands_fast,
    run_end_decode,
    run_end_encode,
)
from colonnade.encoding.scaled import SCALED_OF, pack_scaled, scaled, unpack_scaled, unscaled

try:
    from colonnade.encoding import _packed
except ImportError:  # built without a C compiler
    _packed = None  # type: ignore[assignment]
#: zlib's CRC-32, by libdeflate when the compiled decoders found it (about a quarter of zlib's time)
_crc32 = _packed.crc32 if _packed is not None and _packed.CRC32 else zlib.crc32

CHUNK_FORMAT_VERSION = 5
MAGIC = b"COLC"
_HEADER = struct.Struct("<4sBBHII")
HEADER_SIZE = _HEADER.size
FLAG_DICTIONARY = 1
FLAG_RUN_END = 2
FLAG_DELTA = 4
FLAG_PACKED = 8
FLAG_SCALED = 16
#: Header flags each format version may set (all other bits must be zero).
_VERSION_FLAGS = {1: FLAG_DICTIONARY, 2: FLAG_DICTIONARY | FLAG_RUN_END | FLAG_DELTA,
                  3: FLAG_DICTIONARY | FLAG_RUN_END | FLAG_DELTA | FLAG_PACKED,
                  4: FLAG_DICTIONARY | FLAG_RUN_END | FLAG_DELTA | FLAG_PACKED | FLAG_SCALED,
                  5: FLAG_DICTIONARY | FLAG_RUN_END | FLAG_DELTA | FLAG_PACKED | FLAG_SCALED}

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


def _used_dictionary(array: pa.DictionaryArray) -> pa.DictionaryArray:
    """The array with only the dictionary values it uses (a slice of a longer array, e.g. a
    segment of a batch encoded whole, shares the batch's dictionary): no unused values stored,
    and statistics (taken from the dictionary) that bound what is there."""
    n = len(array.dictionary)
    if n == 0 or len(array) == 0:
        return array
    indices = array.indices
    positions = (pc.drop_null(indices) if indices.null_count else indices).to_numpy(zero_copy_only=False)
    used = np.bincount(positions, minlength=n).astype(bool)
    if used.all():
        return array
    remap = pa.array(np.cumsum(used, dtype=np.int32) - 1)
    return pa.DictionaryArray.from_arrays(pc.take(remap, indices), array.dictionary.filter(pa.array(used)))


def _narrow(array: pa.DictionaryArray) -> pa.DictionaryArray:
    """Dictionary indices as small as the dictionary allows (compresses far better)."""
    index_type = narrow_index_type(len(array.dictionary))
    if array.type.index_type == index_type:
        return array
    return pa.DictionaryArray.from_arrays(array.indices.cast(index_type), array.dictionary)


def _dictionary_candidate(t: pa.DataType) -> bool:
    return (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t)
            or pa.types.is_floating(t) or pa.types.is_date(t) or pa.types.is_timestamp(t)
            or pa.types.is_binary(t))


def _sample_mostly_distinct(array: pa.Array) -> bool:
    """A cheap look before hashing: is a strided sample of a long column mostly distinct?"""
    n = len(array)
    if n <= 4 * _SAMPLE:
        return False
    step = n // _SAMPLE
    sample = array.slice(0, step * _SAMPLE).take(pa.array(np.arange(0, step * _SAMPLE, step)))
    return bool(pc.count_distinct(sample).as_py() > 0.9 * _SAMPLE)


def _maybe_dictionary(array: pa.Array) -> pa.Array:
    """Dictionary-encode when distinct values are few enough to pay off.

    Strings stay dictionary arrays for readers; numbers are only stored that way and decoded
    back on read (see :func:`decode_chunk`)."""
    if len(array) == 0 or not _dictionary_candidate(array.type) or _sample_mostly_distinct(array):
        return array  # a column whose sample is mostly distinct isn't worth hashing whole
    encoded = pc.dictionary_encode(array)
    if len(encoded.dictionary) <= DICTIONARY_RATIO * len(array):
        return _narrow(encoded)
    return array


def _choose_dictionary(array: pa.Array, dictionary: bool | None) -> pa.Array:
    """The column as the dictionary rule stores it (``dictionary``: None decides, else forces)."""
    if pa.types.is_dictionary(array.type):
        return _narrow(array)
    if dictionary is None:
        return _maybe_dictionary(array)
    return _narrow(pc.dictionary_encode(array)) if dictionary else array


def _value_type(array: pa.Array) -> pa.DataType:
    return array.type.value_type if pa.types.is_dictionary(array.type) else array.type


def _read_as_dictionary(array: pa.Array, dictionary: bool | None) -> bool:
    """Whether a column is read back as a dictionary, without hashing it: exact for a column
    with long runs, whose distinct values (≤ runs ≤ rows × RUN_END_RATIO) are always few enough
    for the dictionary rule, which then comes down to the type, the caller and the sample."""
    if not is_dictionary_presented(_value_type(array)):
        return False
    if pa.types.is_dictionary(array.type):
        return True
    if dictionary is not None:
        return dictionary
    return not _sample_mostly_distinct(array)


def _delta_rule(array: pa.Array) -> pa.Array | None:
    """The column's delta runs when they are long and its values' own runs are not (an
    integer column without nulls: see :mod:`colonnade.encoding.runs`), else None."""
    d = deltas(array)
    if d is None or count_runs(d) > RUN_END_RATIO * len(array) or count_runs(array) <= RUN_END_RATIO * len(array):
        return None
    return d


def _run_end_rule(array: pa.Array, dictionary: bool | None, compression: str) -> tuple[bool, bool]:
    """(store it run-end encoded, read it back as a dictionary) by the automatic rule: long runs,
    and in a compressed chunk, a column neither read as a dictionary nor of a type whose runs
    expand slowly (see the module docstring)."""
    n = len(array)
    t = _value_type(array)
    if n < RUN_END_MIN_ROWS or not can_run_end(t):
        return False, False  # the dictionary rule decides the second later
    as_dictionary = _read_as_dictionary(array, dictionary)
    if compression != "none" and (as_dictionary or not expands_fast(t)):
        return False, as_dictionary
    return count_runs(array) <= RUN_END_RATIO * n, as_dictionary


def is_dictionary_presented(t: pa.DataType) -> bool:
    """Whether a dictionary-stored column of this value type is read as a dictionary array."""
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def encode_chunk(array: pa.Array | pa.ChunkedArray, compression: str = "zstd",
                 dictionary: bool | None = None, level: int | None = None,
                 run_end: bool | None = None) -> tuple[bytes, ChunkStats]:
    """Encode one column of one segment; returns the chunk bytes and its statistics.

    ``dictionary`` and ``run_end`` are None to let the rules decide, or force either way (a
    forced run-end encoding applies to non-empty columns of types it supports)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    if pa.types.is_dictionary(array.type):
        array = _used_dictionary(array)
    elif not run_end and dictionary is not False and len(array) and packs_compiled(array.type, compression):
        packed_chunk = _packed_strings(array, dictionary, compression, level)
        if packed_chunk is not None:
            return packed_chunk
    nulls = array.null_count
    if run_end is None:
        delta = _delta_rule(array)
        run_end, as_dictionary = (False, False) if delta is not None else _run_end_rule(array, dictionary, compression)
    else:
        delta = None
        if run_end and len(array) and can_run_end(_value_type(array)):
            chosen = _choose_dictionary(array, dictionary)  # not necessarily long runs: hash to know
            as_dictionary = pa.types.is_dictionary(chosen.type) and is_dictionary_presented(_value_type(chosen))
        else:
            run_end = False
    metadata = None
    if delta is not None:
        stored = run_end_encode(delta)
        lo, hi = _min_max(array)
        metadata = {DELTA_OF: str(array.type).encode()}
    elif run_end:
        stored = run_end_encode(array)
        lo, hi = _min_max(stored.values)  # one value per run: the same bounds, fewer to compare
    else:
        stored = array = _choose_dictionary(array, dictionary)
        as_dictionary = pa.types.is_dictionary(array.type) and is_dictionary_presented(_value_type(array))
        lo, hi = _min_max(array)
        found = scaled(stored) if pa.types.is_floating(stored.type) else None
        if found is not None:
            stored, metadata = found
    if compression == "none":
        codec = None
    else:
        codec = pa.Codec(compression, compression_level=level or COMPRESSION_LEVELS.get(compression))
    # the dictionary flag says what the payload stores, or with run ends, how it is read
    stores_dictionary = as_dictionary if run_end else pa.types.is_dictionary(stored.type)
    if delta is not None:
        flags = FLAG_DELTA | FLAG_RUN_END
    elif metadata is not None:
        flags = FLAG_SCALED
    else:
        flags = (FLAG_DICTIONARY if stores_dictionary else 0) | (FLAG_RUN_END if run_end else 0)
    if flags == FLAG_DICTIONARY and packable(stored):
        payload = pack(stored, compression, codec)
        flags |= FLAG_PACKED
    elif flags == FLAG_SCALED and metadata is not None:
        payload = pack_scaled(stored, metadata[SCALED_OF], compression, codec)
        flags |= FLAG_PACKED
    else:
        field = pa.field(_FIELD, stored.type, metadata=metadata)
        batch = pa.record_batch([stored], schema=pa.schema([field]))
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema, options=pa.ipc.IpcWriteOptions(compression=codec)) as writer:
            writer.write_batch(batch)
        payload = sink.getvalue().to_pybytes()
    data = _framed(flags, payload)
    return data, ChunkStats(len(array), nulls, lo, hi, as_dictionary, len(data))


def _packed_strings(array: pa.Array, dictionary: bool | None, compression: str,
                    level: int | None) -> tuple[bytes, ChunkStats] | None:
    """A string column as the rules store it when they make it a packed dictionary (the
    sample not mostly distinct, or ``dictionary`` forcing it; distinct values few enough),
    encoded in one compiled call (:func:`pack_strings`); None when the rules store it
    otherwise (the caller then applies them). The same chunk as the rules' path makes, but
    for the ZSTD build that compressed its sections."""
    if dictionary is None and _sample_mostly_distinct(array):
        return None
    limit = None if dictionary else int(DICTIONARY_RATIO * len(array))
    found = pack_strings(array, limit, compression, level or COMPRESSION_LEVELS.get(compression) or 0)
    if found is None:
        return None
    payload, _, least, greatest = found
    lo, hi = _stat_string(least), _stat_string(greatest)
    if lo is None or hi is None:
        lo = hi = None
    flags = FLAG_DICTIONARY | FLAG_PACKED
    data = _framed(flags, payload)
    return data, ChunkStats(len(array), array.null_count, lo, hi, True, len(data))


def _framed(flags: int, payload: bytes) -> bytes:
    """A chunk: its header (``flags``, the CRC of the version, flags and payload) and ``payload``."""
    crc = zlib.crc32(payload, zlib.crc32(struct.pack("<BBH", CHUNK_FORMAT_VERSION, flags, 0)))
    return _HEADER.pack(MAGIC, CHUNK_FORMAT_VERSION, flags, 0, crc, len(payload)) + payload


def _stat_string(value: bytes | None) -> str | None:
    """A string column's least or greatest value (its bytes) as statistics keep it."""
    if value is None:
        return None
    text = value.decode("utf-8", errors="surrogateescape")
    return text if len(text) <= MAX_STAT_STRING else None


def _check_header(data: bytes | memoryview | pa.Buffer) -> tuple[int, int]:
    """(flags, CRC) of a chunk whose header is well-formed."""
    if len(data) < HEADER_SIZE:
        raise ChunkFormatError(f"chunk is {len(data)} bytes, shorter than its header")
    magic, version, flags, reserved, crc, length = _HEADER.unpack_from(memoryview(data)[:HEADER_SIZE])
    if magic != MAGIC:
        raise ChunkFormatError("bad magic: not a chunk")
    if version > CHUNK_FORMAT_VERSION or version < 1:
        raise ChunkFormatError(
            f"chunk format version {version} is not supported (this build reads 1..{CHUNK_FORMAT_VERSION})"
        )
    # Bits a version leaves unused must be zero (version 1's CRC doesn't cover the header).
    if flags & ~_VERSION_FLAGS[version] or reserved:
        raise ChunkFormatError(f"unknown header flags {flags:#04x}, reserved {reserved:#06x}")
    if length != len(data) - HEADER_SIZE:
        raise ChunkFormatError(f"payload is {len(data) - HEADER_SIZE} bytes, header says {length}")
    return flags, crc


def verify_chunk(data: bytes | memoryview) -> None:
    """Raise ChunkFormatError unless the header is valid and the checksum holds."""
    _, crc = _check_header(data)
    view = memoryview(data)
    # from version 2 on the CRC starts with the header's version, flags and reserved bytes
    start = zlib.crc32(view[4:8]) if view[4] >= 2 else 0
    if _crc32(view[HEADER_SIZE:], start) != crc:
        raise ChunkFormatError("checksum mismatch")


_READ_OPTIONS = pa.ipc.IpcReadOptions(use_threads=False)


def decode_chunk(data: bytes | memoryview, as_stored: bool = False) -> pa.Array:
    """Verify and decode one chunk to an Arrow array (dictionary arrays stay dictionary, with
    int32 indices; ``as_stored``: a dictionary of numbers too, and indices as narrow as they
    were stored, for a reader that looks values up itself)."""
    flags, _ = _check_header(data)
    verify_chunk(data)
    buf = pa.py_buffer(data).slice(HEADER_SIZE)
    if flags == FLAG_PACKED | FLAG_SCALED and memoryview(data)[4] >= 5:
        try:
            return unpack_scaled(buf)
        except PackedFormatError as exc:
            raise ChunkFormatError(str(exc)) from None
    if flags & FLAG_PACKED:
        if flags != FLAG_PACKED | FLAG_DICTIONARY:
            raise ChunkFormatError("a packed payload is a dictionary or decimal-scaled floats (format 5 on), "
                                   "and nothing else")
        try:
            return _presented(unpack(buf, None if as_stored else pa.int32(), decode_fixed=not as_stored), as_stored)
        except PackedFormatError as exc:
            raise ChunkFormatError(str(exc)) from None
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
    if bool(flags & FLAG_RUN_END) != pa.types.is_run_end_encoded(array.type):
        raise ChunkFormatError("the header's run-end flag does not match the payload")
    metadata = batches[0].schema.field(0).metadata or {}
    delta_of, scaled_of = metadata.get(DELTA_OF), metadata.get(SCALED_OF)
    if bool(flags & FLAG_SCALED) != (scaled_of is not None) or (scaled_of is not None and flags != FLAG_SCALED):
        raise ChunkFormatError("the header's scaled flag does not match the payload")
    if scaled_of is not None:
        try:
            return unscaled(array, scaled_of)
        except ValueError as exc:
            raise ChunkFormatError(str(exc)) from None
    if bool(flags & FLAG_DELTA) != (delta_of is not None) or (delta_of is not None and flags != FLAG_DELTA | FLAG_RUN_END):
        raise ChunkFormatError("the header's delta flag does not match the payload")
    if delta_of is not None:
        try:
            check_run_ends(array)
            return delta_decode(array, delta_of.decode())
        except ValueError as exc:
            raise ChunkFormatError(f"invalid delta encoding: {exc}") from exc
    if pa.types.is_run_end_encoded(array.type):
        as_dictionary = bool(flags & FLAG_DICTIONARY)
        try:
            check_run_ends(array)
        except ValueError as exc:
            raise ChunkFormatError(f"invalid run-end encoding: {exc}") from exc
        if as_dictionary and not is_dictionary_presented(array.type.value_type):
            raise ChunkFormatError(f"the header's dictionary flag does not apply to {array.type.value_type}")
        return run_end_decode(array, as_dictionary)
    if bool(flags & FLAG_DICTIONARY) != pa.types.is_dictionary(array.type):
        raise ChunkFormatError("the header's dictionary flag does not match the payload")
    return _presented(array, as_stored)


def _presented(array: pa.Array, as_stored: bool) -> pa.Array:
    """A decoded dictionary array as scans get it (see :func:`decode_chunk`); others as they are."""
    if pa.types.is_dictionary(array.type) and not as_stored:
        if not is_dictionary_presented(array.type.value_type):
            # numbers were dictionary-stored only to be small (take is ~5x faster than
            # dictionary_decode here)
            return pc.take(array.dictionary, array.indices)
        if array.type.index_type != pa.int32():
            # indices were range-checked when written and the checksum holds: skip re-validation
            array = pa.DictionaryArray.from_arrays(array.indices.cast(pa.int32()), array.dictionary,
                                                   safe=False)
    return array
