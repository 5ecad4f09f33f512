"""The Cassandra store's frame reader against the driver's own, on the same bytes received in
many ways: frames whole, several per read, split anywhere (inside a header too), empty bodies."""

from __future__ import annotations

import random
import struct
from typing import Any

import pytest
from cassandra.cluster import DefaultConnection
from cassandra.connection import ProtocolError, _ConnectionIOBuffer

from colonnade.storage.cassandra_driver import StoreConnection

HEADER = struct.Struct(">BBhBi")  # version (response, v4), flags, stream, opcode, body length


def frames(rng: random.Random, count: int) -> list[tuple[int, int, bytes]]:
    sizes = [0, 1, 8, 9, 100, 4096, 70_000, 1_500_000]
    return [(rng.randrange(-1, 2000), rng.choice([0x08, 0x0C]),
             rng.randbytes(rng.choice(sizes) + rng.randrange(3))) for _ in range(count)]


def wire(sent: list[tuple[int, int, bytes]], version: int = 0x84) -> bytes:
    return b"".join(HEADER.pack(version, 0, stream, op, len(body)) + body for stream, op, body in sent)


def receiver(process: Any) -> tuple[Any, list[tuple[int, int, int, bytes]]]:
    """A connection that only receives: ``feed(piece)`` is a read from the socket."""
    conn: Any = object.__new__(StoreConnection)
    conn._is_checksumming_enabled = False
    conn._current_frame = None
    conn._io_buffer = _ConnectionIOBuffer(conn)
    got: list[tuple[int, int, int, bytes]] = []
    conn.process_msg = lambda frame, body: got.append((frame.stream, frame.opcode, frame.version, body))

    def feed(piece: bytes) -> None:
        conn._iobuf.write(piece)
        if conn._iobuf.tell():
            process(conn)
    return feed, got


def pieces(data: bytes, rng: random.Random, most: int) -> list[bytes]:
    out, at = [], 0
    while at < len(data):
        n = rng.choice([1, 2, 5, 9, rng.randrange(1, most)])
        out.append(data[at:at + n])
        at += n
    return out


@pytest.mark.parametrize("most", [16, 5000, 4 * 1024 * 1024])
def test_frames_come_out_as_the_drivers_reader_gives_them(most: int) -> None:
    rng = random.Random(most)
    sent = frames(rng, 60)
    data = wire(sent)
    split = pieces(data, rng, most)
    feed_new, new = receiver(StoreConnection.process_io_buffer)
    feed_old, old = receiver(DefaultConnection.process_io_buffer)
    for piece in split:
        feed_new(piece)
        feed_old(piece)
    assert new == old
    assert [(s, o, b) for s, o, _, b in new] == sent
    assert all(v == 4 for _, _, v, _ in new)  # the version without the response bit


def test_a_frame_received_in_part_waits_for_the_rest() -> None:
    sent = [(1, 0x08, b"x" * 100), (2, 0x08, b"")]
    data = wire(sent)
    feed, got = receiver(StoreConnection.process_io_buffer)
    feed(data[:5])  # half a header
    feed(data[5:60])  # the header and part of the body
    assert got == []
    feed(data[60:])
    assert [(s, o, b) for s, o, _, b in got] == sent


def test_an_unknown_protocol_version_is_refused() -> None:
    feed, _ = receiver(StoreConnection.process_io_buffer)
    with pytest.raises(ProtocolError, match="protocol version 9"):
        feed(wire([(1, 0x08, b"abc")], version=0x89))
