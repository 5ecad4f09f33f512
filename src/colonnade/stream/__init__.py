"""Streaming ingest from Apache Kafka: micro-batches committed with their offsets, exactly once
(see :mod:`colonnade.stream.loop`)."""

from colonnade.stream.loop import run_stream
from colonnade.stream.options import (
    CommitEvent,
    StreamError,
    StreamOptions,
    StreamReject,
    StreamReport,
    StreamStatus,
)

__all__ = ["CommitEvent", "StreamError", "StreamOptions", "StreamReject", "StreamReport", "StreamStatus",
           "run_stream"]
