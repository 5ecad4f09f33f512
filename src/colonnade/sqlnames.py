"""Names written into SQL text (DuckDB's, and the dialects parsed for it)."""

from __future__ import annotations


def quoted(name: str) -> str:
    """``name`` as a SQL identifier: in double quotes, embedded double quotes doubled (any
    name, keywords and odd characters included, reads back as itself)."""
    return '"' + name.replace('"', '""') + '"'
