"""``colonnade tiles``: the tile layers of a store (see :mod:`colonnade.geo.tiles`).

``ls`` lists them, ``info`` shows one (settings, tiles and bytes per zoom), ``export`` writes a
block of tiles to a ``.npy`` file (numpy's format: ``numpy.load`` reads it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from colonnade.cli.context import Settings, pass_settings
from colonnade.cli.output import echo_json, human_bytes, plural


@click.group()
def tiles() -> None:
    """Tile layers: list, describe, export."""


@tiles.command("ls")
@click.option("--json", "as_json", is_flag=True, help="Print the layers as JSON.")
@pass_settings
def ls(settings: Settings, as_json: bool) -> None:
    """List the tile layers with their tile size, dtype, curve and tile count."""
    with settings.connect() as store:
        infos = [store.tiles(name, create=False).info() for name in store.tile_layers()]
    if as_json:
        echo_json(infos)
        return
    if not infos:
        click.echo("no tile layers")
        return
    for info in infos:
        count = sum(z["tiles"] for z in info["zooms"].values())
        zooms = ", ".join(info["zooms"]) or "none"
        click.echo(f"{info['layer']}: {info['tile_size']}×{info['tile_size']} {info['dtype']}, {info['curve']}, "
                   f"{plural(count, 'tile')}, zooms {zooms}")


@tiles.command()
@click.argument("layer")
@click.option("--json", "as_json", is_flag=True, help="Print the layer as JSON.")
@pass_settings
def info(settings: Settings, layer: str, as_json: bool) -> None:
    """Show LAYER: its settings, and per zoom its tiles, segments and stored bytes."""
    with settings.connect() as store:
        found = store.tiles(layer, create=False).info()
    if as_json:
        echo_json(found)
        return
    click.echo(f"layer {found['layer']} (v{found['version']}): {found['tile_size']}×{found['tile_size']} "
               f"{found['dtype']} tiles, {found['curve']} order, fill {found['fill']:g}, "
               f"{found['tiles_per_segment']} tiles a segment")
    for zoom, z in found["zooms"].items():
        click.echo(f"  zoom {zoom}: {plural(z['tiles'], 'tile')} of {(1 << int(zoom)) ** 2:,}, "
                   f"{plural(z['segments'], 'segment')}, {human_bytes(z['bytes'])}")


@tiles.command()
@click.argument("layer")
@click.option("--zoom", type=click.IntRange(min=0), required=True, help="Zoom level.")
@click.option("--x", "x0", type=click.IntRange(min=0), default=0, show_default=True, help="First tile column.")
@click.option("--y", "y0", type=click.IntRange(min=0), default=0, show_default=True, help="First tile row.")
@click.option("--width", type=click.IntRange(min=1), help="Tiles across (default: to the grid's edge).")
@click.option("--height", type=click.IntRange(min=1), help="Tiles down (default: to the grid's edge).")
@click.option("--version", type=click.IntRange(min=0), help="Read the layer as of this version.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True, metavar="FILE.npy",
              help="Where the block goes (numpy .npy).")
@pass_settings
def export(settings: Settings, layer: str, zoom: int, x0: int, y0: int, width: int | None, height: int | None,
           version: int | None, out: Path) -> None:
    """Write a block of LAYER's tiles at --zoom to FILE.npy, as one array (missing tiles are
    the layer's fill value)."""
    import numpy as np

    with settings.connect() as store:
        found = store.tiles(layer, create=False)
        n = 1 << zoom
        block = found.read_block(zoom, x0, y0, width or max(1, n - x0), height or max(1, n - y0), version=version)
    with out.open("wb") as f:
        np.save(f, block)
    shape: Any = "×".join(str(d) for d in block.shape)
    click.echo(f"wrote {shape} {block.dtype} cells of {layer} zoom {zoom} to {out} ({human_bytes(block.nbytes)})")
