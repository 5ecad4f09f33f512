"""Reading the commit log fast: checkpoints of the live state, and snapshots built from them.

Every ``checkpoint_interval`` commits (default 100, ``COLONNADE_CHECKPOINT_INTERVAL``) the writer
of that version stores a checkpoint: the live state as of the version (recorded schema,
properties, live segments with their partition values, transaction markers). Opening a dataset
reads the newest checkpoint at or below the wanted version plus the commits after it, so the
cost of opening does not grow with the length of the log, and finding a source identity is one
dictionary lookup in that state.

A checkpoint is an optimisation, never the truth: it is written after its commit, by whoever
committed that version, and may be missing (the writer died) or damaged. A checkpoint that fails
its checksum is skipped for the previous one (or the log from version 1), and ``verify`` lists
it. Bytes: ``CLNCKPT`` + format byte ``2`` + CRC-32 and length (big-endian u32 each) of the
JSON body + the body compressed with ZSTD. The body is columnar (one array per field, so that
reading 20,000 segments makes 20,000 small tuples and no dictionaries)::

    {"version": 200, "schema": [["id", "int64"], ...] | null, "properties": {...},
     "segments": {"segment": ["0b9e…", ...], "partition": ["cat=a", ...], "rows": [2, ...],
                  "bucket": [0, ...], "values": ["[\"a\"]", ...], "dictionary": ["[\"cat\"]", ...],
                  "stats": ["{\"id\":[2,0,1,5,0,16]}" | null, ...]},
     "txns": {"app_id": ["file:…", ...], "version": [1, ...], "commit": [37, ...]}}

``values`` and ``dictionary`` are JSON text, decoded once per distinct text (segments of one
partition share them). Format 1 (a list of segment objects, ``txns`` as ``{app id: [txn
version, commit version]}``) is still read.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
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


def encode_checkpoint(snapshot: Snapshot) -> bytes:
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
    body = json.dumps({
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
    }, separators=(",", ":")).encode()
    return _HEADER.pack(MAGIC, CHECKPOINT_FORMAT, zlib.crc32(body), len(body)) + \
        pa.compress(body, codec="zstd", asbytes=True)


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def decode_checkpoint(dataset: str, version: int, data: bytes) -> Snapshot:
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
        if fmt == 1:
            segments = tuple(SegmentEntry.from_dict(s) for s in v["segments"])
            txns = {k: (int(t), int(c)) for k, (t, c) in v["txns"].items()}
        else:
            segments = _segments(v["segments"])
            t = v["txns"]
            txns = dict(zip(t["app_id"], zip(t["version"], t["commit"], strict=True), strict=True))
        return Snapshot(dataset, version, segments, v["schema"], dict(v["properties"]), txns)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise CorruptCheckpointError(dataset, version, f"malformed ({exc})") from None


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


def load_snapshot(store: ChunkStore, dataset: str, version: int | None = None,
                  damaged: list[CorruptCheckpointError] | None = None) -> Snapshot:
    """The dataset as of ``version`` (default: the latest): the newest readable checkpoint at or
    below it plus the commits after it. Damaged checkpoints are skipped (and appended to
    ``damaged``). VersionNotFoundError when the log has no such version."""
    if version is not None and version < 0:
        raise VersionNotFoundError(dataset, version, None)
    base = Snapshot.empty(dataset)
    for cp in sorted((v for v in store.list_checkpoints(dataset) if version is None or v <= version),
                     reverse=True):
        data = store.get_checkpoint(dataset, cp)
        try:
            if data is None:
                raise CorruptCheckpointError(dataset, cp, "missing")
            base = decode_checkpoint(dataset, cp, data)
            break
        except CorruptCheckpointError as exc:
            if damaged is not None:
                damaged.append(exc)
    snapshot = base.apply(history(store, dataset, base.version, version))
    if version is not None and snapshot.version != version:
        raise VersionNotFoundError(dataset, version, snapshot.version)
    return snapshot


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
