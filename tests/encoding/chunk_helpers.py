"""What the chunk tests share: every type of the schema language with a strategy for its
values, and a round trip that checks decoded values and statistics exactly."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import strategies as st

from colonnade.encoding import ChunkStats, decode_chunk, encode_chunk
from colonnade.encoding.chunk import MAX_STAT_STRING

EPOCH = dt.datetime(1970, 1, 1)
COMPRESSIONS = ("zstd", "lz4", "none")

# -- every type of the schema language, with a strategy for its values ------------------------
_DEC = Decimal("99999999.99")
TYPES: dict[str, tuple[pa.DataType, st.SearchStrategy[Any]]] = {
    "bool": (pa.bool_(), st.booleans()),
    "int8": (pa.int8(), st.integers(-(2**7), 2**7 - 1)),
    "int16": (pa.int16(), st.integers(-(2**15), 2**15 - 1)),
    "int32": (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    "int64": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "uint8": (pa.uint8(), st.integers(0, 2**8 - 1)),
    "uint16": (pa.uint16(), st.integers(0, 2**16 - 1)),
    "uint32": (pa.uint32(), st.integers(0, 2**32 - 1)),
    "uint64": (pa.uint64(), st.integers(0, 2**64 - 1)),
    "float32": (pa.float32(), st.floats(width=32)),
    "float64": (pa.float64(), st.floats()),
    "string": (pa.string(), st.one_of(st.text(max_size=12), st.sampled_from(["", "a", "é", "日本", "🎉"]),
                                      st.text(min_size=MAX_STAT_STRING - 2, max_size=MAX_STAT_STRING + 40))),
    "binary": (pa.binary(), st.binary(max_size=40)),
    "date32": (pa.date32(), st.dates()),
    "timestamp[us]": (pa.timestamp("us"), st.datetimes()),
    "decimal(10,2)": (pa.decimal128(10, 2), st.decimals(min_value=-_DEC, max_value=_DEC, places=2)),
}

#: Types whose statistics must be known (so pruning works on them); others may say "unknown".
STATS_REQUIRED = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                  "float32", "float64", "string", "date32", "timestamp[us]"}


def _physical(type_name: str, value: Any) -> Any:
    """A value as statistics keep it: dates as days, timestamps as microseconds since the epoch."""
    if type_name == "date32":
        return (value - EPOCH.date()).days
    if type_name == "timestamp[us]":
        return (value - EPOCH) // dt.timedelta(microseconds=1)
    return value


def expected_min_max(type_name: str, values: list[Any]) -> tuple[Any, Any]:
    """Exact min/max from the Python values, or (None, None) where pruning must not trust them."""
    present = [v for v in values if v is not None]
    if not present:
        return None, None
    if type_name.startswith("float"):
        if any(math.isnan(v) for v in present):
            return None, None
        lo, hi = min(present), max(present)
        return (None, None) if math.isinf(lo) or math.isinf(hi) else (lo, hi)
    lo, hi = min(present), max(present)
    if type_name == "string" and max(len(lo), len(hi)) > MAX_STAT_STRING:
        return None, None
    return _physical(type_name, lo), _physical(type_name, hi)


def arrow_min_max(array: pa.Array) -> tuple[Any, Any]:
    mm = pc.min_max(array)
    physical = {pa.date32(): pa.int32(), pa.timestamp("us"): pa.int64()}.get(array.type)
    lo, hi = mm["min"], mm["max"]
    if physical is not None:
        lo, hi = lo.cast(physical), hi.cast(physical)
    return lo.as_py(), hi.as_py()


def comparable(values: list[Any]) -> list[Any]:
    """NaN-aware, sign-of-zero-aware list for exact comparisons of float columns."""
    out = []
    for v in values:
        if isinstance(v, float):
            out.append(("nan",) if math.isnan(v) else (v, math.copysign(1.0, v)))
        else:
            out.append(v)
    return out


def plain(array: pa.Array) -> pa.Array:
    return array.dictionary_decode() if pa.types.is_dictionary(array.type) else array


def check_round_trip(type_name: str, values: list[Any], compression: str,
                     **options: Any) -> tuple[bytes, ChunkStats]:
    """Encode (``options`` go to encode_chunk), decode, and check values and statistics exactly."""
    type_ = TYPES[type_name][0]
    array = pa.array(values, type=type_)
    data, stats = encode_chunk(array, compression, **options)
    decoded = decode_chunk(data)
    assert plain(decoded).type == type_
    assert comparable(plain(decoded).to_pylist()) == comparable(values)
    assert pa.types.is_dictionary(decoded.type) == stats.dictionary
    assert stats.rows == len(values)
    assert stats.nulls == sum(v is None for v in values)
    assert stats.nbytes == len(data)
    lo, hi = expected_min_max(type_name, values)
    if type_name in STATS_REQUIRED:
        assert (stats.min, stats.max) == (lo, hi)
    else:
        assert (stats.min, stats.max) in ((None, None), (lo, hi))
    if stats.min is not None:  # and they agree with Arrow's own min_max
        assert (stats.min, stats.max) == arrow_min_max(array)
    assert ChunkStats.from_json(stats.to_json()) == stats
    return data, stats
