"""A packed dictionary payload decoded in one compiled call (``_packed.c``); see
:mod:`colonnade.encoding.packed`."""

import pyarrow as pa

#: 1 when the system's libzstd was loaded (ZSTD payloads are decoded here), else 0
ZSTD: int

def unpack(payload: pa.Buffer, index_width: int, mode: int, value_width: int) -> tuple[
    int, int, int, bytes | None, bytes, bytes | None, bytes] | None: ...
def unscale(payload: pa.Buffer) -> tuple[int, int, bytes | None, bytes] | None: ...
