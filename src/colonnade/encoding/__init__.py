"""Chunk byte format, per-chunk statistics and checksums."""

from colonnade.encoding.chunk import (
    CHUNK_FORMAT_VERSION,
    ChunkStats,
    decode_chunk,
    encode_chunk,
    verify_chunk,
)

__all__ = ["CHUNK_FORMAT_VERSION", "ChunkStats", "decode_chunk", "encode_chunk", "verify_chunk"]
