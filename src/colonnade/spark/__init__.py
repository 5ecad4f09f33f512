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


def register(spark: Any, jvm: bool = True) -> None:
    """Make ``format("colonnade")`` known to the session ``spark``.

    The Python data source (:mod:`colonnade.spark.source`) is registered, with filter pushdown
    for Python data sources on (``spark.sql.python.filterPushdown.enabled``). With ``jvm``
    (default), reads go through the JVM reader (:mod:`colonnade.spark.jvm`: compiled on first
    use, added to the session with ``ADD JAR`` unless the session was started with it in
    ``spark.jars``): it reads only the columns a query uses and hands Spark column vectors.
    Without it, every read reads every column (PySpark's Python data sources can't prune)."""
    from colonnade.spark.source import ColonnadeDataSource

    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(ColonnadeDataSource)
    if jvm and not _loadable(spark):
        from colonnade.spark.jvm import jar

        spark.sql(f"ADD JAR '{jar()}'")


def _loadable(spark: Any) -> bool:
    try:
        loader = spark._jvm.java.lang.Thread.currentThread().getContextClassLoader()
        loader.loadClass("colonnade.DefaultSource")
        return True
    except Exception:
        return False


__all__ = ["NAME", "register"]
