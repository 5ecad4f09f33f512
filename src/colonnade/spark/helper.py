"""The helper process of Spark's JVM reader (``colonnade.DefaultSource``): one per Spark JVM,
started by it with ``python -m colonnade.spark.helper``.

It listens on a loopback port and prints ``PORT SECRET``; it exits when its standard input
closes (the JVM that started it is gone). Each connection carries one request: the secret, then
one JSON line ``{"op": ..., "options": {...}, ...}``:

- ``schema``: the dataset's Spark schema (JSON) at the version asked for, else the latest
  (with ``given``, a schema the read was given: an error unless it names columns of the dataset
  with their types);
- ``filters``: which of the plain filters (see :mod:`colonnade.spark.filters`) a scan takes, and
  the version the read is pinned to;
- ``plan``: the pruned scan's segment groups (opaque text each) and their nodes;
- ``read``: one group's rows, an Arrow IPC stream of Spark's types; with ``aggregate``, the
  aggregation Spark pushed, computed over the group's rows (one row per group of keys).

Answers are frames ``[kind][int32 length][payload]``: ``j`` JSON, ``d`` stream bytes, ``z`` end
of stream, ``e`` an error's one-line message (a Colonnade error as itself; anything else with
its type).
"""

from __future__ import annotations

import json
import os
import secrets
import socketserver
import struct
import sys
import threading
from collections.abc import Iterable
from io import BufferedIOBase
from typing import Any

import pyarrow as pa

from colonnade.errors import ColonnadeError
from colonnade.schema.types import schema_from_json, schema_to_json
from colonnade.spark.aggregates import aggregate_group
from colonnade.spark.reading import (
    SegmentGroup,
    asked_version,
    dataset_name,
    filter_of,
    open_store,
    option,
    pinned,
    plan_groups,
    read_group,
    spark_arrow_type,
    split_options,
    store_uri,
)
from colonnade.sqlnames import quoted

_GATHER = 64 * 1024


def _frame(out: BufferedIOBase, kind: bytes, payload: bytes | pa.Buffer) -> None:
    out.write(kind + struct.pack(">i", len(payload)))
    out.write(memoryview(payload))  # a buffer goes to the socket as it is (no copy)


def _version(request: dict[str, Any]) -> int | None:
    """The version a read was pinned to (by the JVM), else the one its options ask for."""
    if request.get("version") is not None:
        return int(request["version"])
    return asked_version(request.get("options") or {})


def _dataset(request: dict[str, Any]) -> tuple[str, str]:
    options = request.get("options") or {}
    return store_uri(option(options, "store")), dataset_name(options)


_SPARK_NAMES = {"int8": "byte", "int16": "short", "int32": "integer", "int64": "long", "float": "float",
                "double": "double", "bool": "boolean", "string": "string", "binary": "binary",
                "date32[day]": "date"}


def _spark_type_json(t: pa.DataType) -> str:
    t = spark_arrow_type(t)
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz else "timestamp_ntz"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    name = _SPARK_NAMES.get(str(t))
    if name is None:
        raise ColonnadeError(f"a column of type {t} can't be read by Spark")
    return name


def _check_given(name: str, fields: list[dict[str, Any]], given: dict[str, Any]) -> None:
    """A schema given to a read (``.schema(...)``) names columns of the dataset with their types
    (Spark's JSON form); else one line naming every difference."""
    types = {f["name"]: f["type"] for f in fields}
    wrong = []
    for f in given.get("fields") or []:
        have = types.get(f["name"])
        if have is None:
            wrong.append(f"{f['name']} is not in the dataset")
        elif have != f["type"]:
            wrong.append(f"{f['name']} is {have}, not {f['type']}")
    if wrong:
        raise ColonnadeError(f"the schema given to read dataset {name!r} does not match it: " + "; ".join(wrong))


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """The JSON answer to a ``schema``, ``filters`` or ``plan`` request."""
    uri, name = _dataset(request)
    store = open_store(uri)
    stored, snapshot, schema = pinned(store, name, _version(request))
    op = request.get("op")
    if op == "schema":
        fields = [{"name": f.name, "type": _spark_type_json(f.type), "nullable": True, "metadata": {}}
                  for f in schema]
        if request.get("given") is not None:
            _check_given(stored, fields, request["given"])
        return {"version": snapshot.version, "schema": {"type": "struct", "fields": fields}}
    if op == "aggregate":
        return {"version": snapshot.version,
                "values": from_metadata(store, stored, snapshot.version, schema, request)}
    expr, taken = filter_of(request.get("filters") or [], schema)
    if op == "filters":
        return {"version": snapshot.version, "taken": taken}
    if op == "plan":
        groups = plan_groups(store, stored, snapshot.version, request.get("columns") or [], expr,
                             *split_options(request.get("options") or {}), snapshot=snapshot)
        aggregation = request.get("aggregate")
        if not groups and aggregation and not aggregation["group_by"]:
            groups = [SegmentGroup((), None, 0)]  # a count of no rows is still one row: 0
        return {"version": snapshot.version, "schema": schema_to_json(schema),
                "partitions": [{"group": g.to_text(), "hosts": list(g.hosts)} for g in groups]}
    raise ColonnadeError(f"unknown request {op!r}")


class _Frames:
    """A write-only file for Arrow's stream writer: its bytes go out as ``d`` frames (small
    writes gathered up to 64 KiB; large buffers sent as they are)."""

    closed = False

    def __init__(self, out: BufferedIOBase) -> None:
        self.out = out
        self.buffer = bytearray()

    def write(self, data: Any) -> int:
        n = len(data)
        if n >= _GATHER:
            self.flush()
            _frame(self.out, b"d", data)
        else:
            self.buffer += data
            if len(self.buffer) >= _GATHER:
                self.flush()
        return n

    def flush(self) -> None:
        if self.buffer:
            _frame(self.out, b"d", bytes(self.buffer))
            self.buffer.clear()

    def close(self) -> None:
        self.flush()


_METADATA_TYPES = (pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.float32(), pa.float64(), pa.string(),
                   pa.date32())


def _sql_value(value: Any) -> str | None:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, dict) and "date" in value:
        return f"DATE '{value['date']}'"
    return None


def _sql_filter(flt: dict[str, Any], schema: pa.Schema) -> str | None:
    """A plain filter as SQL (None: one that is not written here)."""
    op = flt.get("op")
    if op == "not":
        inner = _sql_filter(flt["child"], schema)
        return None if inner is None else f"NOT ({inner})"
    col = flt.get("col")
    if col not in schema.names:
        return None
    name = quoted(str(col))
    if op == "isnull":
        return f"{name} IS NULL"
    if op == "notnull":
        return f"{name} IS NOT NULL"
    if op == "in":
        values = [_sql_value(v) for v in flt.get("values") or []]
        return None if not values or None in values else f"{name} IN ({', '.join(map(str, values))})"
    sql_op = {"eq": "=", "gt": ">", "ge": ">=", "lt": "<", "le": "<=", "eqns": "IS NOT DISTINCT FROM"}.get(str(op))
    value = _sql_value(flt.get("value"))
    return None if sql_op is None or value is None else f"{name} {sql_op} {value}"


def from_metadata(store: Any, name: str, version: int, schema: pa.Schema, request: dict[str, Any]) -> list[Any] | None:
    """The values of the aggregates of a pushed aggregation (``countstar``, ``count``, ``min``,
    ``max`` of columns, no grouping, under the pushed filters), if segment statistics decide
    them exactly (as ``Store.sql`` answers such a query without reading chunks); else None."""
    select = []
    for agg in request.get("aggregates") or []:
        fn, col = agg.get("fn"), agg.get("col")
        if fn == "countstar":
            select.append("count(*)")
            continue
        if fn not in ("count", "min", "max") or col not in schema.names:
            return None
        if fn != "count" and schema.field(col).type not in _METADATA_TYPES:
            return None
        select.append(f'{fn}("{col}")')
    where = [_sql_filter(f, schema) for f in request.get("filters") or []]
    if not select or None in where:
        return None
    sql = f'SELECT {", ".join(select)} FROM "{name}"' + (f" WHERE {' AND '.join(map(str, where))}" if where else "")
    answered = store._answers.from_stats(sql, version, None)
    if answered is None:
        return None
    row = answered.table.to_pylist()[0]
    return [{"date": v.isoformat()} if hasattr(v, "isoformat") else v for v in row.values()]


def stream(request: dict[str, Any], out: BufferedIOBase) -> None:
    """A ``read`` request's rows as ``d`` frames, one Arrow IPC stream per batch (its own
    schema: columns stored as dictionaries stay so, the JVM reader looks values up instead of
    this process decoding them), then ``z``."""
    uri, name = _dataset(request)
    store = open_store(uri)
    schema = schema_from_json(request["schema"])
    expr, _ = filter_of(request.get("filters") or [], schema)
    group = SegmentGroup.from_text(request["group"])
    batches: Iterable[pa.RecordBatch]
    if request.get("aggregate"):  # one row per group of keys of this task's rows
        batches = aggregate_group(store, name, schema, request["aggregate"], expr, group).to_batches()
    else:
        batches = read_group(store, name, schema, request.get("columns") or [], expr, group, as_stored=True)
    sink = _Frames(out)
    for batch in batches:
        with pa.ipc.new_stream(sink, batch.schema) as writer:
            writer.write_batch(batch)
    sink.flush()
    _frame(out, b"z", b"")


class _Handler(socketserver.StreamRequestHandler):
    secret = ""

    def handle(self) -> None:
        if self.rfile.readline().decode().strip() != self.secret:
            return
        out = self.wfile
        try:
            request = json.loads(self.rfile.readline())
            if request.get("op") == "read":
                stream(request, out)
            else:
                _frame(out, b"j", json.dumps(answer(request)).encode())
        except (BrokenPipeError, ConnectionResetError):
            return  # the task stopped reading (a LIMIT was reached, or it was cancelled)
        except ColonnadeError as exc:
            self._report(str(exc))
        except Exception as exc:  # reported to the task, which fails with it
            self._report(f"{type(exc).__name__}: {exc}")

    def _report(self, message: str) -> None:
        try:
            _frame(self.wfile, b"e", message.encode())
        except OSError:
            pass


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main() -> None:
    _Handler.secret = secrets.token_hex(16)
    server = _Server(("127.0.0.1", 0), _Handler)
    print(f"{server.server_address[1]} {_Handler.secret}", flush=True)

    def watch() -> None:
        sys.stdin.read()  # returns when the JVM that started us closes our input (or dies)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
