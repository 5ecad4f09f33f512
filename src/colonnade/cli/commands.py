"""The dataset commands: ingest, sql, explain, datasets, describe, verify, vacuum, drop.

Each command opens the store named by the group's ``--store`` (read commands refuse a SQLite
file that doesn't exist rather than create an empty one), prints its answer on stdout and
raises on failure; ``main.ColonnadeGroup`` turns what is raised into one line on stderr.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from colonnade.cli.context import Settings, pass_settings
from colonnade.cli.output import (
    ANSWER_FORMATS,
    BINARY_FORMATS,
    cell,
    echo_json,
    human_bytes,
    human_time,
    note,
    print_pairs,
    print_table,
    stderr_is_tty,
)
from colonnade.errors import ColonnadeError


class VerifyFailedError(ColonnadeError):
    """Some chunks of a dataset failed verification (they were listed on stdout)."""


def _split(text: str | None) -> list[str] | None:
    if text is None:
        return None
    items = [s.strip() for s in text.split(",") if s.strip()]
    return items or None


def _delimiter(text: str | None) -> str | None:
    if text is None:
        return None
    named = {"\\t": "\t", "tab": "\t", "\t": "\t", "comma": ",", "space": " ", "pipe": "|",
             "semicolon": ";"}
    value = named.get(text.lower(), text)
    if len(value) != 1:
        raise click.BadParameter(f"must be one character (or \\t, tab), got {text!r}",
                                 param_hint="--delimiter")
    return value


# -- ingest -----------------------------------------------------------------------------------
@click.command()
@click.argument("dataset")
@click.argument("files", nargs=-1, required=True, metavar="FILE...", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["csv", "tsv", "parquet", "arrow"]),
              help="Input format (default: from the file extension).")
@click.option("--delimiter", metavar="C", help="Field delimiter of CSV input (\\t or tab for TAB).")
@click.option("--no-header", is_flag=True, help="CSV input has no header line (name columns with "
                                                "--columns or --schema).")
@click.option("--columns", metavar="A,B,..", help="Column names of header-less CSV input.")
@click.option("--schema", "schema_file", metavar="FILE",
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Column types as 'name:type' lines.")
@click.option("--partition-by", metavar="EXPR",
              help="Partition spec of a new dataset, e.g. 'MonthYear' or 'bucket(16, id)'.")
@click.option("--sort-by", metavar="COLS", help="Sort key of a new dataset (comma-separated).")
@click.option("--segment-rows", type=click.IntRange(min=1), metavar="N",
              help="Rows per segment of a new dataset.")
@click.option("--on-error", type=click.Choice(["strict", "quarantine"]), default="strict",
              show_default=True, help="strict: a bad row aborts the file; quarantine: bad rows go "
                                      "to --rejects, good rows are committed.")
@click.option("--max-errors", type=click.IntRange(min=0), metavar="N",
              help="In quarantine mode, abort when a file has more bad rows than this.")
@click.option("--rejects", type=click.Path(dir_okay=False, path_type=Path), metavar="PATH",
              help="Where quarantined rows are written, with their reasons.")
@click.option("--source-id", metavar="ID", help="Source identity (default: the file's digest).")
@click.option("--force", is_flag=True, help="Ingest even if this source was ingested before.")
@click.option("--schema-mode", type=click.Choice(["strict", "merge"]), default="strict",
              show_default=True, help="merge: add new columns of the data to the dataset.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_settings
def ingest(settings: Settings, dataset: str, files: tuple[Path, ...], fmt: str | None,
           delimiter: str | None, no_header: bool, columns: str | None, schema_file: Path | None,
           partition_by: str | None, sort_by: str | None, segment_rows: int | None, on_error: str,
           max_errors: int | None, rejects: Path | None, source_id: str | None, force: bool,
           schema_mode: str, as_json: bool) -> None:
    """Load files (CSV, TSV, Parquet, Arrow IPC) into DATASET, created if missing.

    Each file is one commit; a file already ingested (same content) is skipped unless --force."""
    from colonnade.cli.progress import ingest_progress, summary
    from colonnade.ingest.pipeline import ingest as run_ingest

    for path in files:
        if not path.exists():
            raise FileNotFoundError(2, "No such file or directory", str(path))
        if path.is_dir():
            raise IsADirectoryError(21, "Is a directory", str(path))
    schema = None
    if schema_file is not None:
        from colonnade.schema.types import parse_schema_text

        schema = parse_schema_text(schema_file.read_text(), source=str(schema_file))
    with settings.connect(must_exist=False) as store, ingest_progress(enabled=stderr_is_tty()) as progress:
        result = run_ingest(
            store, dataset, list(files), fmt=fmt, delimiter=_delimiter(delimiter),
            header=not no_header, columns=_split(columns), schema=schema, on_error=on_error,
            max_errors=max_errors, rejects=rejects, source_id=source_id, force=force,
            schema_mode=schema_mode, partition_by=partition_by, sort_by=_split(sort_by),
            segment_rows=segment_rows, progress=progress)
    if as_json:
        echo_json(result.to_dict())
    else:
        click.echo(summary(result))


# -- sql and explain ----------------------------------------------------------------------------
def _query_text(query: str) -> str:
    text = sys.stdin.read() if query == "-" else query
    if not text.strip():
        raise click.BadParameter("the query is empty", param_hint="QUERY")
    return text


@click.command()
@click.argument("query")
@click.option("--format", "fmt", type=click.Choice(ANSWER_FORMATS), default="table", show_default=True,
              help="table: aligned text (fitted to the terminal); csv; json: one array of objects; "
                   "jsonl: one object a line; parquet, arrow (IPC file): binary, to a file or a pipe.")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="Write the answer to FILE instead of stdout.")
@click.option("--version", "pins", multiple=True, metavar="N|DATASET=N",
              help="Read every dataset as of version N, or DATASET as of version N (repeatable).")
@pass_settings
def sql(settings: Settings, query: str, fmt: str, output: Path | None, pins: tuple[str, ...]) -> None:
    """Run a SQL QUERY (DuckDB's dialect; '-' reads it from stdin) over the datasets.

    The answer streams out as it is computed. QUERY may hold several statements separated by
    ';': each answer is printed in turn."""
    from colonnade.cli.answers import OutputError, answer_output, report_written
    from colonnade.store import split_statements

    version, versions = _versions(pins)
    statements = split_statements(_query_text(query))
    if not statements:
        raise click.BadParameter("the query is empty", param_hint="QUERY")
    if fmt in BINARY_FORMATS and sum(s.answers for s in statements) > 1:
        raise OutputError(f"a {fmt} file holds one answer, and the query has "
                          f"{sum(s.answers for s in statements)} statements that answer")
    rows = 0
    with settings.connect() as store:
        with answer_output(output, fmt) as writer:
            for statement in statements:
                with store.sql_reader(statement.text, version=version, versions=versions) as reader:
                    if statement.answers:
                        rows += writer.write(reader)
                    else:
                        reader.read_all()  # runs it (SET, CREATE ...): nothing to show
    report_written(output, rows, writer.answers)


def _versions(pins: tuple[str, ...]) -> tuple[int | None, dict[str, int]]:
    """``--version N`` (every dataset) and ``--version DATASET=N`` (one dataset) options."""
    every: int | None = None
    each: dict[str, int] = {}
    for pin in pins:
        name, sep, number = pin.rpartition("=")
        name = name.strip()
        if not number.strip().isdigit() or (sep and not name):
            raise click.BadParameter(f"expected N or DATASET=N (N ≥ 0), got {pin!r}", param_hint="--version")
        n = int(number)
        if not sep:
            if every is not None and every != n:
                raise click.BadParameter(f"two versions for every dataset: {every} and {n}",
                                         param_hint="--version")
            every = n
        elif each.setdefault(name, n) != n:
            raise click.BadParameter(f"two versions for dataset {name!r}", param_hint="--version")
    return every, each


@click.command()
@click.argument("query")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--version", type=click.IntRange(min=0), metavar="N",
              help="Read every dataset as of version N.")
@pass_settings
def explain(settings: Settings, query: str, as_json: bool, version: int | None) -> None:
    """Run QUERY and report what was pruned and read (segments, chunks, bytes), the filters that
    could not be used for pruning and why, and DuckDB's plan."""
    text = _query_text(query)
    with settings.connect() as store:
        report = store.explain(text, version=version)
    if as_json:
        echo_json(report.to_dict())
        return
    t = report.totals()
    print_pairs([
        ("segments scanned", f"{t['segments_scanned']} of {t['segments_total']}"),
        ("segments read", t["segments_read"]),
        ("partitions scanned", f"{t['partitions_scanned']} of {t['partitions_total']}"),
        ("chunks read", f"{t['chunks_read']} ({human_bytes(t['bytes_read'])})"),
        ("rows scanned", t["rows_scanned"]),
        ("answer rows", report.rows),
        ("time", f"{report.seconds * 1000:.1f} ms"),
    ])
    for name, scans in report.scans.items():
        for m in scans:
            cols = ", ".join(m.get("columns") or []) or "(none)"
            only = ", ".join(m.get("filter_columns") or [])
            click.echo(f"scan {name}: columns {cols}" + (f"; filter-only columns {only}" if only else "")
                       + f"; filter {m.get('filter') or '(none)'}; "
                       f"{m['segments_scanned']}/{m['segments_total']} segments")
    for warning in report.warnings:
        click.echo(f"warning: {warning}")
    click.echo("plan:")
    click.echo(report.plan)


# -- datasets and describe ----------------------------------------------------------------------
@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@pass_settings
def datasets(settings: Settings, as_json: bool) -> None:
    """List the datasets of the store with their rows, segments, bytes and version."""
    with settings.connect() as store:
        infos = [store.dataset(name).describe() for name in store.datasets()]
    keys = ("name", "rows", "segments", "bytes", "version")
    if as_json:
        echo_json([{k: info[k] for k in keys} for info in infos])
        return
    if not infos:
        note(f"no datasets in {store.uri}")
        return
    print_table(["dataset", "rows", "segments", "bytes", "version"],
                [[i["name"], i["rows"], i["segments"], human_bytes(i["bytes"]), i["version"]]
                 for i in infos])


@click.command()
@click.argument("dataset")
@click.option("--json", "as_json", is_flag=True, help="Print the description as JSON.")
@pass_settings
def describe(settings: Settings, dataset: str, as_json: bool) -> None:
    """Show DATASET: size, partitioning, columns with their stored bytes, and its versions."""
    with settings.connect() as store:
        info = store.dataset(dataset).describe()
    if as_json:
        echo_json(info)
        return
    _print_description(info)


def _print_description(info: dict[str, Any]) -> None:
    print_pairs([
        ("dataset", info["name"]),
        ("store", info["store"]),
        ("rows", f"{info['rows']:,}"),
        ("segments", info["segments"]),
        ("partitions", info["partitions"]),
        ("bytes", f"{info['bytes']:,} ({human_bytes(info['bytes'])})"),
        ("version", info["version"]),
        ("partition by", ", ".join(info["partition_by"]) or "(none)"),
        ("sort by", ", ".join(info["sort_by"]) or "(none)"),
        ("segment rows", f"{info['segment_rows']:,}"),
    ])
    click.echo()
    print_table(["column", "type", "bytes"],
                [[c["name"], c["type"], c["bytes"]] for c in info["columns"]], title="columns")
    click.echo()
    print_table(["version", "kind", "at", "rows added", "segments +", "segments -", "source"],
                [[v["version"], v["kind"], human_time(v["at"]), v["rows_added"],
                  v["segments_added"], v["segments_removed"], cell(v["source"]) if v["source"] else ""]
                 for v in info["versions"]], title="versions")


# -- maintenance --------------------------------------------------------------------------------
@click.command()
@click.argument("dataset")
@click.option("--version", type=click.IntRange(min=0), metavar="N",
              help="Verify the segments live at version N (default: the latest).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_settings
def verify(settings: Settings, dataset: str, version: int | None, as_json: bool) -> None:
    """Check the checksum of every chunk of DATASET; exit 1 listing every bad chunk."""
    with settings.connect() as store:
        ds = store.dataset(dataset)
        checked, problems = ds.verify(version)
        checkpoints, damaged = ds.verify_checkpoints()
    if as_json:
        echo_json({"dataset": dataset, "chunks_checked": checked, "ok": not problems and not damaged,
                   "problems": [{"dataset": p.dataset, "column": p.column, "segment": p.segment,
                                 "reason": p.reason} for p in problems],
                   "checkpoints_checked": checkpoints,
                   "damaged_checkpoints": [{"version": d.version, "reason": d.reason} for d in damaged]})
    else:
        for p in problems:
            click.echo(str(p))
        for d in damaged:
            click.echo(f"{d} (the log is read instead)")
    if problems or damaged:
        what = [f"{len(problems)} of {checked} chunks"] if problems else []
        what += [f"{len(damaged)} of {checkpoints} checkpoints"] if damaged else []
        raise VerifyFailedError(f"{' and '.join(what)} of dataset {dataset!r} failed verification")
    if not as_json:
        click.echo(f"ok: {checked} chunks of dataset {dataset!r} verified")


@click.command()
@click.argument("dataset", required=False)
@click.option("--grace", type=click.FloatRange(min=0), default=3600.0, show_default=True,
              metavar="SECONDS", help="Keep unnamed segments younger than this (a writer may "
                                      "still be about to commit them).")
@click.option("--dry-run", is_flag=True, help="Only count what would be removed.")
@pass_settings
def vacuum(settings: Settings, dataset: str | None, grace: float, dry_run: bool) -> None:
    """Remove segments of DATASET (default: of every dataset) that no commit names (left by
    failed or aborted writes), and give the space back to the file system."""
    with settings.connect() as store:
        before = store.disk_bytes()
        names = [store.dataset(dataset).name] if dataset is not None else store.datasets()
        for name in names:
            n = store.dataset(name).vacuum(grace_seconds=grace, dry_run=dry_run)
            what = f"{n} orphan segment{'s' if n != 1 else ''} of dataset {name!r}"
            click.echo(f"would remove {what}" if dry_run else f"removed {what}")
        if not dry_run:
            _reclaim(store, before)


def _reclaim(store: Any, before: int | None) -> None:
    """Give freed space back and say how much the store's file shrank since ``before``."""
    store.reclaim_space()
    after = store.disk_bytes()
    if before is not None and after is not None:
        click.echo(f"freed {human_bytes(max(0, before - after))} of {store.uri} "
                   f"(now {human_bytes(after)})")


@click.command()
@click.argument("dataset")
@click.option("--yes", "-y", is_flag=True, help="Don't ask for confirmation.")
@pass_settings
def drop(settings: Settings, dataset: str, yes: bool) -> None:
    """Delete DATASET and all its data (the embedded store's file shrinks accordingly)."""
    with settings.connect() as store:
        before = store.disk_bytes()
        ds = store.dataset(dataset)
        rows = ds.snapshot().rows
        confirm_destruction(f"drop dataset {ds.name!r} ({rows:,} row{'s' if rows != 1 else ''}) from "
                            f"{store.uri}", yes)
        store.drop_dataset(ds.name)
        click.echo(f"dropped dataset {ds.name!r} from {store.uri}")
        _reclaim(store, before)


class NotConfirmedError(ColonnadeError):
    """A command that destroys data ran without a terminal to confirm on and without --yes."""


def confirm_destruction(action: str, yes: bool) -> None:
    """Ask ``action?`` before destroying data. Without a terminal to ask on (a pipe, a script,
    /dev/null) nothing is read from stdin as an answer: ``--yes`` is required."""
    if yes:
        return
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        raise NotConfirmedError(f"not confirmed: {action} needs --yes when stdin is not a terminal")
    click.confirm(f"{action}?", abort=True, err=True)
