"""The ``colonnade`` command line: ``main.py`` holds the group and the one place every error is
turned into a one-line reason; ``commands.py`` the dataset commands; ``demo.py``, ``bench.py``
and ``cassandra.py`` the demo, the benchmark and the local cluster; ``output.py`` how answers
are printed (tables on a terminal, CSV, JSON)."""
