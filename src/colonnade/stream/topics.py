"""Topics and messages for ``colonnade kafka produce`` (confluent-kafka)."""

from __future__ import annotations

from typing import BinaryIO

from colonnade.errors import ClusterError
from colonnade.stream.kafka_source import quiet_logger


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 15.0) -> bool:
    """Create ``topic`` unless it exists; whether it was created."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": quiet_logger()})
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=timeout)
        return True
    except KafkaException as exc:
        err = exc.args[0] if exc.args else None
        if err is not None and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return False
        raise ClusterError(f"can't create topic {topic} on {bootstrap}: {err.str() if err else exc}") from None
    except Exception as exc:  # noqa: BLE001 - e.g. a timeout: no broker answered
        why = str(exc) or f"no broker answered within {timeout:.0f} s"
        raise ClusterError(f"can't create topic {topic} on {bootstrap}: {why}") from None


def produce_lines(bootstrap: str, topic: str, stream: BinaryIO, timeout: float = 60.0) -> int:
    """Send each line of ``stream`` (without its line end) as one message (no key: the
    producer spreads them over the partitions); the number sent, once all are acknowledged."""
    from confluent_kafka import Producer

    errors: list[str] = []

    def delivered(err: object, msg: object) -> None:
        if err is not None and len(errors) < 1:
            errors.append(str(err))

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True,
                         "logger": quiet_logger()})
    count = 0
    for line in stream:
        line = line.rstrip(b"\r\n")
        while True:
            try:
                producer.produce(topic, line, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.1)
        count += 1
        if count % 10_000 == 0:
            producer.poll(0)
    left = producer.flush(timeout)
    if left or errors:
        raise ClusterError(f"{left or 'some'} messages to {topic} were not acknowledged by {bootstrap}"
                           + (f": {errors[0]}" if errors else ""))
    return count
