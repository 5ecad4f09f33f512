"""Tests of the GDELT-shaped data generator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pytest

from colonnade.bench.gdelt_data import (
    GDELT_COLUMNS,
    GDELT_SCHEMA,
    convert_options,
    generate,
    iter_batches,
    parse_options,
    read_options,
    schema_text,
)

pytestmark = pytest.mark.unit

ROWS = 5_000

EXPECTED_COLUMNS = (
    "GLOBALEVENTID SQLDATE MonthYear Year FractionDate "
    "Actor1Code Actor1Name Actor1CountryCode Actor1KnownGroupCode Actor1EthnicCode "
    "Actor1Religion1Code Actor1Religion2Code Actor1Type1Code Actor1Type2Code Actor1Type3Code "
    "Actor2Code Actor2Name Actor2CountryCode Actor2KnownGroupCode Actor2EthnicCode "
    "Actor2Religion1Code Actor2Religion2Code Actor2Type1Code Actor2Type2Code Actor2Type3Code "
    "IsRootEvent EventCode EventBaseCode EventRootCode QuadClass GoldsteinScale "
    "NumMentions NumSources NumArticles AvgTone "
    "Actor1Geo_Type Actor1Geo_FullName Actor1Geo_CountryCode Actor1Geo_ADM1Code "
    "Actor1Geo_Lat Actor1Geo_Long Actor1Geo_FeatureID "
    "Actor2Geo_Type Actor2Geo_FullName Actor2Geo_CountryCode Actor2Geo_ADM1Code "
    "Actor2Geo_Lat Actor2Geo_Long Actor2Geo_FeatureID "
    "ActionGeo_Type ActionGeo_FullName ActionGeo_CountryCode ActionGeo_ADM1Code "
    "ActionGeo_Lat ActionGeo_Long ActionGeo_FeatureID DATEADDED"
).split()


def read_tsv(path: Path) -> pa.Table:
    return pacsv.read_csv(
        path,
        read_options=pacsv.ReadOptions(column_names=GDELT_COLUMNS),
        parse_options=pacsv.ParseOptions(delimiter="\t", quote_char=False),
        convert_options=pacsv.ConvertOptions(column_types=GDELT_SCHEMA, strings_can_be_null=True),
    )


@pytest.fixture(scope="module")
def tsv(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    path = tmp_path_factory.mktemp("gdelt") / "events.tsv"
    size = generate(path, ROWS, seed=42)
    return path, size


@pytest.fixture(scope="module")
def table(tsv: tuple[Path, int]) -> pa.Table:
    return read_tsv(tsv[0])


def test_columns() -> None:
    assert len(GDELT_COLUMNS) == 57
    assert GDELT_COLUMNS == EXPECTED_COLUMNS
    assert GDELT_SCHEMA.names == EXPECTED_COLUMNS
    assert GDELT_SCHEMA.field("GLOBALEVENTID").type == pa.int64()
    assert GDELT_SCHEMA.field("EventCode").type == pa.string()
    assert GDELT_SCHEMA.field("AvgTone").type == pa.float64()


def test_schema_text() -> None:
    lines = schema_text().splitlines()
    assert len(lines) == 57
    assert lines[0] == "GLOBALEVENTID:int64"
    assert lines[1] == "SQLDATE:int32"
    assert "EventCode:string" in lines
    assert "ActionGeo_Lat:float64" in lines
    assert [line.split(":")[0] for line in lines] == GDELT_COLUMNS


def test_file_shape(tsv: tuple[Path, int]) -> None:
    path, size = tsv
    data = path.read_bytes()
    assert size == len(data)
    lines = data.split(b"\n")
    assert lines[-1] == b""  # trailing newline, no header
    assert len(lines) == ROWS + 1
    assert lines[0].startswith(b"1\t1979")
    assert all(line.count(b"\t") == 56 for line in lines[:-1])
    assert b'"' not in data


def test_deterministic(tsv: tuple[Path, int], tmp_path: Path) -> None:
    again = tmp_path / "again.tsv"
    other = tmp_path / "other.tsv"
    generate(again, ROWS, seed=42, batch_rows=1_234)  # batch size must not change content
    generate(other, ROWS, seed=43)
    assert again.read_bytes() == tsv[0].read_bytes()
    assert other.read_bytes() != tsv[0].read_bytes()


def test_read_back(table: pa.Table) -> None:
    assert table.num_rows == ROWS
    assert table.schema == GDELT_SCHEMA
    ids = table["GLOBALEVENTID"].to_numpy()
    assert (np.diff(ids) > 0).all()
    dates = table["SQLDATE"].to_numpy()
    assert (np.diff(dates) >= 0).all()
    assert pc.min(table["MonthYear"]).as_py() >= 197901
    assert pc.max(table["MonthYear"]).as_py() <= 198412
    assert pc.all(pc.equal(table["DATEADDED"], 20130203)).as_py()
    assert pc.min(table["NumArticles"]).as_py() >= 1
    assert pc.min(table["GoldsteinScale"]).as_py() >= -10
    assert pc.max(table["GoldsteinScale"]).as_py() <= 10
    codes = table["EventCode"].to_pylist()
    roots = table["EventRootCode"].to_pylist()
    assert all(c.startswith(r) and len(r) == 2 for c, r in zip(codes, roots, strict=True))


def test_year_distribution_increasing(table: pa.Table) -> None:
    years = table["Year"].to_numpy()
    counts = [int((years == y).sum()) for y in range(1979, 1985)]
    assert all(c > 0 for c in counts)
    assert counts == sorted(counts)
    assert counts[-1] > 3 * counts[0]


def test_actor_name_skew(table: pa.Table) -> None:
    names = table["Actor1Name"]
    null_share = names.null_count / ROWS
    assert 0.25 < null_share < 0.45
    assert 0.4 < table["Actor2Name"].null_count / ROWS < 0.6
    counts = pc.value_counts(names.drop_null()).field("counts").to_numpy()
    assert counts.max() > 20 * np.median(counts)
    # optional code columns are mostly empty
    assert table["Actor1KnownGroupCode"].null_count / ROWS > 0.9
    assert table["Actor1EthnicCode"].null_count / ROWS > 0.9
    assert table["Actor1Religion1Code"].null_count / ROWS > 0.9


def test_iter_batches_matches_tsv(table: pa.Table) -> None:
    batches = list(iter_batches(ROWS, seed=42, batch_rows=1_500))
    assert [len(b) for b in batches] == [1_500, 1_500, 1_500, 500]
    assert all(b.schema == GDELT_SCHEMA for b in batches)
    assert pa.Table.from_batches(batches).equals(table)


def test_option_helpers(tsv: tuple[Path, int], table: pa.Table) -> None:
    read = pacsv.read_csv(
        tsv[0],
        read_options=read_options(),
        parse_options=parse_options(),
        convert_options=convert_options(),
    )
    assert read.equals(table)


def test_progress_and_empty(tmp_path: Path) -> None:
    seen: list[int] = []
    size = generate(tmp_path / "p.tsv", 2_500, seed=1, batch_rows=1_000, progress=seen.append)
    assert seen == [1_000, 2_000, 2_500]
    assert size == (tmp_path / "p.tsv").stat().st_size
    assert generate(tmp_path / "empty.tsv", 0) == 0
    assert (tmp_path / "empty.tsv").read_bytes() == b""
    assert list(iter_batches(0)) == []
