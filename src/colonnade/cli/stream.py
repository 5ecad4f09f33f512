"""``colonnade stream``: a long-running ingest from a Kafka topic (:mod:`colonnade.stream`).

Progress goes to stderr: a live line on a terminal (events, events/s, lag per partition, last
commit), otherwise one plain line per status interval. The summary is printed on stdout when the
stream ends. SIGINT and SIGTERM stop it cleanly: what is buffered is committed first (a second
Ctrl-C exits at once, committing nothing more: the next start consumes it again).
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from colonnade.cli.context import Settings, pass_settings
from colonnade.cli.output import echo_json, note, plural, stderr_is_tty

if TYPE_CHECKING:
    from colonnade.stream import StreamReport, StreamStatus


@click.command()
@click.argument("dataset")
@click.option("--topic", required=True, metavar="T", help="Kafka topic to consume.")
@click.option("--bootstrap", metavar="HOST:PORT",
              help="Kafka bootstrap servers, comma-separated (default: $COLONNADE_KAFKA, else 127.0.0.1:9092).")
@click.option("--group", metavar="G", help="Consumer group: processes in one group share the topic's "
                                          "partitions (default: colonnade-DATASET).")
@click.option("--format", "fmt", type=click.Choice(["json", "csv", "avro"]), default="json",
              show_default=True, help="Message encoding: a JSON object, a CSV record (fields in column "
                                      "order) or binary Avro of the columns' record schema.")
@click.option("--schema", "schema_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              metavar="FILE", help="Message columns as 'name: type' lines ('not null' after the type: "
                                   "required).")
@click.option("--columns", metavar="A:T,..", help="Message columns inline, e.g. 'id:int64 not null,geo:string'.")
@click.option("--partition-by", metavar="EXPR", help="Partition spec of a new dataset.")
@click.option("--sort-by", metavar="COLS", help="Sort key of a new dataset (comma-separated).")
@click.option("--commit-interval", type=click.FloatRange(min=0.01), default=1.0, show_default=True,
              metavar="SECONDS", help="Time between micro-batch commits.")
@click.option("--on-error", type=click.Choice(["strict", "quarantine"]), default="quarantine",
              show_default=True, help="quarantine: bad messages go to --rejects; strict: a bad "
                                      "message stops the stream, nothing of its micro-batch committed.")
@click.option("--rejects", type=click.Path(dir_okay=False, path_type=Path), metavar="PATH",
              help="Where bad messages are appended (default: DATASET.rejects.jsonl).")
@click.option("--max-events", type=click.IntRange(min=1), metavar="N", help="Stop after N messages.")
@click.option("--stop-when-idle", type=click.FloatRange(min=0), metavar="SECONDS",
              help="Stop when no message arrived for this long (counted only while the group "
                   "has partitions assigned to this process).")
@click.option("--memory-limit", type=click.IntRange(min=1), default=256, show_default=True, metavar="MB",
              help="Decoded rows buffered before a commit is made early.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@pass_settings
def stream(settings: Settings, dataset: str, topic: str, bootstrap: str | None, group: str | None, fmt: str,
           schema_file: Path | None, columns: str | None, partition_by: str | None, sort_by: str | None,
           commit_interval: float, on_error: str, rejects: Path | None, max_events: int | None,
           stop_when_idle: float | None, memory_limit: int, as_json: bool) -> None:
    """Consume Kafka topic T into DATASET continuously, exactly once.

    Every commit interval the rows consumed are committed together with the next offset of
    each partition; a restart (or another process of the group taking over) continues from
    the offsets the dataset records, so each message is stored once whatever fails. Small
    segments are compacted as the stream goes."""
    from colonnade.config import default_kafka_bootstrap
    from colonnade.schema.transforms import split_top_level
    from colonnade.stream import StreamOptions, run_stream
    from colonnade.stream.options import parse_columns

    if schema_file is not None and columns is not None:
        raise click.UsageError("give the columns with --schema FILE or --columns, not both")
    schema = None
    if schema_file is not None:
        schema = parse_columns(schema_file.read_text(), source=str(schema_file))
    elif columns is not None:
        schema = parse_columns(columns)
    options = StreamOptions(
        topic=topic, bootstrap=bootstrap or default_kafka_bootstrap(), group=group, format=fmt, schema=schema,
        partition_by=partition_by, sort_by=tuple(split_top_level(sort_by or "")),
        commit_interval=commit_interval, on_error=on_error, rejects=rejects, max_events=max_events,
        stop_when_idle=stop_when_idle, memory_limit=memory_limit * 2**20)
    stop = threading.Event()
    view = _LiveStatus(dataset) if stderr_is_tty() else _PlainStatus(dataset)
    try:
        with settings.connect(must_exist=False) as store, _stop_on_signals(stop):
            report = run_stream(store, dataset, options, on_status=view.update, stop=stop)
    finally:
        view.close()
    if as_json:
        echo_json(report.to_dict())
    else:
        click.echo(summary(report))


def summary(r: StreamReport) -> str:
    why = {"max-events": "--max-events reached", "idle": "idle", "stopped": "stopped"}.get(r.stopped, r.stopped)
    rejected = f", {plural(r.rejected, 'rejected message')} in {r.rejects_path}" if r.rejected else ""
    offsets = ", ".join(f"{p}:{o}" for p, o in sorted(r.offsets.items())) or "none"
    version = f" (version {r.last_version})" if r.last_version is not None else ""
    return (f"streamed {plural(r.events, 'event')} from {r.topic} into {r.dataset} in "
            f"{plural(r.commits, 'commit')}{version}, {r.seconds:.1f} s ({r.events_per_s:,.0f} events/s)"
            f"{rejected}; {why}; next offsets {offsets}")


def status_line(dataset: str, s: StreamStatus) -> str:
    lag = " ".join(f"{p}:{n:,}" for p, n in sorted(s.lag.items())) or "-"
    last = "none yet" if s.last_version is None else (
        f"v{s.last_version} {time.time() - s.last_commit_at:.1f} s ago" if s.last_commit_at else f"v{s.last_version}")
    line = (f"{dataset}: {s.events:,} events ({s.rejected:,} rejected), {s.events_per_s:,.0f}/s, "
            f"lag {lag}, last commit {last}")
    return f"{line}; {s.problem}" if s.problem else line


class _PlainStatus:
    def __init__(self, dataset: str) -> None:
        self.dataset = dataset

    def update(self, s: StreamStatus) -> None:
        note(status_line(self.dataset, s))

    def close(self) -> None:
        pass


class _LiveStatus:
    """One line redrawn in place on a terminal."""

    def __init__(self, dataset: str) -> None:
        from rich.console import Console
        from rich.live import Live

        self.dataset = dataset
        self._live: Any = Live("", console=Console(file=sys.stderr), transient=True, refresh_per_second=4)
        self._live.start()

    def update(self, s: StreamStatus) -> None:
        from rich.text import Text

        self._live.update(Text(status_line(self.dataset, s)))

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGINT/SIGTERM set ``stop`` (the stream commits and ends); a second one interrupts."""
    def handler(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
