"""Read a ``pyarrow.compute.Expression`` (what DuckDB pushes down) into a small predicate tree.

pyarrow exposes no expression tree in Python, but it serializes expressions (for pickling) as an
Arrow IPC file whose schema metadata lists the tree in prefix order — ``call``/``end`` around
arguments, ``field_ref`` names, ``literal`` and ``options`` pointing at columns of the batch.
The metadata keys repeat, so they are read in order straight from the schema message's
flatbuffer. Anything not understood becomes :class:`Unknown`, which pruning treats as "maybe":
an expression we can't read is never used to skip data.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc


@dataclass(frozen=True)
class Node:
    pass


@dataclass(frozen=True)
class Unknown(Node):
    why: str = ""


@dataclass(frozen=True)
class And(Node):
    args: tuple[Node, ...]


@dataclass(frozen=True)
class Or(Node):
    args: tuple[Node, ...]


@dataclass(frozen=True)
class Compare(Node):
    """``column op values``; op is one of = in < <= > >= is_null is_valid."""

    column: str
    op: str
    values: tuple[pa.Scalar, ...] = ()


_CMP = {"equal": "=", "less": "<", "less_equal": "<=", "greater": ">", "greater_equal": ">="}
_FLIP = {"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _u32(b: bytes, pos: int) -> int:
    return int(struct.unpack_from("<I", b, pos)[0])


def _table_field(b: bytes, table: int, index: int) -> int | None:
    """Absolute position of field ``index`` of the flatbuffer table at ``table``, or None."""
    vtable = table - struct.unpack_from("<i", b, table)[0]
    vsize = struct.unpack_from("<H", b, vtable)[0]
    entry = 4 + 2 * index
    if entry >= vsize:
        return None
    off = struct.unpack_from("<H", b, vtable + entry)[0]
    return table + off if off else None


def _deref(b: bytes, pos: int) -> int:
    return pos + _u32(b, pos)


def _string(b: bytes, pos: int) -> str:
    start = _deref(b, pos)
    n = _u32(b, start)
    return b[start + 4:start + 4 + n].decode()


def _ordered_metadata(message: bytes) -> list[tuple[str, str]]:
    """Key/value pairs of a Schema IPC message's custom_metadata, in order (with repeats)."""
    root = _u32(message, 0)
    header = _table_field(message, root, 2)  # Message.header
    if header is None:
        return []
    schema = _deref(message, header)
    kv_field = _table_field(message, schema, 2)  # Schema.custom_metadata
    if kv_field is None:
        return []
    vec = _deref(message, kv_field)
    out = []
    for i in range(_u32(message, vec)):
        elem = _deref(message, vec + 4 + 4 * i)
        k, v = _table_field(message, elem, 0), _table_field(message, elem, 1)
        out.append((_string(message, k) if k else "", _string(message, v) if v else ""))
    return out


def _serialized(expr: pc.Expression) -> tuple[list[tuple[str, str]], pa.Buffer]:
    buf = expr.__reduce__()[1][0]
    message = pa.ipc.read_message(pa.BufferReader(buf.slice(8))).metadata.to_pybytes()
    return _ordered_metadata(message), buf


def field_names(expr: pc.Expression) -> set[str] | None:
    """Every column an expression refers to (None if the expression can't be read)."""
    try:
        items, _ = _serialized(expr)
    except Exception:  # noqa: BLE001 - the caller falls back to something coarser
        return None
    if any(k == "nested_field_ref" for k, _ in items):
        return None
    return {v for k, v in items if k == "field_ref"}


def parse_expression(expr: pc.Expression | None) -> Node | None:
    """The predicate tree of a filter expression (None for no filter)."""
    if expr is None:
        return None
    try:
        items, buf = _serialized(expr)
        table = pa.ipc.open_file(buf).read_all()
        node, pos = _parse(items, 0, table)
        return node if pos == len(items) else Unknown("trailing items")
    except Exception as exc:  # noqa: BLE001 - unknown shapes must never break a query
        return Unknown(f"unreadable expression: {exc}")


@dataclass(frozen=True)
class _Field:
    name: str


@dataclass(frozen=True)
class _Literal:
    value: pa.Scalar


def _parse(items: list[tuple[str, str]], pos: int, table: pa.Table) -> tuple[Any, int]:
    key, value = items[pos]
    if key == "literal":
        return _Literal(table.column(int(value))[0]), pos + 1
    if key == "field_ref":
        return _Field(value), pos + 1
    if key == "nested_field_ref":
        return Unknown("nested field"), pos + 1
    if key != "call":
        return Unknown(f"unexpected {key}"), pos + 1
    name, pos = value, pos + 1
    args: list[Any] = []
    options = None
    while items[pos][0] != "end":
        if items[pos][0] == "options":
            options = table.column(int(items[pos][1]))[0]
            pos += 1
            continue
        arg, pos = _parse(items, pos, table)
        args.append(arg)
    return _build(name, args, options), pos + 1


def _build(name: str, args: list[Any], options: pa.Scalar | None) -> Any:
    if name in ("and_kleene", "and"):
        return And(tuple(_node(a) for a in args))
    if name in ("or_kleene", "or"):
        return Or(tuple(_node(a) for a in args))
    if name in _CMP and len(args) == 2:
        a, b = args
        if isinstance(a, _Field) and isinstance(b, _Literal):
            return _compare(a.name, _CMP[name], (b.value,))
        if isinstance(a, _Literal) and isinstance(b, _Field):
            return _compare(b.name, _FLIP[_CMP[name]], (a.value,))
        return Unknown(name)
    if name == "is_in" and len(args) == 1 and isinstance(args[0], _Field) and options is not None:
        value_set = options["value_set"]
        skip_nulls = options.get("skip_nulls") if hasattr(options, "get") else None
        del skip_nulls
        values = tuple(v for v in value_set.values if v.is_valid)
        return Compare(args[0].name, "in", values)
    if name == "is_null" and len(args) == 1 and isinstance(args[0], _Field):
        return Compare(args[0].name, "is_null")
    if name == "is_valid" and len(args) == 1 and isinstance(args[0], _Field):
        return Compare(args[0].name, "is_valid")
    if name == "if_else" and len(args) == 3:
        # DuckDB wraps IN as if_else(is_valid(x), is_in(x, ...), null): a row passes only where
        # the middle branch is true, so for pruning it is the middle branch.
        third = args[2]
        if isinstance(third, _Literal) and not third.value.is_valid:
            return And((_node(args[0]), _node(args[1])))
        return Unknown("if_else")
    return Unknown(name)


def _compare(column: str, op: str, values: tuple[pa.Scalar, ...]) -> Node:
    if any(not v.is_valid for v in values):
        return Unknown("null literal")  # comparisons with NULL are never true, but keep it simple
    return Compare(column, op, values)


def _node(x: Any) -> Node:
    if isinstance(x, Node):
        return x
    if isinstance(x, _Field):
        return Unknown("bare boolean column")
    if isinstance(x, _Literal):
        return Unknown("literal")
    return Unknown("?")


def columns_of(node: Node | None) -> set[str]:
    if node is None or isinstance(node, Unknown):
        return set()
    if isinstance(node, And | Or):
        out: set[str] = set()
        for a in node.args:
            out |= columns_of(a)
        return out
    if isinstance(node, Compare):
        return {node.column}
    return set()
