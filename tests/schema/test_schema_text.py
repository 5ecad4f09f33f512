"""The schema language (``name:type`` lines) and dataset specs as JSON."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from colonnade.errors import SchemaError, SpecError
from colonnade.schema.spec import DatasetSpec
from colonnade.schema.types import (
    parse_schema_text,
    parse_type,
    schema_from_json,
    schema_text,
    schema_to_json,
)

pytestmark = pytest.mark.unit

CANONICAL = {
    "bool": pa.bool_(), "int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
    "uint8": pa.uint8(), "uint16": pa.uint16(), "uint32": pa.uint32(), "uint64": pa.uint64(),
    "float32": pa.float32(), "float64": pa.float64(), "string": pa.string(), "binary": pa.binary(),
    "date32": pa.date32(), "timestamp[us]": pa.timestamp("us"), "timestamp[s]": pa.timestamp("s"),
    "timestamp[ms]": pa.timestamp("ms"), "timestamp[ns]": pa.timestamp("ns"),
    "timestamp[us, tz=UTC]": pa.timestamp("us", tz="UTC"), "decimal(10,2)": pa.decimal128(10, 2),
    "decimal(38,0)": pa.decimal128(38, 0), "large_string": pa.large_string(), "large_binary": pa.large_binary(),
}
ALIASES = {
    "boolean": pa.bool_(), "float": pa.float32(), "double": pa.float64(), "str": pa.string(),
    "utf8": pa.string(), "date": pa.date32(), "timestamp": pa.timestamp("us"), "INT64": pa.int64(),
    "Decimal(10, 2)": pa.decimal128(10, 2), " int32 ": pa.int32(),
}


@pytest.mark.parametrize(("text", "type_"), list(CANONICAL.items()) + list(ALIASES.items()), ids=str)
def test_parse_type(text: str, type_: pa.DataType) -> None:
    assert parse_type(text) == type_


def test_example_schema_text() -> None:
    text = """
    # events, one per line
    id: int64
    name:string          # who
    day : date
    at:timestamp

    amount:decimal(10,2)
    """
    schema = parse_schema_text(text)
    assert schema == pa.schema([("id", pa.int64()), ("name", pa.string()), ("day", pa.date32()),
                                ("at", pa.timestamp("us")), ("amount", pa.decimal128(10, 2))])
    assert schema_text(schema) == "id:int64\nname:string\nday:date32\nat:timestamp[us]\namount:decimal(10,2)\n"


names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,15}", fullmatch=True)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(names, st.sampled_from(sorted(CANONICAL))), min_size=1, max_size=20,
                unique_by=lambda c: c[0]))
def test_schema_text_round_trip(columns: list[tuple[str, str]]) -> None:
    schema = pa.schema([(name, CANONICAL[t]) for name, t in columns])
    text = schema_text(schema)
    assert text == "".join(f"{name}:{t}\n" for name, t in columns)  # canonical names are printed
    assert parse_schema_text(text) == schema
    assert schema_text(parse_schema_text(text)) == text
    assert schema_from_json(schema_to_json(schema)) == schema


def test_dictionary_columns_print_as_their_value_type() -> None:
    schema = pa.schema([("c", pa.dictionary(pa.int32(), pa.string()))])
    assert schema_text(schema) == "c:string\n"


@pytest.mark.parametrize(("text", "where", "what"), [
    ("a:int64\nb:integer\n", "schema:2:", "unknown type 'integer'"),
    ("a:int64\n\n# comment\nb int64\n", "schema:4:", "expected 'name:type'"),
    ("a:int64\nb:string\na:bool\n", "schema:3:", "column 'a' given twice"),
    (":int64\n", "schema:1:", "expected 'name:type'"),
    ("a:decimal(10)\n", "schema:1:", "unknown type"),
    ("a:timestamp[h]\n", "schema:1:", "unknown type"),
    ("# only a comment\n\n", "schema:", "no columns"),
])
def test_errors_name_the_line(text: str, where: str, what: str) -> None:
    with pytest.raises(SchemaError) as info:
        parse_schema_text(text)
    message = str(info.value)
    assert message.startswith(where), message
    assert what in message


def test_errors_name_the_source_file() -> None:
    with pytest.raises(SchemaError, match=r"^events\.schema:3: unknown type 'nope'"):
        parse_schema_text("a:int8\nb:int16\nc:nope\n", source="events.schema")


def test_unknown_type_lists_the_known_ones() -> None:
    with pytest.raises(SchemaError, match="int64") as info:
        parse_type("int128")
    assert "decimal(p,s)" in str(info.value)


# -- dataset specs ----------------------------------------------------------------------------------
def test_spec_json_round_trip() -> None:
    schema = parse_schema_text("id:int64\nd:date\ncat:string\nts:timestamp\namount:decimal(10,2)\n")
    spec = DatasetSpec.create("events", schema, partition_by="month(d), bucket(8, id), truncate(2, cat)",
                              sort_by="ts, id", segment_rows=1000, compression="lz4", created=12.5)
    again = DatasetSpec.from_json(spec.to_json())
    assert again.to_json() == spec.to_json()
    assert (again.name, again.schema) == ("events", schema)
    assert [str(t) for t in again.partition_by] == ["month(d)", "bucket(8, id)", "truncate(2, cat)"]
    assert again.sort_by == ("ts", "id")
    assert (again.segment_rows, again.compression, again.created) == (1000, "lz4", 12.5)


@pytest.mark.parametrize("type_", [pa.list_(pa.int32()), pa.struct([("a", pa.int8())]), pa.decimal256(50, 2),
                                   pa.float16(), pa.time64("us")])
def test_a_spec_refuses_a_type_it_could_not_read_back(type_: pa.DataType) -> None:
    """Every column type a spec accepts is written in the schema language and read back as
    itself: a dataset is never created that can't be opened again."""
    with pytest.raises(SchemaError, match=re.escape(f"dataset 'd': column type(s) a dataset cannot keep: x ({type_})")):
        DatasetSpec.create("d", pa.schema([("k", pa.int64()), ("x", type_)]))
    for t in CANONICAL.values():
        spec = DatasetSpec.create("d", pa.schema([("x", t)]))
        assert DatasetSpec.from_json(spec.to_json()).schema == spec.schema


def test_spec_from_a_newer_build_is_refused() -> None:
    spec = DatasetSpec.create("e", pa.schema([("a", pa.int8())]))
    text = spec.to_json().replace('"format": 1', '"format": 99')
    with pytest.raises(SpecError, match="newer"):
        DatasetSpec.from_json(text)


@pytest.mark.parametrize(("partition_by", "sort_by", "what"), [
    ("month(nope)", None, "partition column 'nope'"),
    (None, "id, nope", "sort column 'nope'"),
])
def test_spec_names_unknown_columns(partition_by: str | None, sort_by: str | None, what: str) -> None:
    with pytest.raises(SpecError, match=what):
        DatasetSpec.create("e", pa.schema([("id", pa.int64()), ("d", pa.date32())]), partition_by, sort_by)


def test_partition_keys() -> None:
    spec = DatasetSpec.create("e", pa.schema([("d", pa.date32()), ("cat", pa.string())]),
                              partition_by="month(d), cat")
    assert spec.partition_key((601, "a/b c")) == "month(d)=601/cat=a%2Fb%20c"
    assert spec.partition_key((None, "x")) == "month(d)=__null__/cat=x"
    # distinct partition values never share a key (the string "__null__" is not NULL)
    assert spec.partition_key((1, "__null__")) != spec.partition_key((1, None))
    keys = {spec.partition_key((1, v)) for v in (None, "__null__", "%5F%5Fnull%5F%5F", "__NULL__", "", " ")}
    assert len(keys) == 6


def test_time_zones_keep_their_case() -> None:
    for tz in ("UTC", "Europe/Paris", "America/New_York", "+01:00"):
        type_ = pa.timestamp("us", tz=tz)
        assert parse_type(schema_to_json(pa.schema([("t", type_)]))[0][1]) == type_
