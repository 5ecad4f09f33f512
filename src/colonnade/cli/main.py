"""The ``colonnade`` group and the one place every failure of every command ends up.

:class:`ColonnadeGroup` runs a command and turns what it raises into one line on stderr,
``error: <reason>``, and an exit code: 1 for errors, 130 for Ctrl-C, click's own 2 for usage
errors. A traceback is printed only with ``--debug``. Commands therefore raise; they never
print errors or call ``sys.exit`` themselves.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Any, NoReturn

import click

from colonnade import __version__
from colonnade.cli import EXIT_INTERRUPTED, is_interrupt
from colonnade.cli.context import Settings
from colonnade.config import default_store_uri
from colonnade.errors import ColonnadeError

EXIT_ERROR = 1


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ColonnadeError):
        return _without_traceback(str(exc))
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror}{where}"
    text = str(exc).strip() or "(no message)"
    return f"unexpected {type(exc).__name__}: {text} (rerun with --debug for the traceback)"


def _without_traceback(text: str) -> str:
    """A message with any Python traceback it embeds cut off (DuckDB quotes the traceback of an
    exception raised inside a scan); ``--debug`` prints the whole chain anyway."""
    cut = text.find("Traceback (most recent call last)")
    if cut < 0:
        return text
    head = text[:cut].rstrip()
    for tail in ("Detail: Python exception:", "Python exception:"):
        if head.endswith(tail):
            head = head[: -len(tail)].rstrip()
    return head.rstrip(" .:")


def report(exc: BaseException, debug: bool) -> None:
    """Print ``exc`` as ``error: <reason>`` (its detail lines, if any, indented below)."""
    if debug:
        traceback.print_exception(exc)
    first, *rest = _reason(exc).splitlines() or [""]
    click.echo(f"error: {first}", err=True)
    for line in rest:
        click.echo(f"  {line}" if line and not line.startswith(" ") else line, err=True)


class ColonnadeGroup(click.Group):
    """A click group whose ``invoke`` is the error funnel of the whole command tree."""

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except KeyboardInterrupt:  # Ctrl-C while the options are parsed: no "Aborted!"
            raise click.exceptions.Exit(EXIT_INTERRUPTED) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            result = super().invoke(ctx)
            sys.stdout.flush()  # here, so that a closed pipe is seen by the handler below
            return result
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except BrokenPipeError:
            # the reader of stdout is gone (`| head`): not an error, nothing more to say
            _discard_stdout()
            ctx.exit(0)
        except KeyboardInterrupt:
            click.echo("\ninterrupted", err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except Exception as exc:
            if is_interrupt(exc):  # a Ctrl-C while a module loaded, wrapped by Python
                click.echo("\ninterrupted", err=True)
                ctx.exit(EXIT_INTERRUPTED)
            settings = ctx.obj if isinstance(ctx.obj, Settings) else None
            report(exc, debug=settings.debug if settings else bool(os.environ.get("COLONNADE_DEBUG")))
            ctx.exit(getattr(exc, "exit_code", EXIT_ERROR))  # e.g. 2 for a bad option value


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so that flushing what is still buffered at exit doesn't fail
    again (Python would print "Exception ignored ... BrokenPipeError" and exit 120)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout without a file descriptor (tests)
        pass


@click.group(cls=ColonnadeGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--store", metavar="URI", default=None,
              help="sqlite:///path.db (or a path) or cassandra://host[,host][:port]/keyspace. "
                   "Default: $COLONNADE_STORE, else ./colonnade.db.")
@click.option("--debug", is_flag=True, help="Print tracebacks of errors.")
@click.version_option(__version__, message="%(prog)s %(version)s")  # no package metadata scan
@click.pass_context
def cli(ctx: click.Context, store: str | None, debug: bool) -> None:
    """Colonnade: a columnar analytical store on Cassandra or one SQLite file, queried with SQL."""
    given = store is not None or bool(os.environ.get("COLONNADE_STORE"))
    ctx.obj = Settings(store=store or default_store_uri(), store_given=given, debug=debug)


def _register() -> None:
    from colonnade.cli import (
        bench,
        cassandra,
        cleanup,
        commands,
        demo,
        kafka,
        maintenance,
        sample,
        stream,
        tiles,
    )

    for command in (commands.ingest, commands.sql, commands.explain, commands.datasets,
                    commands.describe, commands.verify, cleanup.expire, cleanup.vacuum, commands.drop,
                    maintenance.compact, maintenance.delete, maintenance.alter,
                    sample.sample, stream.stream, tiles.tiles, demo.demo, bench.bench, cassandra.cassandra, kafka.kafka):
        cli.add_command(command)


_register()


def _exit_interrupted() -> NoReturn:
    """End an interrupted command now: what it had to say is said and its store is closed.
    The exit handlers still run (multiprocessing's, for one, releases the semaphores of an
    ingest's workers), but not the interpreter's teardown, which after an interrupt may find
    objects of native libraries still referenced from the unwound frames and warn about them."""
    import atexit

    atexit._run_exitfuncs()  # each handler's error, if any, is printed by it and passed over
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can be said
            pass
    os._exit(EXIT_INTERRUPTED)


def main(argv: list[str] | None = None) -> None:
    """Run the command line (the console script is ``colonnade.cli.run``, which calls this)."""
    try:
        cli.main(args=argv, prog_name="colonnade")
    except SystemExit as exc:
        if exc.code == EXIT_INTERRUPTED:
            _exit_interrupted()
        raise
    except KeyboardInterrupt:  # before or after the group's own handler (parsing, exit)
        _exit_interrupted()
    except BrokenPipeError:
        _discard_stdout()
        sys.exit(0)
    except RuntimeError as exc:  # a Ctrl-C while a class was built, outside the group's handler
        if is_interrupt(exc):
            _exit_interrupted()
        raise


if __name__ == "__main__":  # pragma: no cover
    main()
