"""Space-filling curve keys: the Hilbert keys are those of the textbook algorithm, both curves
visit every cell once, keys decode back to their cells, a cell's box holds its points, and a
box's key ranges cover every cell it touches (and, within the budget, no other)."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from colonnade.errors import SpecError
from colonnade.schema.curves import (
    box_cells,
    box_ranges,
    cell_box,
    cell_of_key,
    curve_keys,
    hilbert_cells,
    in_ranges,
    key_of_cell,
    zorder_cells,
)
from colonnade.schema.transforms import parse_transform

pytestmark = pytest.mark.unit


def textbook_hilbert(n: int, x: int, y: int) -> int:
    """xy2d as published (Wikipedia, "Hilbert curve"), one point at a time."""
    d, s = 0, n // 2
    while s > 0:
        rx = 1 if x & s else 0
        ry = 1 if y & s else 0
        d += s * s * ((3 * rx) ^ ry)
        if ry == 0:
            if rx == 1:
                x, y = n - 1 - x, n - 1 - y
            x, y = y, x
        s //= 2
    return d


@pytest.mark.parametrize("bits", [1, 2, 3, 4, 5, 7, 8])
def test_hilbert_keys_are_the_textbook_ones_and_neighbours_follow_each_other(bits: int) -> None:
    n = 1 << bits
    xs, ys = (a.ravel().astype(np.uint32) for a in np.meshgrid(np.arange(n), np.arange(n)))
    keys = hilbert_cells(xs, ys, bits)
    assert keys.tolist() == [textbook_hilbert(n, int(x), int(y)) for x, y in zip(xs, ys, strict=True)]
    order = np.argsort(keys)
    steps = np.abs(np.diff(xs[order].astype(int))) + np.abs(np.diff(ys[order].astype(int)))
    assert sorted(keys.tolist()) == list(range(n * n)) and (steps == 1).all()


@pytest.mark.parametrize("bits", [17, 24, 31])
def test_wide_hilbert_keys_are_the_textbook_ones(bits: int) -> None:
    rng = np.random.default_rng(bits)
    xs = rng.integers(0, 1 << bits, 500, dtype=np.uint64)
    ys = rng.integers(0, 1 << bits, 500, dtype=np.uint64)
    assert hilbert_cells(xs, ys, bits).tolist() == [
        textbook_hilbert(1 << bits, int(x), int(y)) for x, y in zip(xs, ys, strict=True)]


def test_zorder_interleaves_bits() -> None:
    x, y = np.array([0b101, 0b000, 0b111], np.uint32), np.array([0b011, 0b111, 0b000], np.uint32)
    assert zorder_cells(x, y, 3).tolist() == [0b011011, 0b101010, 0b010101]


@pytest.mark.parametrize("curve", ["zorder", "hilbert"])
@pytest.mark.parametrize("bits", [1, 4, 6, 11, 20])
def test_keys_decode_to_their_cells(curve: str, bits: int) -> None:
    rng = np.random.default_rng(bits)
    for x, y in rng.integers(0, 1 << bits, size=(200, 2)):
        assert cell_of_key(curve, key_of_cell(curve, int(x), int(y), bits), bits) == (x, y)


@pytest.mark.parametrize("curve", ["zorder", "hilbert"])
def test_a_points_cell_box_holds_it_and_bad_points_have_no_key(curve: str) -> None:
    rng = np.random.default_rng(7)
    lat = np.concatenate([[90.0, -90.0, 0.0, 89.99999999, -0.0], rng.uniform(-90, 90, 5000)])
    lon = np.concatenate([[180.0, -180.0, 0.0, 179.9999999, 1e-12], rng.uniform(-180, 180, 5000)])
    for bits in (1, 6, 16):
        keys = curve_keys(curve, pa.array(lat), pa.array(lon), bits).to_pylist()
        for a, o, k in zip(lat, lon, keys, strict=True):
            lat_lo, lat_hi, lon_lo, lon_hi = cell_box(curve, k, bits)
            assert lat_lo <= a <= lat_hi and lon_lo <= o <= lon_hi, (a, o, k, bits)
    bad = curve_keys(curve, pa.array([None, math.nan, 90.5, -91.0, 10.0, 10.0, 10.0], pa.float64()),
                     pa.array([0.0, 0.0, 0.0, 0.0, 180.01, math.inf, None], pa.float64()), 8)
    assert bad.null_count == 7
    ints = curve_keys(curve, pa.array([45, None], pa.int32()), pa.array([90, 5], pa.int16()), 8)
    assert ints.null_count == 1 and ints[0].as_py() is not None


def cells_touched(box: tuple[float, float, float, float], bits: int) -> set[tuple[int, int]]:
    found = box_cells(box, bits)
    if found is None:
        return set()
    x0, x1, y0, y1 = found
    return {(x, y) for x in range(x0, x1 + 1) for y in range(y0, y1 + 1)}


@settings(max_examples=150, deadline=None)
@given(curve=st.sampled_from(["zorder", "hilbert"]), bits=st.integers(1, 7),
       lat=st.tuples(st.floats(-100, 100), st.floats(0, 120)),
       lon=st.tuples(st.floats(-200, 200), st.floats(0, 250)), budget=st.sampled_from([4, 16, 10_000]))
def test_box_ranges_cover_exactly_the_cells_the_box_touches(curve: str, bits: int, lat: tuple[float, float],
                                                            lon: tuple[float, float], budget: int) -> None:
    box = (lat[0], lat[0] + lat[1], lon[0], lon[0] + lon[1])
    ranges = box_ranges(curve, bits, box, budget)
    touched = cells_touched(box, bits)
    n = 1 << bits
    covered = {cell_of_key(curve, k, bits) for lo, hi in ranges for k in range(lo, hi + 1)}
    assert touched <= covered  # never too few: pruning by the ranges never loses a row
    assert all(a[1] + 1 < b[0] for a, b in zip(ranges, ranges[1:], strict=False))  # sorted, merged
    if budget >= 4 * n * n:
        assert covered == touched  # with room to refine, exactly the box's cells
    for x, y in [(0, 0), (n - 1, n - 1), (n // 2, n // 3)]:
        assert in_ranges(key_of_cell(curve, x, y, bits), ranges) == ((x, y) in covered)


def test_the_range_budget_caps_the_ranges() -> None:
    box = (-33.3, 61.7, -120.2, 151.9)
    exact = box_ranges("hilbert", 16, box, budget=1 << 30)
    capped = box_ranges("hilbert", 16, box, budget=64)
    assert len(capped) <= 64 < len(exact)
    assert all(any(lo <= a and b <= hi for lo, hi in capped) for a, b in exact)


def test_curve_specs_parse_print_and_refuse_bad_arguments() -> None:
    t = parse_transform('hilbert( "Action Lat" , lon, 16 )')
    assert str(t) == 'hilbert("Action Lat", lon, 16)' and t.sources == ("Action Lat", "lon")
    assert str(parse_transform(str(t))) == str(t)
    for bad, why in [("zorder(lat, lon, 0)", "between 1 and 31"), ("hilbert(lat, lon, 32)", "between 1 and 31"),
                     ("zorder(lat, 6)", "cannot parse"), ("hilbert(lat, lon)", "cannot parse")]:
        with pytest.raises(SpecError, match=why):
            parse_transform(bad)
