"""``colonnade cassandra``: a local Apache Cassandra cluster for development, tests and
benchmarks, managed by :class:`colonnade.cluster.cassandra.LocalCluster`."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from colonnade.cli.output import note, print_table
from colonnade.errors import ClusterError

if TYPE_CHECKING:
    from colonnade.cluster.cassandra import LocalCluster


def _cluster(directory: Path | None, nodes: int | None, heap: str | None = None) -> LocalCluster:
    from colonnade.cluster.cassandra import LocalCluster, default_directory

    root = directory if directory is not None else default_directory()
    if nodes is None:  # as many as were ever started in this directory, at least one
        nodes = max(1, len(list((root / "nodes").glob("node*"))))
    kwargs: dict[str, Any] = {"directory": root, "nodes": nodes}
    if heap is not None:
        kwargs["heap"] = heap
    return LocalCluster(**kwargs)


def _require_java() -> None:
    """Fail before any download when no JVM can be found (the same lookup the cluster uses)."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return
    if shutil.which("java") is None:
        raise ClusterError("java not found: install a Java 17 JDK (e.g. apt-get install "
                           "openjdk-17-jdk-headless) or set JAVA_HOME")


def _cluster_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
                      metavar="DIR", help="Cluster directory (default: $COLONNADE_CASSANDRA_DIR, "
                                          "else ~/.cache/colonnade/cassandra).")(fn)
    return click.option("--nodes", type=click.IntRange(min=1), metavar="N",
                        help="Number of nodes (default: those of the directory, else 1).")(fn)


@click.group()
def cassandra() -> None:
    """Run a local Cassandra cluster (node i on 127.0.0.i, CQL port 9042)."""


@cassandra.command()
@_cluster_options
@click.option("--heap", metavar="SIZE", help="JVM heap per node, e.g. 1G (default 1G).")
@click.option("--node", type=click.IntRange(min=1), metavar="I", help="Start only node I.")
@click.option("--timeout", type=click.FloatRange(min=1), metavar="SECONDS",
              help="How long to wait for each node to answer CQL (default 180).")
def start(directory: Path | None, nodes: int | None, heap: str | None, node: int | None,
          timeout: float | None) -> None:
    """Start the nodes (downloading Cassandra with mvn on first use) and wait until they answer."""
    _require_java()
    cluster = _cluster(directory, nodes, heap)
    for i in [node] if node is not None else range(1, cluster.nodes + 1):
        note(f"starting node{i} on {cluster.address(i)} ...")
        cluster.start_node(i, timeout=timeout)
        click.echo(f"node{i} up: {cluster.address(i)}:9042")


@cassandra.command()
@_cluster_options
@click.option("--node", type=click.IntRange(min=1), metavar="I", help="Stop only node I.")
def stop(directory: Path | None, nodes: int | None, node: int | None) -> None:
    """Stop the nodes this directory started (SIGTERM, then SIGKILL after a timeout)."""
    cluster = _cluster(directory, nodes)
    cluster.stop(node)
    targets = [node] if node is not None else range(1, cluster.nodes + 1)
    click.echo("stopped " + ", ".join(f"node{i}" for i in targets))


@cassandra.command()
@_cluster_options
def status(directory: Path | None, nodes: int | None) -> None:
    """Show each node's address, process id and state (up, starting, down)."""
    cluster = _cluster(directory, nodes)
    print_table(["node", "address", "pid", "state"],
                [[f"node{s.node}", s.address, s.pid if s.pid is not None else "-", s.state]
                 for s in cluster.status()])


@cassandra.command()
@_cluster_options
@click.option("--node", type=click.IntRange(min=1), default=1, show_default=True, metavar="I")
@click.option("--lines", type=click.IntRange(min=1), default=50, show_default=True, metavar="N")
def logs(directory: Path | None, nodes: int | None, node: int, lines: int) -> None:
    """Print the last lines of a node's system.log."""
    cluster = _cluster(directory, nodes)
    text = cluster.logs(node, lines)
    if text:
        click.echo(text)
    else:
        note(f"node{node} has no log yet in {cluster.node_dir(node)}")
