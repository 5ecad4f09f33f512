"""Tile layers: square raster tiles on a ``2**zoom × 2**zoom`` grid per zoom level, stored as a
Colonnade dataset in space-filling-curve order.

A layer is a dataset whose rows are tiles: ``zoom``, ``key`` (the tile's Hilbert or Z-order
index at its zoom, ``2 * zoom`` bits), ``x``, ``y`` and ``tile`` (the cells, ``tile_size²``
values of ``dtype`` in row-major order). It is partitioned by ``zoom`` and by
``truncate(tiles_per_segment, key)`` and sorted by ``key``: with ``tiles_per_segment`` a power
of four, every segment holds one aligned square block of tiles (64: 8×8), so an aligned 16×16
block is four segments and any block is a few key ranges (``curves.cell_ranges``), which prune
partitions and, by the key's min/max, segments. Tile bytes are compressed and checksummed as
every chunk is. The layer's settings are a dataset property (``tiles``), committed with the
layer.

Writing a tile that exists replaces it: a write reads the segments of the blocks it touches,
keeps their other tiles and writes each block again, in one commit (copy-on-write, like a
delete), so readers see all of a write or none of it. Tiles never written read as ``fill``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from colonnade.errors import ColonnadeError
from colonnade.schema.curves import CURVES, cell_ranges, key_of_cell

if TYPE_CHECKING:
    from colonnade.table.dataset import Dataset

PROPERTY = "tiles"
MAX_ZOOM = 30
TILE_SCHEMA = pa.schema([("zoom", pa.int8()), ("key", pa.int64()), ("x", pa.int32()), ("y", pa.int32()),
                         ("tile", pa.binary())])
DTYPES = ("uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "float64", "int64", "uint64")


class TileError(ColonnadeError, ValueError):
    """A tile or a layer setting that can't be used (wrong shape or dtype, outside the grid)."""


@dataclass(frozen=True)
class LayerSettings:
    tile_size: int = 256
    dtype: str = "float32"
    curve: str = "hilbert"
    fill: float = 0.0
    tiles_per_segment: int = 64

    def check(self) -> None:
        if self.tile_size < 1 or self.tile_size > 8192:
            raise TileError(f"tile size must be between 1 and 8192, not {self.tile_size}")
        if self.dtype not in DTYPES:
            raise TileError(f"unknown tile dtype {self.dtype!r}: use one of {', '.join(DTYPES)}")
        if self.curve not in CURVES:
            raise TileError(f"unknown curve {self.curve!r}: use hilbert or zorder")
        n = self.tiles_per_segment
        if n < 1 or n & (n - 1) or (n.bit_length() - 1) % 2:
            raise TileError(f"tiles per segment must be a power of 4 (1, 4, 16, 64, ...), not {n}")

    def to_json(self) -> dict[str, Any]:
        return {"tile_size": self.tile_size, "dtype": self.dtype, "curve": self.curve, "fill": self.fill,
                "tiles_per_segment": self.tiles_per_segment}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> LayerSettings:
        return cls(int(value["tile_size"]), str(value["dtype"]), str(value["curve"]), float(value["fill"]),
                   int(value["tiles_per_segment"]))


@dataclass(frozen=True)
class TileWriteResult:
    version: int | None
    tiles: int  # tiles written
    replaced: int  # of which existed before
    segments: int  # segments written (new tiles and the kept tiles of the blocks they touched)


def layer_settings(ds: Dataset) -> LayerSettings | None:
    value = ds.snapshot().properties.get(PROPERTY)
    return None if value is None else LayerSettings.from_json(value)


class TileLayer:
    """One tile layer of a store (see the module docstring); made by ``Store.tiles``."""

    def __init__(self, dataset: Dataset, settings: LayerSettings) -> None:
        self.dataset = dataset
        self.settings = settings
        self._dtype = np.dtype(settings.dtype)
        self._tile_bytes = settings.tile_size * settings.tile_size * self._dtype.itemsize

    @property
    def name(self) -> str:
        return self.dataset.name

    def __repr__(self) -> str:
        s = self.settings
        return f"TileLayer({self.name!r}, tile_size={s.tile_size}, dtype={s.dtype!r}, curve={s.curve!r})"

    # -- keys
    def key(self, zoom: int, x: int, y: int) -> int:
        self._check_position(zoom, x, y)
        return key_of_cell(self.settings.curve, x, y, zoom)

    def _check_position(self, zoom: int, x: int, y: int) -> None:
        if not isinstance(zoom, int | np.integer) or not 0 <= zoom <= MAX_ZOOM:
            raise TileError(f"zoom must be an integer between 0 and {MAX_ZOOM}, not {zoom!r}")
        n = 1 << int(zoom)
        for name, v in (("x", x), ("y", y)):
            if not isinstance(v, int | np.integer) or not 0 <= v < n:
                raise TileError(f"tile {name}={v!r} is outside the grid of zoom {zoom} (0 to {n - 1})")

    def _tile_bytes_of(self, zoom: int, x: int, y: int, array: Any) -> bytes:
        a = np.asarray(array)
        size = self.settings.tile_size
        if a.shape != (size, size):
            raise TileError(f"tile {zoom}/{x}/{y}: shape {a.shape} is not ({size}, {size})")
        if a.dtype != self._dtype:
            if not np.can_cast(a.dtype, self._dtype, casting="safe"):
                raise TileError(f"tile {zoom}/{x}/{y}: dtype {a.dtype} can't be stored as {self._dtype} "
                                "without loss")
            a = a.astype(self._dtype)
        return np.ascontiguousarray(a).tobytes()

    # -- writing
    def write(self, zoom: int, x: int, y: int, array: Any) -> TileWriteResult:
        return self.write_many([(zoom, x, y, array)])

    def write_many(self, tiles: Iterable[tuple[int, int, int, Any]]) -> TileWriteResult:
        """Write tiles in one commit (a tile written twice here keeps the last); every tile is
        checked before anything is written."""
        rows: dict[tuple[int, int], tuple[int, int, bytes]] = {}
        for zoom, x, y, array in tiles:
            key = self.key(zoom, x, y)
            rows[(int(zoom), key)] = (int(x), int(y), self._tile_bytes_of(zoom, x, y, array))
        if not rows:
            return TileWriteResult(None, 0, 0, 0)
        return _write_tiles(self, rows)

    # -- reading
    def read(self, zoom: int, x: int, y: int) -> np.ndarray:
        return self.read_block(zoom, x, y, 1, 1)

    def read_block(self, zoom: int, x0: int, y0: int, width: int, height: int,
                   version: int | None = None) -> np.ndarray:
        """The tiles ``[x0, x0 + width) × [y0, y0 + height)`` as one array of shape
        ``(height * tile_size, width * tile_size)``, row ``y0`` of tiles at the top; missing
        tiles are ``fill``."""
        if width < 1 or height < 1:
            raise TileError(f"a block needs a width and height of at least 1, not {width}×{height}")
        self._check_position(zoom, x0, y0)
        self._check_position(zoom, x0 + width - 1, y0 + height - 1)
        size = self.settings.tile_size
        out = np.full((height * size, width * size), self.settings.fill, dtype=self._dtype)
        for x, y, data in self._tiles_in(zoom, x0, x0 + width - 1, y0, y0 + height - 1, version):
            if x0 <= x < x0 + width and y0 <= y < y0 + height:
                r, c = (y - y0) * size, (x - x0) * size
                out[r:r + size, c:c + size] = np.frombuffer(data, dtype=self._dtype).reshape(size, size)
        return out

    def _tiles_in(self, zoom: int, x0: int, x1: int, y0: int, y1: int,
                  version: int | None) -> Iterator[tuple[int, int, bytes]]:
        ranges = cell_ranges(self.settings.curve, zoom, x0, x1, y0, y1, budget=64)
        scan = self.dataset.scan(columns=["x", "y", "tile"], filter=block_filter(zoom, ranges), version=version)
        for batch in scan.to_batches():
            xs, ys = batch.column(0).to_pylist(), batch.column(1).to_pylist()
            tiles = batch.column(2)
            for i in range(batch.num_rows):
                yield xs[i], ys[i], tiles[i].as_buffer()

    def info(self) -> dict[str, Any]:
        """The layer's settings, and per zoom its tile count and stored bytes."""
        snapshot = self.dataset.snapshot()
        zooms: dict[int, dict[str, int]] = {}
        stats = self.dataset.segment_stats(snapshot, sorted(snapshot.by_partition()))
        for s in snapshot.segments:
            z = zooms.setdefault(int(s.values[0]), {"tiles": 0, "segments": 0, "bytes": 0})
            z["tiles"] += s.rows
            z["segments"] += 1
            z["bytes"] += sum(st.nbytes for st in stats.get(s.segment, {}).values())
        return {"layer": self.name, **self.settings.to_json(), "version": snapshot.version,
                "zooms": {str(k): v for k, v in sorted(zooms.items())}}


def block_filter(zoom: int, ranges: Sequence[tuple[int, int]]) -> pc.Expression:
    """``zoom = Z AND (key BETWEEN a AND b OR ...)``."""
    key = pc.field("key")
    either: pc.Expression | None = None
    for lo, hi in ranges:
        term = (key >= lo) & (key <= hi) if lo != hi else key == lo
        either = term if either is None else either | term
    zoom_is = pc.field("zoom") == pa.scalar(zoom, pa.int8())
    return zoom_is if either is None else zoom_is & either


def _write_tiles(layer: TileLayer, rows: dict[tuple[int, int], tuple[int, int, bytes]]) -> TileWriteResult:
    """Copy-on-write of the blocks the tiles fall in (see the module docstring)."""
    from colonnade.config import WriteSettings
    from colonnade.table.commits import AddSegments, Commit, RemoveSegments
    from colonnade.table.scan import Scan
    from colonnade.table.writer import SegmentWriter

    ds = layer.dataset
    snapshot = ds.snapshot()
    spec = ds.spec.with_schema(ds.schema_at(snapshot))
    bin_size = layer.settings.tiles_per_segment
    touched = {spec.partition_key((zoom, key - key % bin_size)) for zoom, key in rows}
    by_partition = snapshot.by_partition()
    old = [s for p in touched for s in by_partition.get(p, [])]
    commit = Commit.new("write_tiles", info={"tiles": len(rows)})
    settings = WriteSettings.from_env(segment_rows=bin_size, compression=spec.compression)
    writer = SegmentWriter(ds.store, spec, commit.id, settings)
    replaced = 0
    to_read = _partly_replaced(ds, snapshot, old, rows)
    replaced = sum(s.rows for s in old) - sum(s.rows for s in to_read)
    try:
        if to_read:
            for batch in Scan(ds, snapshot=replace(snapshot, segments=tuple(to_read))).to_batches():
                zooms = batch.column("zoom").to_numpy(zero_copy_only=False)
                keys = batch.column("key").to_numpy(zero_copy_only=False)
                keep = np.array([(int(z), int(k)) not in rows for z, k in zip(zooms, keys, strict=True)], dtype=bool)
                replaced += int((~keep).sum())
                if keep.any():
                    writer.write(batch.filter(pa.array(keep)))
        ordered = sorted(rows.items())
        writer.write(pa.RecordBatch.from_arrays([
            pa.array([z for (z, _), _ in ordered], pa.int8()),
            pa.array([k for (_, k), _ in ordered], pa.int64()),
            pa.array([v[0] for _, v in ordered], pa.int32()),
            pa.array([v[1] for _, v in ordered], pa.int32()),
            pa.array([v[2] for _, v in ordered], pa.binary()),
        ], schema=TILE_SCHEMA))
        entries = writer.finish()
    except BaseException:
        writer.abort()
        raise
    removed = tuple(s.segment for s in old)
    actions: list[Any] = [RemoveSegments(removed)] if removed else []
    actions.append(AddSegments(tuple(entries)))
    done = ds.commit(commit.with_actions(*actions), reads=ds.reads(snapshot, removes=list(removed), partitions=touched))
    return TileWriteResult(done.version, len(rows), replaced, len(entries))


def _partly_replaced(ds: Dataset, snapshot: Any, segments: list[Any],
                     rows: dict[tuple[int, int], Any]) -> list[Any]:
    """The segments that keep some of their tiles: a segment whose keys (unique in a layer)
    are all being written, as its key min/max and row count prove, is not read."""
    if not segments:
        return []
    stats = ds.segment_stats(snapshot, sorted({s.partition for s in segments}))
    out = []
    for s in segments:
        key = stats.get(s.segment, {}).get("key")
        zoom = int(s.values[0])
        whole = (key is not None and key.min is not None and key.max is not None and key.nulls == 0
                 and key.max - key.min + 1 == s.rows
                 and all((zoom, k) in rows for k in range(key.min, key.max + 1)))
        if not whole:
            out.append(s)
    return out


def create_layer(ds: Dataset, settings: LayerSettings) -> None:
    """Record the layer's settings on its (new, empty) dataset: the dataset's first commit."""
    from colonnade.table.commits import Commit, SetProperties

    commit = Commit.new("set_properties", info={PROPERTY: settings.to_json()})
    ds.commit(commit.with_actions(SetProperties({PROPERTY: settings.to_json()})))


def layer_spec(settings: LayerSettings) -> dict[str, Any]:
    """The dataset settings of a new layer (see ``Store.create_dataset``)."""
    return {"partition_by": f"zoom, truncate({settings.tiles_per_segment}, key)", "sort_by": "key",
            "segment_rows": settings.tiles_per_segment}
