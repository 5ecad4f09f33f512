"""Ad impressions for ``colonnade bench adimpressions``: the generator, the topic and the producer.

An event is the seed study's AdImpression (timestamp, publisher, advertiser, website, geo, bid,
cookie) plus an ``id``: an int64, unique and sequential (0, 1, 2, ...), so that a count and the
sum of ids prove that every event arrived exactly once. Geos are 51 US-state-like codes and
publishers 100 names, both drawn from Zipf-like weights (1/k^s), so the group-by queries have
clear leaders and a long tail; advertisers, websites and cookies are uniform.

Everything but the timestamp is a pure function of ``(seed, id)``: events are generated in
fixed blocks of :data:`BLOCK` ids, each from its own NumPy generator seeded with
``(seed, block number)``, so the bench regenerates exactly what the producer sent (the ground
truth of the answers) without keeping it. The timestamp is the produce time (epoch ms) of the
block, stamped just before the block is encoded.

A Kafka message is one event as a CSV line without header, in :data:`SCHEMA`'s field order
(about 63 bytes, like the seed's Avro payload), e.g. ``1234567,1718000000000,pub3,adv412,
site_77.com,CA,0.42,c612345`` (one line). Lines are encoded in bulk (``pyarrow.csv.write_csv`` of
a block, then split), so the producer loop only calls ``produce``.

The producer runs as a process of its own (``python -m colonnade.bench.adimpressions_data``),
writes progress lines on stderr and, at the end, one JSON line on stdout (events, bytes, mean
payload, seconds, events/s).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

#: Events per generated block; blocks are the unit of determinism.
BLOCK = 65_536
#: Columns in CSV field order; ``timestamp`` is epoch milliseconds at produce time.
SCHEMA = pa.schema([("id", pa.int64()), ("timestamp", pa.int64()), ("publisher", pa.string()),
                    ("advertiser", pa.string()), ("website", pa.string()), ("geo", pa.string()),
                    ("bid", pa.float64()), ("cookie", pa.string())])

GEOS = ("CA", "TX", "FL", "NY", "PA", "IL", "OH", "GA", "NC", "MI", "NJ", "VA", "WA", "AZ", "MA",
        "TN", "IN", "MO", "MD", "WI", "CO", "MN", "SC", "AL", "LA", "KY", "OR", "OK", "CT", "UT",
        "IA", "NV", "AR", "MS", "KS", "NM", "NE", "ID", "WV", "HI", "NH", "ME", "RI", "MT", "DE",
        "SD", "ND", "AK", "DC", "VT", "WY")
PUBLISHERS = tuple(f"pub{i}" for i in range(100))
ADVERTISERS = tuple(f"adv{i}" for i in range(1000))
WEBSITES = tuple(f"site_{i}.com" for i in range(1000))
COOKIES = 1_000_000
#: Zipf-like exponents of the geo and publisher weights.
GEO_SKEW = 1.0
PUBLISHER_SKEW = 1.1


def zipf_weights(n: int, s: float) -> np.ndarray:
    """Probabilities 1/k^s for k = 1..n, normalised."""
    w = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** s
    return np.asarray(w / w.sum())


_GEO_P = zipf_weights(len(GEOS), GEO_SKEW)
_PUB_P = zipf_weights(len(PUBLISHERS), PUBLISHER_SKEW)


def _dictionary(values: tuple[str, ...]) -> pa.Array:
    return pa.array(values, pa.string())


_DICTS = {name: _dictionary(v) for name, v in
          (("publisher", PUBLISHERS), ("advertiser", ADVERTISERS), ("website", WEBSITES), ("geo", GEOS))}


def block(seed: int, number: int, timestamp_ms: int = 0) -> pa.Table:
    """Block ``number`` (ids ``number*BLOCK ..``) of the events for ``seed``: string columns are
    dictionary-encoded (their dictionaries are the fixed vocabularies, identical in every block)."""
    rng = np.random.default_rng([seed, number])
    n = BLOCK
    ids = np.arange(number * BLOCK, (number + 1) * BLOCK, dtype=np.int64)
    geo = rng.choice(len(GEOS), size=n, p=_GEO_P).astype(np.int8)
    pub = rng.choice(len(PUBLISHERS), size=n, p=_PUB_P).astype(np.int8)
    adv = rng.integers(0, len(ADVERTISERS), size=n, dtype=np.int16)
    site = rng.integers(0, len(WEBSITES), size=n, dtype=np.int16)
    bid = np.round(rng.random(n), 2)
    cookie = rng.integers(0, COOKIES, size=n)
    cookies = pc.binary_join_element_wise("c", pa.array(cookie).cast(pa.string()), "")

    def dict_col(name: str, idx: np.ndarray) -> pa.DictionaryArray:
        return pa.DictionaryArray.from_arrays(pa.array(idx), _DICTS[name])

    return pa.table({"id": ids, "timestamp": pa.array(np.full(n, timestamp_ms, dtype=np.int64)),
                     "publisher": dict_col("publisher", pub), "advertiser": dict_col("advertiser", adv),
                     "website": dict_col("website", site), "geo": dict_col("geo", geo),
                     "bid": pa.array(bid), "cookie": cookies})


def events(seed: int, start: int, count: int, timestamp_ms: int = 0) -> Iterator[pa.Table]:
    """The events with ids ``start .. start+count-1``, as tables of at most one block each."""
    end = start + count
    at = start
    while at < end:
        number = at // BLOCK
        lo = at - number * BLOCK
        hi = min(BLOCK, end - number * BLOCK)
        yield block(seed, number, timestamp_ms).slice(lo, hi - lo)
        at = number * BLOCK + hi


def ground_truth(seed: int, count: int, start: int = 0) -> pa.Table:
    """id, publisher, geo, bid of the events ``start .. start+count-1`` (the columns the checks
    and the queries read; strings stay dictionary-encoded: about 18 bytes per event)."""
    parts = [t.select(["id", "publisher", "geo", "bid"]) for t in events(seed, start, count)]
    if not parts:
        return block(seed, 0).select(["id", "publisher", "geo", "bid"]).slice(0, 0)
    return pa.concat_tables(parts).combine_chunks()


_WRITE = pacsv.WriteOptions(include_header=False, quoting_style="none", batch_size=BLOCK)


def encode(table: pa.Table) -> list[bytes]:
    """One CSV line (no header, no newline) per event."""
    buf = io.BytesIO()
    pacsv.write_csv(table, buf, _WRITE)
    lines = buf.getvalue().split(b"\n")
    lines.pop()  # after the last newline
    return lines


_READ = pacsv.ReadOptions(column_names=SCHEMA.names, use_threads=False, block_size=1 << 26)
_PARSE = pacsv.ParseOptions(newlines_in_values=True)
_CONVERT = pacsv.ConvertOptions(column_types=SCHEMA, check_utf8=True)


def decode(payloads: list[bytes]) -> pa.Table:
    """Events back from their payloads, as the stream decodes CSV messages: one
    ``pyarrow.csv.read_csv`` of them all, joined by newlines, with the stream's options."""
    data = b"\n".join(payloads) + b"\n"
    return pacsv.read_csv(pa.BufferReader(data), read_options=_READ, parse_options=_PARSE,
                          convert_options=_CONVERT)


# -- the topic and the producer ----------------------------------------------------------------------
#: Producer settings: batches of up to 1 MB lingering 5 ms, LZ4, the idempotent producer (which
#: implies acks=all: a retried send is never written twice, so exactly-once is checkable).
PRODUCER_CONFIG: dict[str, Any] = {
    "linger.ms": 5, "batch.size": 1_000_000, "compression.type": "lz4", "enable.idempotence": True,
    "acks": "all", "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 1_048_576,
}


def create_topic(bootstrap: str, topic: str, partitions: int = 4, timeout: float = 60.0) -> None:
    """Create ``topic`` (replication factor 1) and wait until it is there."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    admin.list_topics(timeout=10)  # no broker: KafkaException (transport failure) within 10 s
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                                  operation_timeout=timeout)
    futures[topic].result(timeout=timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=10)
        t = md.topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions:
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} not ready after {timeout:.0f} s")


def delete_topic(bootstrap: str, topic: str, timeout: float = 60.0) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic], operation_timeout=timeout)[topic].result(timeout=timeout)


def topic_end_offsets(bootstrap: str, topic: str, timeout: float = 30.0) -> dict[int, int]:
    """Partition -> high watermark (the offset the next message will get)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"colonnade-bench-wm-{time.time_ns()}",
                  "enable.auto.commit": False})
    try:
        md = c.list_topics(topic, timeout=timeout)
        parts = sorted(md.topics[topic].partitions)
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1] for p in parts}
    finally:
        c.close()


@dataclass
class ProduceResult:
    events: int
    bytes: int
    seconds: float
    start_id: int
    rate_limit: float | None

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds if self.seconds else 0.0

    @property
    def mean_payload_bytes(self) -> float:
        return self.bytes / self.events if self.events else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"events": self.events, "bytes": self.bytes, "seconds": self.seconds,
                "start_id": self.start_id, "rate_limit": self.rate_limit,
                "events_per_s": self.events_per_s, "mean_payload_bytes": self.mean_payload_bytes}


def produce(bootstrap: str, topic: str, count: int, seed: int, start: int = 0, rate: float | None = None,
            progress: Any = None, config: dict[str, Any] | None = None) -> ProduceResult:
    """Send the events ``start .. start+count-1`` to ``topic``, at full speed or at ``rate``
    events/s; returns after every message was acknowledged (``flush``)."""
    from confluent_kafka import KafkaException, Producer

    errors: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None and len(errors) < 10:
            errors.append(str(err))

    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONFIG, **(config or {})})
    sent = nbytes = 0
    started = time.perf_counter()
    last_report = started
    # rate-limited: slices of 1/50 s worth of events, each sent when its time has come
    slice_n = max(1, int(rate / 50)) if rate else BLOCK
    p = producer.produce
    for table in events(seed, start, count):
        lines = encode(_stamp(table))
        for lo in range(0, len(lines), slice_n):
            if rate:
                due = started + sent / rate
                wait = due - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
            for line in lines[lo:lo + slice_n]:
                try:
                    p(topic, line, on_delivery=on_delivery)
                except BufferError:  # local queue full: let deliveries drain it
                    producer.poll(0.05)
                    p(topic, line, on_delivery=on_delivery)
                nbytes += len(line)
            sent += min(slice_n, len(lines) - lo)
            producer.poll(0)
        now = time.perf_counter()
        if progress is not None and now - last_report >= 2.0:
            progress(f"produced {sent:,} events, {sent / (now - started):,.0f}/s")
            last_report = now
    remaining = producer.flush(120)
    seconds = time.perf_counter() - started
    if remaining or errors:
        raise KafkaException(f"{remaining} messages undelivered; errors: {errors[:3]}")
    return ProduceResult(sent, nbytes, seconds, start, rate)


def _stamp(table: pa.Table) -> pa.Table:
    now = time.time_ns() // 1_000_000
    return table.set_column(1, "timestamp", pa.array(np.full(table.num_rows, now, dtype=np.int64)))


def main(argv: list[str] | None = None) -> int:
    """The producer process: ``python -m colonnade.bench.adimpressions_data --bootstrap ... --topic
    ... --events N [--start ID] [--seed S] [--rate R]``."""
    parser = argparse.ArgumentParser(prog="python -m colonnade.bench.adimpressions_data")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--rate", type=float, default=None)
    args = parser.parse_args(argv)

    def progress(line: str) -> None:
        print(f"  producer: {line}", file=sys.stderr, flush=True)

    result = produce(args.bootstrap, args.topic, args.events, args.seed, start=args.start, rate=args.rate,
                     progress=progress)
    print(json.dumps(result.to_dict()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
