"""Reading the commit log fast: checkpoints of the live state, and snapshots built from them.

Every ``checkpoint_interval`` commits (default 100, ``COLONNADE_CHECKPOINT_INTERVAL``), and after
a commit that removed at least that many segments (a compaction), the writer of that version
stores a checkpoint: the live state as of the version (recorded schema,
properties, live segments with their partition values, transaction markers). Opening a dataset
reads the newest checkpoint at or below the wanted version plus the commits after it, so the
cost of opening does not grow with the length of the log, and finding a source identity is one
dictionary lookup in that state.

A checkpoint is an optimisation, never the truth: it is written after its commit, by whoever
committed that version, and may be missing (the writer died) or damaged. A checkpoint that fails
its checksum is skipped for the previous one (or the log from version 1), and ``verify`` lists
it. Once ``expire`` has removed the commits below a version (see
:mod:`colonnade.table.expiry`), the log no longer starts at version 1: a snapshot is built only
from a checkpoint the kept commits continue without a gap, and when none is readable opening
fails with a CorruptCheckpointError naming the checkpoint the kept log starts from, never with a
state replayed from part of the log. Versions below the oldest kept one are VersionNotFoundError
(saying they were expired), even where a fallback checkpoint could still build them.

Bytes: ``CLNCKPT`` + format byte ``2`` + CRC-32 and length (big-endian u32 each) of the
JSON body + the body compressed with ZSTD. The body is columnar (one array per field, so that
reading 20,000 segments makes 20,000 small tuples and no dictionaries)::

    {"version": 200, "schema": [["id", "int64"], ...] | null, "properties": {...},
     "segments": {"segment": ["0b9e…", ...], "partition": ["cat=a", ...], "rows": [2, ...],
                  "bucket": [0, ...], "values": ["[\"a\"]", ...], "dictionary": ["[\"cat\"]", ...],
                  "stats": ["{\"id\":[2,0,1,5,0,16]}" | null, ...]},
     "txns": {"app_id": ["file:…", ...], "version": [1, ...], "commit": [37, ...]},
     "expired": ["segment id", ...]}

``values`` and ``dictionary`` are JSON text, decoded once per distinct text (segments of one
partition share them). Format 1 (a list of segment objects, ``txns`` as ``{app id: [txn
version, commit version]}``) is still read.

``expired`` (optional, written by ``expire`` in the checkpoint of the oldest kept version) lists
the segments that only the versions it expired read, so that ``vacuum`` can remove them at once
although the commits that named them are gone (older builds ignore the key).
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Collection
from typing import Any

from colonnade.errors import CorruptCheckpointError, VersionNotFoundError
from colonnade.storage.base import ChunkStore
from colonnade.table.commits import Commit, SegmentEntry, Snapshot, value_from_json, value_to_json

MAGIC = b"CLNCKPT"
CHECKPOINT_FORMAT = 2
READABLE_CHECKPOINT_FORMATS = (1, 2)
_HEADER = struct.Struct(">7sBII")
DEFAULT_CHECKPOINT_INTERVAL = 100


def checkpoint_interval() -> int:
    """Commits between checkpoints: ``$COLONNADE_CHECKPOINT_INTERVAL`` or 100."""
    text = os.environ.get("COLONNADE_CHECKPOINT_INTERVAL")
    try:
        return max(1, int(text)) if text else DEFAULT_CHECKPOINT_INTERVAL
    except ValueError:
        return DEFAULT_CHECKPOINT_INTERVAL


def checkpoint_due(version: int, commit: Commit) -> bool:
    """Whether the writer of ``version`` also writes its checkpoint: every
    ``checkpoint_interval`` versions, and after a commit that removed at least that many
    segments (a compaction or an overwrite: the live state just shrank, and opening from the
    previous checkpoint would decode every segment it removed)."""
    interval = checkpoint_interval()
    return version % interval == 0 or len(commit.removed) >= interval


def encode_checkpoint(snapshot: Snapshot, expired: Collection[str] = ()) -> bytes:
    import pyarrow as pa

    segs = snapshot.segments
    txns = list(snapshot.txns.items())
    values: dict[tuple[Any, ...], str] = {}
    dictionaries: dict[frozenset[str], str] = {}
    for s in segs:  # once per distinct text, as decoding does
        if s.values not in values:
            values[s.values] = _compact([value_to_json(v) for v in s.values])
        if s.dictionary not in dictionaries:
            dictionaries[s.dictionary] = _compact(sorted(s.dictionary))
    content: dict[str, Any] = {
        "version": snapshot.version, "schema": snapshot.schema, "properties": snapshot.properties,
        "segments": {
            "segment": [s.segment for s in segs], "partition": [s.partition for s in segs],
            "rows": [s.rows for s in segs], "bucket": [s.bucket for s in segs],
            "values": [values[s.values] for s in segs],
            "dictionary": [dictionaries[s.dictionary] for s in segs],
            "stats": [s.stats for s in segs],
        },
        "txns": {"app_id": [k for k, _ in txns], "version": [t for _, (t, _) in txns],
                 "commit": [c for _, (_, c) in txns]},
    }
    if expired:
        content["expired"] = sorted(expired)
    body = json.dumps(content, separators=(",", ":")).encode()
    return _HEADER.pack(MAGIC, CHECKPOINT_FORMAT, zlib.crc32(body), len(body)) + \
        pa.compress(body, codec="zstd", asbytes=True)


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def decode_checkpoint(dataset: str, version: int, data: bytes) -> Snapshot:
    v = _checkpoint_body(dataset, version, data)
    try:
        if isinstance(v["segments"], list):  # format 1
            segments = tuple(SegmentEntry.from_dict(s) for s in v["segments"])
            txns = {k: (int(t), int(c)) for k, (t, c) in v["txns"].items()}
        else:
            segments = _segments(v["segments"])
            t = v["txns"]
            txns = dict(zip(t["app_id"], zip(t["version"], t["commit"], strict=True), strict=True))
        return Snapshot(dataset, version, segments, v["schema"], dict(v["properties"]), txns)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise CorruptCheckpointError(dataset, version, f"malformed ({exc})") from None


def checkpoint_expired(dataset: str, version: int, data: bytes) -> list[str]:
    """The segments a checkpoint lists as read only by expired versions (see ``expired``)."""
    return [str(s) for s in _checkpoint_body(dataset, version, data).get("expired", ())]


def _checkpoint_body(dataset: str, version: int, data: bytes) -> dict[str, Any]:
    import pyarrow as pa

    if len(data) < _HEADER.size:
        raise CorruptCheckpointError(dataset, version, f"{len(data)} bytes, shorter than its header")
    magic, fmt, crc, size = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise CorruptCheckpointError(dataset, version, "not a checkpoint (bad magic bytes)")
    if fmt not in READABLE_CHECKPOINT_FORMATS:
        readable = ", ".join(map(str, READABLE_CHECKPOINT_FORMATS))
        raise CorruptCheckpointError(dataset, version, f"checkpoint format {fmt} is unknown to this "
                                                       f"build (it reads {readable})")
    try:
        body = pa.decompress(data[_HEADER.size:], decompressed_size=size, codec="zstd", asbytes=True)
    except (pa.ArrowException, ValueError) as exc:
        raise CorruptCheckpointError(dataset, version, f"cannot decompress ({exc})") from None
    if zlib.crc32(body) != crc:
        raise CorruptCheckpointError(dataset, version, "checksum mismatch")
    try:
        v = json.loads(body)
        if int(v["version"]) != version:
            raise ValueError(f"it says version {v['version']}")
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptCheckpointError(dataset, version, f"malformed ({exc})") from None
    if not isinstance(v, dict):
        raise CorruptCheckpointError(dataset, version, "malformed (not an object)")
    return v


def _segments(columns: dict[str, list[Any]]) -> tuple[SegmentEntry, ...]:
    """The live segments of a format-2 checkpoint (partition values and dictionary sets
    decoded once per distinct text)."""
    values: dict[str, tuple[Any, ...]] = {}
    dictionaries: dict[str, frozenset[str]] = {}

    def decoded_values(text: str) -> tuple[Any, ...]:
        found = values.get(text)
        if found is None:
            found = values[text] = tuple(value_from_json(x) for x in json.loads(text))
        return found

    def decoded_dictionary(text: str) -> frozenset[str]:
        found = dictionaries.get(text)
        if found is None:
            found = dictionaries[text] = frozenset(json.loads(text))
        return found

    return tuple(SegmentEntry(seg, part, rows, bucket, decoded_values(vals), decoded_dictionary(dic), stats)
                 for seg, part, rows, bucket, vals, dic, stats in zip(
                     columns["segment"], columns["partition"], columns["rows"], columns["bucket"],
                     columns["values"], columns["dictionary"], columns["stats"], strict=True))


def history(store: ChunkStore, dataset: str, after: int = 0, upto: int | None = None) -> list[Commit]:
    """Commits with ``after < version ≤ upto``, in version order."""
    return [Commit.from_payload(dataset, v, p) for v, p in store.list_commits(dataset, after, upto)]


def check_kept(store: ChunkStore, dataset: str, version: int) -> None:
    """VersionNotFoundError if ``version`` is negative or was expired (one small read)."""
    if version < 0:
        raise VersionNotFoundError(dataset, version, None)
    oldest = store.oldest_version(dataset)
    if version < oldest:
        raise VersionNotFoundError(dataset, version, store.latest_version(dataset), oldest)


def load_snapshot(store: ChunkStore, dataset: str, version: int | None = None,
                  damaged: list[CorruptCheckpointError] | None = None,
                  last: list[bytes] | None = None) -> Snapshot:
    """The dataset as of ``version`` (default: the latest): the newest readable checkpoint at or
    below it plus the commits after it. Damaged checkpoints are skipped (and appended to
    ``damaged``). VersionNotFoundError when the log has no such version or it was expired;
    CorruptCheckpointError (``fatal``) when the kept log starts after every readable checkpoint.
    With ``last`` given, the mark of the snapshot's own commit (see :func:`follow`) is
    appended to it, unless the snapshot is of version 0 or that commit was expired."""
    if version is not None:
        check_kept(store, dataset, version)
    base = Snapshot.empty(dataset)
    skipped: list[CorruptCheckpointError] = []
    for cp in sorted((v for v in store.list_checkpoints(dataset) if version is None or v <= version),
                     reverse=True):
        data = store.get_checkpoint(dataset, cp)
        try:
            if data is None:
                raise CorruptCheckpointError(dataset, cp, "missing")
            base = decode_checkpoint(dataset, cp, data)
            break
        except CorruptCheckpointError as exc:
            skipped.append(exc)
    if damaged is not None:
        damaged.extend(skipped)
    own, rows = (store.follow_commits(dataset, base.version, version) if last is not None and base.version
                 else (None, store.list_commits_marked(dataset, base.version, version)))
    tail = [Commit.from_payload(dataset, v, p) for v, p, _ in rows]
    if not _continues(base.version, tail):
        raise _no_start(store, dataset, tail[0].version, skipped)
    snapshot = base.apply(tail)
    if version is not None and snapshot.version != version:
        raise VersionNotFoundError(dataset, version, snapshot.version)
    mark = rows[-1][2] if rows else own
    if last is not None and mark is not None:
        last.append(mark)
    return snapshot


def follow(store: ChunkStore, snapshot: Snapshot, last: bytes, upto: int | None = None
           ) -> tuple[Snapshot, bytes] | None:
    """``snapshot`` with the commits after it applied (up to ``upto``), and the mark of the
    commit of the version reached, provided the log still holds the commit ``snapshot`` was
    read at, with mark ``last`` (see :meth:`ChunkStore.follow_commits`): then it is the log
    ``snapshot`` was read from, not that of a dataset dropped and created again under the name
    since. One round trip. None when that can't be seen (the commit was expired, the log is
    another one or is gone): read it afresh."""
    mark, rows = store.follow_commits(snapshot.dataset, snapshot.version, upto)
    if mark is None or mark != last:
        return None
    tail = [Commit.from_payload(snapshot.dataset, v, p) for v, p, _ in rows]
    if not _continues(snapshot.version, tail):
        return None
    return snapshot.apply(tail), rows[-1][2] if rows else mark


def _continues(version: int, tail: list[Commit]) -> bool:
    """Whether ``tail`` follows ``version`` without a gap (expired commits leave one)."""
    return all(c.version == version + i for i, c in enumerate(tail, start=1))


def _no_start(store: ChunkStore, dataset: str, first: int,
              skipped: list[CorruptCheckpointError]) -> CorruptCheckpointError:
    """The error of a log kept from version ``first`` on with no readable checkpoint at or
    after ``first - 1``: it names the checkpoint the kept log starts from (the oldest kept
    version's, which expire wrote) and the fallbacks that could not stand in for it."""
    oldest = store.oldest_version(dataset)
    candidates = {d.version: d for d in skipped if d.version >= first - 1}
    start = oldest if oldest >= first - 1 else max(candidates, default=first - 1)
    reason = candidates[start].reason if start in candidates else "missing"
    others = sorted(v for v in candidates if v != start)
    also = "".join(f"; fallback checkpoint of version {v}: {candidates[v].reason}" for v in others)
    return CorruptCheckpointError(
        dataset, start, f"{reason}{also}; the log before version {first} was expired, so no older "
                        f"state can stand in for it", fatal=True)


def verify_checkpoints(store: ChunkStore, dataset: str) -> tuple[int, list[CorruptCheckpointError]]:
    """Decode every checkpoint; (checkpoints checked, damaged ones). After an expire, a kept log
    that no readable checkpoint starts is listed too (``fatal``: the dataset cannot be opened)."""
    damaged = []
    versions = store.list_checkpoints(dataset)
    for version in versions:
        data = store.get_checkpoint(dataset, version)
        try:
            if data is None:
                raise CorruptCheckpointError(dataset, version, "missing")
            decode_checkpoint(dataset, version, data)
        except CorruptCheckpointError as exc:
            damaged.append(exc)
    if store.oldest_version(dataset):
        try:
            load_snapshot(store, dataset)
        except CorruptCheckpointError as exc:
            damaged = [d for d in damaged if d.version != exc.version] + [exc]
            versions = versions if exc.version in versions else [*versions, exc.version]
    return len(versions), sorted(damaged, key=lambda d: d.version)


def write_checkpoint(store: ChunkStore, snapshot: Snapshot) -> bool:
    """Store the checkpoint of ``snapshot``; whether it was written. Called by the writer of a
    version on the interval, right after its commit; a checkpoint that cannot be written is left
    out (the previous one plus a longer tail still opens the dataset)."""
    from colonnade.errors import StoreError

    try:
        store.put_checkpoint(snapshot.dataset, snapshot.version, encode_checkpoint(snapshot))
    except StoreError:
        return False
    return True
