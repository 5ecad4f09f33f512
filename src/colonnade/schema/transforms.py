"""Partition transforms: each maps a source column to partition values and projects predicates.

A transform's ``apply`` turns a column into partition values; its ``project`` turns a predicate
on the source column (``op`` and literal values) into a predicate on the partition value that is
true whenever the original could be — the rule that makes partition pruning safe. ``None`` means
"can't project": the partition is kept. Monotonic transforms (identity, truncate, month, day)
project ranges (an exclusive bound on an integer, date or timestamp column first becomes the
inclusive bound next to it, so ``d < 2024-02-01`` rules out February); bucket projects only
equality and IN. ``source_range`` is the other way round: the least and greatest source values
a partition value can hold, for predicates that can only be evaluated on source values.
"""

from __future__ import annotations

import datetime as dt
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from colonnade.errors import SpecError
from colonnade.sqlnames import quoted

Predicate = tuple[str, tuple[Any, ...]]  # (op, values); op in = in < <= > >=

_EPOCH = dt.date(1970, 1, 1)


def quote_name(name: str) -> str:
    """A column name as a partition spec writes it: bare when it is a plain identifier, else in
    double quotes with embedded quotes doubled (as SQL does)."""
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return name
    return quoted(name)


class Transform(ABC):
    name: str
    source: str

    @property
    def field_name(self) -> str:
        return str(self)

    @property
    def sources(self) -> tuple[str, ...]:
        """The columns the transform reads (one, except for curves)."""
        return (self.source,)

    @abstractmethod
    def apply(self, array: pa.Array) -> pa.Array:
        """Partition values for every row (nulls stay null)."""

    def apply_columns(self, columns: Sequence[pa.Array]) -> pa.Array:
        """Partition values from the ``sources`` columns, in their order."""
        return self.apply(columns[0])

    def apply_value(self, value: Any, type_: pa.DataType) -> Any:
        out = self.apply(pa.array([value], type=type_))
        return out[0].as_py()

    @abstractmethod
    def project(self, op: str, values: tuple[Any, ...], type_: pa.DataType) -> Predicate | None:
        """A predicate on the partition value implied by ``source op values``, or None."""

    def check_type(self, type_: pa.DataType) -> None:  # noqa: B027 - optional
        """Raise SpecError if the transform can't apply to this column type."""

    def source_range(self, value: Any, type_: pa.DataType) -> tuple[Any, Any] | None:
        """The least and greatest source values whose partition value is ``value``, in the
        physical form of chunk statistics (see ``ChunkStats``; None where unbounded), or None
        if unknown."""
        return None


def _step(value: Any, type_: pa.DataType, direction: int) -> Any:
    """The value next to ``value`` (above for +1, below for -1) on a discrete column type, or
    None if the type has no such neighbour here."""
    if pa.types.is_integer(type_) and isinstance(value, int):
        return value + direction
    if pa.types.is_date32(type_) and isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value + dt.timedelta(days=direction)
    if pa.types.is_timestamp(type_) and isinstance(value, dt.datetime) and type_.unit in _UNIT_DELTA:
        return value + direction * _UNIT_DELTA[type_.unit]
    return None


_UNIT_DELTA = {"s": dt.timedelta(seconds=1), "ms": dt.timedelta(milliseconds=1), "us": dt.timedelta(microseconds=1)}
_TICKS_PER_DAY = {"s": 86_400, "ms": 86_400_000, "us": 86_400_000_000, "ns": 86_400_000_000_000}


def _day_range(first: dt.date, after: dt.date, type_: pa.DataType) -> tuple[Any, Any] | None:
    """Physical least and greatest values of ``[first, after)`` on a date or naive timestamp column."""
    lo, hi = (first - _EPOCH).days, (after - _EPOCH).days
    if pa.types.is_date32(type_):
        return lo, hi - 1
    if pa.types.is_timestamp(type_) and type_.tz is None:
        ticks = _TICKS_PER_DAY[type_.unit]
        return lo * ticks, hi * ticks - 1
    return None


class _Monotonic(Transform):
    """Transforms where a ≤ b implies t(a) ≤ t(b): ranges project to ranges."""

    def project(self, op: str, values: tuple[Any, ...], type_: pa.DataType) -> Predicate | None:
        if op in ("<", ">") and len(values) == 1:
            # x < v is x <= (the value below v) on a discrete type: a v that starts a partition
            # then rules that partition out
            neighbour = _step(values[0], type_, -1 if op == "<" else 1)
            if neighbour is not None:
                op, values = op + "=", (neighbour,)
        try:
            mapped = tuple(self.apply_value(v, type_) for v in values)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError, OverflowError):
            return None
        if any(v is None for v in mapped):
            return None
        if op in ("=", "in"):
            return (op, mapped)
        if op in ("<", "<="):
            return ("<=", mapped)
        if op in (">", ">="):
            return (">=", mapped)
        return None


class Identity(_Monotonic):
    name = "identity"

    def __init__(self, source: str) -> None:
        self.source = source

    @property
    def field_name(self) -> str:
        return self.source

    def apply(self, array: pa.Array) -> pa.Array:
        if pa.types.is_dictionary(array.type):
            return array.dictionary_decode()
        return array

    def project(self, op: str, values: tuple[Any, ...], type_: pa.DataType) -> Predicate | None:
        return (op, values)

    def source_range(self, value: Any, type_: pa.DataType) -> tuple[Any, Any] | None:
        from colonnade.encoding.chunk import physical_value

        try:
            v = physical_value(pa.scalar(value, type=type_.value_type if pa.types.is_dictionary(type_) else type_))
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError, OverflowError):
            return None
        return None if v is None else (v, v)

    def __str__(self) -> str:
        return f"identity({quote_name(self.source)})"


class Truncate(_Monotonic):
    name = "truncate"

    def __init__(self, width: int, source: str) -> None:
        if width < 1:
            raise SpecError("truncate width must be ≥ 1")
        self.width = width
        self.source = source

    def check_type(self, type_: pa.DataType) -> None:
        if not (pa.types.is_integer(type_) or pa.types.is_string(type_) or pa.types.is_large_string(type_)):
            raise SpecError(f"truncate({self.width}, {self.source}) needs an integer or string column, not {type_}")

    def apply(self, array: pa.Array) -> pa.Array:
        if pa.types.is_dictionary(array.type):
            array = array.dictionary_decode()
        if pa.types.is_integer(array.type):
            return pc.if_else(array.is_valid(), self._truncate_integers(array), pa.scalar(None, array.type))
        return pc.utf8_slice_codeunits(array, 0, self.width)

    def _truncate_integers(self, array: pa.Array) -> pa.Array:
        """``v - (v mod width)`` without wrapping around: computed in 64 bits, and values whose
        truncation falls below the type's minimum saturate there (still monotonic)."""
        if pa.types.is_unsigned_integer(array.type):
            values = array.cast(pa.uint64()).fill_null(0).to_numpy(zero_copy_only=False)
            width = np.uint64(min(self.width, 2**64 - 1))
            return pa.array(values - values % width).cast(array.type)
        values = array.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
        out = values - values % np.int64(min(self.width, 2**63 - 1))
        lowest = np.iinfo(array.type.to_pandas_dtype()).min
        out[out > values] = lowest  # wrapped around below the int64 minimum
        return pa.array(np.maximum(out, lowest)).cast(array.type)

    def source_range(self, value: Any, type_: pa.DataType) -> tuple[Any, Any] | None:
        if pa.types.is_integer(type_) and isinstance(value, int):
            top = np.iinfo(type_.to_pandas_dtype()).max
            return value, int(min(value + self.width - 1, top))
        if isinstance(value, str) and (pa.types.is_string(type_) or pa.types.is_large_string(type_)):
            return value, None  # every string that starts with value sorts after it
        return None

    def __str__(self) -> str:
        return f"truncate({self.width}, {quote_name(self.source)})"


def _to_dates(array: pa.Array) -> pa.Array:
    if pa.types.is_date32(array.type):
        return array
    if pa.types.is_timestamp(array.type) or pa.types.is_date64(array.type):
        return array.cast(pa.date32())
    raise SpecError(f"needs a date or timestamp column, not {array.type}")


class Month(_Monotonic):
    """Months since 1970-01 (as Iceberg's month transform)."""

    name = "month"

    def __init__(self, source: str) -> None:
        self.source = source

    def check_type(self, type_: pa.DataType) -> None:
        if not (pa.types.is_date(type_) or pa.types.is_timestamp(type_)):
            raise SpecError(f"month({self.source}) needs a date or timestamp column, not {type_}")

    def apply(self, array: pa.Array) -> pa.Array:
        d = _to_dates(array)
        return pc.add(pc.multiply(pc.subtract(pc.year(d), 1970), 12), pc.subtract(pc.month(d), 1)).cast(pa.int32())

    def source_range(self, value: Any, type_: pa.DataType) -> tuple[Any, Any] | None:
        if not isinstance(value, int):
            return None
        year, month = 1970 + value // 12, value % 12 + 1
        try:
            first = dt.date(year, month, 1)
            after = dt.date(year + month // 12, month % 12 + 1, 1)
        except ValueError:
            return None
        return _day_range(first, after, type_)

    def __str__(self) -> str:
        return f"month({quote_name(self.source)})"


class Day(_Monotonic):
    """Days since 1970-01-01."""

    name = "day"

    def __init__(self, source: str) -> None:
        self.source = source

    def check_type(self, type_: pa.DataType) -> None:
        Month.check_type(self, type_)  # type: ignore[arg-type]

    def apply(self, array: pa.Array) -> pa.Array:
        return _to_dates(array).cast(pa.int32())

    def source_range(self, value: Any, type_: pa.DataType) -> tuple[Any, Any] | None:
        if not isinstance(value, int):
            return None
        try:
            first = _EPOCH + dt.timedelta(days=value)
            after = first + dt.timedelta(days=1)
        except OverflowError:
            return None
        return _day_range(first, after, type_)

    def __str__(self) -> str:
        return f"day({quote_name(self.source)})"


class Year(_Monotonic):
    """Years since 1970 (as Iceberg's year transform)."""

    name = "year"

    def __init__(self, source: str) -> None:
        self.source = source

    def check_type(self, type_: pa.DataType) -> None:
        if not (pa.types.is_date(type_) or pa.types.is_timestamp(type_)):
            raise SpecError(f"year({self.source}) needs a date or timestamp column, not {type_}")

    def apply(self, array: pa.Array) -> pa.Array:
        return pc.subtract(pc.year(_to_dates(array)), 1970).cast(pa.int32())

    def source_range(self, value: Any, type_: pa.DataType) -> tuple[Any, Any] | None:
        if not isinstance(value, int):
            return None
        try:
            first, after = dt.date(1970 + value, 1, 1), dt.date(1971 + value, 1, 1)
        except ValueError:
            return None
        return _day_range(first, after, type_)

    def __str__(self) -> str:
        return f"year({quote_name(self.source)})"


class Hour(_Monotonic):
    """Hours since 1970-01-01 00:00 (as Iceberg's hour transform; timestamps only)."""

    name = "hour"

    def __init__(self, source: str) -> None:
        self.source = source

    def check_type(self, type_: pa.DataType) -> None:
        if not pa.types.is_timestamp(type_):
            raise SpecError(f"hour({self.source}) needs a timestamp column, not {type_}")

    def apply(self, array: pa.Array) -> pa.Array:
        if pa.types.is_dictionary(array.type):
            array = array.dictionary_decode()
        if not pa.types.is_timestamp(array.type):
            raise SpecError(f"needs a timestamp column, not {array.type}")
        # hours of the stored instant since the epoch, floored (exact integer arithmetic)
        per_hour = 3600 * {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[array.type.unit]
        units = array.cast(pa.int64())
        hours = pc.divide(units, per_hour)  # truncates toward zero
        below = pc.less(pc.subtract(units, pc.multiply(hours, per_hour)), 0)
        return pc.if_else(below, pc.subtract(hours, 1), hours)

    def source_range(self, value: Any, type_: pa.DataType) -> tuple[Any, Any] | None:
        if not isinstance(value, int) or not pa.types.is_timestamp(type_):
            return None
        ticks = _TICKS_PER_DAY[type_.unit] // 24  # stored ticks count from the epoch instant
        return value * ticks, (value + 1) * ticks - 1

    def __str__(self) -> str:
        return f"hour({quote_name(self.source)})"


class Bucket(Transform):
    """A stable hash of the value modulo n (pandas' SipHash with its fixed key)."""

    name = "bucket"

    def __init__(self, n: int, source: str) -> None:
        if n < 1:
            raise SpecError("bucket count must be ≥ 1")
        self.n = n
        self.source = source

    def check_type(self, type_: pa.DataType) -> None:
        if pa.types.is_floating(type_) or pa.types.is_decimal(type_):
            raise SpecError(f"bucket({self.n}, {self.source}) needs an integer, string, binary, date or "
                            f"timestamp column, not {type_}")

    def apply(self, array: pa.Array) -> pa.Array:
        if pa.types.is_dictionary(array.type):
            array = array.dictionary_decode()
        valid = array.is_valid()
        if pa.types.is_string(array.type) or pa.types.is_large_string(array.type) or pa.types.is_binary(array.type):
            values = np.asarray(array.fill_null("").to_numpy(zero_copy_only=False), dtype=object)
        else:
            if pa.types.is_date32(array.type):
                array = array.cast(pa.int32())  # Arrow casts date32 to int32 only
            # unsigned values above the int64 maximum hash as uint64; pandas hashes the 8 bytes,
            # so every value both types hold hashes the same either way
            wide = pa.uint64() if pa.types.is_unsigned_integer(array.type) else pa.int64()
            values = array.cast(wide).fill_null(0).to_numpy(zero_copy_only=False)
        import pandas as pd  # imported here: pandas costs a second at start-up

        hashed = pd.util.hash_array(values, categorize=False) % np.uint64(self.n)
        return pc.if_else(valid, pa.array(hashed.astype(np.int32)), pa.scalar(None, pa.int32()))

    def project(self, op: str, values: tuple[Any, ...], type_: pa.DataType) -> Predicate | None:
        if op not in ("=", "in"):
            return None
        try:
            return (op, tuple(self.apply_value(v, type_) for v in values))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            return None

    def __str__(self) -> str:
        return f"bucket({self.n}, {quote_name(self.source)})"


_UNARY: dict[str, type[Identity | Year | Month | Day | Hour]] = {
    "identity": Identity, "year": Year, "month": Month, "day": Day, "hour": Hour}
_SPEC_HELP = ("use col, \"quoted col\", identity(col), year(col), month(col), day(col), hour(col), "
              "bucket(n, col), truncate(w, col), zorder(lat, lon, bits) or hilbert(lat, lon, bits)")


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) tokens of a partition expression: ``name``, ``quoted`` (unquoted text),
    ``number`` and the punctuation ``(``, ``)``, ``,``."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch in "(),":
            out.append((ch, ch))
            i += 1
        elif ch == '"':
            j, value = i + 1, []
            while True:
                if j >= len(text):
                    raise SpecError(f"unterminated quoted name in partition expression {text.strip()!r}")
                if text[j] == '"':
                    if text[j + 1:j + 2] == '"':
                        value.append('"')
                        j += 2
                        continue
                    break
                value.append(text[j])
                j += 1
            if not value:
                raise SpecError(f"empty quoted name in partition expression {text.strip()!r}")
            out.append(("quoted", "".join(value)))
            i = j + 1
        else:
            m = re.compile(r"[^\s(),\"]+").match(text, i)
            assert m is not None
            word = m.group(0)
            out.append(("number" if re.fullmatch(r"[+-]?\d+", word) else "name", word))
            i = m.end()
    return out


def parse_transform(text: str) -> Transform:
    """Parse one partition expression: ``col``, ``"quoted col"``, ``identity(col)``,
    ``year(col)``, ``month(col)``, ``day(col)``, ``hour(col)``, ``bucket(n, col)``,
    ``truncate(w, col)``, ``zorder(lat, lon, bits)``, ``hilbert(lat, lon, bits)``; column names
    may be double-quoted (``""`` is a quote inside)."""
    tokens = _tokens(text)
    if not tokens:
        raise SpecError("empty partition expression")
    kinds = [k for k, _ in tokens]
    if kinds in (["name"], ["quoted"]):
        return Identity(tokens[0][1])
    if len(tokens) >= 4 and kinds[0] == "name" and kinds[1] == "(" and kinds[-1] == ")":
        fn = tokens[0][1].lower()
        args = tokens[2:-1]
        arg_kinds = [k for k, _ in args]
        column = args[-1][1] if args and args[-1][0] in ("name", "quoted") else None
        if fn in _UNARY and len(args) == 1 and column is not None:
            return _UNARY[fn](column)
        if (fn in ("bucket", "truncate") and arg_kinds[:2] == ["number", ","] and len(args) == 3
                and column is not None):
            n = int(args[0][1])
            return Bucket(n, column) if fn == "bucket" else Truncate(n, column)
        from colonnade.schema.curve import parse_curve  # geo builds on this module

        curve = parse_curve(fn, args)
        if curve is not None:
            return curve
    legacy = _legacy_transform(text) if '"' not in text else None
    if legacy is not None:
        return legacy
    raise SpecError(f"cannot parse partition transform {text.strip()!r}: {_SPEC_HELP}")


_LEGACY_CALL = re.compile(r"^\s*(\w+)\s*\((.*)\)\s*$")


def _legacy_transform(text: str) -> Transform | None:
    """Specs stored before names could be quoted wrote any column name bare, e.g.
    ``identity(Month Year)``: still read them."""
    m = _LEGACY_CALL.match(text)
    if not m:
        return None
    fn, args = m.group(1).lower(), [a.strip() for a in m.group(2).split(",")]
    if fn in _UNARY and len(args) == 1 and args[0]:
        return _UNARY[fn](args[0])
    if fn in ("bucket", "truncate") and len(args) == 2 and re.fullmatch(r"\d+", args[0]) and args[1]:
        return Bucket(int(args[0]), args[1]) if fn == "bucket" else Truncate(int(args[0]), args[1])
    return None


def split_top_level(text: str) -> list[str]:
    """Split a comma-separated list of transforms, ignoring commas inside parentheses and
    inside double-quoted names."""
    parts: list[str] = []
    current: list[str] = []
    depth, quoted = 0, False
    for ch in text:
        if ch == '"':
            quoted = not quoted  # a doubled quote toggles twice: still right
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
        if ch == "," and depth == 0 and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def parse_partition_spec(text: str | None) -> list[Transform]:
    return [parse_transform(p) for p in split_top_level(text)] if text else []
