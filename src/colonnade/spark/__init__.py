"""Colonnade datasets in Apache Spark (PySpark 4.1 or newer).

>>> import colonnade.spark
>>> colonnade.spark.register(spark)
>>> df = spark.read.format("colonnade").option("store", "cassandra://10.0.0.1/prod").load("gdelt")
>>> df.write.format("colonnade").option("store", uri).mode("append").save("gdelt_copy")

``register`` is ``spark.dataSource.register(ColonnadeDataSource)`` (plus turning filter pushdown
on); see
:mod:`colonnade.spark.source` for what a read and a write do, and the options they take.
PySpark is not a dependency of Colonnade: install it beside it (``pip install pyspark``).
"""

from __future__ import annotations

from typing import Any

NAME = "colonnade"


def register(spark: Any) -> None:
    """Make ``format("colonnade")`` known to the session ``spark``, with filter pushdown for
    Python data sources on (``spark.sql.python.filterPushdown.enabled``: a reader that takes
    filters is refused without it)."""
    from colonnade.spark.source import ColonnadeDataSource

    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(ColonnadeDataSource)


__all__ = ["NAME", "register"]
