"""What a stream is told (:class:`StreamOptions`) and what it tells (status, commits, report)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from colonnade.errors import ColonnadeError

ON_ERROR = ("strict", "quarantine")


class StreamError(ColonnadeError):
    """A stream stopped: a bad message in strict mode, or a setting that can't work."""


@dataclass
class StreamOptions:
    """How ``run_stream`` consumes a topic into a dataset.

    ``schema`` gives the columns (CSV: in field order); a column whose field is not nullable is
    required. It is needed to create the dataset; an existing dataset's columns are used when it
    is None. ``memory_limit`` bounds the decoded rows buffered between commits (a commit is made
    early when they pass it) and, a quarter of it, the consumer's prefetch queue.
    """

    topic: str
    bootstrap: str = "127.0.0.1:9092"
    group: str | None = None  # default: colonnade-<dataset>
    format: str = "json"
    schema: pa.Schema | None = None
    partition_by: str | None = None
    sort_by: tuple[str, ...] = ()
    commit_interval: float = 1.0
    on_error: str = "quarantine"
    rejects: Path | None = None  # default: <dataset>.rejects.jsonl in the working directory
    max_events: int | None = None
    stop_when_idle: float | None = None
    memory_limit: int = 256 * 2**20
    compact_segments: int = 16  # small segments in a partition that make the stream compact it
    poll_messages: int = 20_000
    status_interval: float | None = None  # default: the commit interval
    retry_max: float = 30.0  # longest wait between retries of an unavailable store (seconds)
    consumer: dict[str, Any] = field(default_factory=dict)  # more librdkafka settings

    def check(self) -> None:
        if self.on_error not in ON_ERROR:
            raise StreamError(f"on_error must be strict or quarantine, not {self.on_error!r}")
        if self.commit_interval <= 0:
            raise StreamError("the commit interval must be > 0 seconds")
        if self.max_events is not None and self.max_events < 1:
            raise StreamError("max events must be ≥ 1")
        if self.memory_limit < 2**20:
            raise StreamError("the memory limit must be at least 1 MiB")


@dataclass(frozen=True)
class StreamReject:
    """A message the stream could not decode: where it was and why."""

    topic: str
    partition: int
    offset: int
    reason: str
    raw: bytes | None

    def to_dict(self) -> dict[str, object]:
        raw = None if self.raw is None else self.raw.decode("utf-8", "backslashreplace")
        return {"topic": self.topic, "partition": self.partition, "offset": self.offset,
                "reason": self.reason, "raw": raw}


@dataclass(frozen=True)
class CommitEvent:
    """One micro-batch made visible."""

    version: int
    rows: int
    rejected: int
    at: float  # time.time() when the commit was written
    offsets: dict[int, int]  # partition -> next offset, for the partitions it consumed
    oldest_produced_ms: int | None  # Kafka timestamps of its messages (None: none carried one)
    newest_produced_ms: int | None


@dataclass(frozen=True)
class StreamStatus:
    """Where a running stream is, every status interval."""

    at: float
    events: int  # messages consumed and committed or buffered (rows + rejects)
    rejected: int
    commits: int
    events_per_s: float  # over the last interval
    lag: dict[int, int]  # partition -> messages behind the end of the partition
    last_version: int | None
    last_commit_at: float | None
    buffered: int  # messages consumed, not committed yet
    problem: str | None = None  # e.g. "broker unavailable: ..." while retrying


@dataclass
class StreamReport:
    """A finished stream."""

    dataset: str
    topic: str
    events: int = 0
    rows: int = 0
    rejected: int = 0
    commits: int = 0
    compactions: int = 0
    seconds: float = 0.0
    offsets: dict[int, int] = field(default_factory=dict)
    last_version: int | None = None
    stopped: str = ""  # max-events | idle | stopped
    rejects_path: str | None = None
    conflicts: int = 0  # micro-batches dropped because another stream had consumed them
    retries: int = 0  # commits retried after the store failed

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, object]:
        return {"dataset": self.dataset, "topic": self.topic, "events": self.events, "rows": self.rows,
                "rejected": self.rejected, "commits": self.commits, "compactions": self.compactions,
                "seconds": round(self.seconds, 3), "events_per_s": round(self.events_per_s, 1),
                "offsets": {str(k): v for k, v in sorted(self.offsets.items())},
                "last_version": self.last_version, "stopped": self.stopped,
                "rejects": self.rejects_path, "conflicts": self.conflicts, "retries": self.retries}


def parse_columns(text: str, source: str = "--columns") -> pa.Schema:
    """Message columns from ``name:type`` items, one per line or comma-separated; a ``not null``
    after the type makes the column required (a message without it is rejected)."""
    from colonnade.errors import SchemaError
    from colonnade.schema.types import parse_schema_text

    items = [i.strip() for line in text.splitlines() for i in line.split("#", 1)[0].split(",")]
    required: set[str] = set()
    lines = []
    for item in items:
        if not item:
            continue
        words = item.split()
        if len(words) >= 3 and [w.lower() for w in words[-2:]] == ["not", "null"]:
            item = " ".join(words[:-2])
            required.add(item.partition(":")[0].strip())
        lines.append(item)
    try:
        schema = parse_schema_text("\n".join(lines), source=source)
    except SchemaError as exc:
        raise StreamError(str(exc)) from None
    return pa.schema([f.with_nullable(f.name not in required) for f in schema])
