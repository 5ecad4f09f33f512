"""Commit records: typed actions with named fields, and the snapshot they add up to.

A commit is a list of actions (the Delta protocol's model, kept small):

* ``commit_info`` (exactly one, first): id, operation (append, overwrite, delete, compact, ...),
  time, the version the writer read, who wrote it, free-form metrics;
* ``add_segments`` / ``remove_segments``: segments that become live / stop being live;
* ``set_schema``: the dataset's columns from this version on (schema evolution is a commit, so
  time travel reads each version's own columns);
* ``set_properties``: dataset properties (retention, ...), merged key by key;
* ``txn``: ``(app_id, version)`` — an ingest's source identity (``version`` 1), a stream's
  position (``position:kafka:topic:partition`` → the next offset to consume, see
  :func:`position_id`) or the base version a sample represents (``sample-of:<base>``);
  the latest version per app id is kept.

Format 2, as stored (JSON)::

    {"format": 2, "actions": [
      {"type": "commit_info", "id": "6f1c…", "operation": "append", "at": 1764000000.0,
       "read_version": 3, "writer": "colonnade 0.1.0 on host1 (pid 4242)", "info": {"input": "a.csv"}},
      {"type": "txn", "app_id": "file:/data/a.csv:512:sha256:…", "version": 1},
      {"type": "add_segments", "segments": [{"segment": "0b9e…", "partition": "cat=a", "rows": 2,
       "bucket": 0, "values": ["a"], "dictionary": ["cat"],
       "stats": "{\\"cat\\":[2,0,\\"a\\",\\"a\\",1,61],\\"n\\":[2,1,4,4,0,58]}"}]}]}

A segment's ``stats`` (per column: rows, nulls, min, max, dictionary-encoded, bytes; the same
figures as its segment-index row) are JSON text inside the record, decoded only when a scan or a
metadata answer needs them; segments added before the log carried them have none, and their
statistics are read from the segment index.

Format 1 records (one flat object per commit) are still read, as the equivalent actions. A
record of an unknown format or with an unknown action type is an error naming the dataset and
the version, never skipped.

Protocol of an append: 1. write chunks under fresh segment ids (invisible: no commit names
them); 2. write segment-index rows (still invisible); 3. write the commit record for version
``latest + 1`` atomically; if another writer took that version, re-read the new commits and try
the next one (chunks are not rewritten). A reader pins a version and sees exactly the segments
added and not removed by commits ≤ it (see :mod:`colonnade.table.log` for checkpoints).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, NamedTuple

from colonnade.errors import CorruptCommitError

COMMIT_FORMAT_VERSION = 2
READABLE_FORMATS = (1, 2)


class SegmentEntry(NamedTuple):
    """A segment as named by a commit: its partition values (to prune partitions) and its
    statistics (to prune segments and answer from metadata). A named tuple: a dataset opened
    from a checkpoint makes one per live segment, and tuples cost a fifth of a dataclass."""

    segment: str
    partition: str
    rows: int
    bucket: int
    values: tuple[Any, ...]  # partition values, one per transform
    dictionary: frozenset[str] = frozenset()  # columns stored dictionary-encoded
    #: per-column statistics as JSON text, ``{"col": [rows, nulls, min, max, dictionary, bytes]}``
    #: (None in commits written before the log carried them: the segment index has them)
    stats: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"segment": self.segment, "partition": self.partition, "rows": self.rows,
               "bucket": self.bucket, "values": [value_to_json(v) for v in self.values],
               "dictionary": sorted(self.dictionary)}
        if self.stats is not None:
            out["stats"] = self.stats
        return out

    @classmethod
    def from_dict(cls, v: dict[str, Any]) -> SegmentEntry:
        stats = v.get("stats")
        return cls(v["segment"], v["partition"], int(v["rows"]), int(v["bucket"]),
                   tuple(value_from_json(x) for x in v["values"]), frozenset(v["dictionary"]),
                   None if stats is None else str(stats))

    @classmethod
    def from_format1(cls, v: list[Any]) -> SegmentEntry:
        return cls(v[0], v[1], int(v[2]), int(v[3]), tuple(value_from_json(x) for x in v[4]), frozenset(v[5]))


def value_to_json(v: Any) -> Any:
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


def value_from_json(v: Any) -> Any:
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


# -- actions ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CommitInfo:
    id: str
    operation: str  # append | overwrite | delete | compact | schema | ...
    at: float
    read_version: int | None = None  # the version the writer read before writing
    writer: str = ""
    info: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "operation": self.operation, "at": self.at,
                "read_version": self.read_version, "writer": self.writer, "info": self.info}

    @classmethod
    def from_dict(cls, v: dict[str, Any]) -> CommitInfo:
        return cls(v["id"], v["operation"], float(v["at"]), v.get("read_version"), v.get("writer", ""),
                   v.get("info") or {})


@dataclass(frozen=True)
class AddSegments:
    segments: tuple[SegmentEntry, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"segments": [s.to_dict() for s in self.segments]}

    @classmethod
    def from_dict(cls, v: dict[str, Any]) -> AddSegments:
        return cls(tuple(SegmentEntry.from_dict(s) for s in v["segments"]))


@dataclass(frozen=True)
class RemoveSegments:
    segments: tuple[str, ...]  # segment ids

    def to_dict(self) -> dict[str, Any]:
        return {"segments": list(self.segments)}

    @classmethod
    def from_dict(cls, v: dict[str, Any]) -> RemoveSegments:
        return cls(tuple(str(s) for s in v["segments"]))


@dataclass(frozen=True)
class SetSchema:
    schema: list[list[str]]  # [[name, type], ...] as schema_to_json writes it

    def to_dict(self) -> dict[str, Any]:
        return {"schema": self.schema}

    @classmethod
    def from_dict(cls, v: dict[str, Any]) -> SetSchema:
        return cls([[str(n), str(t)] for n, t in v["schema"]])


@dataclass(frozen=True)
class SetProperties:
    properties: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"properties": self.properties}

    @classmethod
    def from_dict(cls, v: dict[str, Any]) -> SetProperties:
        return cls(dict(v["properties"]))


#: App ids of stream positions start with this (a source identity given by a user may not);
#: any other app id is a source identity.
POSITION_PREFIX = "position:kafka:"
#: App ids of the base version a sample represents (see :mod:`colonnade.table.sample`).
SAMPLE_PREFIX = "sample-of:"


def position_id(topic: str, partition: int) -> str:
    """The app id under which a commit records a stream's next offset in one Kafka partition."""
    return f"{POSITION_PREFIX}{topic}:{partition}"


@dataclass(frozen=True)
class Txn:
    app_id: str
    version: int

    @property
    def is_position(self) -> bool:
        """A stream position (next offset), rather than a source identity."""
        return self.app_id.startswith(POSITION_PREFIX)

    @property
    def is_source(self) -> bool:
        """An ingest's source identity (not a stream position, nor a sample's base version)."""
        return not self.app_id.startswith((POSITION_PREFIX, SAMPLE_PREFIX))

    def to_dict(self) -> dict[str, Any]:
        return {"app_id": self.app_id, "version": self.version}

    @classmethod
    def from_dict(cls, v: dict[str, Any]) -> Txn:
        return cls(str(v["app_id"]), int(v["version"]))


Action = CommitInfo | AddSegments | RemoveSegments | SetSchema | SetProperties | Txn

ACTION_TYPES: dict[str, type[Action]] = {
    "commit_info": CommitInfo, "add_segments": AddSegments, "remove_segments": RemoveSegments,
    "set_schema": SetSchema, "set_properties": SetProperties, "txn": Txn,
}
_TYPE_NAMES = {cls: name for name, cls in ACTION_TYPES.items()}


# -- commits ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Commit:
    """One commit: its version and its actions (``commit_info`` first)."""

    version: int
    actions: tuple[Action, ...]

    @property
    def commit_info(self) -> CommitInfo:
        return next(a for a in self.actions if isinstance(a, CommitInfo))

    @property
    def id(self) -> str:
        return self.commit_info.id

    @property
    def kind(self) -> str:
        return self.commit_info.operation

    @property
    def at(self) -> float:
        return self.commit_info.at

    @property
    def info(self) -> dict[str, Any]:
        return self.commit_info.info

    @property
    def txns(self) -> tuple[Txn, ...]:
        return tuple(a for a in self.actions if isinstance(a, Txn))

    @property
    def source(self) -> str | None:
        """The source identity an ingest recorded (its first txn that is not a stream
        position), if any."""
        return next((t.app_id for t in self.txns if t.is_source), None)

    @property
    def positions(self) -> dict[str, int]:
        """The stream positions this commit recorded (app id → next offset)."""
        return {t.app_id: t.version for t in self.txns if t.is_position}

    @property
    def added(self) -> tuple[SegmentEntry, ...]:
        return tuple(s for a in self.actions if isinstance(a, AddSegments) for s in a.segments)

    @property
    def removed(self) -> tuple[str, ...]:
        return tuple(s for a in self.actions if isinstance(a, RemoveSegments) for s in a.segments)

    @property
    def schema(self) -> list[list[str]] | None:
        """The schema this commit set, if it set one."""
        sets = [a for a in self.actions if isinstance(a, SetSchema)]
        return sets[-1].schema if sets else None

    @property
    def rows_added(self) -> int:
        return sum(s.rows for s in self.added)

    def at_version(self, version: int, read_version: int | None = None) -> Commit:
        """This commit as written for ``version`` (time and read version set now)."""
        info = replace(self.commit_info, at=time.time(),
                       read_version=self.commit_info.read_version if read_version is None else read_version)
        return Commit(version, tuple(info if isinstance(a, CommitInfo) else a for a in self.actions))

    def with_actions(self, *actions: Action) -> Commit:
        return Commit(self.version, self.actions + actions)

    def to_payload(self) -> bytes:
        return json.dumps({
            "format": COMMIT_FORMAT_VERSION,
            "actions": [{"type": _TYPE_NAMES[type(a)], **a.to_dict()} for a in self.actions],
        }, separators=(",", ":")).encode()

    @classmethod
    def from_payload(cls, dataset: str, version: int, payload: bytes) -> Commit:
        try:
            v = json.loads(payload)
        except (ValueError, UnicodeDecodeError) as exc:
            raise CorruptCommitError(dataset, version, f"not valid JSON ({exc})") from None
        if not isinstance(v, dict) or "format" not in v:
            raise CorruptCommitError(dataset, version, "no format version")
        if v["format"] not in READABLE_FORMATS:
            raise CorruptCommitError(
                dataset, version,
                f"commit format {v['format']} is unknown to this build (it reads formats "
                f"{', '.join(map(str, READABLE_FORMATS))})")
        try:
            if v["format"] == 1:
                return cls(version, _format1_actions(v))
            actions = []
            for a in v["actions"]:
                kind = ACTION_TYPES.get(a.get("type"))
                if kind is None:
                    raise CorruptCommitError(dataset, version, f"unknown action type {a.get('type')!r}")
                actions.append(kind.from_dict(a))
        except CorruptCommitError:
            raise
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise CorruptCommitError(dataset, version, f"malformed record ({exc!r})") from None
        if sum(isinstance(a, CommitInfo) for a in actions) != 1:
            raise CorruptCommitError(dataset, version, "a commit needs exactly one commit_info action")
        return cls(version, tuple(actions))

    @classmethod
    def new(cls, kind: str, added: Iterable[SegmentEntry] = (), removed: Iterable[str] = (),
            source: str | None = None, schema: list[list[str]] | None = None,
            info: dict[str, Any] | None = None, writer: str | None = None,
            positions: dict[str, int] | None = None, commit_id: str | None = None) -> Commit:
        """A commit of operation ``kind``; ``writer`` names who writes it (default: this build
        of Colonnade, the host and the process); ``positions``: stream positions it records
        (app id from :func:`position_id` → next offset); ``commit_id``: the id its segments were
        written under, when they were written before (default: a new one)."""
        actions: list[Action] = [CommitInfo(commit_id or str(uuid.uuid4()), kind, time.time(), None,
                                            default_writer() if writer is None else writer, info or {})]
        if source is not None:
            if not Txn(source, 1).is_source:
                raise ValueError(f"a source identity can't start with {POSITION_PREFIX!r} or "
                                 f"{SAMPLE_PREFIX!r}: {source}")
            actions.append(Txn(source, 1))
        for app_id, offset in sorted((positions or {}).items()):
            if not app_id.startswith(POSITION_PREFIX):
                raise ValueError(f"a stream position's app id starts with {POSITION_PREFIX!r}: {app_id}")
            actions.append(Txn(app_id, int(offset)))
        if schema is not None:
            actions.append(SetSchema(schema))
        removed = tuple(removed)
        if removed:
            actions.append(RemoveSegments(removed))
        added = tuple(added)
        if added:
            actions.append(AddSegments(added))
        return cls(0, tuple(actions))


def default_writer() -> str:
    """``colonnade 0.1.0 on host (pid 1234)``: the writer a commit records by default."""
    import socket

    from colonnade import __version__

    return f"colonnade {__version__} on {socket.gethostname()} (pid {os.getpid()})"


def _format1_actions(v: dict[str, Any]) -> tuple[Action, ...]:
    """A format-1 record (``id, kind, source, at, added, removed, schema, info``) as actions."""
    actions: list[Action] = [CommitInfo(v["id"], v["kind"], float(v["at"]), None, "", v.get("info") or {})]
    if v.get("source") is not None:
        actions.append(Txn(v["source"], 1))
    if v.get("schema") is not None:
        actions.append(SetSchema(v["schema"]))
    if v["removed"]:
        actions.append(RemoveSegments(tuple(v["removed"])))
    if v["added"]:
        actions.append(AddSegments(tuple(SegmentEntry.from_format1(s) for s in v["added"])))
    return tuple(actions)


# -- snapshots ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Snapshot:
    """The dataset as of one version: its live segments (in commit order), the schema recorded
    last (None: no commit recorded one), its properties and its transaction markers."""

    dataset: str
    version: int
    segments: tuple[SegmentEntry, ...]
    schema: list[list[str]] | None = None
    properties: dict[str, Any] = field(default_factory=dict)
    txns: dict[str, tuple[int, int]] = field(default_factory=dict)  # app id -> (txn version, commit version)

    @property
    def rows(self) -> int:
        return sum(s.rows for s in self.segments)

    def by_partition(self) -> dict[str, list[SegmentEntry]]:
        """The live segments of each partition, in commit order (worked out once per snapshot;
        callers must not change it)."""
        known = self.__dict__.get("_by_partition")
        if known is None:
            known = {}
            for s in self.segments:
                known.setdefault(s.partition, []).append(s)
            object.__setattr__(self, "_by_partition", known)  # a cache, not a field
        return known  # type: ignore[no-any-return]

    def dictionary_columns(self) -> frozenset[str]:
        """The columns every live segment stores dictionary-encoded (worked out once: every
        query of a snapshot asks, and a snapshot may hold hundreds of thousands of segments)."""
        known = self.__dict__.get("_dictionary_columns")
        if known is None:
            known = frozenset.intersection(*(s.dictionary for s in self.segments)) if self.segments else frozenset()
            object.__setattr__(self, "_dictionary_columns", known)  # a cache, not a field
        return known  # type: ignore[no-any-return]

    @classmethod
    def empty(cls, dataset: str) -> Snapshot:
        return cls(dataset, 0, ())

    def apply(self, commits: Iterable[Commit], version: int | None = None) -> Snapshot:
        """This snapshot with ``commits`` (newer ones, in version order) applied, up to ``version``."""
        commits = [c for c in commits if version is None or c.version <= version]
        if not commits:
            return self  # nothing newer: no copy of the live segments
        if any(isinstance(a, RemoveSegments) for c in commits for a in c.actions):
            live = {s.segment: s for s in self.segments}
            added: list[SegmentEntry] | None = None
        else:  # appends only (a stream's commits): extend the tuple, no dictionary of every segment
            live, added = {}, []
        schema, properties, txns, at = self.schema, dict(self.properties), dict(self.txns), self.version
        for c in commits:
            for action in c.actions:
                if isinstance(action, RemoveSegments):
                    for sid in action.segments:
                        live.pop(sid, None)
                elif isinstance(action, AddSegments):
                    if added is not None:
                        added.extend(action.segments)
                    else:
                        for s in action.segments:
                            live[s.segment] = s
                elif isinstance(action, SetSchema):
                    schema = action.schema
                elif isinstance(action, SetProperties):
                    properties.update(action.properties)
                elif isinstance(action, Txn):
                    txns[action.app_id] = (action.version, c.version)
            at = c.version
        segments = self.segments + tuple(added) if added is not None else tuple(live.values())
        return Snapshot(self.dataset, at, segments, schema, properties, txns)

    @classmethod
    def replay(cls, dataset: str, commits: list[Commit], version: int | None = None) -> Snapshot:
        return cls.empty(dataset).apply(commits, version)


#: The base dataset's property listing its samples (a JSON list of their names).
SAMPLES_PROPERTY = "samples"


def listed_samples(properties: dict[str, str], actions: tuple[Any, ...] = ()) -> list[str]:
    """The samples ``properties`` list, as ``actions`` (a commit's) leave them."""
    text = properties.get(SAMPLES_PROPERTY)
    for a in actions:
        if isinstance(a, SetProperties) and SAMPLES_PROPERTY in a.properties:
            text = a.properties[SAMPLES_PROPERTY]
    return list(json.loads(text or "[]"))
