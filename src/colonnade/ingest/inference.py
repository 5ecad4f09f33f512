"""Columns typed as text by a few odd values: found in the rows the types were inferred from.

A CSV column's type is inferred from the first rows of the file (see
:mod:`colonnade.ingest.delimited`): one value that is not a number among thousands of numbers
makes the column text, and the dataset is created so without a word. When an ingest creates a
dataset, the pipeline looks again at those same rows, as text: a text column whose non-null
values are numbers (or dates and times) in at least :data:`THRESHOLD` of the rows, but not in
all, is reported as a :class:`SchemaWarning` naming the type the other values have, how many
have it, and the first line whose value does not. The share is measured over the inference
sample only (about the first MiB of rows), because that is what decided the type: a value
further on that does not fit an inferred type is a bad row, not a reason to make it text.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from colonnade.errors import SchemaError
from colonnade.schema.types import parse_type, type_name

#: The share of a text column's values that must look typed for the column to be reported.
THRESHOLD = 0.99

_NUMBER = r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$"
_TEMPORAL = (r"^[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[ T][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]+)?)?"
             r"(?:Z|[+-][0-9]{2}(?::?[0-9]{2})?)?)?$")


@dataclass(frozen=True)
class SchemaWarning:
    """A column inferred as text although nearly all its values in the sample are typed."""

    path: str  # the file the types were inferred from
    column: str
    type: str  # the type the other values have, as a schema file names it (int64, date32...)
    share: float  # of the column's non-null values in the sample that have that type
    values: int  # non-null values of the column in the sample
    rows: int  # rows in the sample (the first rows of the file)
    line: int  # the first line whose value does not have the type
    value: str  # that value

    @property
    def matching(self) -> int:
        """How many of the sample's values have the type."""
        return round(self.share * self.values)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def storable_type(t: pa.DataType) -> pa.DataType:
    """An inferred type the store can keep, else string (null, binary and time columns)."""
    if pa.types.is_null(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return pa.string()
    try:
        return t if parse_type(type_name(t)) == t else pa.string()
    except SchemaError:
        return pa.string()


def typed_as_text(path: str, sample: pa.Table, columns: list[str],
                  lines: list[int]) -> list[SchemaWarning]:
    """Warnings for the ``columns`` of ``sample`` (every column read as text) whose values
    nearly all have a type; ``lines[i]`` is the line row ``i`` of the sample starts on."""
    warnings = []
    for name in columns:
        values = sample.column(name)
        present = len(values) - values.null_count
        if not present:
            continue
        for pattern in (_NUMBER, _TEMPORAL):
            fits = pc.match_substring_regex(values, pattern)
            hits = int(pc.sum(fits).as_py() or 0)
            if hits == present or hits < THRESHOLD * present:
                continue
            inferred = _inferred(pc.filter(values, fits))
            if inferred is None:
                continue
            first = int(pc.index(fits, pa.scalar(False)).as_py())
            warnings.append(SchemaWarning(path, name, type_name(inferred), hits / present,
                                          present, sample.num_rows, lines[first],
                                          str(values[first].as_py())))
            break
    return warnings


def _inferred(values: pa.ChunkedArray) -> pa.DataType | None:
    """The type pyarrow infers for these values (which hold no delimiter, quote or line
    break), if the store keeps it and it is not text."""
    text = ("v\n" + "\n".join(values.to_pylist()) + "\n").encode()
    table = pacsv.read_csv(pa.BufferReader(text), read_options=pacsv.ReadOptions(
        use_threads=False, block_size=len(text) + 1))
    t = storable_type(table.schema.field(0).type)
    return None if pa.types.is_string(t) else t
