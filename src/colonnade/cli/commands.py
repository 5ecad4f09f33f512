"""The dataset commands: ingest, sql, explain, datasets, describe, verify, drop (expire and
vacuum are in ``maintenance``).

Each command opens the store named by the group's ``--store`` (read commands refuse a SQLite
file that doesn't exist rather than create an empty one), prints its answer on stdout and
raises on failure; ``main.ColonnadeGroup`` turns what is raised into one line on stderr.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

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


def _sort_keys(text: str | None) -> list[str] | None:
    """``--sort-by``: columns and curve expressions, split at top-level commas only."""
    from colonnade.schema.transforms import split_top_level

    return split_top_level(text) or None if text is not None else None


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
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@click.option("--format", "fmt", type=click.Choice(["csv", "tsv", "parquet", "arrow"]),
              help="Input format (default: from the file extension; csv for standard input).")
@click.option("--delimiter", metavar="C", help="Field delimiter of CSV input (\\t or tab for TAB).")
@click.option("--no-header", is_flag=True, help="CSV input has no header line (name columns with "
                                                "--columns or --schema).")
@click.option("--columns", metavar="A,B,..", help="Column names of header-less CSV input.")
@click.option("--schema", "schema_file", metavar="FILE",
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Column types as 'name: type' lines; columns it leaves out are inferred.")
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
              help="Where quarantined rows are written, with their reasons (default: "
                   "FILE.rejects.jsonl beside each file; stdin.rejects.jsonl for '-').")
@click.option("--source-id", metavar="ID", help="Source identity (default: the file's digest).")
@click.option("--force", is_flag=True, help="Ingest even if this source was ingested before.")
@click.option("--schema-mode", type=click.Choice(["strict", "merge"]), default="strict",
              show_default=True, help="merge: add new columns of the data to the dataset.")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
              help="Read and write with N processes; the whole input is then one commit.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_settings
def ingest(settings: Settings, dataset: str, files: tuple[str, ...], fmt: str | None,
           delimiter: str | None, no_header: bool, columns: str | None, schema_file: Path | None,
           partition_by: str | None, sort_by: str | None, segment_rows: int | None, on_error: str,
           max_errors: int | None, rejects: Path | None, source_id: str | None, force: bool,
           schema_mode: str, workers: int, as_json: bool) -> None:
    """Load files (CSV, TSV, Parquet, Arrow IPC) into DATASET, created if missing.

    Each file is one commit; a file already ingested (same content) is skipped unless --force.
    FILE may be a quoted pattern ('data/*.csv': the matching files, in sorted order; a path
    that exists is taken as it is), or '-' for standard input, which is copied to a temporary
    file first (in $TMPDIR) and identified by the digest of its content: piping the same data
    again adds nothing. '-' alone with --format arrow reads an Arrow IPC stream batch by batch
    as it arrives (nothing spooled; unless --schema-mode merge), in one commit.

    With --workers N (2 or more), N processes read and write the files (CSV/TSV cut into byte
    ranges, Parquet into row groups) and the whole input is one commit: re-running the same
    files adds nothing; a bad row (strict), a failed worker or Ctrl-C commits nothing.

    A new dataset takes the column types inferred from the first rows of the first file; they
    are printed on stderr, with a warning for each column made text by a few values that are not
    numbers or dates. Ctrl-C says whether each file's commit landed, and exits with 130."""
    if workers > 1:
        from colonnade.ingest.pool import prestart

        prestart()  # the workers' fork server imports while this process does
    from colonnade.cli.progress import ingest_progress, summary
    from colonnade.ingest.interrupts import IngestInterrupted
    from colonnade.ingest.pipeline import ingest as run_ingest

    inputs = _expand_inputs(files)
    schema = None
    if schema_file is not None:
        from colonnade.schema.types import parse_schema_text

        schema = parse_schema_text(schema_file.read_text(), source=str(schema_file))
    if inputs == ["-"] and fmt == "arrow" and schema_mode == "strict":  # merge: spooled
        _ingest_arrow_stdin(settings, dataset, source_id=source_id, force=force,
                            schema_mode=schema_mode, partition_by=partition_by,
                            sort_by=_sort_keys(sort_by), segment_rows=segment_rows, as_json=as_json)
        return
    result = None
    with _spooled_stdin("-" in inputs, fmt) as stdin:
        paths = [stdin.path if p == "-" and stdin is not None else Path(p) for p in inputs]
        names = {str(stdin.path): STDIN} if stdin is not None else {}
        sources = {str(stdin.path): stdin.identity} if stdin is not None else {}
        try:
            with settings.connect(must_exist=False) as store, \
                    ingest_progress(enabled=stderr_is_tty()) as progress:
                result = run_ingest(
                    store, dataset, paths, fmt=fmt, delimiter=_delimiter(delimiter),
                    header=not no_header, columns=_split(columns), schema=schema,
                    on_error=on_error, max_errors=max_errors, rejects=rejects,
                    source_id=source_id, force=force, schema_mode=schema_mode,
                    partition_by=partition_by, sort_by=_sort_keys(sort_by), segment_rows=segment_rows,
                    progress=progress, names=names, sources=sources, workers=workers)
                created = store.dataset(dataset).schema if result.created and result.inferred else None
                for f in result.files:  # inputs the ingest did not open under their name
                    f.path = names.get(f.path, f.path)
        except IngestInterrupted as exc:
            if as_json:
                echo_json({**exc.result.to_dict(), "interrupted": True, "pending": exc.pending})
            _interrupted(str(exc))
        except KeyboardInterrupt:
            if result is None:
                _interrupted(f"interrupted: nothing committed to {dataset}")
            click.echo(summary(result))
            _interrupted("interrupted after the ingest was done")
    if created is not None:
        _print_created(dataset, created, result)
    if as_json:
        echo_json(result.to_dict())
    else:
        click.echo(summary(result))


def _ingest_arrow_stdin(settings: Settings, dataset: str, *, as_json: bool, **options: Any) -> None:
    """An Arrow IPC stream on standard input, appended batch by batch in one commit."""
    from colonnade.cli.progress import ingest_progress, summary
    from colonnade.ingest.arrow_stream import ingest_arrow_stream

    result = None
    try:
        with settings.connect(must_exist=False) as store, \
                ingest_progress(enabled=stderr_is_tty()) as progress:
            result = ingest_arrow_stream(store, dataset, sys.stdin.buffer, name=STDIN,
                                         progress=progress, **options)
    except KeyboardInterrupt:
        if result is None:
            _interrupted(f"interrupted: nothing committed to {dataset}")
        raise
    if as_json:
        echo_json(result.to_dict())
    else:
        click.echo(summary(result))


#: How standard input is named in messages and results.
STDIN = "<stdin>"
_GLOB_CHARS = frozenset("*?[")


def _expand_inputs(args: tuple[str, ...]) -> list[str]:
    """The input files: a path that exists as given, '-' for stdin, else the sorted matches of a
    pattern; each file once."""
    import glob

    inputs: list[str] = []
    seen: set[Path] = set()
    for arg in args:
        if arg == "-":
            if "-" in inputs:
                raise click.BadParameter("standard input ('-') can be given once", param_hint="FILE")
            inputs.append(arg)
            continue
        path = Path(arg)
        if path.exists() or not _GLOB_CHARS & set(arg):
            if not path.exists():
                raise FileNotFoundError(2, "No such file or directory", arg)
            if path.is_dir():
                raise IsADirectoryError(21, "Is a directory", arg)
            matches = [arg]
        else:
            matches = sorted(m for m in glob.glob(arg, recursive=True) if Path(m).is_file())
            if not matches:
                from colonnade.errors import IngestError

                raise IngestError(f"no file matches {arg!r}")
        for match in matches:
            key = Path(match).resolve()
            if key not in seen:
                seen.add(key)
                inputs.append(match)
    return inputs


class _Spool:
    """Standard input copied to a file: its path and its source identity (the content's)."""

    def __init__(self, path: Path, identity: str) -> None:
        self.path, self.identity = path, identity


@contextmanager
def _spooled_stdin(wanted: bool, fmt: str | None) -> Iterator[_Spool | None]:
    """Standard input in a temporary file (removed afterwards), when ``wanted``."""
    if not wanted:
        yield None
        return
    import hashlib
    import tempfile

    digest = hashlib.sha256()
    size = 0
    with tempfile.TemporaryDirectory(prefix="colonnade-stdin-") as tmp, \
            _reading_note(stderr_is_tty()) as reading:
        stream = sys.stdin.buffer
        first = stream.read(1 << 20)
        suffix = {"tsv": ".tsv", "parquet": ".parquet", "arrow": ".arrow"}.get(fmt or "", ".csv")
        if first[:2] == b"\x1f\x8b" and suffix in (".csv", ".tsv"):
            suffix += ".gz"  # gzip-compressed text
        path = Path(tmp) / f"stdin{suffix}"
        with open(path, "wb") as out:
            chunk = first
            while chunk:
                digest.update(chunk)
                size += len(chunk)
                out.write(chunk)
                reading(size)
                chunk = stream.read(8 << 20)
        reading(-1)
        yield _Spool(path, f"stdin:{size}:sha256:{digest.hexdigest()}")


@contextmanager
def _reading_note(enabled: bool) -> Iterator[Callable[[int], None]]:
    """On a terminal, a spinner with the bytes of standard input read so far (-1: done)."""
    if not enabled:
        yield lambda size: None
        return
    from rich.console import Console

    with Console(stderr=True).status("reading standard input") as status:
        def show(size: int) -> None:
            if size < 0:
                status.stop()
            else:
                status.update(f"reading standard input: {size / 1e6:,.1f} MB")

        yield show


def _interrupted(message: str) -> NoReturn:
    note(("\n" if stderr_is_tty() else "") + message)
    raise click.exceptions.Exit(130)


def _print_created(dataset: str, schema: Any, result: Any) -> None:
    """On stderr: the schema of the dataset this ingest created, and the warnings about its
    types (the library's ``schema_warnings``, with how to fix each)."""
    import shutil
    import textwrap

    from colonnade.schema.types import type_name

    rows = f"{result.inferred_rows:,} row{'s' if result.inferred_rows != 1 else ''}"
    given = "" if len(result.inferred) == len(schema) else ", where --schema does not give them"
    note(f"created dataset {dataset}; column types inferred from the first {rows} of "
         f"{result.inferred_from}{given}:")
    width = min(shutil.get_terminal_size((100, 24)).columns, 120)
    listing = ", ".join(f"{f.name}: {type_name(f.type)}" for f in schema)
    note(textwrap.fill(listing, width=width, initial_indent="  ", subsequent_indent="  ",
                       break_on_hyphens=False))
    for w in result.schema_warnings:
        note(f"warning: column {w.column} is string, though {w.matching:,} of its {w.values:,} "
             f"values in those {rows} ({w.share:.1%}) are {w.type}; the first that is not: "
             f"{w.path}:{w.line}: {w.value!r}")
        note(f"  to store it as {w.type}: drop dataset {dataset}, then ingest again with "
             f"--schema FILE, FILE holding the line '{w.column}: {w.type}' (the other columns "
             f"are still inferred), and --on-error quarantine to set aside the rows whose "
             f"{w.column} is not {w.type}")


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
        infos = [store.dataset(name).describe(versions=0) for name in store.datasets()]
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
@click.option("--versions", type=click.IntRange(min=0), default=20, show_default=True, metavar="N",
              help='The newest N versions are listed (every one: SELECT * FROM "DATASET$commits").')
@pass_settings
def describe(settings: Settings, dataset: str, as_json: bool, versions: int) -> None:
    """Show DATASET: size, partitioning, columns with their stored bytes, and its versions."""
    with settings.connect() as store:
        info = store.dataset(dataset).describe(versions=versions)
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
    shown, kept = len(info["versions"]), info["versions_kept"]
    if shown < kept:
        click.echo(f"the newest {shown:,} of {kept:,} versions kept; every one: "
                   f'SELECT * FROM "{info["name"]}$commits"')


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
        checkpoints, damaged = ds.verify_checkpoints()
        # a kept log that no readable checkpoint starts cannot be opened: its chunks go unchecked
        checked, problems = (0, []) if any(d.fatal for d in damaged) else ds.verify(version)
    if as_json:
        echo_json({"dataset": dataset, "chunks_checked": checked, "ok": not problems and not damaged,
                   "problems": [{"dataset": p.dataset, "column": p.column, "segment": p.segment,
                                 "reason": p.reason} for p in problems],
                   "checkpoints_checked": checkpoints,
                   "damaged_checkpoints": [{"version": d.version, "reason": d.reason, "fatal": d.fatal}
                                           for d in damaged]})
    else:
        for p in problems:
            click.echo(str(p))
        for d in damaged:  # a fatal one says why nothing can be read instead
            click.echo(str(d) if d.fatal else f"{d} (the log is read instead)")
    if problems or damaged:
        what = [f"{len(problems)} of {checked} chunks"] if problems else []
        what += [f"{len(damaged)} of {checkpoints} checkpoints"] if damaged else []
        raise VerifyFailedError(f"{' and '.join(what)} of dataset {dataset!r} failed verification")
    if not as_json:
        click.echo(f"ok: {checked} chunks of dataset {dataset!r} verified")


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
