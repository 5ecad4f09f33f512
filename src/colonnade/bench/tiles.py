"""``colonnade bench tiles``: the GeoTrellis tile study on real Cassandra.

GeoTrellis stored map tiles in Cassandra one row per tile, keyed by their space-filling-curve
index (the "write-optimized" layout), and tried binning neighbouring keys into shared partitions
("read-optimized", 64 tiles a partition, row cache on); the binned layout lost (16×16 block
reads 311 ms against 136 ms). This benchmark runs both of those layouts and Colonnade's tile
layer (:mod:`colonnade.geo.tiles`) on the cluster of ``--store``, in one run:

    write-optimized  CREATE TABLE tiles_write (key varint, name text, zoom int, value blob,
                     PRIMARY KEY (key, name, zoom))                  one point read per tile
    read-optimized   CREATE TABLE tiles_read (name text, zoom int, zoombin int, key varint,
                     value blob, PRIMARY KEY ((name, zoom, zoombin), key))
                     WITH caching = {'keys': 'ALL', 'rows_per_partition': '64'}, zoombin = key // 64
    colonnade        store.tiles(...): segments of 64 tiles (aligned 8×8 blocks) in Hilbert order

The data: all of zoom level 6 (4,096 tiles of 256×256 uint8 cells: a synthetic land-cover
raster, classes 0-7 in smooth regions with 2% speckle). Keys are Hilbert indexes at zoom 6.
The CQL layouts are used as a competent user of the Python driver would: prepared statements
run with ``execute_concurrent_with_args`` (``WRITE_CONCURRENCY`` / ``READ_CONCURRENCY`` in
flight, token-aware), protocol v4 (as the store: the driver's v5 framing is much slower on
large values), each tile's bytes compressed alone with the codec Colonnade's layer uses
(``--codec``, the layer's default ``lz4hc`` unless given; GeoTrellis deflates its Avro
records), compressed in two threads and decompressed on the reading thread as the layer
does, and Cassandra's default LZ4 SSTable compression; the keyspace has the store's
replication. Every layout's write is timed from the tiles as numpy arrays to the last
acknowledgement, every read from the block's position to one numpy array of
4,096×4,096 cells, and every block read is compared with the tiles written (outside the timer).

``--write-iterations`` (15) writes of all of zoom 6, then ``--read-iterations`` (100) random
16×16 blocks at any position in the grid and as many on the 16×16 grid (aligned: one key range
each; the study's spec, CassandraIndexStrategySpec, groups its keys on that grid and reads all
4,096 tiles of the level per iteration), the same sequences for every layout, interleaved so
that each layout sees the same machine, after 3 unmeasured warm-up reads of each kind.
Mean, standard deviation, p50 and p95 per layout; JSON, Markdown and a PNG go to ``--out``,
named by the cluster's size (``tiles-1node``, ``tiles-3node``).
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from colonnade.bench.common import write_report
from colonnade.geo.tiles import compress_tiles, tile_codec

ZOOM = 6
TILE = 256
BLOCK = 16
WRITE_ITERATIONS = 15
READ_ITERATIONS = 100
WARMUP_READS = 3
TILES_PER_PARTITION = 64
WRITE_CONCURRENCY = 64
READ_CONCURRENCY = 128
LAYER = "bench_tiles"
LAYOUTS = ("write-optimized", "read-optimized", "colonnade")
PUBLISHED = {"write_ms": {"write-optimized": 1119.7, "read-optimized": 2451.9},
             "read_ms": {"write-optimized": 135.7, "read-optimized": 311.2}}


class BenchError(RuntimeError):
    pass


def land_cover(zoom: int = ZOOM, size: int = TILE, seed: int = 6) -> dict[tuple[int, int], np.ndarray]:
    """Every tile of the zoom level: classes 0-7 in smooth regions, 2% speckle."""
    rng = np.random.default_rng(seed)
    n = 1 << zoom
    cells = np.arange(size, dtype=np.float32)
    out = {}
    for x in range(n):
        gx = (x * size + cells)[None, :]
        for y in range(n):
            gy = (y * size + cells)[:, None]
            field = 4 + 1.8 * np.sin(gx / 211.0) + 1.7 * np.cos(gy / 157.0) + 0.9 * np.sin((gx + gy) / 89.0)
            tile = np.clip(field, 0, 7).astype(np.uint8)
            speckle = rng.random((size, size)) < 0.02
            tile[speckle] = rng.integers(0, 8, int(speckle.sum()), dtype=np.uint8)
            out[(x, y)] = tile
    return out


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"mean_ms": statistics.mean(values) * 1000, "stddev_ms": statistics.pstdev(values) * 1000,
            "p50_ms": statistics.median(values) * 1000,
            "p95_ms": ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))] * 1000,
            "n": len(values)}


class CqlLayout:
    """One of GeoTrellis' two CQL layouts, used through the Python driver."""

    def __init__(self, session: Any, keyspace: str, kind: str, curve_key: Callable[[int, int], int],
                 codec: str) -> None:
        from colonnade.bench.layouts import prepare

        self.session, self.kind, self.key_of = session, kind, curve_key
        self.codec = tile_codec(codec)
        if kind == "write-optimized":
            self.table = f"{keyspace}.tiles_write"
            session.execute(f"DROP TABLE IF EXISTS {self.table}")
            session.execute(f"CREATE TABLE {self.table} (key varint, name text, zoom int, value blob, "
                            "PRIMARY KEY (key, name, zoom))")
            self.insert = prepare(session, f"INSERT INTO {self.table} (key, name, zoom, value) VALUES (?, ?, ?, ?)")
            self.select = prepare(session, f"SELECT value FROM {self.table} WHERE key = ? AND name = ? AND zoom = ?")
        else:
            self.table = f"{keyspace}.tiles_read"
            session.execute(f"DROP TABLE IF EXISTS {self.table}")
            session.execute(f"CREATE TABLE {self.table} (name text, zoom int, zoombin int, key varint, value blob, "
                            "PRIMARY KEY ((name, zoom, zoombin), key)) "
                            f"WITH caching = {{'keys': 'ALL', 'rows_per_partition': '{TILES_PER_PARTITION}'}}")
            self.insert = prepare(session, f"INSERT INTO {self.table} (name, zoom, zoombin, key, value) "
                                           "VALUES (?, ?, ?, ?, ?)")
            self.select = prepare(session, f"SELECT value FROM {self.table} WHERE name = ? AND zoom = ? "
                                           "AND zoombin = ? AND key = ?")
        self.select.is_idempotent = True

    def _where(self, key: int) -> tuple[Any, ...]:
        if self.kind == "write-optimized":
            return (key, LAYER, ZOOM)
        return (LAYER, ZOOM, key // TILES_PER_PARTITION, key)

    def write(self, tiles: dict[tuple[int, int], np.ndarray]) -> None:
        from cassandra.concurrent import execute_concurrent_with_args

        params = []
        values = compress_tiles(self.codec, list(tiles.values()))  # as the tile layer does
        for ((x, y), _), value in zip(tiles.items(), values, strict=True):
            key = self.key_of(x, y)
            params.append((*self._where(key)[:-1], key, value) if self.kind == "read-optimized"
                          else (key, LAYER, ZOOM, value))
        execute_concurrent_with_args(self.session, self.insert, params, concurrency=WRITE_CONCURRENCY,
                                     raise_on_first_error=True)

    def read_block(self, x0: int, y0: int) -> np.ndarray:
        from cassandra.concurrent import execute_concurrent_with_args

        positions = [(x, y) for y in range(y0, y0 + BLOCK) for x in range(x0, x0 + BLOCK)]
        results = execute_concurrent_with_args(
            self.session, self.select, [self._where(self.key_of(x, y)) for x, y in positions],
            concurrency=READ_CONCURRENCY, raise_on_first_error=True, execution_profile="read")
        out = np.zeros((BLOCK * TILE, BLOCK * TILE), dtype=np.uint8)

        def place(found: tuple[tuple[int, int], tuple[bool, Any]]) -> None:
            (x, y), (ok, rows) = found
            row = rows.one() if ok else None
            if row is None:
                return
            data = row[0] if self.codec is None else self.codec.decompress(row[0], TILE * TILE, asbytes=True)
            r, c = (y - y0) * TILE, (x - x0) * TILE
            out[r:r + TILE, c:c + TILE] = np.frombuffer(data, dtype=np.uint8).reshape(TILE, TILE)

        # decompressed on this thread, as the tile layer does (two pool threads measured slower)
        for found in zip(positions, results, strict=True):
            place(found)
        return out


def expected_block(tiles: dict[tuple[int, int], np.ndarray], x0: int, y0: int) -> np.ndarray:
    rows = [np.hstack([tiles[(x, y)] for x in range(x0, x0 + BLOCK)]) for y in range(y0, y0 + BLOCK)]
    return np.vstack(rows)


def main(store: str = "cassandra://127.0.0.1/benchtiles", out: Path | None = None,
         write_iterations: int = WRITE_ITERATIONS, read_iterations: int = READ_ITERATIONS,
         tiles_per_segment: int = TILES_PER_PARTITION, codec: str = "lz4hc",
         echo: Callable[[str], None] = print) -> dict[str, Any]:
    import colonnade
    from colonnade.bench.layouts import connect
    from colonnade.config import parse_store_uri
    from colonnade.schema.curves import key_of_cell
    from colonnade.storage.cassandra_settings import CassandraSettings

    uri = parse_store_uri(store)
    if uri.scheme != "cassandra":
        raise BenchError("bench tiles needs a Cassandra store: --store cassandra://HOST/KEYSPACE")
    echo(f"generating zoom {ZOOM}: {(1 << ZOOM) ** 2:,} tiles of {TILE}×{TILE} uint8")
    tiles = land_cover()

    def key_of(x: int, y: int) -> int:
        return key_of_cell("hilbert", x, y, ZOOM)

    cluster, session = connect(uri, protocol_version=4)
    try:
        nodes = len([h for h in cluster.metadata.all_hosts() if h.is_up])
        replication = CassandraSettings.from_options(uri.options).replication
        keyspace = f"{uri.keyspace}_tiles"
        options = ", ".join(f"'{k}': {v!r}" if isinstance(v, str) else f"'{k}': {v}" for k, v in replication.items())
        session.execute(f"CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = {{{options}}}")
        cql = {kind: CqlLayout(session, keyspace, kind, key_of, codec) for kind in LAYOUTS[:2]}
        with colonnade.connect(store) as s:
            if LAYER in s:
                s.drop_dataset(LAYER)
            layer = s.tiles(LAYER, tile_size=TILE, dtype="uint8", curve="hilbert", tiles_per_segment=tiles_per_segment,
                            codec=codec)
            writers: dict[str, Callable[[], object]] = {
                "write-optimized": lambda: cql["write-optimized"].write(tiles),
                "read-optimized": lambda: cql["read-optimized"].write(tiles),
                "colonnade": lambda: layer.write_many((ZOOM, x, y, t) for (x, y), t in tiles.items())}
            readers: dict[str, Callable[[int, int], np.ndarray]] = {
                "write-optimized": cql["write-optimized"].read_block,
                "read-optimized": cql["read-optimized"].read_block,
                "colonnade": lambda x0, y0: layer.read_block(ZOOM, x0, y0, BLOCK, BLOCK)}
            writes: dict[str, list[float]] = {k: [] for k in LAYOUTS}
            for i in range(write_iterations):
                for kind in LAYOUTS:
                    started = time.perf_counter()
                    writers[kind]()
                    writes[kind].append(time.perf_counter() - started)
                echo(f"  write {i + 1}/{write_iterations}: " + ", ".join(
                    f"{k} {writes[k][-1] * 1000:,.0f} ms" for k in LAYOUTS))
            rng = random.Random(16)
            last = (1 << ZOOM) - BLOCK
            positions = {  # any position, and positions on the 16×16 grid (one key range each)
                "read": [(rng.randint(0, last), rng.randint(0, last)) for _ in range(WARMUP_READS + read_iterations)],
                "read_aligned": [(BLOCK * rng.randint(0, last // BLOCK), BLOCK * rng.randint(0, last // BLOCK))
                                 for _ in range(WARMUP_READS + read_iterations)]}
            reads: dict[str, dict[str, list[float]]] = {op: {k: [] for k in LAYOUTS} for op in positions}
            for i in range(WARMUP_READS + read_iterations):
                for op, where in positions.items():
                    x0, y0 = where[i]
                    want = expected_block(tiles, x0, y0)
                    for kind in LAYOUTS:
                        started = time.perf_counter()
                        got = readers[kind](x0, y0)
                        seconds = time.perf_counter() - started
                        if not np.array_equal(got, want):
                            raise BenchError(f"{kind}: the block at {x0},{y0} differs from the tiles written")
                        if i >= WARMUP_READS:
                            reads[op][kind].append(seconds)
            info = layer.info()
            s.drop_dataset(LAYER)
    finally:
        cluster.shutdown()
    report: dict[str, Any] = {
        "store": store, "nodes": nodes, "replication": replication, "zoom": ZOOM, "tiles": len(tiles),
        "tile_size": TILE, "dtype": "uint8", "block": BLOCK, "tiles_per_segment": tiles_per_segment, "codec": codec,
        "write_iterations": write_iterations, "read_iterations": read_iterations,
        "write_concurrency": WRITE_CONCURRENCY, "read_concurrency": READ_CONCURRENCY,
        "colonnade_bytes": info["zooms"][str(ZOOM)]["bytes"],
        "write": {k: summary(v) for k, v in writes.items()},
        **{op: {k: summary(v) for k, v in by_kind.items()} for op, by_kind in reads.items()},
        "published": PUBLISHED}
    w = report["write"]
    for op in ("read", "read_aligned"):
        r = report[op]
        report[f"{op}_speedup_vs_write_optimized"] = r["write-optimized"]["mean_ms"] / r["colonnade"]["mean_ms"]
        report[f"{op}_target_met"] = bool(report[f"{op}_speedup_vs_write_optimized"] >= 3
                                          and r["colonnade"]["stddev_ms"] < r["write-optimized"]["stddev_ms"])
    report["write_ratio_vs_write_optimized"] = w["colonnade"]["mean_ms"] / w["write-optimized"]["mean_ms"]
    report["write_target_met"] = bool(report["write_ratio_vs_write_optimized"] <= 1.0)
    for op in ("write", "read", "read_aligned"):
        echo(f"{op}: " + "; ".join(f"{k} mean {v['mean_ms']:,.1f} ms (sd {v['stddev_ms']:,.1f}, "
                                   f"p50 {v['p50_ms']:,.1f}, p95 {v['p95_ms']:,.1f})" for k, v in report[op].items()))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        echo(write_report(out / f"tiles-{nodes}node", report, markdown, chart))
    return report


def markdown(r: dict[str, Any]) -> str:
    lines = [
        f"# GeoTrellis tile study on {r['nodes']} Cassandra node{'s' if r['nodes'] != 1 else ''}", "",
        f"Zoom {r['zoom']}: {r['tiles']:,} tiles of {r['tile_size']}×{r['tile_size']} {r['dtype']}; "
        f"{r['write_iterations']} writes of the whole level, {r['read_iterations']} reads of random (unaligned) "
        f"{r['block']}×{r['block']} blocks; replication {r['replication']}. CQL layouts: prepared statements, "
        f"{r['write_concurrency']} writes / {r['read_concurrency']} reads in flight, protocol v4; every layout "
        f"compresses each tile alone with {r['codec']}; Colonnade: {r['tiles_per_segment']} tiles a segment. Every block read was checked against "
        "the tiles written.", "",
        "| layout | write mean | write sd | write p50 | write p95 | block read mean | sd | p50 | p95 | "
        "aligned block read mean | sd | p50 | p95 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for k in LAYOUTS:
        w, d, a = r["write"][k], r["read"][k], r["read_aligned"][k]
        lines.append(f"| {k} | {w['mean_ms']:,.0f} ms | {w['stddev_ms']:,.0f} | {w['p50_ms']:,.0f} | "
                     f"{w['p95_ms']:,.0f} | {d['mean_ms']:,.1f} ms | {d['stddev_ms']:,.1f} | {d['p50_ms']:,.1f} | "
                     f"{d['p95_ms']:,.1f} | {a['mean_ms']:,.1f} ms | {a['stddev_ms']:,.1f} | {a['p50_ms']:,.1f} | "
                     f"{a['p95_ms']:,.1f} |")
    p = r["published"]
    lines += ["", f"Published (GeoTrellis, 3 ccm nodes, 4-core Xeon): write {p['write_ms']['write-optimized']:,} ms "
              f"(write-optimized) / {p['write_ms']['read-optimized']:,} ms (read-optimized); block read "
              f"{p['read_ms']['write-optimized']} / {p['read_ms']['read-optimized']} ms.", "",
              f"Colonnade block reads are {r['read_speedup_vs_write_optimized']:.2f}x faster than the write-optimized "
              f"layout at any position and {r['read_aligned_speedup_vs_write_optimized']:.2f}x on the 16×16 grid "
              f"(target ≥ 3x with a smaller stddev: {'met' if r['read_target_met'] else 'missed'} / "
              f"{'met' if r['read_aligned_target_met'] else 'missed'}); its writes take "
              f"{r['write_ratio_vs_write_optimized']:.2f}x the write-optimized layout's time (target ≤ 1x: "
              f"{'met' if r['write_target_met'] else 'missed'}).", ""]
    return "\n".join(lines)


def chart(r: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"write-optimized": "#ff7f0e", "read-optimized": "#7f7f7f", "colonnade": "#1f77b4"}
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5), constrained_layout=True)
    for ax, op, title in ((axes[0], "write", f"write all of zoom {r['zoom']} ({r['tiles']:,} tiles)"),
                          (axes[1], "read", f"read a {r['block']}×{r['block']} block"),
                          (axes[2], "read_aligned", f"read an aligned {r['block']}×{r['block']} block")):
        names = list(LAYOUTS)
        means = [r[op][k]["mean_ms"] for k in names]
        sds = [r[op][k]["stddev_ms"] for k in names]
        ax.bar(names, means, yerr=sds, capsize=6, color=[colours[k] for k in names])
        for i, v in enumerate(means):
            ax.text(i, v, f"{v:,.0f} ms", ha="center", va="bottom", fontsize=8)
        ax.set_title(f"{title}, {r['nodes']} node(s): mean ± sd", fontsize=11)
        ax.set_ylabel("ms", fontsize=8)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
