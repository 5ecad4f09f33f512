"""String columns encoded as packed dictionary payloads in one compiled call each
(``_encode.c``); see :func:`colonnade.encoding.packed.pack_strings`."""

import pyarrow as pa

#: 1 when the system's libzstd was loaded with its compression calls, else 0
ZSTD: int

def pack_strings(validity: pa.Buffer | None, offsets: pa.Buffer, data: pa.Buffer | None, offset: int, n: int,
                 wide: bool, limit: int, schema: bytes, codec: int, level: int
                 ) -> tuple[bytes, int, bytes | None, bytes | None] | None: ...
