"""Packed dictionary and decimal-scaled payloads decoded in one compiled call each, and CRC-32
by libdeflate (``_packed.c``); see :mod:`colonnade.encoding.packed` and
:mod:`colonnade.encoding.scaled`."""

import pyarrow as pa

#: 1 when the system's libzstd was loaded (ZSTD payloads are decoded here), else 0
ZSTD: int
#: 1 when the system's libdeflate was loaded (crc32 works), else 0
CRC32: int

def unpack(payload: pa.Buffer, index_width: int, mode: int, value_width: int) -> tuple[
    int, int, int, bytes | None, bytes, bytes | None, bytes] | None: ...
def unscale(payload: pa.Buffer) -> tuple[int, int, bytes | None, bytes] | None: ...
def crc32(data: bytes | memoryview, start: int) -> int: ...
