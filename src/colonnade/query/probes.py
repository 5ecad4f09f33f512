"""Decide WHERE probes (see :mod:`colonnade.query.where`) against partitions and segments.

A probe is decided by DuckDB itself: its checks (``f(x) >= c`` / ``f(x) <= c``) are evaluated on
a small table of bound values of the column's own type, in the connection that runs the query,
so every literal, implicit cast and comparison means exactly what it means in the query (a
``FLOAT`` column compared with ``1.1`` is compared in ``FLOAT``; ``TIMESTAMPTZ '2024-03-01'``
is read in the session's time zone). This is sound only when ``f`` — the column side with the
casts DuckDB adds to compare it — is monotonic, so before use each probe's types are checked:
every cast on the column must be exact and order-preserving (widening integers, ``FLOAT`` to
``DOUBLE``, ``DATE`` or a coarser timestamp to a finer one, naive to ``TIMESTAMPTZ`` only in
UTC), and so must the cast DuckDB adds to compare the column with each constant. Anything else
is rejected with the reason. Bounds come from partition values (through the transforms'
:meth:`~colonnade.schema.transforms.Transform.source_range`) and chunk min/max; a segment whose
floats hold a NaN or an infinity has no min/max, and NULLs count through null counts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from colonnade.encoding.chunk import ChunkStats
from colonnade.expressions.tree import And, Node, Or
from colonnade.query.where import PLACEHOLDER, Probe, Rejected, probes_of, replace_probes
from colonnade.schema.curve import Curve
from colonnade.table.scan import Pruned

if TYPE_CHECKING:
    import duckdb

    from colonnade.schema.spec import DatasetSpec
    from colonnade.table.commits import SegmentEntry

_TABLE = "__colonnade_probe"

_INTEGERS = {"TINYINT": (-2**7, 2**7 - 1), "SMALLINT": (-2**15, 2**15 - 1), "INTEGER": (-2**31, 2**31 - 1),
             "BIGINT": (-2**63, 2**63 - 1), "HUGEINT": (-2**127, 2**127 - 1), "UTINYINT": (0, 2**8 - 1),
             "USMALLINT": (0, 2**16 - 1), "UINTEGER": (0, 2**32 - 1), "UBIGINT": (0, 2**64 - 1),
             "UHUGEINT": (0, 2**128 - 1), "BOOLEAN": (0, 1)}
_FLOATS = {"FLOAT": 2**24, "DOUBLE": 2**53}  # integers up to this magnitude are exact
_TIMES = {"DATE": 0, "TIMESTAMP_S": 1, "TIMESTAMP_MS": 2, "TIMESTAMP": 3, "TIMESTAMP_NS": 4}
_TZ = "TIMESTAMP WITH TIME ZONE"
_DECIMAL = re.compile(r"^DECIMAL\((\d+),\s*(\d+)\)$")


def _decimal(t: str) -> tuple[int, int] | None:
    m = _DECIMAL.match(t)
    return (int(m.group(1)), int(m.group(2))) if m else None


def exact_cast(a: str, b: str, utc: bool) -> bool:
    """Is DuckDB's cast from type ``a`` to ``b`` exact and order-preserving (x < y ⇔ f(x) < f(y))?"""
    if a == b:
        return True
    if a in _INTEGERS:
        lo, hi = _INTEGERS[a]
        if b in _INTEGERS and b != "BOOLEAN":
            return _INTEGERS[b][0] <= lo and hi <= _INTEGERS[b][1]
        if b in _FLOATS:
            return max(-lo, hi) <= _FLOATS[b]
        d = _decimal(b)
        return d is not None and len(str(max(-lo, hi))) <= d[0] - d[1]
    if a == "FLOAT":
        return b == "DOUBLE"
    if (da := _decimal(a)) is not None and (db := _decimal(b)) is not None:
        return db[1] >= da[1] and db[0] - db[1] >= da[0] - da[1]
    if a in _TIMES and b in _TIMES:
        return _TIMES[a] <= _TIMES[b]
    if {a, b} <= {*_TIMES, _TZ} and "TIMESTAMP_NS" not in (a, b):
        return utc  # naive ⇄ TIMESTAMPTZ goes through the session's time zone
    return False


def compare_type(a: str, b: str) -> str | None:
    """The type DuckDB compares a column of type ``a`` with a constant of type ``b`` in (None:
    not a pair we model)."""
    if a == b:
        return a
    numeric = set(_INTEGERS) | set(_FLOATS)
    if (a in numeric or _decimal(a)) and (b in numeric or _decimal(b)) and "BOOLEAN" not in (a, b):
        if "DOUBLE" in (a, b):
            return "DOUBLE"
        if "FLOAT" in (a, b):
            return "FLOAT"
        if _decimal(b) and a in _INTEGERS:
            return b if exact_cast(a, b, False) else f"DECIMAL({38},{_decimal(b)[1]})"  # type: ignore[index]
        if _decimal(a):
            return a
        return b if exact_cast(a, b, False) else a
    if a == "BOOLEAN" and b in _INTEGERS:
        return b
    if a in _TIMES and b in _TIMES:
        return a if _TIMES[a] >= _TIMES[b] else b
    if {a, b} <= {*_TIMES, _TZ}:
        return _TZ
    return None


_TEMPLATE: list[str] = []  # DuckDB's JSON of "SELECT 1 FROM __colonnade_probe", made once


def _statement(con: duckdb.DuckDBPyConnection, exprs: list[str]) -> str:
    """SQL text of ``SELECT <exprs> FROM __colonnade_probe`` (expressions as DuckDB's JSON)."""
    if not _TEMPLATE:
        _TEMPLATE.append(str(con.execute(f"SELECT json_serialize_sql('SELECT 1 FROM {_TABLE}')").fetchall()[0][0]))
    template = json.loads(_TEMPLATE[0])
    template["statements"][0]["node"]["select_list"] = [json.loads(e) for e in exprs]
    return str(con.execute("SELECT json_deserialize_sql(?::JSON)", [json.dumps(template)]).fetchall()[0][0])


_INTEGER_TYPES = {pa.int8(): "TINYINT", pa.int16(): "SMALLINT", pa.int32(): "INTEGER", pa.int64(): "BIGINT",
                  pa.uint8(): "UTINYINT", pa.uint16(): "USMALLINT", pa.uint32(): "UINTEGER", pa.uint64(): "UBIGINT"}
_TIMESTAMP_TYPES = {"s": "TIMESTAMP_S", "ms": "TIMESTAMP_MS", "us": "TIMESTAMP", "ns": "TIMESTAMP_NS"}
_MICROS = {"s": 1_000_000, "ms": 1_000, "us": 1}


def duck_type(t: pa.DataType) -> str | None:
    """The type DuckDB gives a column of Arrow type ``t`` (None: not one probes handle)."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    if t in _INTEGER_TYPES:
        return _INTEGER_TYPES[t]
    if pa.types.is_float32(t) or pa.types.is_float64(t):
        return "FLOAT" if pa.types.is_float32(t) else "DOUBLE"
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "VARCHAR"
    if pa.types.is_date32(t):
        return "DATE"
    if pa.types.is_timestamp(t):
        if t.tz is None:
            return _TIMESTAMP_TYPES[t.unit]
        return _TZ if t.unit in _MICROS else None
    if pa.types.is_decimal128(t):
        return f"DECIMAL({t.precision},{t.scale})"
    return None


def _from_physical(t: pa.DataType) -> tuple[str, str] | None:
    """How statistics values (see ChunkStats) of a column of Arrow type ``t`` are passed to
    DuckDB: the type of the parameter list, and the SQL that makes each item (``r``) a value of
    the column's own DuckDB type, exactly."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    duck = duck_type(t)
    if duck is None or duck.startswith("DECIMAL"):
        return None  # decimals have no min/max (null counts still work)
    if pa.types.is_float32(t):
        return "DOUBLE", "CAST(r AS FLOAT)"  # a float32 is exactly a double
    if pa.types.is_date32(t):
        return "INTEGER", "CAST(DATE '1970-01-01' + r AS DATE)"
    if pa.types.is_timestamp(t):
        if t.tz is not None:
            return "BIGINT", f"to_timestamp(0) + to_microseconds(r * {_MICROS[t.unit]})"
        if t.unit == "ns":
            return "BIGINT", "make_timestamp_ns(r)"
        return "BIGINT", f"CAST(make_timestamp(r * {_MICROS[t.unit]}) AS {duck})"
    return duck, "r"


def _on(expr: str, slot: int) -> str:
    """A probe expression over PLACEHOLDER, moved to the column of ``slot``."""
    return expr.replace(json.dumps([PLACEHOLDER]), json.dumps([f"{PLACEHOLDER}{slot}"]))


class ProbeRunner:
    """Runs probe expressions in DuckDB, on the query's connection, over a relation holding
    values of each probed column in that column's own type (passed as parameters: registering
    a table costs more than the whole query): one statement for many probes."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def _sql(self, exprs: list[tuple[int, str]], source: str) -> str:
        sql = _statement(self.con, [_on(e, slot) for slot, e in exprs])
        head, sep, _ = sql.rpartition(f" FROM {_TABLE}")
        if not sep:
            raise ValueError(f"unexpected statement {sql!r}")
        return f"{head} FROM ({source}) AS {_TABLE}"

    def run(self, columns: list[tuple[pa.DataType, list[Any]]], exprs: list[tuple[int, str]]) -> list[tuple[Any, ...]]:
        """Rows of ``SELECT exprs`` over the columns' values (``exprs``: (column slot, expression));
        shorter columns are padded with NULLs."""
        raws, outs, params = [], [], []
        for i, (t, values) in enumerate(columns):
            how = _from_physical(t)
            if how is None:
                raise ValueError(f"no values of type {t} for probes")
            raws.append(f"UNNEST(?::{how[0]}[]) AS r{i}")
            outs.append(f"{_rename(how[1], i)} AS {PLACEHOLDER}{i}")
            params.append(values)
        source = f"SELECT {', '.join(outs)} FROM (SELECT {', '.join(raws)})"
        return [tuple(r) for r in self.con.execute(self._sql(exprs, source), params).fetchall()]

    def types(self, columns: list[pa.DataType], exprs: list[tuple[int, str]]) -> list[str]:
        """DuckDB's types of ``exprs`` over columns of these types."""
        outs = []
        for i, t in enumerate(columns):
            duck = duck_type(t)
            if duck is None:
                raise ValueError(f"columns of type {t} are not probed")
            outs.append(f"CAST(NULL AS {duck}) AS {PLACEHOLDER}{i}")
        return [str(t) for t in self.con.sql(self._sql(exprs, f"SELECT {', '.join(outs)}")).types]

    def utc(self) -> bool:
        zone = str(self.con.execute("SELECT current_setting('TimeZone')").fetchall()[0][0])
        return zone.upper() in ("UTC", "ETC/UTC", "GMT", "ETC/GMT", "Z", "ZULU", "UCT", "ETC/UCT")


def _rename(sql: str, i: int) -> str:
    """The conversion SQL with its item ``r`` named ``r<i>``."""
    return re.sub(r"\br\b", f"r{i}", sql)


def _cast_chain(side_json: str) -> list[str]:
    """The column side and each inner expression of its cast chain, innermost first."""
    node = json.loads(side_json)
    chain = [node]
    while node.get("class") == "CAST":
        node = node["child"]
        chain.append(node)
    return [json.dumps(n) for n in reversed(chain)]


def bind(runner: ProbeRunner, schema: pa.Schema, node: Node | None) -> tuple[Node | None, list[Rejected]]:
    """Keep the probes whose casts are proven exact and order-preserving; reject the rest."""
    rejected: list[Rejected] = []
    probes = []
    for p in probes_of(node):
        if duck_type(schema.field(p.column).type) is None:
            rejected.append(Rejected(p.subject, frozenset({p.column}),
                                     f"columns of type {schema.field(p.column).type} are not pruned on", p.expr, p.alias))
        else:
            probes.append(p)
    if not probes:
        return replace_probes(node, set()), rejected
    columns = sorted({p.column for p in probes})
    slots = {c: i for i, c in enumerate(columns)}
    exprs: list[tuple[int, str]] = []
    spans = []
    for p in probes:
        chain = _cast_chain(p.column_side)
        spans.append((len(exprs), len(chain)))
        exprs += [(slots[p.column], e) for e in chain] + [(slots[p.column], c.expr) for c in p.constants]
    try:
        types: list[str] | None = runner.types([schema.field(c).type for c in columns], exprs)
    except Exception:  # noqa: BLE001 - typed one by one below, to say which one fails
        types = None
    utc = runner.utc()
    kept: set[int] = set()
    for p, (start, chain_length) in zip(probes, spans, strict=True):
        if types is not None:
            reason = _type_reason(p, types[start:start + chain_length],
                                  types[start + chain_length:start + chain_length + len(p.constants)], utc)
        else:
            reason = _type_one(runner, schema.field(p.column).type, p, utc)
        if reason is None:
            kept.add(id(p))
        else:
            rejected.append(Rejected(p.subject, frozenset({p.column}), reason, p.expr, p.alias))
    return replace_probes(node, kept), rejected


def _type_one(runner: ProbeRunner, column_type: pa.DataType, probe: Probe, utc: bool) -> str | None:
    chain = _cast_chain(probe.column_side)
    try:
        types = runner.types([column_type], [(0, e) for e in chain] + [(0, c.expr) for c in probe.constants])
    except Exception as exc:  # noqa: BLE001 - DuckDB can't even type it: not for pruning
        return f"DuckDB can't type it ({str(exc).splitlines()[0][:120]})"
    return _type_reason(probe, types[:len(chain)], types[len(chain):], utc)


def _type_reason(probe: Probe, steps: list[str], constants: list[str], utc: bool) -> str | None:
    for a, b in zip(steps, steps[1:], strict=False):
        if not exact_cast(a, b, utc):
            return _cast_reason(a, b)
    side = steps[-1]
    if probe.kind != "compare":
        return None
    for constant, b in zip(probe.constants, constants, strict=True):
        if constant.string_literal or b in ("NULL", '"NULL"'):
            continue  # DuckDB casts a string literal (or NULL) to the column's type
        common = compare_type(side, b)
        if common is None:
            return f"comparing {side} with {b} is not modelled"
        if not exact_cast(side, common, utc):
            return f"DuckDB compares it as {common}: {_cast_reason(side, common)}"
    return None


def _cast_reason(a: str, b: str) -> str:
    if b == "VARCHAR":
        return "cast to VARCHAR is not order-preserving"
    if _TZ in (a, b) and {a, b} <= {*_TIMES, _TZ}:
        return f"cast from {a} to {b} depends on the session's time zone (not UTC)"
    return f"cast from {a} to {b} is not exact (it loses precision or range)"


# -- deciding ---------------------------------------------------------------------------------
Bounds = tuple[Any, Any, bool, bool]  # (lo, hi, may hold nulls, may hold non-nulls)


def _may_match(node: Node | None, leaf: Callable[[Probe], bool]) -> bool:
    if isinstance(node, And):
        return all(_may_match(a, leaf) for a in node.args)
    if isinstance(node, Or):
        return any(_may_match(a, leaf) for a in node.args)
    if isinstance(node, Probe):
        return leaf(node)
    return True


def _probe_may_match(probe: Probe, bounds: Bounds, results: dict[Any, tuple[Any, ...]]) -> bool:
    lo, hi, has_nulls, has_values = bounds
    if probe.kind == "is_null":
        return has_nulls
    if probe.kind == "is_valid" or not has_values:
        return has_values
    for alternative in probe.alternatives:
        ok = True
        for side, index in alternative:
            value = hi if side == "hi" else lo
            if value is None or value not in results:
                continue
            if results[value][index] is False:
                ok = False
                break
        if ok:
            return True
    return False


@dataclass
class Decider:
    """Decides one dataset's probes for many candidates at once: ``add`` the bounds of every
    candidate, ``run`` (one DuckDB statement for all probes), then ``may_match`` each."""

    runner: ProbeRunner
    schema: pa.Schema
    node: Node

    def __post_init__(self) -> None:
        self._probes = [p for p in probes_of(self.node)]
        self._values: dict[str, set[Any]] = {}
        self._results: dict[int, dict[Any, tuple[Any, ...]]] = {}

    @property
    def columns(self) -> set[str]:
        return {p.column for p in self._probes}

    def add(self, column: str, bounds: Bounds) -> None:
        self._values.setdefault(column, set()).update(v for v in bounds[:2] if v is not None)

    def run(self) -> None:
        compares = [p for p in self._probes if p.kind == "compare" and self._values.get(p.column) and p.checks
                    and _from_physical(self.schema.field(p.column).type) is not None]
        if not compares:
            return
        columns = sorted({p.column for p in compares})
        values = {c: sorted(self._values[c], key=repr) for c in columns}
        exprs = [(columns.index(p.column), check) for p in compares for check in p.checks]
        try:
            rows = self.runner.run([(self.schema.field(c).type, values[c]) for c in columns], exprs)
        except Exception:  # noqa: BLE001 - probes that fail to run decide nothing
            return
        at = 0
        for p in compares:
            n = len(p.checks)
            slot = values[p.column]
            self._results[id(p)] = {v: rows[i][at:at + n] for i, v in enumerate(slot)}
            at += n

    def may_match(self, bounds: Callable[[str], Iterable[Bounds]]) -> bool:
        """``bounds(column)``: what is known of the column in the candidate (each must agree)."""
        return _may_match(self.node, lambda p: all(
            _probe_may_match(p, b, self._results.get(id(p), {})) for b in bounds(p.column)))


def partition_bounds(spec: DatasetSpec, values: tuple[Any, ...]) -> Callable[[str], list[Bounds]]:
    """What a partition's transform values say about each source column."""
    schema = spec.schema

    def bounds(column: str) -> list[Bounds]:
        out: list[Bounds] = []
        for transform, value in zip(spec.partition_by, values, strict=True):
            if isinstance(transform, Curve) and column in transform.sources:
                cell = transform.source_bounds(column, value, schema.field(column).type)
                if cell is not None:  # a partition with a key holds valid coordinates only
                    out.append((cell[0], cell[1], False, True))
                continue
            if transform.sources != (column,):
                continue
            if value is None:  # every transform maps null to null, and only null
                out.append((None, None, True, False))
                continue
            rng = transform.source_range(value, schema.field(column).type)
            lo, hi = rng if rng is not None else (None, None)
            out.append((lo, hi, False, True))
        return out

    return bounds


def segment_bounds(stats: dict[str, ChunkStats], rows: int) -> Callable[[str], list[Bounds]]:
    def bounds(column: str) -> list[Bounds]:
        s = stats.get(column)
        if s is None:  # column added after the segment was written: all null
            return [(None, None, True, False)]
        return [(s.min, s.max, s.nulls > 0, s.nulls < rows)]

    return bounds


def prune(runner: ProbeRunner, spec: DatasetSpec, schema: pa.Schema, node: Node,
          segments: tuple[SegmentEntry, ...],
          read_stats: Callable[[list[str]], dict[str, dict[str, ChunkStats]]]) -> Pruned:
    """Rule out partitions (by their values) and then segments (by their statistics)."""
    by_partition: dict[str, list[SegmentEntry]] = {}
    for s in segments:
        by_partition.setdefault(s.partition, []).append(s)
    decider = Decider(runner, schema, node)
    columns = frozenset(decider.columns)
    part_bounds = {p: partition_bounds(spec, segs[0].values) for p, segs in by_partition.items()}
    if spec.partition_by and any(c in columns for t in spec.partition_by for c in t.sources):
        for b in part_bounds.values():
            for column in columns:
                for x in b(column):
                    decider.add(column, x)
        decider.run()
        out_partitions = {p for p, b in part_bounds.items() if not decider.may_match(b)}
    else:
        out_partitions = set()
    kept = [p for p in by_partition if p not in out_partitions]
    stats = read_stats(kept) if kept else {}
    decider = Decider(runner, schema, node)
    seg_bounds = {}
    for p in kept:
        for s in by_partition[p]:
            st = stats.get(s.segment)
            if st is None:
                continue  # the scan reports the missing index row
            seg_bounds[s.segment] = segment_bounds(st, s.rows)
            for column in columns:
                for x in seg_bounds[s.segment](column):
                    decider.add(column, x)
    decider.run()
    out_segments = {seg for seg, b in seg_bounds.items() if not decider.may_match(b)}
    return Pruned(frozenset(out_partitions), frozenset(out_segments), stats, columns)
