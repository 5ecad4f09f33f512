"""The maintenance commands that commit: compact, delete, alter.

Each opens the store named by the group's ``--store``, prints a one-line summary (or ``--json``)
on stdout and raises on failure (``main.ColonnadeGroup`` prints one line on stderr).
"""

from __future__ import annotations

import click

from colonnade.cli.commands import confirm_destruction
from colonnade.cli.context import Settings, pass_settings
from colonnade.cli.output import echo_json, plural


@click.command()
@click.argument("dataset")
@click.option("--target-rows", type=click.IntRange(min=1), metavar="N",
              help="Rows per merged segment (default: the dataset's segment rows).")
@click.option("--partition", "where", metavar="EXPR",
              help="Only the partitions that may hold rows matching this SQL predicate on the "
                   "partition columns, e.g. \"cat = 'a'\" (default: every partition).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_settings
def compact(settings: Settings, dataset: str, target_rows: int | None, where: str | None,
            as_json: bool) -> None:
    """Merge the small segments of each partition of DATASET into full segments, in one commit.

    Runs the dataset's retention first, if it has one (see 'colonnade alter --retain').
    Appends and queries can run meanwhile: readers of older versions keep their answers."""
    from colonnade.table.compaction import compact as run
    from colonnade.table.compaction import partitions_matching

    with settings.connect() as store:
        ds = store.dataset(dataset)
        partitions = partitions_matching(ds, where) if where is not None else None
        result = run(ds, target_rows, partitions)
    if as_json:
        echo_json(result.to_dict())
        return
    if result.retention is not None and result.retention.version is not None:
        r = result.retention
        click.echo(f"retention: deleted {plural(r.rows_deleted, 'row')} of {ds.name} (v{r.version})")
    if result.version is None:
        click.echo(f"nothing to compact in {ds.name}: no partition has two segments under "
                   f"{result.target_rows:,} rows")
        return
    click.echo(f"compacted {ds.name}: {plural(result.segments_before, 'segment')} → "
               f"{result.segments_after}, {plural(result.rows, 'row')}, "
               f"{plural(result.partitions, 'partition')}, {result.seconds:.2f} s (v{result.version})")


@click.command()
@click.argument("dataset")
@click.option("--where", "where", required=True, metavar="PREDICATE",
              help="SQL predicate (DuckDB's dialect) over the dataset's columns: the rows where "
                   "it is TRUE are deleted (NULL keeps the row).")
@click.option("--yes", "-y", is_flag=True, help="Don't ask for confirmation.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_settings
def delete(settings: Settings, dataset: str, where: str, yes: bool, as_json: bool) -> None:
    """Delete the rows of DATASET matching --where, in one commit.

    Older versions still read the deleted rows (until they are expired and vacuumed)."""
    from colonnade.table.predicate import Predicate

    with settings.connect() as store:
        ds = store.dataset(dataset)
        Predicate(ds.name, where, ds.schema).close()  # a bad predicate fails before the question
        confirm_destruction(f"delete the rows of dataset {ds.name!r} where {where}", yes)
        result = ds.delete(where)
    if as_json:
        echo_json(result.to_dict())
        return
    if result.version is None:
        click.echo(f"no row of {ds.name} matches: nothing deleted")
        return
    click.echo(f"deleted {plural(result.rows_deleted, 'row')} from {ds.name}: "
               f"{plural(result.segments_removed, 'segment')} removed, "
               f"{result.segments_rewritten} rewritten (v{result.version})")


@click.command()
@click.argument("dataset")
@click.option("--retain", metavar="DURATION", required=True,
              help="Keep rows this long by the --on column (90d, 12h, 2w...), or 'none' to keep "
                   "them all. Applied by every compaction.")
@click.option("--on", "column", metavar="COLUMN", help="The date or timestamp column rows are aged by.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_settings
def alter(settings: Settings, dataset: str, retain: str, column: str | None, as_json: bool) -> None:
    """Change a property of DATASET (one commit): its retention by time."""
    with settings.connect() as store:
        ds = store.dataset(dataset)
        if retain.strip().lower() != "none" and column is None:
            raise click.UsageError("--retain DURATION needs --on COLUMN (the time column rows are aged by)")
        result = ds.set_retention(retain, column)
    removed = retain.strip().lower() == "none"
    if as_json:
        echo_json({"dataset": ds.name, "version": result.version,
                   "retention": None if removed else {"duration": retain.strip(), "column": column}})
        return
    what = "no retention" if removed else f"retention {retain.strip()} on {column}"
    click.echo(f"altered {ds.name}: {what} (v{result.version})")
