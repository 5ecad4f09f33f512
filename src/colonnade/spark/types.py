"""Column types between a dataset and Spark: the schema Spark sees (see
:func:`colonnade.spark.reading.spark_arrow_type`), the Arrow batches it accepts from a read, and
whether a DataFrame's columns can be stored in a dataset's."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_type, to_arrow_schema, to_arrow_type
from pyspark.sql.types import DataType, StructField, StructType

from colonnade.errors import SchemaError
from colonnade.schema.types import logical_schema, type_name
from colonnade.spark.reading import spark_arrow_type


def spark_field_type(t: pa.DataType) -> DataType:
    """The Spark type a column of Arrow type ``t`` is read as."""
    return from_arrow_type(spark_arrow_type(t), prefer_timestamp_ntz=True)


def spark_schema(schema: pa.Schema) -> StructType:
    """The schema Spark sees for a dataset of Arrow schema ``schema`` (every column nullable)."""
    return StructType([StructField(f.name, spark_field_type(f.type), nullable=True)
                       for f in logical_schema(schema)])


def arrow_target(schema: StructType) -> pa.Schema:
    """The exact Arrow schema Spark accepts for rows of ``schema`` from a read."""
    return to_arrow_schema(schema, timezone="UTC")


def _widens(src: pa.DataType, dst: pa.DataType) -> bool:
    """A value of type ``src`` is kept exactly in a column of type ``dst``."""
    if src == dst:
        return True
    if pa.types.is_integer(src) and pa.types.is_integer(dst):
        return (pa.types.is_signed_integer(src) == pa.types.is_signed_integer(dst)
                and src.bit_width <= dst.bit_width)
    if pa.types.is_integer(src) and pa.types.is_floating(dst):
        return src.bit_width < 32 or (src.bit_width == 32 and dst == pa.float64())
    if pa.types.is_floating(src) and pa.types.is_floating(dst):
        return src.bit_width <= dst.bit_width
    if pa.types.is_string(src) and pa.types.is_large_string(dst):
        return True
    if pa.types.is_binary(src) and pa.types.is_large_binary(dst):
        return True
    return pa.types.is_timestamp(src) and pa.types.is_timestamp(dst) and (src.tz is None) == (dst.tz is None)


def check_write_schema(dataset: str, stored: pa.Schema, data: StructType, merge: bool) -> pa.Schema:
    """The dataset schema a write of DataFrame schema ``data`` commits: ``stored``, or with the
    DataFrame's new columns added when ``merge``. SchemaError (one message naming every
    difference) when a column is missing, added without ``merge``, or of a type the dataset's
    column can't keep."""
    problems = []
    names = {f.name for f in data}
    for f in data:
        if f.name not in stored.names:
            if not merge:
                problems.append(f"{f.name}: {f.dataType.simpleString()} is not in the dataset")
            continue
        want = stored.field(f.name).type
        got = to_arrow_type(f.dataType, timezone="UTC")
        if f.dataType != spark_field_type(want) and not _widens(got, want):
            problems.append(f"{f.name}: {f.dataType.simpleString()} can't be stored in a "
                            f"{type_name(want)} column")
    problems += [f"{n}: {type_name(stored.field(n).type)} is missing from the DataFrame"
                 for n in stored.names if n not in names and not merge]
    if problems:
        hint = "" if merge else " (option mergeSchema true adds new columns)"
        raise SchemaError(f"the DataFrame does not match dataset {dataset!r}{hint}: " + "; ".join(problems))
    added = [pa.field(f.name, to_arrow_type(f.dataType, timezone="UTC"), nullable=True)
             for f in data if f.name not in stored.names]
    return pa.schema(list(stored) + added) if added else stored


def arrow_schema_of(data: StructType) -> pa.Schema:
    """The Arrow schema a new dataset gets from a DataFrame's schema."""
    return pa.schema([pa.field(f.name, to_arrow_type(f.dataType, timezone="UTC"), nullable=True)
                      for f in data])
