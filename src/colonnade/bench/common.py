"""What the benchmarks share: whether a Cassandra node answers, and writing a report."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any


def cassandra_reachable(contact: str, timeout: float = 2.0) -> bool:
    """Whether ``host[:port]`` (default port 9042) accepts a TCP connection."""
    host, _, port = contact.rpartition(":")
    try:
        with socket.create_connection((host or contact, int(port or 9042)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def cassandra_contact(uri: str, given: str | None = None) -> str:
    """The Cassandra node of a benchmark's row references: ``given``, else the store's first
    host when it is a Cassandra store, else 127.0.0.1:9042 (used only if it answers)."""
    if given:
        return given
    if uri.startswith("cassandra://"):
        from colonnade.config import parse_store_uri

        parsed = parse_store_uri(uri)
        return f"{parsed.hosts[0]}:{parsed.port}"
    return "127.0.0.1:9042"


def write_report(stem: Path, report: dict[str, Any], markdown: Callable[[dict[str, Any]], str],
                 chart: Callable[[dict[str, Any], Path], object]) -> str:
    """``stem``.json, .md and .png of a report; returns the Markdown text."""
    stem.with_suffix(".json").write_text(json.dumps(report, indent=1, default=str))
    text = markdown(report)
    stem.with_suffix(".md").write_text(text)
    chart(report, stem.with_suffix(".png"))
    return text
