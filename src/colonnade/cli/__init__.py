"""The ``colonnade`` command line: ``main.py`` holds the group and the one place every error is
turned into a one-line reason; ``commands.py`` the dataset commands; ``demo.py``, ``bench.py``
and ``cassandra.py`` the demo, the benchmark and the local cluster; ``output.py`` how things
are printed, ``answers.py`` and ``encode.py`` how query answers are streamed (tables, CSV,
JSON, Parquet, Arrow).

:func:`run` is the console script: it loads the command line only inside its Ctrl-C guard,
so an interrupt at any moment of start-up ends quietly (status 130) instead of in a traceback.
An interrupt can also arrive wrapped: Python turns any exception raised while a class is being
built (a dataclass field's ``__set_name__``, say) into a ``RuntimeError`` caused by it, so
:func:`is_interrupt` follows the chain of causes.
"""

EXIT_INTERRUPTED = 130


def is_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` is a Ctrl-C, or an error raised because of one."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__
    return False


def run() -> None:
    """Console-script entry point."""
    try:
        from colonnade.cli.main import main
    except BaseException as exc:
        if is_interrupt(exc):
            raise SystemExit(EXIT_INTERRUPTED) from None
        raise
    main()
