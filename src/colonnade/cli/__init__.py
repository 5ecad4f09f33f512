"""The ``colonnade`` command line: ``main.py`` holds the group and the one place every error is
turned into a one-line reason; ``commands.py`` the dataset commands; ``demo.py``, ``bench.py``
and ``cassandra.py`` the demo, the benchmark and the local cluster; ``output.py`` how things
are printed, ``answers.py`` and ``encode.py`` how query answers are streamed (tables, CSV,
JSON, Parquet, Arrow).

:func:`run` is the console script: it loads the command line only inside its Ctrl-C guard,
so an interrupt at any moment of start-up ends quietly (status 130) instead of in a traceback.
"""

EXIT_INTERRUPTED = 130


def run() -> None:
    """Console-script entry point."""
    try:
        from colonnade.cli.main import main
    except KeyboardInterrupt:
        raise SystemExit(EXIT_INTERRUPTED) from None
    main()
