"""Space-filling curves over latitude/longitude: Z-order and Hilbert keys, and box → key ranges.

A point is quantized onto a ``2**bits × 2**bits`` grid (x from longitude over [-180, 180], y from
latitude over [-90, 90]; the top edge belongs to the last cell) and the cell is numbered along
the curve, giving a key of ``2 * bits`` bits. NULL, NaN and out-of-range coordinates have no
cell: their key is NULL. Every aligned ``2**k × 2**k`` block of cells is one contiguous run of
keys on both curves, which is what makes a bounding box a short list of key ranges.

Encoding is vectorized with numpy: Z-order interleaves bits with the usual magic masks; Hilbert
runs a four-state machine over 8-bit slices of both coordinates through a 256K-entry table
(the states are the orientations of the sub-square: swapped and/or complemented), so a 16-bit
curve takes two table lookups per point.

``box_ranges`` decomposes a box into key ranges as GeoMesa's zranges does: walk the quadtree
from the top, emit blocks the box covers whole, refine blocks it covers in part, and when the
next level would exceed the range budget emit every partial block whole (more rows read, never
fewer). Adjacent ranges are merged.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np
import pyarrow as pa

CURVES = ("zorder", "hilbert")
MAX_BITS = 31
DEFAULT_RANGE_BUDGET = 256
Box = tuple[float, float, float, float]  # lat_lo, lat_hi, lon_lo, lon_hi (inclusive)
Range = tuple[int, int]  # inclusive key range


def _coordinates(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """float64 values of a numeric column, NaN where null."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    if array.type != pa.float64():
        array = array.cast(pa.float64())
    return np.asarray(array.to_numpy(zero_copy_only=False), dtype=np.float64)


def quantize(values: np.ndarray, low: float, high: float, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Cell index of each value on ``2**bits`` cells over [low, high], and which values are in
    range (finite and within the bounds); indices of the others are 0."""
    ok = (values >= low) & (values <= high)  # NaN compares false
    cells = values - low
    cells *= (1 << bits) / (high - low)
    np.clip(cells, 0, (1 << bits) - 1, out=cells)  # the top edge belongs to the last cell
    if not ok.all():
        cells[~ok] = 0
    return cells.astype(np.uint32 if bits <= 16 else np.uint64), ok


def cell_of(value: float, low: float, high: float, bits: int) -> int:
    """The cell of one value, clamped into the grid (for query bounds, which may lie outside)."""
    if not value >= low:  # also NaN
        return 0
    if value >= high:
        return (1 << bits) - 1
    return min(int((value - low) * ((1 << bits) / (high - low))), (1 << bits) - 1)


_SPREAD_64 = ((16, 0x0000FFFF0000FFFF), (8, 0x00FF00FF00FF00FF), (4, 0x0F0F0F0F0F0F0F0F),
              (2, 0x3333333333333333), (1, 0x5555555555555555))


def _spread(v: np.ndarray, bits: int) -> np.ndarray:
    """Put bit i of each value at bit 2i (values < 2**bits); uint32 when the result fits."""
    dtype: Any = np.uint32 if bits <= 16 else np.uint64
    steps = _SPREAD_64[1:] if bits <= 16 else _SPREAD_64
    x: Any = v.astype(dtype, copy=False)
    for shift, mask in steps:
        x = (x | (x << dtype(shift))) & dtype(mask & 0xFFFFFFFF if bits <= 16 else mask)
    return np.asarray(x)


def zorder_cells(x: np.ndarray, y: np.ndarray, bits: int) -> np.ndarray:
    """Z-order keys of cells: y's bits in the odd places, x's in the even."""
    sx, sy = _spread(x, bits), _spread(y, bits)
    return np.asarray((sy << sy.dtype.type(1)) | sx)


SLICE = 8  # bits of each coordinate one table lookup consumes


@cache
def _hilbert_table() -> np.ndarray:
    """For state s and 8-bit slices xs, ys (index ``s << 16 | xs << 8 | ys``): the 16 key bits
    they give, shifted left by 2, or'd with the next state. The state is the orientation of
    the current sub-square: bit 0 swapped, bit 1 complemented. Built by running the textbook
    algorithm one bit at a time over every index at once (256K entries, 1 MiB)."""
    n = 1 << SLICE
    index = np.arange(4 * n * n, dtype=np.uint32)
    xs, ys = (index >> SLICE) & (n - 1), index & (n - 1)
    swapped = ((index >> (2 * SLICE)) & 1).astype(np.uint8)
    flipped = ((index >> (2 * SLICE + 1)) & 1).astype(np.uint8)
    digits: Any = np.zeros(len(index), dtype=np.uint32)
    for bit in range(SLICE - 1, -1, -1):
        rx = ((xs >> bit) & 1).astype(np.uint8) ^ flipped
        ry = ((ys >> bit) & 1).astype(np.uint8) ^ flipped
        rx, ry = np.where(swapped == 1, ry, rx), np.where(swapped == 1, rx, ry)
        digits = (digits << 2) | ((3 * rx) ^ ry).astype(np.uint32)
        turn = ry == 0
        flipped = flipped ^ (turn & (rx == 1)).astype(np.uint8)
        swapped = swapped ^ turn.astype(np.uint8)
    return (digits << 2) | (flipped.astype(np.uint32) << 1) | swapped


def hilbert_cells(x: np.ndarray, y: np.ndarray, bits: int) -> np.ndarray:
    """Hilbert keys of cells (the curve of Hilbert's 1891 paper, from (0, 0) to (2**bits-1, 0))."""
    steps = -(-bits // SLICE)
    pad = SLICE * steps - bits  # low zero bits added so the slices are whole; dropped at the end
    dtype: Any = np.uint64 if 2 * SLICE * steps > 32 else np.uint32
    if pad:
        x = x.astype(dtype) << dtype(pad)
        y = y.astype(dtype) << dtype(pad)
    table = _hilbert_table()
    mask = dtype((1 << SLICE) - 1)
    state = np.zeros(len(x), dtype=np.uint32)
    key: Any = np.zeros(len(x), dtype=dtype)
    for step in range(steps - 1, -1, -1):
        shift = dtype(SLICE * step)
        index = ((x >> shift) & mask).astype(np.uint32) << np.uint32(SLICE)
        index |= ((y >> shift) & mask).astype(np.uint32)
        index |= state << np.uint32(2 * SLICE)
        found = table[index]
        key = (key << dtype(2 * SLICE)) | (found >> np.uint32(2)).astype(dtype)
        state = found & np.uint32(3)
    if pad:
        key >>= dtype(2 * pad)
    return key


def curve_keys(curve: str, lat: pa.Array | pa.ChunkedArray, lon: pa.Array | pa.ChunkedArray,
               bits: int) -> pa.Array:
    """int64 keys of the points (NULL where a coordinate is NULL, NaN or out of range)."""
    y, y_ok = quantize(_coordinates(lat), -90.0, 90.0, bits)
    x, x_ok = quantize(_coordinates(lon), -180.0, 180.0, bits)
    cells = (hilbert_cells if curve == "hilbert" else zorder_cells)(x, y, bits)
    valid = y_ok & x_ok
    keys = cells.astype(np.int64, copy=False)
    if valid.all():
        return pa.array(keys)
    return pa.array(keys, mask=~valid)


def key_of_cell(curve: str, x: int, y: int, bits: int) -> int:
    return int(keys_of_cells(curve, np.array([x]), np.array([y]), bits)[0])


def keys_of_cells(curve: str, x: np.ndarray, y: np.ndarray, bits: int) -> np.ndarray:
    """int64 keys of cells given by integer arrays (each in ``[0, 2**bits)``)."""
    fn = hilbert_cells if curve == "hilbert" else zorder_cells
    dtype = np.uint32 if bits <= 16 else np.uint64
    return fn(x.astype(dtype), y.astype(dtype), bits).astype(np.int64)


def cell_of_key(curve: str, key: int, bits: int) -> tuple[int, int]:
    """The cell ``(x, y)`` a key numbers (the inverse of ``key_of_cell``)."""
    if curve == "zorder":
        x = y = 0
        for i in range(bits):
            x |= ((key >> (2 * i)) & 1) << i
            y |= ((key >> (2 * i + 1)) & 1) << i
        return x, y
    x = y = 0
    t, s = key, 1
    while s < (1 << bits):  # Hilbert's curve walked up from the smallest sub-square
        rx = 1 & (t // 2)
        ry = 1 & (t ^ rx)
        if ry == 0:
            if rx == 1:
                x, y = s - 1 - x, s - 1 - y
            x, y = y, x
        x, y = x + s * rx, y + s * ry
        t //= 4
        s *= 2
    return x, y


def cell_box(curve: str, key: int, bits: int) -> Box:
    """The coordinates a cell holds: ``(lat_lo, lat_hi, lon_lo, lon_hi)``, widened by a hair so
    that rounding in ``quantize`` can never put a point outside its cell's box."""
    x, y = cell_of_key(curve, key, bits)
    lat_step, lon_step = 180.0 / (1 << bits), 360.0 / (1 << bits)
    eps = 1e-9
    return (-90.0 + y * lat_step - eps, -90.0 + (y + 1) * lat_step + eps,
            -180.0 + x * lon_step - eps, -180.0 + (x + 1) * lon_step + eps)


def box_cells(box: Box, bits: int) -> tuple[int, int, int, int] | None:
    """The cells ``(x0, x1, y0, y1)`` a box touches, or None if it lies outside the grid."""
    lat_lo, lat_hi, lon_lo, lon_hi = box
    if lat_lo > lat_hi or lon_lo > lon_hi or lat_hi < -90 or lat_lo > 90 or lon_hi < -180 or lon_lo > 180:
        return None
    return (cell_of(lon_lo, -180.0, 180.0, bits), cell_of(lon_hi, -180.0, 180.0, bits),
            cell_of(lat_lo, -90.0, 90.0, bits), cell_of(lat_hi, -90.0, 90.0, bits))


def box_ranges(curve: str, bits: int, box: Box, budget: int = DEFAULT_RANGE_BUDGET) -> list[Range]:
    """Inclusive key ranges covering every cell the box touches (sorted, merged; at most about
    ``budget`` before merging). Empty when the box lies outside the grid."""
    cells = box_cells(box, bits)
    return [] if cells is None else cell_ranges(curve, bits, *cells, budget=budget)


def cell_ranges(curve: str, bits: int, x0: int, x1: int, y0: int, y1: int,
                budget: int = DEFAULT_RANGE_BUDGET) -> list[Range]:
    """Inclusive key ranges covering the cells ``[x0, x1] × [y0, y1]`` (see ``box_ranges``)."""
    found: list[Range] = []
    # blocks of side 2**level at (bx, by) in block units, partly inside the box
    level = bits
    partial = [(0, 0)]
    while partial:
        size = 1 << level
        refine: list[tuple[int, int]] = []
        whole: list[tuple[int, int]] = []
        for bx, by in partial:
            lx, ly = bx * size, by * size
            hx, hy = lx + size - 1, ly + size - 1
            if hx < x0 or lx > x1 or hy < y0 or ly > y1:
                continue
            if lx >= x0 and hx <= x1 and ly >= y0 and hy <= y1:
                whole.append((bx, by))
            else:
                refine.append((bx, by))
        found.extend(_block_range(curve, bits, level, bx, by) for bx, by in whole)
        if level == 0 or not refine or len(found) + 4 * len(refine) > budget:
            found.extend(_block_range(curve, bits, level, bx, by) for bx, by in refine)
            break
        level -= 1
        partial = [(2 * bx + dx, 2 * by + dy) for bx, by in refine for dx in (0, 1) for dy in (0, 1)]
    return merge_ranges(found)


def _block_range(curve: str, bits: int, level: int, bx: int, by: int) -> Range:
    """The keys of the aligned block of side ``2**level`` at block position (bx, by)."""
    key = key_of_cell(curve, bx << level, by << level, bits)
    span = 1 << (2 * level)
    first = key - key % span
    return first, first + span - 1


def merge_ranges(ranges: Sequence[Range]) -> list[Range]:
    out: list[Range] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def in_ranges(value: int, ranges: Sequence[Range]) -> bool:
    """Whether ``value`` lies in one of the sorted, disjoint ranges."""
    import bisect

    i = bisect.bisect_right(ranges, (value, 1 << 64)) - 1
    return i >= 0 and ranges[i][0] <= value <= ranges[i][1]


