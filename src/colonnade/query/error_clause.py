"""The ``WITH ERROR`` tail of an approximate query: found, parsed and cut off the statement.

SnappyData's spelling, written after everything else (ORDER BY, LIMIT)::

    SELECT ... WITH ERROR [e] [CONFIDENCE c] [BEHAVIOR 'b']

with 0 < e < 1, 0 < c < 1 (default 0.95) and ``b`` one of :data:`BEHAVIORS` (default
``run_on_full_table``). A bare ``WITH ERROR`` accepts any error and then defaults to
``do_nothing``, as SnappyData's code does. The tail is found on sqlglot's tokens, not by a regular
expression, so ``'with error'`` inside a string literal or a comment, and a common table
expression named ``error`` (``WITH error AS (...)``), are not taken for it; sqlglot is imported
only when the text holds the word ``error`` at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from colonnade.errors import QueryError

if TYPE_CHECKING:
    from sqlglot.tokens import Token

#: What to do with a result whose error exceeds the limit (see :mod:`colonnade.query.estimates`).
BEHAVIORS = ("do_nothing", "local_omit", "strict", "run_on_full_table", "partial_run_on_base_table")
DEFAULT_CONFIDENCE = 0.95
DEFAULT_BEHAVIOR = "run_on_full_table"
#: The behavior of a bare ``WITH ERROR`` (no limit): any error is accepted.
ANY_ERROR_BEHAVIOR = "do_nothing"


@dataclass(frozen=True)
class ErrorClause:
    """A parsed ``WITH ERROR`` clause. ``error`` None: no limit (a bare ``WITH ERROR``)."""

    error: float | None
    confidence: float = DEFAULT_CONFIDENCE
    behavior: str = DEFAULT_BEHAVIOR

    def __post_init__(self) -> None:
        if self.error is not None and not 0 < self.error < 1:
            raise QueryError(f"WITH ERROR must be between 0 and 1 (exclusive), got {self.error:g}")
        if not 0 < self.confidence < 1:
            raise QueryError("CONFIDENCE must be between 0 and 1 (exclusive), got "
                             f"{self.confidence:g}")
        if self.behavior not in BEHAVIORS:
            raise QueryError(f"unknown BEHAVIOR {self.behavior!r}: expected one of "
                             f"{', '.join(BEHAVIORS)}")


def split_error_clause(sql: str) -> tuple[str, ErrorClause | None]:
    """``sql`` without its ``WITH ERROR`` tail, and the tail parsed (None: there is none).
    Raises :class:`QueryError` for a tail with bad values or anything after it."""
    if "error" not in sql.lower():
        return sql, None  # the common case: no tokenizing, no sqlglot import
    import sqlglot
    from sqlglot.tokens import TokenType

    try:
        tokens = sqlglot.tokenize(sql, read="duckdb")
    except sqlglot.errors.SqlglotError:
        return sql, None  # e.g. an unterminated string: DuckDB reports it on the statement
    depth = 0
    for i, token in enumerate(tokens):
        if token.token_type in (TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE):
            depth += 1
        elif token.token_type in (TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE):
            depth -= 1
        elif depth == 0 and token.token_type == TokenType.WITH and _starts_tail(tokens, i + 1):
            return sql[:token.start].rstrip(), _parse_tail(tokens[i + 2:])
    return sql, None


def _starts_tail(tokens: list[Token], i: int) -> bool:
    """Whether ``WITH`` is followed by the word ERROR that is not a CTE's name."""
    from sqlglot.tokens import TokenType

    word = tokens[i] if i < len(tokens) else None
    if word is None or word.token_type != TokenType.VAR or word.text.upper() != "ERROR":
        return False
    after = tokens[i + 1] if i + 1 < len(tokens) else None
    return after is None or after.token_type not in (TokenType.ALIAS, TokenType.L_PAREN)


def _parse_tail(tokens: list[Token]) -> ErrorClause:
    """``[e] [CONFIDENCE c] [BEHAVIOR 'b'] [;]``, the options in any order."""
    from sqlglot.tokens import TokenType

    tokens = [t for t in tokens if t.token_type != TokenType.SEMICOLON]
    found: dict[str, Any] = {}
    error, position = _number(tokens, 0)
    while position < len(tokens):
        word = tokens[position].text.upper()
        if word == "CONFIDENCE" and "confidence" not in found:
            found["confidence"], position = _number(tokens, position + 1)
            if found["confidence"] is None:
                raise QueryError(f"CONFIDENCE needs a number, got {_text(tokens, position + 1)}")
        elif word == "BEHAVIOR" and "behavior" not in found:
            value = tokens[position + 1] if position + 1 < len(tokens) else None
            if value is None or value.token_type != TokenType.STRING:
                raise QueryError(f"BEHAVIOR needs a quoted name ('{BEHAVIORS[0]}', ...), got "
                                 f"{_text(tokens, position + 1)}")
            found["behavior"] = value.text.lower()
            position += 2
        else:
            raise QueryError(f"unexpected {tokens[position].text!r} after WITH ERROR: expected "
                             "WITH ERROR [e] [CONFIDENCE c] [BEHAVIOR 'b'] at the end of the query")
    if error is None:
        found.setdefault("behavior", ANY_ERROR_BEHAVIOR)
    return ErrorClause(error, **found)


def _number(tokens: list[Token], i: int) -> tuple[float | None, int]:
    """The number at ``tokens[i]`` (``0.1``, ``.1`` (tokenized DOT NUMBER), ``-1``) and the
    position after it; (None, i) if there is none."""
    from sqlglot.tokens import TokenType

    sign = 1.0
    j = i
    if j < len(tokens) and tokens[j].token_type in (TokenType.DASH, TokenType.PLUS):
        sign = -1.0 if tokens[j].token_type == TokenType.DASH else 1.0
        j += 1
    text = ""
    if j + 1 < len(tokens) and tokens[j].token_type == TokenType.DOT \
            and tokens[j + 1].token_type == TokenType.NUMBER \
            and tokens[j + 1].start == tokens[j].end + 1:
        text, j = "." + tokens[j + 1].text, j + 2
    elif j < len(tokens) and tokens[j].token_type == TokenType.NUMBER:
        text, j = tokens[j].text, j + 1
    if not text:
        return None, i
    try:
        return sign * float(text), j
    except ValueError:
        raise QueryError(f"bad number {text!r} in WITH ERROR") from None


def _text(tokens: list[Token], i: int) -> str:
    return repr(tokens[i].text) if i < len(tokens) else "nothing"
