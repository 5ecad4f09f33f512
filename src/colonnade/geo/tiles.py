"""Tile layers: square raster tiles on a ``2**zoom × 2**zoom`` grid per zoom level, stored as a
Colonnade dataset in space-filling-curve order.

A layer is a dataset whose rows are tiles: ``zoom``, ``key`` (the tile's Hilbert or Z-order
index at its zoom, ``2 * zoom`` bits), ``x``, ``y`` and ``tile`` (the cells, ``tile_size²``
values of ``dtype`` in row-major order, compressed alone with the layer's ``codec``). It is
partitioned by ``zoom`` and by ``truncate(tiles_per_segment, key)`` and sorted by ``key``: with
``tiles_per_segment`` a power of four, every segment holds one aligned square block of tiles
(64: 8×8), so an aligned 16×16 block is four segments and any block is the segments of the
aligned blocks it meets, found from the partition values alone. Each tile is compressed alone
(the chunks themselves are stored uncompressed, and checksummed as every chunk is) so that a
block that is not aligned decompresses only its own tiles, not all those of the segments it
meets. The layer's settings are a dataset property (``tiles``), committed with the layer:
creating a layer is one commit.

Writing a tile that exists replaces it: a write reads the segments of the blocks it touches
(unless their key statistics show that every tile of theirs is being written), keeps their
other tiles and writes each block again, in one commit (copy-on-write, like a delete), so
readers see all of a write or none of it. Tiles never written read as ``fill``.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from colonnade.errors import ColonnadeError, CorruptChunkError
from colonnade.schema.curves import CURVES, key_of_cell, keys_of_cells
from colonnade.storage.base import ChunkRef

if TYPE_CHECKING:
    from colonnade.table.commits import SegmentEntry, Snapshot
    from colonnade.table.dataset import Dataset

PROPERTY = "tiles"
MAX_ZOOM = 30
TILE_SCHEMA = pa.schema([("zoom", pa.int8()), ("key", pa.int64()), ("x", pa.int32()), ("y", pa.int32()),
                         ("tile", pa.binary())])
WRITE_BATCH_BYTES = 256 << 20  # tile cells compressed and handed to the writer at once
#: per-tile codecs: ``lz4hc`` (the default) is the LZ4 frame format compressed at high-compression
#: level 3: on a class raster its tiles are ~1.35x zstd's and decompress ~4x faster; tiles are
#: read far more often than written
CODECS = ("lz4hc", "zstd", "lz4", "none")
LZ4HC_LEVEL = 3
#: compresses the tiles of a write (shared, so a write starts no threads)
_POOL = ThreadPoolExecutor(2, thread_name_prefix="colonnade-tiles")
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
    codec: str = "lz4hc"  # each tile's cells compressed alone (see the module docstring)

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
        if self.codec not in CODECS:
            raise TileError(f"unknown tile codec {self.codec!r}: use {', '.join(CODECS)}")

    def to_json(self) -> dict[str, Any]:
        return {"tile_size": self.tile_size, "dtype": self.dtype, "curve": self.curve, "fill": self.fill,
                "tiles_per_segment": self.tiles_per_segment, "codec": self.codec}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> LayerSettings:
        return cls(int(value["tile_size"]), str(value["dtype"]), str(value["curve"]), float(value["fill"]),
                   int(value["tiles_per_segment"]), str(value["codec"]))


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
        self._codec = tile_codec(settings.codec)

    def compress(self, cells: np.ndarray) -> bytes:
        """A tile's stored bytes."""
        return compress_tile(self._codec, cells)

    def decompress(self, stored: Any) -> np.ndarray:
        """A tile's cells (size × size of the layer's dtype) from its stored bytes."""
        data = stored if self._codec is None else self._codec.decompress(stored, self._tile_bytes)
        cells = np.frombuffer(data, dtype=self._dtype)
        if cells.nbytes != self._tile_bytes:
            raise TileError(f"a tile of layer {self.name!r} holds {cells.nbytes} bytes, not {self._tile_bytes}")
        size = self.settings.tile_size
        return cells.reshape(size, size)

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

    def _checked(self, zoom: int, x: int, y: int, array: Any) -> np.ndarray:
        """The tile as a C-contiguous array of the layer's dtype, or TileError."""
        a = np.asarray(array)
        size = self.settings.tile_size
        if a.shape != (size, size):
            raise TileError(f"tile {zoom}/{x}/{y}: shape {a.shape} is not ({size}, {size})")
        if a.dtype != self._dtype:
            if not np.can_cast(a.dtype, self._dtype, casting="safe"):
                raise TileError(f"tile {zoom}/{x}/{y}: dtype {a.dtype} can't be stored as {self._dtype} "
                                "without loss")
            a = a.astype(self._dtype)
        return np.ascontiguousarray(a)

    # -- writing
    def write(self, zoom: int, x: int, y: int, array: Any) -> TileWriteResult:
        return self.write_many([(zoom, x, y, array)])

    def write_many(self, tiles: Iterable[tuple[int, int, int, Any]]) -> TileWriteResult:
        """Write tiles in one commit (a tile written twice here keeps the last); every tile is
        checked before anything is written."""
        found: dict[tuple[int, int, int], np.ndarray] = {}
        for zoom, x, y, array in tiles:
            self._check_position(zoom, x, y)
            found[(int(zoom), int(x), int(y))] = self._checked(zoom, x, y, array)
        if not found:
            return TileWriteResult(None, 0, 0, 0)
        where = np.array(list(found), dtype=np.int64).reshape(-1, 3)
        keys = np.empty(len(where), dtype=np.int64)
        for zoom in np.unique(where[:, 0]):
            at = where[:, 0] == zoom
            keys[at] = keys_of_cells(self.settings.curve, where[at, 1], where[at, 2], int(zoom))
        return _write_tiles(self, where, keys, list(found.values()))

    # -- reading
    def read(self, zoom: int, x: int, y: int) -> np.ndarray:
        return self.read_block(zoom, x, y, 1, 1)

    def read_block(self, zoom: int, x0: int, y0: int, width: int, height: int,
                   version: int | None = None) -> np.ndarray:
        """The tiles ``[x0, x0 + width) × [y0, y0 + height)`` as one array of shape
        ``(height * tile_size, width * tile_size)``, row ``y0`` of tiles at the top; missing
        tiles are ``fill``. Only the ``key`` and ``tile`` chunks of the segments the block
        meets are read; each segment's tiles are decompressed as its chunks arrive, while the
        others are still being fetched."""
        if width < 1 or height < 1:
            raise TileError(f"a block needs a width and height of at least 1, not {width}×{height}")
        self._check_position(zoom, x0, y0)
        self._check_position(zoom, x0 + width - 1, y0 + height - 1)
        size = self.settings.tile_size
        snapshot = self.dataset.snapshot(version)
        segments = self.block_segments(zoom, x0, y0, width, height, snapshot)
        if not segments:
            return np.full((height * size, width * size), self.settings.fill, dtype=self._dtype)
        out = np.empty((height * size, width * size), dtype=self._dtype)  # every tile is placed or filled
        ys, xs = np.mgrid[y0:y0 + height, x0:x0 + width]
        keys = keys_of_cells(self.settings.curve, xs.ravel(), ys.ravel(), zoom)
        # where each of the block's tiles goes in ``out``
        slot = dict(zip(keys.tolist(), zip(((ys.ravel() - y0) * size).tolist(), ((xs.ravel() - x0) * size).tolist(),
                                           strict=True), strict=True))

        placed: list[int] = []

        def place(key_array: pa.Array, tile_array: pa.Array) -> None:
            offsets = np.frombuffer(tile_array.buffers()[1], dtype=np.int32)[
                tile_array.offset:tile_array.offset + len(tile_array) + 1]
            data = tile_array.buffers()[2]
            for i, key in enumerate(key_array.to_pylist()):
                at = slot.get(key)
                if at is not None:
                    start = int(offsets[i])
                    out[at[0]:at[0] + size, at[1]:at[1] + size] = self.decompress(
                        data.slice(start, int(offsets[i + 1]) - start))
                    placed.append(key)

        self._read_segments(segments, place)
        for key in slot.keys() - set(placed):
            r, c = slot[key]
            out[r:r + size, c:c + size] = self.settings.fill
        return out

    def _read_segments(self, segments: list[SegmentEntry], place: Any) -> None:
        """Fetch the tile chunks of the segments (and their key chunks, unless the log's
        statistics show a segment holds every key from its least to its greatest, in order) and
        call ``place(keys, tiles)`` per segment as soon as its chunks are here."""
        from colonnade.table.scan import decode_column
        from colonnade.table.writer import column_stats_from_text

        ds = self.dataset
        types = {"key": pa.int64(), "tile": pa.binary()}
        implied: dict[str, pa.Array] = {}
        refs = []
        for s in segments:
            key = column_stats_from_text(s.stats).get("key") if s.stats else None
            if key is not None and key.nulls == 0 and key.min is not None and key.max is not None \
                    and key.max - key.min + 1 == s.rows:
                implied[s.segment] = pa.array(np.arange(key.min, key.max + 1, dtype=np.int64))  # sorted, unique
            else:
                refs.append(ChunkRef(s.partition, "key", s.segment, s.bucket))
            refs.append(ChunkRef(s.partition, "tile", s.segment, s.bucket))
        arrived: dict[str, dict[str, tuple[ChunkRef, Any]]] = {}
        # Each segment is checksummed, decoded and placed on this thread as soon as its chunks
        # are here, while the driver receives the others. Pool threads measured slower: every
        # tile's decompression gives up the GIL and waits to take it back from the driver.
        for ref, data in ds.store.get_chunks(ds.name, refs):
            got = arrived.setdefault(ref.segment, {})
            got[ref.column] = (ref, data)
            if "tile" not in got or ("key" not in got and ref.segment not in implied):
                continue
            arrays = {c: decode_column(ds.name, r, d, types[c]) for c, (r, d) in arrived.pop(ref.segment).items()}
            keys = implied.get(ref.segment, arrays.get("key"))
            if keys is None or len(keys) != len(arrays["tile"]):
                raise CorruptChunkError(ds.name, "tile", ref.segment,
                                        f"{len(arrays['tile'])} tiles, {0 if keys is None else len(keys)} keys")
            place(keys, arrays["tile"])

    def block_segments(self, zoom: int, x0: int, y0: int, width: int, height: int,
                       snapshot: Snapshot | None = None) -> list[SegmentEntry]:
        """The segments a block's tiles can be in: those of the aligned blocks of
        ``tiles_per_segment`` tiles (side ``2**k``) the block meets, found from their corner
        keys alone (one curve computation, no statistics read)."""
        snapshot = snapshot or self.dataset.snapshot()
        spec = self.dataset.spec_at(snapshot)
        by_partition = snapshot.by_partition()
        step = self.settings.tiles_per_segment
        k = (step.bit_length() - 1) // 2
        ys, xs = np.mgrid[y0 >> k:((y0 + height - 1) >> k) + 1, x0 >> k:((x0 + width - 1) >> k) + 1]
        corners = keys_of_cells(self.settings.curve, xs.ravel() << k, ys.ravel() << k, zoom)
        found: dict[str, SegmentEntry] = {}
        for first in sorted(set((corners - corners % step).tolist())):
            for s in by_partition.get(spec.partition_key((zoom, first)), ()):
                found[s.segment] = s
        return list(found.values())

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


def _write_tiles(layer: TileLayer, where: np.ndarray, keys: np.ndarray, arrays: list[np.ndarray]) -> TileWriteResult:
    """Copy-on-write of the blocks the tiles fall in (see the module docstring); ``where`` holds
    (zoom, x, y) per tile, ``keys`` their curve keys."""
    from colonnade.config import WriteSettings
    from colonnade.table.commits import AddSegments, Commit, RemoveSegments
    from colonnade.table.scan import Scan
    from colonnade.table.writer import SegmentWriter

    ds = layer.dataset
    snapshot = ds.snapshot()
    spec = ds.spec.with_schema(ds.schema_at(snapshot))
    bin_size = layer.settings.tiles_per_segment
    written = set(zip(where[:, 0].tolist(), keys.tolist(), strict=True))
    touched = {spec.partition_key((zoom, key - key % bin_size)) for zoom, key in written}
    by_partition = snapshot.by_partition()
    old = [s for p in touched for s in by_partition.get(p, [])]
    commit = Commit.new("write_tiles", info={"tiles": len(written)})
    settings = WriteSettings.from_env(segment_rows=bin_size, compression=spec.compression)
    writer = SegmentWriter(ds.store, spec, commit.id, settings)
    to_read = _partly_replaced(ds, snapshot, old, written)
    replaced = sum(s.rows for s in old) - sum(s.rows for s in to_read)
    try:
        if to_read:
            for batch in Scan(ds, snapshot=replace(snapshot, segments=tuple(to_read))).to_batches():
                zooms = batch.column("zoom").to_numpy(zero_copy_only=False)
                old_keys = batch.column("key").to_numpy(zero_copy_only=False)
                keep = np.array([(int(z), int(k)) not in written for z, k in zip(zooms, old_keys, strict=True)],
                                dtype=bool)
                replaced += int((~keep).sum())
                if keep.any():
                    writer.write(batch.filter(pa.array(keep)))
        order = np.lexsort((keys, where[:, 0]))
        per_batch = max(1, WRITE_BATCH_BYTES // max(1, arrays[0].nbytes))
        for start in range(0, len(order), per_batch):
            writer.write(_tile_batch(layer, where, keys, arrays, order[start:start + per_batch]))
        entries = writer.finish()
    except BaseException:
        writer.abort()
        raise
    removed = tuple(s.segment for s in old)
    actions: list[Any] = [RemoveSegments(removed)] if removed else []
    actions.append(AddSegments(tuple(entries)))
    done = ds.commit(commit.with_actions(*actions), reads=ds.reads(snapshot, removes=list(removed), partitions=touched))
    return TileWriteResult(done.version, len(written), replaced, len(entries))


def _tile_batch(layer: TileLayer, where: np.ndarray, keys: np.ndarray, arrays: list[np.ndarray],
                rows: np.ndarray) -> pa.RecordBatch:
    """Rows of the tiles ``rows`` (indexes), each tile's cells compressed alone."""
    return pa.RecordBatch.from_arrays([
        pa.array(where[rows, 0], pa.int8()), pa.array(keys[rows], pa.int64()),
        pa.array(where[rows, 1], pa.int32()), pa.array(where[rows, 2], pa.int32()),
        pa.array(compress_tiles(layer._codec, [arrays[i] for i in rows]), pa.binary())], schema=TILE_SCHEMA)


def compress_tiles(codec: pa.Codec | None, arrays: list[np.ndarray]) -> list[bytes]:
    """Each tile compressed alone, in the two threads of the pool (a task per half: a task
    per tile costs more than it saves)."""
    half = (len(arrays) + 1) // 2
    parts = _POOL.map(lambda part: [compress_tile(codec, a) for a in part], (arrays[:half], arrays[half:]))
    return [data for part in parts for data in part]


def _partly_replaced(ds: Dataset, snapshot: Any, segments: list[Any],
                     rows: set[tuple[int, int]]) -> list[Any]:
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


def tile_codec(name: str) -> pa.Codec | None:
    """The codec of ``CODECS`` named ``name`` (None: tiles stored as they are)."""
    if name == "none":
        return None
    if name == "lz4hc":
        return pa.Codec("lz4", compression_level=LZ4HC_LEVEL)
    return pa.Codec(name, compression_level=3 if name == "zstd" else None)


def compress_tile(codec: pa.Codec | None, cells: np.ndarray) -> bytes:
    data = cells.tobytes()
    return data if codec is None else bytes(codec.compress(data, asbytes=True))


def create_layer(ds: Dataset, settings: LayerSettings) -> None:
    """Record the layer's settings on its (new, empty) dataset: the dataset's first commit."""
    from colonnade.table.commits import Commit, SetProperties

    commit = Commit.new("set_properties", info={PROPERTY: settings.to_json()})
    ds.commit(commit.with_actions(SetProperties({PROPERTY: settings.to_json()})))


def layer_spec(settings: LayerSettings) -> dict[str, Any]:
    """The dataset settings of a new layer (see ``Store.create_dataset``)."""
    return {"partition_by": f"zoom, truncate({settings.tiles_per_segment}, key)", "sort_by": "key",
            "segment_rows": settings.tiles_per_segment, "compression": "none"}
