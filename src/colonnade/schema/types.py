"""The schema language: ``name:type`` lines to and from Arrow schemas.

Types: bool, int8, int16, int32, int64, uint8..uint64, float32, float64, string, large_string,
binary, large_binary, date32 (alias date), timestamp (microseconds), timestamp[s|ms|us|ns],
decimal(p,s).
"""

from __future__ import annotations

import re

import pyarrow as pa

from colonnade.errors import SchemaError

_SIMPLE: dict[str, pa.DataType] = {
    "bool": pa.bool_(), "boolean": pa.bool_(),
    "int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
    "uint8": pa.uint8(), "uint16": pa.uint16(), "uint32": pa.uint32(), "uint64": pa.uint64(),
    "float32": pa.float32(), "float": pa.float32(), "float64": pa.float64(), "double": pa.float64(),
    "string": pa.string(), "str": pa.string(), "utf8": pa.string(), "large_string": pa.large_string(),
    "binary": pa.binary(), "large_binary": pa.large_binary(), "date32": pa.date32(), "date": pa.date32(),
    "timestamp": pa.timestamp("us"),
}
_TS = re.compile(r"timestamp\[(s|ms|us|ns)(?:,\s*tz=([\w/+:-]+))?\]$", re.IGNORECASE)
_DEC = re.compile(r"decimal\((\d+),\s*(\d+)\)$")


def parse_type(text: str) -> pa.DataType:
    t = text.strip().lower()
    if t in _SIMPLE:
        return _SIMPLE[t]
    if m := _TS.match(text.strip()):  # time zone names are case-sensitive: not lowered
        return pa.timestamp(m.group(1).lower(), tz=m.group(2))
    if m := _DEC.match(t):
        try:
            return pa.decimal128(int(m.group(1)), int(m.group(2)))
        except ValueError as exc:
            raise SchemaError(f"type {text.strip()!r}: {exc}") from None
    raise SchemaError(f"unknown type {text.strip()!r} (known: {', '.join(sorted(set(_SIMPLE)))}, "
                      "timestamp[unit], decimal(p,s))")


def type_name(t: pa.DataType) -> str:
    if pa.types.is_dictionary(t):
        return type_name(t.value_type)
    for name, candidate in _SIMPLE.items():
        if candidate == t and name not in ("boolean", "float", "double", "str", "utf8", "date", "timestamp"):
            return name
    if pa.types.is_timestamp(t):
        return f"timestamp[{t.unit}" + (f", tz={t.tz}]" if t.tz else "]")
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    return str(t)


def parse_schema_text(text: str, source: str = "schema") -> pa.Schema:
    """Parse ``name:type`` lines (blank lines and ``#`` comments ignored)."""
    fields = []
    seen: set[str] = set()
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, tname = line.partition(":")
        if not sep or not name.strip():
            raise SchemaError(f"{source}:{lineno}: expected 'name:type', got {raw.strip()!r}")
        name = name.strip()
        if name in seen:
            raise SchemaError(f"{source}:{lineno}: column {name!r} given twice")
        seen.add(name)
        try:
            fields.append(pa.field(name, parse_type(tname)))
        except SchemaError as exc:
            raise SchemaError(f"{source}:{lineno}: {exc}") from None
    if not fields:
        raise SchemaError(f"{source}: no columns")
    return pa.schema(fields)


def schema_text(schema: pa.Schema) -> str:
    return "".join(f"{f.name}:{type_name(f.type)}\n" for f in schema)


def check_storable(schema: pa.Schema, dataset: str | None = None) -> None:
    """SchemaError naming the columns whose types the schema language can't write down (a
    dataset holding one could be created but never opened again)."""
    bad = []
    for f in logical_schema(schema):
        try:
            ok = parse_type(type_name(f.type)) == f.type
        except SchemaError:
            ok = False
        if not ok:
            bad.append(f"{f.name} ({f.type})")
    if bad:
        where = f"dataset {dataset!r}: " if dataset else ""
        raise SchemaError(f"{where}column type(s) a dataset cannot keep: {', '.join(bad)} (known: "
                          f"{', '.join(sorted(set(_SIMPLE)))}, timestamp[unit], decimal(p,s))")


def schema_to_json(schema: pa.Schema) -> list[list[str]]:
    return [[f.name, type_name(f.type)] for f in schema]


def schema_from_json(value: list[list[str]]) -> pa.Schema:
    return pa.schema([pa.field(name, parse_type(t)) for name, t in value])


def logical_schema(schema: pa.Schema) -> pa.Schema:
    """The schema with dictionary types replaced by their value types."""
    return pa.schema([
        pa.field(f.name, f.type.value_type if pa.types.is_dictionary(f.type) else f.type)
        for f in schema
    ])
