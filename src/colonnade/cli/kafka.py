"""``colonnade kafka``: a local Apache Kafka broker for development and tests, managed by
:class:`colonnade.cluster.kafka.LocalKafka`."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from colonnade.cli.output import note, print_table

if TYPE_CHECKING:
    from colonnade.cluster.kafka import LocalKafka


def _broker(directory: Path | None, port: int | None, heap: str | None = None) -> LocalKafka:
    from colonnade.cluster.kafka import LocalKafka

    kwargs: dict[str, Any] = {"directory": directory, "port": port}
    if heap is not None:
        kwargs["heap"] = heap
    return LocalKafka(**kwargs)


def _broker_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
                      metavar="DIR", help="Broker directory (default: $COLONNADE_KAFKA_DIR, "
                                          "else ~/.cache/colonnade/kafka).")(fn)
    return click.option("--port", type=click.IntRange(1, 65534), metavar="N",
                        help="Client port on 127.0.0.1; the controller takes N+1 (default: the "
                             "port the directory's broker last ran on, else 9092).")(fn)


@click.group()
def kafka() -> None:
    """Run a local Kafka broker (one KRaft node on 127.0.0.1, port 9092).

    The first start downloads Kafka 4 from Maven Central with mvn (a Java 17 JDK and Maven are
    needed); topics and messages persist in the broker directory across restarts.
    """


@kafka.command()
@_broker_options
@click.option("--heap", metavar="SIZE", help="Maximum JVM heap, e.g. 512m (default 512m).")
def start(directory: Path | None, port: int | None, heap: str | None) -> None:
    """Start the broker (downloading Kafka on first use) and wait until it answers."""
    broker = _broker(directory, port, heap)
    if broker.status().state != "up":
        note(f"starting kafka on {broker.bootstrap_servers} ...")
    if broker.start():
        click.echo(f"kafka up: {broker.bootstrap_servers}")
    else:
        click.echo(f"kafka already up: {broker.bootstrap_servers} (pid {broker.pid()})")


@kafka.command()
@_broker_options
def stop(directory: Path | None, port: int | None) -> None:
    """Stop the broker this directory started (SIGTERM, then SIGKILL after a timeout)."""
    broker = _broker(directory, port)
    if broker.stop():
        click.echo("stopped kafka")
    else:
        click.echo("kafka was not running")


@kafka.command()
@_broker_options
def status(directory: Path | None, port: int | None) -> None:
    """Show the broker's address, process id and state (up, starting, down)."""
    s = _broker(directory, port).status()
    print_table(["broker", "address", "pid", "state"],
                [["kafka", s.address, s.pid if s.pid is not None else "-", s.state]])


@kafka.command()
@_broker_options
@click.option("--lines", type=click.IntRange(min=1), default=50, show_default=True, metavar="N")
def logs(directory: Path | None, port: int | None, lines: int) -> None:
    """Print the last lines of the broker's server.log."""
    broker = _broker(directory, port)
    text = broker.logs(lines)
    if text:
        click.echo(text)
    else:
        note(f"kafka has no log yet in {broker.log_dir}")


@kafka.command()
@click.argument("topic")
@click.option("--bootstrap", metavar="HOST:PORT", help="Kafka bootstrap servers (default: $COLONNADE_KAFKA, "
                                                       "else 127.0.0.1:9092).")
@click.option("--partitions", type=click.IntRange(min=1), default=4, show_default=True, metavar="N",
              help="Partitions of the topic, if it is created.")
def produce(topic: str, bootstrap: str | None, partitions: int) -> None:
    """Send each line of standard input to TOPIC as one message (created if missing).

    Messages are spread over the partitions; the command ends when every one is acknowledged."""
    from colonnade.config import default_kafka_bootstrap
    from colonnade.stream.topics import create_topic, produce_lines

    servers = bootstrap or default_kafka_bootstrap()
    created = create_topic(servers, topic, partitions)
    if created:
        note(f"created topic {topic} with {partitions} partitions")
    sent = produce_lines(servers, topic, sys.stdin.buffer)
    click.echo(f"produced {sent:,} message{'s' if sent != 1 else ''} to {topic}")
