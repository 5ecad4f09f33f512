"""``colonnade bench``: benchmarks that reproduce the published experiments.

The CLI only collects options; each benchmark module (imported when its command runs) owns
what it measures, prints and writes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from colonnade.cli.context import Settings, pass_settings


@click.group()
def bench() -> None:
    """Run a benchmark.

    Benchmarks measure cold reads: each repetition decodes what it reads (the decoded-chunk
    cache is off unless COLONNADE_CACHE_MB is set), as each run of a reference reads its files
    again."""
    os.environ.setdefault("COLONNADE_CACHE_MB", "0")


@bench.command()
@click.option("--rows", type=click.IntRange(min=1), metavar="N",
              help="Rows of GDELT-shaped data (default: 4,037,539, the original study's size).")
@click.option("--store", "store_uri", metavar="URI",
              help="Store to benchmark (default: the group's --store if given, else a scratch "
                   "SQLite store in --out).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              help="Where results (JSON, Markdown) and generated data are written.")
@click.option("--baseline-rows", type=click.IntRange(min=1), metavar="M",
              help="Rows loaded into the slow row-per-record and wide-row baseline layouts.")
@click.option("--layouts", metavar="L,..",
              help="Layouts to measure (e.g. colonnade,embedded,reference,row,wide,blob).")
@click.option("--repeats", type=click.IntRange(min=1), metavar="K",
              help="Repetitions per measurement (the median is reported).")
@click.option("--warmup", "warmup_s", type=click.FloatRange(min=0), metavar="SECONDS",
              help="Seconds each layout's reads and queries run untimed before they are timed "
                   "(at least once each; default 30, 0 for none).")
@click.option("--rounds", type=click.IntRange(min=0), metavar="R",
              help="Rounds of every layout's reads and queries timed one after another once all "
                   "are loaded (default 7, 0 for none): ratios of layouts measured seconds apart.")
@pass_settings
def gdelt(settings: Settings, rows: int | None, store_uri: str | None, out: Path | None,
          baseline_rows: int | None, layouts: str | None, repeats: int | None,
          warmup_s: float | None, rounds: int | None) -> None:
    """The GDELT layout study: ingest, scans and Q1-Q3 against DuckDB over Parquet."""
    from colonnade.bench import gdelt as study

    store = store_uri or (settings.store if settings.store_given else None)
    names = [s.strip() for s in layouts.split(",") if s.strip()] if layouts else None
    options: dict[str, Any] = {"rows": rows, "store": store, "out": out, "baseline_rows": baseline_rows,
               "layouts": names, "repeats": repeats, "warmup_s": warmup_s, "rounds": rounds}
    study.main(**{k: v for k, v in options.items() if v is not None})


@bench.command()
@click.option("--rows", type=click.IntRange(min=1000), metavar="N",
              help="Rows of GDELT-shaped data (default: 4,037,539).")
@click.option("--boxes", type=click.IntRange(min=1), metavar="K", help="Boxes per size (1°, 10°, 45°; default 20).")
@click.option("--repeats", type=click.IntRange(min=1), metavar="R", help="Runs per query (the median is kept; default 3).")
@click.option("--store", "store_uri", metavar="URI",
              help="Store to benchmark (default: the group's --store if given, else a scratch SQLite store).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              default=Path("bench-results"), show_default=True, help="Where geo.json, geo.md and geo.png go.")
@pass_settings
def geo(settings: Settings, rows: int | None, boxes: int | None, repeats: int | None, store_uri: str | None,
        out: Path) -> None:
    """Bounding-box queries on GDELT partitioned by a Z-order cell and sorted by a Hilbert key,
    against DuckDB over sorted Parquet; and the keys' encoding rate."""
    from colonnade.bench import geo as study

    store = store_uri or (settings.store if settings.store_given else None)
    options: dict[str, Any] = {"rows": rows, "boxes": boxes, "repeats": repeats, "store": store, "out": out}
    study.main(**{k: v for k, v in options.items() if v is not None})


@bench.command()
@click.option("--store", "store_uri", metavar="URI",
              help="Cassandra store (default: the group's --store if it is one, else "
                   "cassandra://127.0.0.1/benchtiles); the CQL layouts go to keyspace <keyspace>_tiles.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              default=Path("bench-results"), show_default=True,
              help="Where tiles-<N>node.json, .md and .png go (N: the cluster's nodes).")
@click.option("--write-iterations", type=click.IntRange(min=1), default=15, show_default=True, metavar="N",
              help="Writes of all of zoom 6 per layout.")
@click.option("--read-iterations", type=click.IntRange(min=1), default=100, show_default=True, metavar="N",
              help="Random 16×16 block reads per layout.")
@click.option("--tiles-per-segment", type=click.IntRange(min=1), default=64, show_default=True, metavar="T",
              help="Colonnade's tiles a segment (a power of 4).")
@click.option("--codec", type=click.Choice(["lz4hc", "zstd", "lz4", "none"]), default="lz4hc", show_default=True,
              help="How every layout compresses each tile.")
@pass_settings
def tiles(settings: Settings, store_uri: str | None, out: Path, write_iterations: int, read_iterations: int,
          tiles_per_segment: int, codec: str) -> None:
    """The GeoTrellis tile study: writes of zoom 6 and 16×16 block reads, in the write-optimized
    and read-optimized CQL layouts and in a Colonnade tile layer."""
    from colonnade.bench import tiles as study

    store = store_uri or (settings.store if settings.store_given and settings.store.startswith("cassandra:")
                          else "cassandra://127.0.0.1/benchtiles")
    study.main(store=store, out=out, write_iterations=write_iterations, read_iterations=read_iterations,
               tiles_per_segment=tiles_per_segment, codec=codec)


@bench.command()
@click.option("--events", type=click.IntRange(min=10_000), default=30_000_000, show_default=True,
              metavar="N", help="Ad impressions to generate and append.")
@click.option("--store", "store_uri", metavar="URI",
              help="Store to benchmark (default: the group's --store if given, else a scratch "
                   "SQLite store).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              default=Path("bench-results"), show_default=True,
              help="Where aqp-<store kind>.json, .md and .png go.")
@click.option("--fraction", type=click.FloatRange(min=0, max=1, min_open=True, max_open=True),
              default=0.01, show_default=True, metavar="F", help="The sample's fraction.")
@click.option("--queries", type=click.IntRange(min=1), default=500, show_default=True, metavar="Q",
              help="Random queries whose bounds are checked against the true answers.")
@click.option("--repeats", type=click.IntRange(min=1), default=3, show_default=True, metavar="K",
              help="Runs per seed query (the median is reported).")
@click.option("--ingest-rounds", type=click.IntRange(min=1), default=3, show_default=True, metavar="R",
              help="Times the ingest with and without the sample is measured, from empty "
                   "datasets (the median share is reported).")
@pass_settings
def aqp(settings: Settings, events: int, store_uri: str | None, out: Path, fraction: float,
        queries: int, repeats: int, ingest_rounds: int) -> None:
    """Approximate answers (WITH ERROR) from a stratified sample against exact answers on ad
    impressions: latency, coverage of the error bounds, and what keeping the sample costs."""
    from colonnade.bench import aqp as study

    store = store_uri or (settings.store if settings.store_given else None)
    study.main(events=events, store=store, out=out, fraction=fraction, queries=queries,
               repeats=repeats, rounds=ingest_rounds)


@bench.command("log")
@click.option("--commits", type=click.IntRange(min=2), default=20_000, show_default=True, metavar="N",
              help="One-row commits in the long log.")
@click.option("--small", type=click.IntRange(min=1), default=20, show_default=True, metavar="N",
              help="One-row commits in the short log it is compared with.")
@click.option("--store", "store_uri", metavar="URI",
              help="Store to benchmark (default: the group's --store if given, else a scratch "
                   "SQLite store in --out).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              default=Path("bench-results"), show_default=True, help="Where log.json and log.md go.")
@click.option("--repeats", type=click.IntRange(min=1), default=5, show_default=True, metavar="K",
              help="Repetitions per measurement (the median is reported).")
@click.option("--compact-every", type=click.IntRange(min=1), default=1_000, show_default=True, metavar="N",
              help="Commits between compactions of the stream-like log.")
@pass_settings
def log(settings: Settings, commits: int, small: int, store_uri: str | None, out: Path,
        repeats: int, compact_every: int) -> None:
    """The cost of a long commit log: open, plan, SQL and source lookup at N vs 20 commits,
    with and without compaction."""
    from colonnade.bench import log as study

    store = store_uri or (settings.store if settings.store_given else None)
    study.main(commits=commits, small=small, store=store, out=out, repeats=repeats,
               compact_every=compact_every)


@bench.command("compact")
@click.option("--segments", type=click.IntRange(min=2), default=1000, show_default=True, metavar="N",
              help="Small segments (one append each) to compact.")
@click.option("--segment-rows", type=click.IntRange(min=1), default=4000, show_default=True, metavar="R",
              help="Rows per small segment.")
@click.option("--full-rows", type=click.IntRange(min=1), default=65_536, show_default=True, metavar="F",
              help="Rows per full segment (the datasets' segment rows).")
@click.option("--store", "store_uri", metavar="URI",
              help="Store to benchmark (default: the group's --store if given, else a scratch "
                   "SQLite store).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              help="Where compact.json is written.")
@click.option("--repeats", type=click.IntRange(min=1), default=3, show_default=True, metavar="K",
              help="Repetitions (the median is reported).")
@pass_settings
def compact(settings: Settings, segments: int, segment_rows: int, full_rows: int, store_uri: str | None,
            out: Path | None, repeats: int) -> None:
    """Compaction of N small segments into full ones vs the store's ingest rate of the same rows."""
    from colonnade.bench import compact as study

    store = store_uri or (settings.store if settings.store_given else None)
    study.main(segments=segments, segment_rows=segment_rows, full_rows=full_rows, repeats=repeats,
               store=store, out=out)


@bench.command("metadata")
@click.option("--rows", type=click.IntRange(min=1), default=4_037_539, show_default=True, metavar="N",
              help="Rows of GDELT-shaped data.")
@click.option("--store", "store_uri", metavar="URI",
              help="Store to benchmark (default: the group's --store if given, else a scratch "
                   "SQLite store in --out).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              default=Path("bench-results"), show_default=True, help="Where generated data goes.")
@click.option("--repeats", type=click.IntRange(min=1), default=15, show_default=True, metavar="K",
              help="Runs per measurement (the median is reported).")
@pass_settings
def metadata(settings: Settings, rows: int, store_uri: str | None, out: Path, repeats: int) -> None:
    """count(*) and count(NumArticles) answered from metadata, against DuckDB over Parquet."""
    from colonnade.bench import metadata as study

    store = store_uri or (settings.store if settings.store_given else None)
    study.main(rows=rows, out=out, store=store, repeats=repeats)


@bench.command("spark")
@click.option("--rows", type=click.IntRange(min=1), default=4_037_539, show_default=True, metavar="N",
              help="Rows of GDELT-shaped data.")
@click.option("--store", "store_uri", metavar="URI",
              help="A store to compare besides the embedded one (e.g. cassandra://127.0.0.1/bench; "
                   "default: the group's --store if given).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              default=Path("bench-results"), show_default=True, help="Where data and the report go.")
@click.option("--repeats", type=click.IntRange(min=1), default=5, show_default=True, metavar="K",
              help="Runs per query (the median is reported).")
@click.option("--plan-segments", type=click.IntRange(min=1), default=10_000, show_default=True, metavar="S",
              help="Segments of the dataset whose read planning is timed.")
@pass_settings
def spark(settings: Settings, rows: int, store_uri: str | None, out: Path, repeats: int,
          plan_segments: int) -> None:
    """Spark SQL (local[2]) over Colonnade against Spark over ZSTD Parquet: Q1–Q3, read-all."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise click.ClickException("bench spark needs PySpark 4.1 or newer: pip install pyspark") from None
    from colonnade.bench import spark as study

    store = store_uri or (settings.store if settings.store_given else None)
    study.main(rows=rows, out=out, store=store, repeats=repeats, plan_segments=plan_segments,
               echo=click.echo)


@bench.command("joins")
@click.option("--rows", type=click.IntRange(min=1), default=4_037_539, show_default=True, metavar="N",
              help="Rows of GDELT-shaped data.")
@click.option("--store", "store_uri", metavar="URI",
              help="A store to compare besides the embedded one (e.g. cassandra://127.0.0.1/bench; "
                   "default: the group's --store if given).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              default=Path("bench-results"), show_default=True, help="Where data and the report go.")
@click.option("--repeats", type=click.IntRange(min=1), default=5, show_default=True, metavar="K",
              help="Runs per query (the median is reported).")
@pass_settings
def joins(settings: Settings, rows: int, store_uri: str | None, out: Path, repeats: int) -> None:
    """Joins, self-joins and 1-4 concurrent read-alls against DuckDB over ZSTD Parquet."""
    from colonnade.bench import joins as study

    store = store_uri or (settings.store if settings.store_given else None)
    study.main(rows=rows, out=out, store=store, repeats=repeats, echo=click.echo)


@bench.command("adimpressions")
@click.option("--events", type=click.IntRange(min=3), default=30_000_000, show_default=True, metavar="N",
              help="Ad impressions produced at full speed; figures are reported at N/3, 2N/3 and N.")
@click.option("--store", "store_uri", metavar="URI",
              help="Store to ingest into (default: the group's --store if given, else a scratch "
                   "SQLite store in --out).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              default=Path("bench-results"), show_default=True,
              help="Where adimpressions-<store kind>.json, .md and .png go.")
@click.option("--bootstrap", default="127.0.0.1:9092", show_default=True, metavar="HOST:PORT",
              help="Kafka bootstrap servers.")
@click.option("--reference-events", type=click.IntRange(min=1), default=1_000_000, show_default=True,
              metavar="M", help="Events written one row each into Cassandra by the lambda-stack reference.")
@click.option("--cassandra", metavar="HOST:PORT",
              help="Cassandra node of the row-per-event reference (default: the store's node, else "
                   "127.0.0.1:9042 if reachable; skipped otherwise).")
@click.option("--rate", type=click.FloatRange(min=1), metavar="R",
              help="Events/s of the freshness phase (default: half the sustained ingest rate, at most 50,000).")
@click.option("--freshness-seconds", type=click.FloatRange(min=0), default=30.0, show_default=True,
              metavar="S", help="Length of the rate-limited freshness phase (0: none).")
@click.option("--commit-interval", type=click.FloatRange(min=0.01), default=1.0, show_default=True,
              metavar="S", help="The stream's commit interval.")
@click.option("--references", default="ceiling,cassandra,duckdb", show_default=True, metavar="R,..",
              help="References to run (ceiling, cassandra, duckdb; empty: none).")
@click.option("--seed", type=int, default=42, show_default=True, help="Seed of the generated events.")
@click.option("--keep-topic", is_flag=True, help="Keep the run's Kafka topic (deleted by default).")
@click.option("--preload", is_flag=True,
              help="Fill the topic before the stream starts (ingest measured without the producer "
                   "competing for the CPU) instead of producing while it runs.")
@click.option("--sample-on", default="", metavar="COLS",
              help="Give the dataset a sample on these columns (fraction 0.01, at least 50 rows per "
                   "stratum), kept current by every commit of the stream.")
@pass_settings
def adimpressions(settings: Settings, events: int, store_uri: str | None, out: Path, bootstrap: str,
                  reference_events: int, cassandra: str | None, rate: float | None, freshness_seconds: float,
                  commit_interval: float, references: str, seed: int, keep_topic: bool,
                  preload: bool, sample_on: str) -> None:
    """The ad impressions streaming study: Kafka ingest with Q1-Q3 running, against a consume+decode
    ceiling, Cassandra one row per event and DuckDB micro-batch appends."""
    from colonnade.bench import adimpressions as study

    store = store_uri or (settings.store if settings.store_given else None)
    wanted = tuple(s.strip() for s in references.split(",") if s.strip())
    unknown = set(wanted) - {"ceiling", "cassandra", "duckdb"}
    if unknown:
        raise click.BadParameter(f"unknown reference(s) {', '.join(sorted(unknown))}", param_hint="--references")
    study.main(events=events, store=store, out=out, bootstrap=bootstrap, reference_events=reference_events,
               cassandra=cassandra, rate=rate, freshness_seconds=freshness_seconds,
               commit_interval=commit_interval, references=wanted, seed=seed, keep_topic=keep_topic,
               preload=preload, sample_on=tuple(c.strip() for c in sample_on.split(",") if c.strip()),
               echo=lambda line: click.echo(line, err=True))


@bench.command("ip2location")
@click.option("--addresses", type=int, default=100_000_000, show_default=True, metavar="N",
              help="Addresses (rows) the generated range table expands to.")
@click.option("--ranges", type=int, metavar="N",
              help="IPv4 ranges of the generated DB11-like table (default: one per 700 addresses, "
                   "DB11's density).")
@click.option("--store", "store_uri", metavar="URI",
              help="Store to load (default: the group's --store if given, else a fresh scratch SQLite "
                   "store in --out).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              default=Path("bench-results"), show_default=True,
              help="Where ip2location-<store kind>.json, .md and .png go.")
@click.option("--workers", type=int, metavar="N",
              help="Processes that generate and write the rows (default: one per CPU).")
@click.option("--reference-rows", type=int, default=100_000, show_default=True, metavar="N",
              help="Addresses (a prefix) loaded one Cassandra row each into the seed's two row layouts "
                   "(0: no reference).")
@click.option("--cassandra", metavar="HOST:PORT",
              help="Cassandra node of the row references (default: the store's node, else 127.0.0.1:9042; "
                   "skipped when it does not answer).")
@click.option("--seed", type=int, default=42, show_default=True, help="Seed of the generated table.")
@pass_settings
def ip2location(settings: Settings, addresses: int, ranges: int | None, store_uri: str | None, out: Path,
                workers: int | None, reference_rows: int, cassandra: str | None, seed: int) -> None:
    """The IP2Location bulk-load study: a DB11-like range table expanded to one row per address,
    loaded by parallel workers in one commit; count(*), point lookups and counts by country,
    against the seed's one-row-per-address Cassandra layouts."""
    from colonnade.cli.cleanup import OptionError

    if addresses < 1:
        raise OptionError(f"--addresses must be at least 1, got {addresses}")
    if ranges is not None and not 1 <= ranges <= addresses:
        raise OptionError(f"--ranges must be between 1 and --addresses ({addresses:,}), got {ranges}")
    if workers is not None and workers < 1:
        raise OptionError(f"--workers must be at least 1, got {workers}")
    if reference_rows < 0:
        raise OptionError(f"--reference-rows must be 0 or more, got {reference_rows}")
    from colonnade.bench import ip2location as study

    store = store_uri or (settings.store if settings.store_given else None)
    study.main(addresses=addresses, ranges=ranges, store=store, out=out, workers=workers,
               reference_rows=reference_rows, seed=seed, cassandra=cassandra, echo=lambda line: click.echo(line, err=True))
