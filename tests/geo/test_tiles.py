"""Tile layers on both stores: tiles round-trip, blocks (aligned or not, at the grid's edge)
equal the same tiles assembled with numpy, missing tiles read as the fill value, a write
replaces tiles in one commit, an aligned 16×16 block reads four segments, bad tiles write
nothing, and a damaged tile chunk is an error naming itself, never wrong cells."""

from __future__ import annotations

import numpy as np
import pytest

from colonnade.errors import ColonnadeError
from colonnade.geo.tiles import TileError
from colonnade.store import Store

SIZE = 16


def tile(seed: int, dtype: str = "float32") -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((SIZE, SIZE)) * 100).astype(dtype)


def assembled(tiles: dict[tuple[int, int], np.ndarray], x0: int, y0: int, w: int, h: int,
              fill: float, dtype: str = "float32") -> np.ndarray:
    out = np.full((h * SIZE, w * SIZE), fill, dtype=dtype)
    for (x, y), a in tiles.items():
        if x0 <= x < x0 + w and y0 <= y < y0 + h:
            out[(y - y0) * SIZE:(y - y0 + 1) * SIZE, (x - x0) * SIZE:(x - x0 + 1) * SIZE] = a
    return out


@pytest.mark.parametrize("curve", ["hilbert", "zorder"])
def test_tiles_and_blocks_read_back_as_written(store: Store, curve: str) -> None:
    layer = store.tiles("land", tile_size=SIZE, dtype="float32", curve=curve, fill=-1.0)
    tiles = {(x, y): tile(x * 100 + y) for x in range(32) for y in range(32) if (x * 7 + y * 3) % 11}
    result = layer.write_many((5, x, y, a) for (x, y), a in tiles.items())
    assert (result.tiles, result.replaced) == (len(tiles), 0)
    assert np.array_equal(layer.read(5, 3, 5), tiles[(3, 5)]) and (3, 4) not in tiles
    assert np.array_equal(layer.read(5, 0, 0), np.full((SIZE, SIZE), -1.0, np.float32))  # never written
    for x0, y0, w, h in [(0, 0, 16, 16), (16, 16, 16, 16), (5, 9, 16, 16), (27, 30, 5, 2), (0, 0, 32, 32), (31, 0, 1, 7)]:
        got = layer.read_block(5, x0, y0, w, h)
        assert got.shape == (h * SIZE, w * SIZE)
        assert np.array_equal(got, assembled(tiles, x0, y0, w, h, -1.0)), (x0, y0, w, h)
    assert np.array_equal(layer.read(6, 0, 0), np.full((SIZE, SIZE), -1.0, np.float32))  # another zoom
    again = store.tiles("land")
    assert again.settings == layer.settings
    assert np.array_equal(again.read_block(5, 5, 9, 16, 16), assembled(tiles, 5, 9, 16, 16, -1.0))


@pytest.mark.parametrize("codec", ["lz4hc", "zstd", "lz4", "none"])
def test_every_codec_round_trips_and_a_layer_keeps_its_codec(store: Store, codec: str) -> None:
    """Each per-tile codec gives back the cells written (lz4hc is the default); a layer opened
    again asking for another codec is refused, naming both."""
    layer = store.tiles("c", tile_size=SIZE, dtype="int16", codec=codec)
    assert store.tiles("c").settings.codec == codec
    tiles = {(x, y): ((np.arange(SIZE * SIZE) // 16 + x * 10 + y) % 7).astype("int16").reshape(SIZE, SIZE)
             for x in range(10) for y in range(10)}  # compressible: runs of classes
    layer.write_many((4, x, y, a) for (x, y), a in tiles.items())
    assert np.array_equal(layer.read_block(4, 1, 2, 9, 8), assembled(tiles, 1, 2, 9, 8, 0.0, "int16"))
    stored = len(layer.compress(tiles[(0, 0)]))
    assert stored == SIZE * SIZE * 2 if codec == "none" else stored < SIZE * SIZE * 2
    other = "zstd" if codec != "zstd" else "lz4hc"
    with pytest.raises(TileError, match=f"codec '{codec}' \\(asked for '{other}'\\)"):
        store.tiles("c", codec=other)
    if codec == "lz4hc":
        assert store.tiles("d").settings.codec == "lz4hc"  # the default


def test_an_aligned_block_reads_four_segments(store: Store) -> None:
    layer = store.tiles("grid", tile_size=SIZE, dtype="uint8")
    layer.write_many((6, x, y, np.full((SIZE, SIZE), (x + y) % 256, np.uint8)) for x in range(64) for y in range(64))
    ds = store.dataset("grid")
    assert len(ds.snapshot().segments) == 64  # 8×8 tiles a segment
    for x0, y0, segments in [(16, 32, 4), (48, 0, 4), (8, 8, 4), (4, 4, 9), (60, 61, 1)]:
        found = layer.block_segments(6, x0, y0, min(16, 64 - x0), min(16, 64 - y0))
        assert len(found) == segments, (x0, y0)
        if x0 == 60:
            continue
        block = layer.read_block(6, x0, y0, 16, 16)
        assert block[0, 0] == (x0 + y0) % 256 and block[-1, -1] == (x0 + y0 + 30) % 256
    # a zoom whose whole grid is smaller than a segment's block: one segment
    layer.write(1, 1, 0, np.full((SIZE, SIZE), 7, np.uint8))
    assert len(layer.block_segments(1, 0, 0, 2, 2)) == 1 and len(layer.block_segments(1, 1, 1, 1, 1)) == 1
    assert np.array_equal(layer.read_block(1, 0, 0, 2, 2)[:SIZE, SIZE:], np.full((SIZE, SIZE), 7, np.uint8))
    assert not layer.read_block(1, 0, 0, 2, 2)[:, :SIZE].any()


def test_writing_a_tile_again_replaces_it_in_one_commit(store: Store) -> None:
    layer = store.tiles("t", tile_size=SIZE, dtype="int16")
    layer.write_many((3, x, y, np.full((SIZE, SIZE), x * 10 + y, np.int16)) for x in range(8) for y in range(8))
    before = store.dataset("t").version
    result = layer.write_many([(3, 2, 2, np.full((SIZE, SIZE), -5, np.int16)),
                               (3, 7, 7, np.full((SIZE, SIZE), -6, np.int16)),
                               (3, 7, 7, np.full((SIZE, SIZE), -7, np.int16))])  # the last one wins
    assert (result.tiles, result.replaced) == (2, 2)
    assert store.dataset("t").version == before + 1
    block = layer.read_block(3, 0, 0, 8, 8)
    assert block[2 * SIZE, 2 * SIZE] == -5 and block[7 * SIZE, 7 * SIZE] == -7 and block[SIZE, 3 * SIZE] == 31
    assert int(store.sql("SELECT count(*) AS n FROM t").column(0)[0].as_py()) == 64
    old = layer.read_block(3, 0, 0, 8, 8, version=before)
    assert old[2 * SIZE, 2 * SIZE] == 22 and old[7 * SIZE, 7 * SIZE] == 77  # time travel
    # every tile of the block again: the old segment is replaced without being read
    again = layer.write_many((3, x, y, np.full((SIZE, SIZE), 100 + x, np.int16)) for x in range(8) for y in range(8))
    assert (again.tiles, again.replaced, again.segments) == (64, 64, 1)
    assert np.array_equal(layer.read_block(3, 0, 0, 8, 8)[0], np.repeat(np.arange(100, 108, dtype=np.int16), SIZE))
    assert int(store.sql("SELECT count(*) AS n FROM t").column(0)[0].as_py()) == 64


def test_bad_tiles_and_settings_are_one_line_errors_and_write_nothing(store: Store) -> None:
    layer = store.tiles("b", tile_size=SIZE, dtype="uint8")
    layer.write(2, 1, 1, np.ones((SIZE, SIZE), np.uint8))
    version = store.dataset("b").version
    good = (2, 0, 0, np.zeros((SIZE, SIZE), np.uint8))
    for bad, why in [((2, 1, 2, np.zeros((SIZE, SIZE + 1), np.uint8)), "shape"),
                     ((2, 1, 2, np.zeros((SIZE, SIZE), np.float32)), "dtype float32 can't be stored as uint8"),
                     ((2, 4, 0, np.zeros((SIZE, SIZE), np.uint8)), "outside the grid of zoom 2"),
                     ((2, 0, -1, np.zeros((SIZE, SIZE), np.uint8)), "outside the grid"),
                     ((31, 0, 0, np.zeros((SIZE, SIZE), np.uint8)), "zoom must be")]:
        with pytest.raises(TileError, match=why) as exc:
            layer.write_many([good, bad])
        assert "\n" not in str(exc.value)
    assert store.dataset("b").version == version
    assert not layer.read(2, 0, 0).any()
    with pytest.raises(TileError, match="dtype 'uint8' \\(asked for 'float32'\\)"):
        store.tiles("b", dtype="float32")
    with pytest.raises(TileError, match="power of 4"):
        store.tiles("c", tiles_per_segment=32)
    with pytest.raises(TileError, match="unknown tile dtype"):
        store.tiles("c", dtype="complex64")
    assert "c" not in store
    import pyarrow as pa

    store.create_dataset("plain", pa.schema([("a", pa.int64())]))
    with pytest.raises(TileError, match="not a tile layer"):
        store.tiles("plain")
    assert store.tile_layers() == ["b"]


def test_a_damaged_tile_chunk_is_an_error_not_wrong_cells(store: Store, raw_store: object) -> None:
    layer = store.tiles("d", tile_size=SIZE, dtype="float32")
    layer.write_many((4, x, y, tile(x + y)) for x in range(8) for y in range(8))
    segment = store.dataset("d").snapshot().segments[0]
    raw_store.flip_chunk_byte("d", segment, "tile", position=-1)  # type: ignore[attr-defined]
    with pytest.raises(ColonnadeError, match="tile"):
        layer.read_block(4, 0, 0, 8, 8)


def test_cli_lists_describes_and_exports_layers(tmp_path: object) -> None:
    import json
    from pathlib import Path

    from click.testing import CliRunner

    import colonnade
    from colonnade.cli.main import cli

    root = Path(str(tmp_path))
    uri = str(root / "s.db")
    tiles = {(x, y): tile(x * 8 + y) for x in range(8) for y in range(8) if (x, y) != (2, 3)}
    with colonnade.connect(uri) as store:
        store.tiles("dem", tile_size=SIZE, dtype="float32", fill=-9.0).write_many(
            (3, x, y, a) for (x, y), a in tiles.items())
    runner = CliRunner()

    def run(*args: str) -> str:
        result = runner.invoke(cli, ["--store", uri, "tiles", *args])
        assert result.exit_code == 0, result.output
        return result.output

    assert run("ls") == "dem: 16×16 float32, hilbert, 63 tiles, zooms 3\n"
    assert json.loads(run("info", "dem", "--json"))["zooms"]["3"]["tiles"] == 63
    assert "zoom 3: 63 tiles of 64, 1 segment" in run("info", "dem")
    out = root / "block.npy"
    assert f"wrote 48×32 float32 cells of dem zoom 3 to {out}" in run(
        "export", "dem", "--zoom", "3", "--x", "1", "--y", "2", "--width", "2", "--height", "3", "--out", str(out))
    assert np.array_equal(np.load(out), assembled(tiles, 1, 2, 2, 3, -9.0))
    run("export", "dem", "--zoom", "3", "--x", "6", "--y", "5", "--out", str(out))  # to the grid's edge
    assert np.array_equal(np.load(out), assembled(tiles, 6, 5, 2, 3, -9.0))
    for args, why in [(["info", "nope"], "error: no tile layer 'nope'"),
                      (["export", "dem", "--zoom", "3", "--x", "8", "--out", str(out)], "outside the grid")]:
        result = runner.invoke(cli, ["--store", uri, "tiles", *args])
        assert result.exit_code == 1 and why in result.output and "Traceback" not in result.output, result.output
    with colonnade.connect(uri) as store:
        assert store.datasets() == ["dem"]  # asking about a missing layer made none
