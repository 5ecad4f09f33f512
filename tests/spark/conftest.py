"""A real local Spark (``local[2,2]``: two cores, a failed task is tried once more) for the
Spark data source tests, started once per test session."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest


def _python_only() -> type:
    from colonnade.spark.source import ColonnadeDataSource

    class PythonOnly(ColonnadeDataSource):
        @classmethod
        def name(cls) -> str:
            return "colonnade_python"

    return PythonOnly


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ["PYSPARK_PYTHON"] = sys.executable  # workers run this interpreter (colonnade in it)
    from pyspark.sql import SparkSession

    import colonnade.spark

    session = (SparkSession.builder.master("local[2,2]").appName("colonnade-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.memory", "1g")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    colonnade.spark.register(session)
    assert colonnade.spark._loadable(session)  # format("colonnade") reads through the JVM reader
    session.dataSource.register(_python_only())  # the Python data source's own reader, for comparison
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(params=["colonnade", "colonnade_python"], ids=["jvm", "python"])
def fmt(request: pytest.FixtureRequest) -> str:
    """A read through the JVM reader (``format("colonnade")``), or PySpark's Python data source."""
    return str(request.param)
