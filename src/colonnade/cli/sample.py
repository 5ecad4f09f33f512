"""``colonnade sample create|list|drop``: stratified samples that ``WITH ERROR`` queries use.

Each opens the store named by the group's ``--store``, prints a one-line summary or a table (or
``--json``) on stdout and raises on failure (``main.ColonnadeGroup`` prints one line on stderr).
"""

from __future__ import annotations

import click

from colonnade.cli.context import Settings, pass_settings
from colonnade.cli.output import echo_json, plural, print_table


@click.group()
def sample() -> None:
    """Stratified samples of a dataset, kept current by every commit, for queries ending in
    WITH ERROR e [CONFIDENCE c] [BEHAVIOR 'b']."""


@sample.command()
@click.argument("dataset")
@click.option("--on", "on", required=True, metavar="COLS",
              help="Columns to stratify on, comma-separated: those the queries group and filter by.")
@click.option("--fraction", type=float, required=True, metavar="F",
              help="Share of each large stratum's rows to keep, between 0 and 1 (e.g. 0.02).")
@click.option("--min-per-stratum", type=click.IntRange(min=2), default=50, show_default=True,
              metavar="K", help="Rows every stratum keeps at least (all of them if it has fewer).")
@click.option("--name", metavar="NAME", help="The sample's name (default: DATASET_by_COLS).")
@click.option("--seed", type=int, metavar="N", help="Seed of the row keys (default: random).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_settings
def create(settings: Settings, dataset: str, on: str, fraction: float, min_per_stratum: int,
           name: str | None, seed: int | None, as_json: bool) -> None:
    """Build a sample of DATASET stratified on --on, from its latest version."""
    with settings.connect() as store:
        info = store.create_sample(dataset, on, fraction, name, min_per_stratum, seed)
    if as_json:
        echo_json(info.to_dict())
        return
    click.echo(f"created sample {info.name} of {info.dataset}: {plural(info.rows, 'row')} in "
               f"{info.strata:,} {'stratum' if info.strata == 1 else 'strata'} (version {info.base_version} of {info.dataset})")


@sample.command(name="list")
@click.argument("dataset", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the samples as JSON.")
@pass_settings
def list_(settings: Settings, dataset: str | None, as_json: bool) -> None:
    """The samples of DATASET (of every dataset by default)."""
    with settings.connect() as store:
        found = store.samples(dataset)
    if as_json:
        echo_json([s.to_dict() for s in found])
        return
    print_table(["sample", "dataset", "on", "fraction", "min per stratum", "rows", "strata",
                 "base version"],
                [[s.name, s.dataset, ", ".join(s.on), s.fraction, s.min_per_stratum, s.rows,
                  s.strata, s.base_version] for s in found])


@sample.command()
@click.argument("name")
@pass_settings
def drop(settings: Settings, name: str) -> None:
    """Drop sample NAME (its dataset keeps every row)."""
    with settings.connect() as store:
        store.drop_sample(name)
    click.echo(f"dropped sample {name}")
