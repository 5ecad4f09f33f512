"""Partition transforms: what ``apply`` computes, and that ``project`` is safe.

Safety is the property partition pruning rests on: whenever a value satisfies a predicate, its
partition value satisfies the projected predicate. It is checked on the transforms alone and
through the pruning rule that uses them (with literals of other numeric types, as DuckDB
pushes them).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from colonnade.errors import SpecError
from colonnade.expressions.pruning import partition_may_match
from colonnade.expressions.tree import Compare
from colonnade.schema.spec import DatasetSpec
from colonnade.schema.transforms import (
    Bucket,
    Day,
    Hour,
    Identity,
    Month,
    Transform,
    Truncate,
    Year,
    parse_partition_spec,
    parse_transform,
)

pytestmark = pytest.mark.unit

EPOCH = dt.date(1970, 1, 1)
INT_TYPES = {
    pa.int8(): (-(2**7), 2**7 - 1), pa.int16(): (-(2**15), 2**15 - 1),
    pa.int32(): (-(2**31), 2**31 - 1), pa.int64(): (-(2**63), 2**63 - 1),
    pa.uint8(): (0, 2**8 - 1), pa.uint16(): (0, 2**16 - 1),
    pa.uint32(): (0, 2**32 - 1), pa.uint64(): (0, 2**64 - 1),
}


def months(d: dt.date) -> int:
    return (d.year - 1970) * 12 + d.month - 1


def apply(t: Transform, values: list[Any], type_: pa.DataType) -> list[Any]:
    return t.apply(pa.array(values, type=type_)).to_pylist()


# -- apply -------------------------------------------------------------------------------------------
def test_identity_keeps_values_and_decodes_dictionaries() -> None:
    t = Identity("x")
    assert apply(t, [3, None, -1], pa.int16()) == [3, None, -1]
    encoded = pa.array(["a", "b", None, "a"]).dictionary_encode()
    assert t.apply(encoded).to_pylist() == ["a", "b", None, "a"]
    assert t.apply(encoded).type == pa.string()
    assert t.field_name == "x" and str(t) == "identity(x)"


@pytest.mark.parametrize("type_", list(INT_TYPES), ids=str)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_truncate_integers_floors_towards_minus_infinity(type_: pa.DataType, data: st.DataObject) -> None:
    lo, hi = INT_TYPES[type_]
    width = data.draw(st.integers(1, 10**6), label="width")
    values = data.draw(st.lists(st.one_of(st.none(), st.integers(lo, hi)), max_size=30), label="values")
    got = apply(Truncate(width, "x"), values, type_)
    for v, t in zip(values, got, strict=True):
        if v is None:
            assert t is None
        else:
            # v - (v mod width) (Python's mod is floored), saturated at the type's minimum
            assert t == max(v - v % width, lo)
            assert t <= v


def test_truncate_integer_examples() -> None:
    t = Truncate(10, "x")
    assert apply(t, [0, 1, 9, 10, 11, -1, -10, -11, None], pa.int32()) == [0, 0, 0, 10, 10, -10, -10, -20, None]
    # no wrap-around at the bottom of a type
    assert apply(Truncate(3, "x"), [-128, -127, 127], pa.int8()) == [-128, -128, 126]
    assert apply(Truncate(1000, "x"), [-128, 5, 127], pa.int8()) == [-128, 0, 0]
    assert apply(Truncate(10, "x"), [-(2**63)], pa.int64()) == [-(2**63)]


@settings(max_examples=80, deadline=None)
@given(width=st.integers(1, 12), values=st.lists(st.one_of(st.none(), st.text(max_size=20)), max_size=20))
def test_truncate_strings_keeps_a_code_point_prefix(width: int, values: list[str | None]) -> None:
    got = apply(Truncate(width, "s"), values, pa.string())
    assert got == [None if v is None else v[:width] for v in values]


def test_truncate_string_examples() -> None:
    assert apply(Truncate(3, "s"), ["abcdef", "ab", "", "日本語テキスト", "é🎉xyz", None], pa.string()) == \
        ["abc", "ab", "", "日本語", "é🎉x", None]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(st.none(), st.dates()), max_size=20))
def test_month_and_day_of_dates(values: list[dt.date | None]) -> None:
    assert apply(Month("d"), values, pa.date32()) == [None if v is None else months(v) for v in values]
    assert apply(Day("d"), values, pa.date32()) == [None if v is None else (v - EPOCH).days for v in values]


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
@settings(max_examples=40, deadline=None)
@given(values=st.lists(st.one_of(st.none(), st.datetimes(min_value=dt.datetime(1700, 1, 1),
                                                         max_value=dt.datetime(2250, 1, 1))), max_size=20))
def test_month_and_day_of_timestamps(unit: str, values: list[dt.datetime | None]) -> None:
    type_ = pa.timestamp(unit)
    array = pa.array(values, type=pa.timestamp("us")).cast(type_, safe=False)
    dates = [None if v is None else (v.date() if isinstance(v, dt.datetime) else v.to_pydatetime().date())
             for v in array.to_pylist()]
    assert Month("ts").apply(array).to_pylist() == [None if d is None else months(d) for d in dates]
    assert Day("ts").apply(array).to_pylist() == [None if d is None else (d - EPOCH).days for d in dates]


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
@settings(max_examples=40, deadline=None)
@given(values=st.lists(st.one_of(st.none(), st.datetimes(min_value=dt.datetime(1700, 1, 1),
                                                         max_value=dt.datetime(2250, 1, 1))), max_size=20))
def test_year_and_hour_of_timestamps(unit: str, values: list[dt.datetime | None]) -> None:
    array = pa.array(values, type=pa.timestamp("us")).cast(pa.timestamp(unit), safe=False)
    stored = [None if v is None else (v if isinstance(v, dt.datetime) else v.to_pydatetime())
              for v in array.to_pylist()]
    epoch = dt.datetime(1970, 1, 1)
    assert Year("ts").apply(array).to_pylist() == [None if v is None else v.year - 1970 for v in stored]
    assert Hour("ts").apply(array).to_pylist() == [
        None if v is None else (v - epoch) // dt.timedelta(hours=1) for v in stored]


def test_year_and_hour_examples_and_types() -> None:
    ts = [dt.datetime(1969, 12, 31, 23, 59, 59, 999999), dt.datetime(1970, 1, 1), dt.datetime(2024, 3, 1, 5, 30)]
    assert apply(Hour("t"), ts, pa.timestamp("us")) == [-1, 0, 474797]
    assert apply(Year("t"), ts, pa.timestamp("us")) == [-1, 0, 54]
    assert apply(Year("d"), [dt.date(1969, 6, 1), dt.date(2000, 1, 1)], pa.date32()) == [-1, 30]
    with pytest.raises(SpecError, match="timestamp"):
        Hour("d").check_type(pa.date32())
    assert Year("t").project("<", (dt.datetime(2024, 1, 1),), pa.timestamp("us")) == ("<=", (53,))


@pytest.mark.parametrize(("text", "source", "canonical"), [
    ('"Month Year"', "Month Year", 'identity("Month Year")'),
    ('bucket(4, "a, b")', "a, b", 'bucket(4, "a, b")'),
    ('day("say ""hi""")', 'say "hi"', 'day("say ""hi""")'),
    ("year(ts)", "ts", "year(ts)"),
    ('HOUR( "t s" )', "t s", 'hour("t s")'),
    ("identity(Month Year)", "Month Year", 'identity("Month Year")'),  # as older specs stored it
])
def test_quoted_column_names_in_partition_specs(text: str, source: str, canonical: str) -> None:
    transform = parse_transform(text)
    assert transform.source == source and str(transform) == canonical
    assert str(parse_transform(str(transform))) == canonical  # the stored form reads back
    assert [t.source for t in parse_partition_spec(f'{text}, "x,y"')] == [source, "x,y"]


def test_month_and_day_examples_around_the_epoch() -> None:
    ts = [dt.datetime(1969, 12, 31, 23, 59, 59), dt.datetime(1970, 1, 1), dt.datetime(2020, 2, 29, 12)]
    assert apply(Month("t"), ts, pa.timestamp("us")) == [-1, 0, 601]
    assert apply(Day("t"), ts, pa.timestamp("us")) == [-1, 0, 18321]
    assert apply(Month("d"), [dt.date(1969, 1, 1)], pa.date32()) == [-12]


@pytest.mark.parametrize(("type_", "values"), [
    (pa.int64(), [0, 1, -1, 2**40, None]),
    (pa.int8(), [0, 1, -1, 100, None]),
    (pa.string(), ["", "a", "日本", None]),
    (pa.binary(), [b"", b"a", None]),
    (pa.date32(), [EPOCH, dt.date(2020, 1, 1), None]),
    (pa.timestamp("us"), [dt.datetime(2020, 1, 1, 1, 2, 3), None]),
], ids=str)
@pytest.mark.parametrize("n", [1, 4, 16, 1000])
def test_bucket_values_are_in_range_deterministic_and_keep_nulls(type_: pa.DataType, values: list[Any], n: int) -> None:
    t = Bucket(n, "x")
    got = apply(t, values, type_)
    assert got == apply(t, values, type_)
    assert all((b is None) == (v is None) for v, b in zip(values, got, strict=True))
    assert all(0 <= b < n for b in got if b is not None)
    assert [t.apply_value(v, type_) for v in values] == got


def test_bucket_spreads_values() -> None:
    got = apply(Bucket(8, "x"), list(range(1000)), pa.int64())
    counts = [got.count(b) for b in range(8)]
    assert min(counts) > 60, counts


def test_bucket_of_an_integer_does_not_depend_on_its_width() -> None:
    # A literal cast to the column's type must land in the bucket the stored value did.
    t = Bucket(16, "x")
    for type_ in (pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint32()):
        assert apply(t, [0, 5, 100], type_) == apply(t, [0, 5, 100], pa.int64())


def test_bucket_values_are_stable() -> None:
    # Partition values are stored: a changed hash would put new rows of a value in another
    # partition than old ones and make bucket pruning skip the old rows. Never change these.
    t = Bucket(16, "x")
    assert apply(t, [0, 1, 2, 3, -1, 123456789], pa.int64()) == [0, 5, 10, 0, 11, 0]
    assert apply(t, ["", "a", "colonnade", "日本"], pa.string()) == [6, 0, 13, 1]


@pytest.mark.parametrize(("text", "type_"), [
    ("truncate(4, x)", pa.float64()), ("truncate(4, x)", pa.date32()), ("month(x)", pa.int64()),
    ("day(x)", pa.string()), ("bucket(4, x)", pa.float64()), ("bucket(4, x)", pa.decimal128(10, 2)),
], ids=str)
def test_transforms_refuse_columns_they_cannot_apply_to(text: str, type_: pa.DataType) -> None:
    with pytest.raises(SpecError, match="x"):
        DatasetSpec.create("t", pa.schema([pa.field("x", type_)]), partition_by=text)


# -- parsing -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "expected"), [
    ("x", "identity(x)"), ("identity(x)", "identity(x)"), (" bucket( 8 , x ) ", "bucket(8, x)"),
    ("truncate(10, x)", "truncate(10, x)"), ("MONTH(d)", "month(d)"), ("day(ts)", "day(ts)"),
])
def test_parse_transform(text: str, expected: str) -> None:
    t = parse_transform(text)
    assert str(t) == expected
    assert str(parse_transform(str(t))) == expected


def test_parse_partition_spec_splits_at_top_level_commas() -> None:
    assert [str(t) for t in parse_partition_spec("month(d), bucket(4, id),cat")] == \
        ["month(d)", "bucket(4, id)", "identity(cat)"]
    assert parse_partition_spec("") == []


@pytest.mark.parametrize("text", ["bucket(x)", "bucket(a, x)", "truncate(0, x)", "bucket(0, x)",
                                  "week(ts)", "month(a, b)", "hour(\"unterminated)", "", "  "])
def test_bad_transforms_are_spec_errors(text: str) -> None:
    with pytest.raises(SpecError):
        parse_transform(text)


# -- project: examples ---------------------------------------------------------------------------------
def test_projection_examples() -> None:
    assert Identity("x").project("<", (5,), pa.int64()) == ("<", (5,))
    assert Truncate(10, "x").project("<", (25,), pa.int64()) == ("<=", (20,))
    assert Truncate(10, "x").project(">=", (25,), pa.int64()) == (">=", (20,))
    assert Truncate(10, "x").project("in", (1, 25), pa.int64()) == ("in", (0, 20))
    assert Month("d").project("=", (dt.date(2020, 3, 9),), pa.date32()) == ("=", (602,))
    # d > 1970-01-02 is d >= 1970-01-03 (day 2): the partition of the bound itself is ruled out
    assert Day("d").project(">", (dt.date(1970, 1, 2),), pa.date32()) == (">=", (2,))
    assert Bucket(4, "x").project("<", (3,), pa.int64()) is None
    b = Bucket(4, "x").project("in", (3, 4), pa.int64())
    assert b is not None and b[0] == "in" and len(b[1]) == 2


# -- project: safety, as a property ----------------------------------------------------------------------
OPS = ("=", "in", "<", "<=", ">", ">=")


def holds(value: Any, op: str, literals: tuple[Any, ...]) -> bool:
    if op in ("=", "in"):
        return value in literals
    lit = literals[0]
    return {"<": value < lit, "<=": value <= lit, ">": value > lit, ">=": value >= lit}[op]


@st.composite
def column_cases(draw: st.DrawFn) -> tuple[Transform, pa.DataType, st.SearchStrategy[Any]]:
    kind = draw(st.sampled_from(["int", "string", "date", "timestamp"]))
    if kind == "int":
        type_ = draw(st.sampled_from(list(INT_TYPES)))
        lo, hi = INT_TYPES[type_]
        near = st.one_of(st.integers(lo, hi), st.integers(max(lo, -300), min(hi, 300)))
        transform = draw(st.sampled_from([Identity("c"), Truncate(draw(st.integers(1, 50)), "c"),
                                          Bucket(draw(st.integers(1, 8)), "c")]))
        return transform, type_, near
    if kind == "string":
        text = st.text(alphabet="abcé日🎉", max_size=6)
        transform = draw(st.sampled_from([Identity("c"), Truncate(draw(st.integers(1, 4)), "c"),
                                          Bucket(draw(st.integers(1, 8)), "c")]))
        return transform, pa.string(), text
    dates = st.dates(min_value=dt.date(1960, 1, 1), max_value=dt.date(2040, 12, 31))
    transform = draw(st.sampled_from([Identity("c"), Year("c"), Month("c"), Day("c"), Bucket(4, "c")]))
    if kind == "date":
        return transform, pa.date32(), dates
    times = st.datetimes(min_value=dt.datetime(1960, 1, 1), max_value=dt.datetime(2040, 12, 31))
    if draw(st.booleans()):
        transform = Hour("c")
    return transform, pa.timestamp("us"), times


@settings(max_examples=300, deadline=None)
@given(case=column_cases(), data=st.data())
def test_projection_is_safe(case: tuple[Transform, pa.DataType, st.SearchStrategy[Any]], data: st.DataObject) -> None:
    transform, type_, values = case
    value = data.draw(values, label="value")
    op = data.draw(st.sampled_from(OPS), label="op")
    literals = tuple(data.draw(st.lists(values, min_size=1, max_size=1 if op != "in" else 4), label="literals"))
    if op == "in" and data.draw(st.booleans(), label="include value"):
        literals += (value,)
    partition_value = transform.apply_value(value, type_)
    projected = transform.project(op, literals, type_)
    if projected is None or not holds(value, op, literals):
        return
    pop, plits = projected
    assert holds(partition_value, pop, plits), (value, partition_value, projected)


NUMERIC_LITERALS = [
    lambda v: pa.scalar(v, pa.int64()),
    lambda v: pa.scalar(float(v), pa.float64()),
    lambda v: pa.scalar(v + 0.5, pa.float64()),
    lambda v: pa.scalar(v - 0.5, pa.float64()),
    lambda v: pa.scalar(v, pa.int8()) if -128 <= v <= 127 else pa.scalar(v, pa.int64()),
    lambda v: pa.scalar(v, pa.decimal128(20, 0)),
]


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_partition_pruning_never_drops_a_matching_row(data: st.DataObject) -> None:
    """Through the pruning rule: literals of any numeric type, several transforms at once."""
    type_ = data.draw(st.sampled_from([pa.int8(), pa.int32(), pa.int64(), pa.uint16()]), label="type")
    lo, hi = INT_TYPES[type_]
    ints = st.integers(max(lo, -1000), min(hi, 1000))
    transforms = data.draw(st.lists(st.sampled_from(
        ["c", "truncate(7, c)", "truncate(100, c)", "bucket(5, c)", "truncate(1, s)", "s"]),
        min_size=1, max_size=3, unique=True), label="transforms")
    spec = DatasetSpec("t", pa.schema([pa.field("c", type_), pa.field("s", pa.string())]),
                       tuple(parse_transform(p) for p in transforms))
    value = data.draw(st.one_of(st.none(), ints), label="value")
    text = data.draw(st.one_of(st.none(), st.text(alphabet="abc", max_size=3)), label="text")
    op = data.draw(st.sampled_from(OPS + ("is_null", "is_valid")), label="op")
    if op in ("is_null", "is_valid"):
        node = Compare("c", op)
        matches = (value is None) == (op == "is_null")
    else:
        # literals near the value, on the side that makes the predicate true (mostly)
        delta = data.draw(st.integers(0, 30), label="delta")
        base = value if value is not None else 0
        raw = [{"=": base, "in": base, "<": base + delta + 1, "<=": base + delta,
                ">": base - delta - 1, ">=": base - delta}[op]]
        if op == "in":
            raw += data.draw(st.lists(ints, max_size=2), label="more")
        makers = data.draw(st.lists(st.sampled_from(NUMERIC_LITERALS), min_size=len(raw), max_size=len(raw)))
        literals = tuple(make(v) for make, v in zip(makers, raw, strict=True))
        node = Compare("c", op, literals)
        matches = value is not None and holds(value, op, tuple(lit.as_py() for lit in literals))
    assume(matches)
    row = {"c": value, "s": text}
    values = tuple(t.apply_value(row[t.source], spec.schema.field(t.source).type) for t in spec.partition_by)
    assert partition_may_match(node, spec, values), (spec.partition_by, row, node)


def test_partition_pruning_prunes_what_it_can_prove() -> None:
    spec = DatasetSpec("t", pa.schema([pa.field("c", pa.int64())]), (Truncate(10, "c"),))
    lit = (pa.scalar(25),)
    assert not partition_may_match(Compare("c", "<", lit), spec, (30,))
    assert partition_may_match(Compare("c", "<", lit), spec, (20,))
    assert not partition_may_match(Compare("c", "=", lit), spec, (10,))
    assert not partition_may_match(Compare("c", "is_null"), spec, (10,))
    assert not partition_may_match(Compare("c", ">", lit), spec, (None,))
    assert partition_may_match(Compare("c", "is_null"), spec, (None,))
    # 2.5 can't be cast to an integer exactly: no projection, no pruning
    assert partition_may_match(Compare("c", "=", (pa.scalar(2.5),)), spec, (10,))


def test_bucket_of_unsigned_values_above_the_int64_maximum() -> None:
    big = [2**63, 2**64 - 1, 2**63 + 5]
    out = Bucket(7, "c").apply(pa.array(big + [1, 300, None], pa.uint64())).to_pylist()
    assert all(0 <= b < 7 for b in out[:5]) and out[5] is None
    # values both types hold land in the same bucket whatever their integer type
    assert out[3:5] == Bucket(7, "c").apply(pa.array([1, 300], pa.int64())).to_pylist()
    assert Bucket(7, "c").project("=", (2**64 - 1,), pa.uint64()) == ("=", (out[1],))
