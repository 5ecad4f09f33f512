"""The clean-up commands: expire (old versions out of time travel) and vacuum (segments no
kept version reads, and orphans of failed writes). Compact, delete and alter are in
:mod:`.maintenance`.

Like every command, they print their answer on stdout (``--json`` for machines) and raise on
failure; ``main.ColonnadeGroup`` turns what is raised into one line on stderr.
"""

from __future__ import annotations

from typing import Any

import click

from colonnade.cli.context import Settings, pass_settings
from colonnade.cli.output import echo_json, human_bytes, plural, print_table
from colonnade.errors import ColonnadeError


class OptionError(ColonnadeError):
    """An option of a command has a value it cannot take (a usage error: exit status 2)."""

    exit_code = 2


def _span(first: int, last: int) -> str:
    return f"version {first}" if first == last else f"versions {first}-{last}"


@click.command()
@click.argument("dataset")
@click.option("--older-than", metavar="DURATION",
              help="Expire versions superseded longer ago than this: a number and a unit (s, m, "
                   "h, d, w), e.g. 7d or 12h. Default 7d when --retain-last is not given.")
@click.option("--retain-last", type=int, metavar="N",
              help="Keep the N newest versions (with --older-than: expire only versions that are "
                   "both older and not among the N newest).")
@click.option("--dry-run", is_flag=True, help="Only say what would be expired and removed.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_settings
def expire(settings: Settings, dataset: str, older_than: str | None, retain_last: int | None,
           dry_run: bool, as_json: bool) -> None:
    """Remove old versions of DATASET from time travel; the latest is always kept.

    A version is expired once it was superseded longer ago than --older-than (default 7 days),
    or when it is not among the --retain-last newest. Afterwards, reading an expired version
    (sql --version, scan) fails saying which is the oldest kept, and describe lists only the
    kept ones. Their commit records and checkpoints are removed (a checkpoint of the oldest
    kept version is written first, and an older one kept as its fallback); the data they alone
    read stays until 'colonnade vacuum'. Writers may keep committing meanwhile."""
    from colonnade.config import parse_duration
    from colonnade.errors import ConfigError

    if retain_last is not None and retain_last < 1:
        raise OptionError(f"--retain-last must be at least 1, got {retain_last} (the latest "
                          f"version is never expired)")
    seconds = None
    if older_than is not None:
        try:
            seconds = parse_duration(older_than)
        except ConfigError as exc:
            raise OptionError(f"--older-than: {exc}") from None
    with settings.connect() as store:
        result = store.dataset(dataset).expire(older_than=seconds, retain_last=retain_last,
                                               dry_run=dry_run)
    if as_json:
        echo_json(result.to_dict())
        return
    would = "would " if dry_run else ""
    if result.retention is not None and result.retention.rows_deleted:
        click.echo(f"retention deleted {plural(result.retention.rows_deleted, 'row')} of dataset "
                   f"{result.dataset!r} (v{result.retention.version})")
    if result.versions is None:
        kept = "" if not result.latest else f": {_span(result.oldest_before or 0, result.latest)} kept"
        click.echo(f"nothing to expire in dataset {result.dataset!r}{kept}")
    else:
        click.echo(f"{would}expire{'' if dry_run else 'd'} {_span(*result.versions)} of dataset "
                   f"{result.dataset!r}: the oldest version kept is {result.oldest}, the latest "
                   f"{result.latest}")
    removed = []
    if result.commits_removed:
        removed.append(plural(result.commits_removed, "commit record"))
    if result.checkpoints_removed:
        removed.append(plural(len(result.checkpoints_removed), "checkpoint"))
    if removed or result.checkpoints_written:
        what = " and ".join(removed) if removed else "no log entries"
        wrote = (f"; {would}wr{'ite' if dry_run else 'ote'} the checkpoint of "
                 f"{_span(min(result.checkpoints_written), max(result.checkpoints_written))}"
                 if result.checkpoints_written else "")
        click.echo(f"{would}remove{'' if dry_run else 'd'} {what}{wrote}"
                   + (f"; checkpoint {result.fallback} is kept as the fallback" if result.fallback else ""))
    if result.versions is not None:
        click.echo("the data only expired versions read stays until 'colonnade vacuum'")


@click.command()
@click.argument("dataset", required=False)
@click.option("--grace", default="1h", show_default=True, metavar="DURATION",
              help="Keep unnamed segments younger than this (a writer may still be about to "
                   "commit them): seconds, or a number and a unit (s, m, h, d, w), e.g. 30m.")
@click.option("--dry-run", is_flag=True, help="Only list what would be removed.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_settings
def vacuum(settings: Settings, dataset: str | None, grace: str, dry_run: bool, as_json: bool) -> None:
    """Remove the segments of DATASET (default: of every dataset) that no kept version reads,
    and give the space back to the file system.

    Two kinds go: orphans, left by failed or aborted writes (once older than --grace), and
    segments that only versions removed by 'colonnade expire' read (replaced by an overwrite,
    a compaction or a delete before the oldest kept version). Readers of kept versions and
    writers committing meanwhile are unaffected."""
    from colonnade.cli.commands import _reclaim

    grace_seconds = _grace(grace)

    freed = None
    with settings.connect() as store:
        before = store.disk_bytes()
        names = [store.dataset(dataset).name] if dataset is not None else store.datasets()
        reports = [store.dataset(name).vacuum(grace_seconds=grace_seconds, dry_run=dry_run) for name in names]
        if not as_json:
            for report in reports:
                _print_vacuum(report)
        if not dry_run and not as_json:
            _reclaim(store, before)
        elif not dry_run:
            store.reclaim_space()
            after = store.disk_bytes()
            freed = None if before is None or after is None else max(0, before - after)
    if as_json:
        echo_json({"dry_run": dry_run, "datasets": [r.to_dict() for r in reports], "freed_bytes": freed})


def _grace(text: str) -> float:
    """``--grace``: seconds (``0``, ``3600``) or a duration (``30m``, ``1h``)."""
    from colonnade.config import parse_duration
    from colonnade.errors import ConfigError

    try:
        seconds = float(text)
    except ValueError:
        try:
            return parse_duration(text)
        except ConfigError as exc:
            raise OptionError(f"--grace: {exc}") from None
    if seconds < 0:
        raise OptionError(f"--grace must be at least 0, got {text}")
    return seconds


def _print_vacuum(report: Any) -> None:
    verb = "would remove" if report.dry_run else "removed"
    name = report.dataset
    click.echo(f"{verb} {plural(report.orphans, 'orphan segment')} of dataset {name!r}")
    if report.expired:
        click.echo(f"{verb} {plural(report.expired, 'expired segment')} of dataset {name!r} (only "
                   f"versions before {report.oldest} read them)")
    if report.segments:
        click.echo(f"  in all: {plural(report.segments, 'segment')} in "
                   f"{plural(report.partitions, 'partition')}, {plural(report.rows, 'row')}, "
                   f"{human_bytes(report.bytes)}")
    if report.dry_run and report.segments:
        by_partition: dict[tuple[str, str], list[int]] = {}
        for r in report.removed:
            totals = by_partition.setdefault((r.partition, r.reason), [0, 0, 0])
            totals[0] += 1
            totals[1] += r.rows
            totals[2] += r.bytes
        print_table(["partition", "kind", "segments", "rows", "bytes"],
                    [[p or "(unpartitioned)", kind, n, rows, human_bytes(nbytes)]
                     for (p, kind), (n, rows, nbytes) in sorted(by_partition.items())])
