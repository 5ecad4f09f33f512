"""Commit records and snapshots: the log that decides what a reader sees.

A commit record is JSON with a format version. Protocol of an append:

1. write chunks under fresh segment ids (invisible: no commit names them);
2. write segment-index rows (still invisible);
3. write the commit record for version ``latest + 1`` atomically; if another writer took that
   version, re-read the log and try the next one (chunks are not rewritten).

A reader pins a version and sees exactly the segments added and not removed by commits ≤ it.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from colonnade.errors import CorruptCommitError

COMMIT_FORMAT_VERSION = 1


@dataclass(frozen=True)
class SegmentEntry:
    """A segment as named by a commit: enough to prune partitions without reading stats."""

    segment: str
    partition: str
    rows: int
    bucket: int
    values: tuple[Any, ...]  # partition values, one per transform
    dictionary: frozenset[str] = frozenset()  # columns stored dictionary-encoded

    def to_json(self) -> list[Any]:
        return [self.segment, self.partition, self.rows, self.bucket, [_value_to_json(v) for v in self.values],
                sorted(self.dictionary)]

    @classmethod
    def from_json(cls, v: list[Any]) -> SegmentEntry:
        return cls(v[0], v[1], int(v[2]), int(v[3]), tuple(_value_from_json(x) for x in v[4]), frozenset(v[5]))


def _value_to_json(v: Any) -> Any:
    """Partition values as JSON: scalars as they are, other types tagged (a value is never a list)."""
    if isinstance(v, dt.datetime):
        return ["timestamp", v.isoformat()]
    if isinstance(v, dt.date):
        return ["date", v.isoformat()]
    if isinstance(v, dt.time):
        return ["time", v.isoformat()]
    if isinstance(v, Decimal):
        return ["decimal", str(v)]
    if isinstance(v, bytes):
        return ["binary", base64.b64encode(v).decode()]
    return v


def _value_from_json(v: Any) -> Any:
    if not isinstance(v, list):
        return v
    tag, text = v
    if tag == "timestamp":
        return dt.datetime.fromisoformat(text)
    if tag == "date":
        return dt.date.fromisoformat(text)
    if tag == "time":
        return dt.time.fromisoformat(text)
    if tag == "decimal":
        return Decimal(text)
    if tag == "binary":
        return base64.b64decode(text)
    raise ValueError(f"unknown partition value tag {tag!r}")


@dataclass(frozen=True)
class Commit:
    version: int
    id: str
    kind: str  # append | overwrite | delete | compact | schema
    source: str | None
    at: float
    added: tuple[SegmentEntry, ...] = ()
    removed: tuple[str, ...] = ()  # segment ids
    schema: list[list[str]] | None = None  # set when the commit changed the schema
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def rows_added(self) -> int:
        return sum(s.rows for s in self.added)

    def to_payload(self) -> bytes:
        return json.dumps({
            "format": COMMIT_FORMAT_VERSION, "id": self.id, "kind": self.kind, "source": self.source,
            "at": self.at, "added": [s.to_json() for s in self.added], "removed": list(self.removed),
            "schema": self.schema, "info": self.info,
        }, separators=(",", ":")).encode()

    @classmethod
    def from_payload(cls, dataset: str, version: int, payload: bytes) -> Commit:
        try:
            v = json.loads(payload)
        except (ValueError, UnicodeDecodeError) as exc:
            raise CorruptCommitError(dataset, version, f"not valid JSON ({exc})") from None
        if not isinstance(v, dict) or "format" not in v:
            raise CorruptCommitError(dataset, version, "no format version")
        if v["format"] != COMMIT_FORMAT_VERSION:
            raise CorruptCommitError(
                dataset, version,
                f"commit format {v['format']} is unknown to this build (reads {COMMIT_FORMAT_VERSION})")
        try:
            return cls(version, v["id"], v["kind"], v.get("source"), float(v["at"]),
                       tuple(SegmentEntry.from_json(s) for s in v["added"]),
                       tuple(v["removed"]), v.get("schema"), v.get("info") or {})
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise CorruptCommitError(dataset, version, f"malformed record ({exc!r})") from None

    @classmethod
    def new(cls, kind: str, added: Iterable[SegmentEntry] = (), removed: Iterable[str] = (),
            source: str | None = None, schema: list[list[str]] | None = None,
            info: dict[str, Any] | None = None) -> Commit:
        return cls(0, str(uuid.uuid4()), kind, source, time.time(), tuple(added), tuple(removed),
                   schema, info or {})


@dataclass(frozen=True)
class Snapshot:
    """The dataset as of one version: its live segments, in commit order."""

    dataset: str
    version: int
    segments: tuple[SegmentEntry, ...]
    commits: tuple[Commit, ...]

    @property
    def rows(self) -> int:
        return sum(s.rows for s in self.segments)

    @classmethod
    def replay(cls, dataset: str, commits: list[Commit], version: int | None = None) -> Snapshot:
        live: dict[str, SegmentEntry] = {}
        kept = []
        for c in commits:
            if version is not None and c.version > version:
                break
            for sid in c.removed:
                live.pop(sid, None)
            for s in c.added:
                live[s.segment] = s
            kept.append(c)
        v = kept[-1].version if kept else 0
        return cls(dataset, v, tuple(live.values()), tuple(kept))
