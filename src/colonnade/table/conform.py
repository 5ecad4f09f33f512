"""Data against a dataset's schema: conforming batches, merging new columns, readable diffs, and
the kinds of input an append accepts."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from colonnade.errors import SchemaError
from colonnade.schema.types import logical_schema, type_name


def schema_diff(expected: pa.Schema, got: pa.Schema) -> str:
    """A readable diff of two schemas, one line per difference."""
    lines = []
    exp = {f.name: f.type for f in expected}
    new = {f.name: f.type for f in logical_schema(got)}
    for name, t in exp.items():
        if name not in new:
            lines.append(f"  - {name}: {type_name(t)} (missing from the data)")
        elif new[name] != t:
            lines.append(f"  ~ {name}: {type_name(t)} in the dataset, {type_name(new[name])} in the data")
    for name, t in new.items():
        if name not in exp:
            lines.append(f"  + {name}: {type_name(t)} (not in the dataset)")
    return "\n".join(lines)


def conform(dataset: str, batch: pa.RecordBatch, schema: pa.Schema, allow_missing: bool = False) -> pa.RecordBatch:
    """Reorder and safely cast a batch to ``schema``, or raise SchemaError with a diff.

    Columns missing from the batch are filled with nulls only when ``allow_missing``
    (schema mode ``merge``)."""
    if batch.schema.equals(schema):  # as parsed against the schema: no per-column work
        return batch
    names = batch.schema.names
    if set(names) != set(schema.names):
        missing_only = set(names) < set(schema.names)
        if not (missing_only and allow_missing):
            raise SchemaError(f"schema of the data differs from dataset {dataset!r}:\n"
                              + schema_diff(schema, batch.schema))
    arrays = []
    for f in schema:
        if f.name not in names:
            arrays.append(pa.nulls(batch.num_rows, f.type))
            continue
        col = batch.column(f.name)
        if pa.types.is_dictionary(col.type) and not pa.types.is_dictionary(f.type):
            col = col.dictionary_decode()
        if col.type != f.type:
            try:
                col = col.cast(f.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise SchemaError(
                    f"column {f.name!r}: cannot store {type_name(col.type)} values in a "
                    f"{type_name(f.type)} column of dataset {dataset!r} ({exc})") from None
        arrays.append(col)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def merged_schema(current: pa.Schema, data_schema: pa.Schema) -> pa.Schema | None:
    """``current`` with the data's new columns added (nullable), or None if the data adds none;
    SchemaError if the data changes an existing column's type beyond a safe cast."""
    fields = list(current)
    for f in logical_schema(data_schema):
        if f.name in current.names:
            if current.field(f.name).type != f.type:
                try:
                    pa.array([], f.type).cast(current.field(f.name).type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    raise SchemaError(f"column {f.name!r} changes type: "
                                      + schema_diff(current, data_schema)) from None
            continue
        fields.append(pa.field(f.name, f.type, nullable=True))
    return pa.schema(fields) if len(fields) != len(current) else None


def as_batches(data: Any) -> Iterator[pa.RecordBatch]:
    """Record batches of a table, batch, reader, Arrow stream, pandas DataFrame or iterable of
    batches and tables."""
    if isinstance(data, pa.Table):
        yield from data.to_batches()
    elif isinstance(data, pa.RecordBatch):
        yield data
    elif isinstance(data, pa.RecordBatchReader):
        yield from data
    elif hasattr(data, "__arrow_c_stream__") and not isinstance(data, Iterable):
        yield from pa.RecordBatchReader.from_stream(data)
    elif type(data).__name__ == "DataFrame":
        yield from pa.Table.from_pandas(data, preserve_index=False).to_batches()
    elif isinstance(data, Iterable):
        for item in data:
            if isinstance(item, pa.RecordBatch):
                yield item
            elif isinstance(item, pa.Table):
                yield from item.to_batches()
            else:
                raise SchemaError(f"cannot append {type(item).__name__}: expected Arrow record batches")
    else:
        raise SchemaError(f"cannot append {type(data).__name__}: pass an Arrow table, batches, a reader or a path")
