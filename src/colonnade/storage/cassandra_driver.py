"""Cassandra driver plumbing of the Cassandra store: which requests may be retried, a window
that bounds the requests and bytes in flight while writes are sent asynchronously, and the
reassembly of chunk rows that arrive page by page, and the routing of chunk queries to the
replicas of the chunks they read."""

from __future__ import annotations

import atexit
import io
import socket
import struct
import threading
import time
import weakref
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

from cassandra import ConsistencyLevel, ProtocolVersion
from cassandra.cluster import DefaultConnection, NoHostAvailable
from cassandra.connection import (
    PROTOCOL_VERSION_MASK,
    ConnectionBusy,
    ProtocolError,
    _Frame,
    frame_header_v1_v2,
    frame_header_v3,
)
from cassandra.policies import RetryPolicy, WriteType
from cassandra.pool import NoConnectionsAvailable
from cassandra.query import BoundStatement

from colonnade.storage.base import ChunkRef

MAX_REQUESTS = 256  # writes in flight, whatever their size
#: Nagle off (the Python driver leaves it on): a request over one TCP segment otherwise waits
#: for the node's delayed ACK, ~40 ms (the Java driver turns it off by default).
NO_DELAY = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]


# -- driver plumbing ------------------------------------------------------------------------
_OPEN: weakref.WeakSet[Any] = weakref.WeakSet()  # clusters to shut down at exit if still open
_HOOK = threading.Lock()
_hooked = False


def shut_at_exit(cluster: Any) -> None:
    """Shut ``cluster`` down when the interpreter exits, if it is still open, before thread
    pools stop taking work: the driver's own exit hook comes after that, and a task its
    scheduler ran meanwhile (e.g. a reconnection to a stopped node) printed a traceback."""
    global _hooked
    with _HOOK:
        if not _hooked:  # threading's exit hooks run last registered first: before the pools'
            getattr(threading, "_register_atexit", atexit.register)(_shut_open)
            _hooked = True
        _OPEN.add(cluster)


def _shut_open() -> None:
    for cluster in list(_OPEN):
        if not cluster.is_shutdown:
            try:
                cluster.shutdown()
            except Exception:  # noqa: BLE001 - exiting all the same
                pass


class IdempotentRetryPolicy(RetryPolicy):
    """Retry what is safe to run twice, and nothing else: a retried LWT that had in fact been
    applied would come back "not applied" and look like a lost commit."""

    def on_write_timeout(self, query, consistency, write_type, required_responses,
                         received_responses, retry_num):
        if getattr(query, "is_idempotent", False) and retry_num == 0 and write_type in (
                WriteType.SIMPLE, WriteType.BATCH, WriteType.UNLOGGED_BATCH):
            return self.RETRY, consistency
        return self.RETHROW, None

    def on_unavailable(self, query, consistency, required_replicas, alive_replicas, retry_num):
        return self.RETHROW, None  # other coordinators see the same replicas: report it now

    def on_request_error(self, query, consistency, error, retry_num):
        if getattr(query, "is_idempotent", False) and retry_num < 2:
            return self.RETRY_NEXT_HOST, None
        return self.RETHROW, None


def level_name(level: int | None) -> str:
    return ConsistencyLevel.value_to_name.get(level, str(level))


def one_line(text: str, limit: int = 240) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def is_busy(exc: BaseException) -> bool:
    """True when the driver refused to send (its socket buffer was full): nothing reached the
    server, so sending again later is safe for any statement."""
    if not isinstance(exc, NoHostAvailable) or not exc.errors:
        return False
    return all(isinstance(e, ConnectionBusy | NoConnectionsAvailable) for e in exc.errors.values())


def chunk_routing_key(dataset: str, partition: str, column: str | None, bucket: int) -> bytes:
    """The serialized partition key of a chunk, as the driver's token-aware policy hashes it:
    ``(dataset, partition, bucket)`` of ``slice_chunks``, or with ``column`` given, ``(dataset,
    partition, column, bucket)`` of a keyspace's legacy ``chunks`` table."""
    names = (dataset, partition) if column is None else (dataset, partition, column)
    parts = (*(n.encode() for n in names), struct.pack(">i", bucket))
    return b"".join(struct.pack(">H", len(p)) + p + b"\0" for p in parts)


class RoutedStatement(BoundStatement):
    """A bound statement sent to the replicas of ``routing_key``, set by the caller: a query
    with ``partition IN ?`` names no single partition key, so the driver would send it to any
    node, which then asks the replicas (one more hop on a cluster of several nodes)."""

    @property
    def routing_key(self) -> bytes | None:
        return self._routing_key


class RequestWindow:
    """Runs many ``execute_async`` calls with at most ``max_bytes`` and ``max_requests`` in
    flight. Requests the driver refuses as busy are sent again after a pause, for up to
    ``patience`` seconds each; the first real failure stops everything."""

    def __init__(self, session: Any, max_bytes: int, patience: float) -> None:
        self._session, self._max_bytes, self._patience = session, max_bytes, patience
        self._bytes = self._requests = 0
        self._again: deque[tuple[Any, int, float]] = deque()
        self._cond = threading.Condition()
        self.error: BaseException | None = None

    def submit(self, statement: Any, size: int) -> None:
        while True:
            with self._cond:
                while self.error is None and not self._again and self._requests and (
                        self._bytes + size > self._max_bytes or self._requests >= MAX_REQUESTS):
                    self._cond.wait()
                if self.error is not None:
                    return
                if not self._again:
                    self._bytes += size
                    self._requests += 1
                    break
            self._resend()
        self._send(statement, size, time.monotonic())

    def wait(self) -> BaseException | None:
        """Wait for everything submitted; the first failure, if any."""
        while True:
            with self._cond:
                while self._requests and not self._again:
                    self._cond.wait()
                if not self._requests:
                    return self.error
            self._resend()

    def _resend(self) -> None:
        time.sleep(0.001)  # let the driver's event loop drain the socket
        with self._cond:
            again, self._again = self._again, deque()
        for statement, size, since in again:
            if self.error is None:
                self._send(statement, size, since)
            else:
                self._release(size)

    def _send(self, statement: Any, size: int, since: float) -> None:
        try:
            future = self._session.execute_async(statement, execution_profile="write")
        except Exception as exc:
            self._failed(exc, statement, size, since)
            return
        future.add_callbacks(lambda _rows: self._release(size), self._failed,
                             errback_args=(statement, size, since))

    def _failed(self, exc: BaseException, statement: Any, size: int, since: float) -> None:
        with self._cond:
            if is_busy(exc) and self.error is None and time.monotonic() - since < self._patience:
                self._again.append((statement, size, since))
                self._cond.notify_all()
                return
            self.error = self.error or exc
        self._release(size)

    def _release(self, size: int) -> None:
        with self._cond:
            self._bytes -= size
            self._requests -= 1
            self._cond.notify_all()


class ChunkQuery:
    """One chunk query (some columns of one slice, some segments) and the reassembly of its
    rows, which arrive in clustering order (segment, part) for each column, possibly over
    several pages."""

    __slots__ = ("key", "wanted", "future", "pages", "since", "_chunk", "_parts", "_count")

    def __init__(self, key: tuple[tuple[str, ...], tuple[str, ...], int],
                 wanted: dict[tuple[str, str], list[ChunkRef]]) -> None:
        self.key, self.wanted = key, wanted  # key: (partitions, columns, bucket)
        self.future: Any = None
        self.pages = 0
        self.since = time.monotonic()  # last progress, for giving up on a busy connection
        self._chunk: tuple[str, str] | None = None  # (column, segment) being reassembled
        self._parts: list[bytes] = []
        self._count = 0

    @property
    def segments(self) -> list[str]:
        return sorted({segment for _, segment in self.wanted})

    def feed(self, rows: Iterable[tuple[str, str, int, int, bytes]], last: bool) -> Iterator[tuple[ChunkRef, bytes]]:
        for column, segment, part, count, data in rows:
            if (column, segment) != self._chunk:
                yield from self._flush()
                self._chunk = (column, segment)
            if part == 0:
                self._count = count or 1
            if part == len(self._parts) and part < self._count:  # not stale parts of an overwrite
                self._parts.append(data or b"")
        if last:
            yield from self._flush()
            for refs in self.wanted.values():  # never seen: missing
                for ref in refs:
                    yield ref, b""
            self.wanted = {}

    def _flush(self) -> Iterator[tuple[ChunkRef, bytes]]:
        if self._chunk is None:
            return
        parts, self._parts, self._count = self._parts, [], 0
        data = parts[0] if len(parts) == 1 else b"".join(parts)  # incomplete → checksum fails
        for ref in self.wanted.pop(self._chunk, ()):
            yield ref, data
        self._chunk = None


class StoreConnection(DefaultConnection):  # type: ignore[misc,valid-type]
    """The driver's connection, receiving up to 4 MiB per read from the socket instead of
    4 KiB: a chunk scan receives hundreds of MB, and each of the driver's reads is a Python call
    holding the GIL that the decoding threads want (read-all of 4,037,539 GDELT rows on one
    node, p50 of 11 interleaved runs: 3.0 s at 4 KiB, 2.0 s at 128 KiB; later, p50 of 8
    interleaved runs, 1.62 s at 128 KiB and 1.51 s at 4 MiB, the driver's thread using
    333-395 ms of CPU per read at 128 KiB and 220-273 ms at 4 MiB; a grouped query's pages,
    about 1.5 MB each, gain nothing). A read allocates its size and gives back what the socket
    did not fill."""

    in_buffer_size = 4 * 1024 * 1024
    _current_frame: Any  # the driver's: the header of the frame being received, if read

    def process_io_buffer(self) -> None:
        """The complete frames received, each handed on as its body's bytes (one copy), then
        what is left of the last kept for the next read (one copy of at most a frame).

        The driver's own loop (kept for protocol v5's checksummed segments) copies every byte
        received four or five times more: the whole buffer to parse each frame header
        (``getvalue``), and what follows each frame into a buffer of its own, copied again when
        the next read is added to it."""
        if self._is_checksumming_enabled:
            super().process_io_buffer()
            return
        buffers = self._io_buffer
        received = buffers.io_buffer
        end = received.tell()
        start = 0
        view = received.getbuffer()
        try:
            while True:
                frame = self._current_frame
                if frame is None:
                    if start == end:
                        break
                    version = view[start] & PROTOCOL_VERSION_MASK
                    if version not in ProtocolVersion.SUPPORTED_VERSIONS:
                        raise ProtocolError(f"This version of the driver does not support protocol version {version}")
                    header = frame_header_v3 if version >= 3 else frame_header_v1_v2
                    if end - start < header.size + 1:
                        break
                    flags, stream, op, body_len = header.unpack_from(view, start + 1)
                    if body_len < 0:
                        raise ProtocolError(f"Received negative body length: {body_len!r}")
                    frame = self._current_frame = _Frame(version, flags, stream, op, header.size + 1,
                                                         header.size + 1 + body_len)
                if end - start < frame.end_pos:
                    break
                body = bytes(view[start + frame.body_offset:start + frame.end_pos])
                start += frame.end_pos
                self._current_frame = None
                self.process_msg(frame, body)
            if start:
                kept = io.BytesIO()
                kept.write(view[start:end])
                buffers._io_buffer = kept
        finally:
            view.release()


def commit_mark(written: int) -> bytes:
    """A commit's mark: its payload's write time (microseconds), as 8 bytes."""
    return int(written).to_bytes(8, "big", signed=True)
