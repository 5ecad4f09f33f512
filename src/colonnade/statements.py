"""Statements of a SQL script: split by DuckDB's own parser, and the statements DuckDB doesn't
know that a store answers itself (``WITH ERROR`` queries, ``CREATE``/``DROP SAMPLE TABLE``: see
:mod:`colonnade.samples`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import duckdb

from colonnade.errors import QueryError

#: Statements answered by :mod:`colonnade.samples` (checked before anything is parsed).
EXTENDED = re.compile(r"(?is)\bwith\s+error\b|\b(create|drop)\s+sample\s+table\b")


@dataclass(frozen=True)
class Statement:
    """One statement of a SQL script; ``answers`` is False for those that return nothing to
    show (``SET``, ``CREATE``, ``DROP``, ``BEGIN``...)."""

    text: str
    answers: bool


def split_statements(text: str) -> list[Statement]:
    """The statements of a SQL script, split by DuckDB's own parser (so a ``;`` inside a string
    or a comment doesn't split); empty statements are dropped."""
    try:
        parsed = duckdb.extract_statements(text)
    except duckdb.Error as exc:
        if not EXTENDED.search(text):
            raise QueryError(_one_line(exc)) from None
        return _split_extended(text)
    return [Statement(s.query.strip(), duckdb.ExpectedResultType.NOTHING not in s.expected_result_type)
            for s in parsed if s.query.strip().strip(";").strip()]


def _split_extended(text: str) -> list[Statement]:
    """:func:`split_statements` for a script holding statements DuckDB doesn't parse (see
    :data:`EXTENDED`): split at each ``;`` outside parentheses, strings and comments."""
    import sqlglot
    from sqlglot.tokens import TokenType

    try:
        tokens = sqlglot.tokenize(text, read="duckdb")
    except sqlglot.errors.SqlglotError as exc:
        raise QueryError(_one_line(exc)) from None
    pieces, start, depth = [], 0, 0
    for token in tokens:
        depth += (token.token_type == TokenType.L_PAREN) - (token.token_type == TokenType.R_PAREN)
        if token.token_type == TokenType.SEMICOLON and depth == 0:
            pieces.append(text[start:token.start])
            start = token.end + 1
    pieces.append(text[start:])
    out: list[Statement] = []
    for piece in (p.strip() for p in pieces):
        if not piece:
            continue
        out.extend([Statement(piece, True)] if EXTENDED.search(piece) else split_statements(piece))
    return out


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return " ".join(line.strip() for line in text if line.strip())[:500]
