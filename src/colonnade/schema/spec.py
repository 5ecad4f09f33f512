"""DatasetSpec: a dataset's schema, partition spec, sort key and write settings, as JSON."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import quote

import pyarrow as pa

from colonnade.errors import SpecError
from colonnade.schema.transforms import (
    Transform,
    parse_partition_spec,
    parse_transform,
    split_top_level,
)
from colonnade.schema.types import (
    check_storable,
    logical_schema,
    schema_from_json,
    schema_to_json,
    type_name,
)

SPEC_FORMAT_VERSION = 1
_NULL_KEY = "__null__"


def _is_call(text: str) -> bool:
    return "(" in text and text.rstrip().endswith(")")


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    schema: pa.Schema
    partition_by: tuple[Transform, ...] = ()
    sort_by: tuple[str, ...] = ()
    segment_rows: int = 65_536
    compression: str = "zstd"
    created: float = field(default=0.0, compare=False)

    def __post_init__(self) -> None:
        names = set(self.schema.names)
        if len(names) != len(self.schema.names):
            raise SpecError(f"dataset {self.name!r}: duplicate column names")
        for t in self.partition_by:
            for source in t.sources:
                if source not in names:
                    raise SpecError(f"partition column {source!r} is not in the schema of {self.name!r}")
                t.check_type(self.schema.field(source).type)
        for key in self.sort_keys():
            for source in [key] if isinstance(key, str) else key.sources:
                if source not in names:
                    raise SpecError(f"sort column {source!r} is not in the schema of {self.name!r}")
            if not isinstance(key, str):
                for source in key.sources:
                    key.check_type(self.schema.field(source).type)

    def sort_keys(self) -> list[str | Transform]:
        """The sort key: column names, and curve expressions (``hilbert(lat, lon, 16)``) for
        entries that aren't a column's name."""
        names = set(self.schema.names)
        return [c if c in names or not _is_call(c) else parse_transform(c) for c in self.sort_by]

    @classmethod
    def create(cls, name: str, schema: pa.Schema, partition_by: str | list[str] | None = None,
               sort_by: str | list[str] | None = None, **settings: Any) -> DatasetSpec:
        if isinstance(partition_by, str):
            transforms = parse_partition_spec(partition_by)
        else:
            transforms = [parse_transform(p) for p in (partition_by or [])]
        if isinstance(sort_by, str):
            sort = split_top_level(sort_by)
        else:
            sort = list(sort_by or [])
        names = set(schema.names)
        # a curve entry is stored as the transform writes itself (one spelling per key)
        sort = [c if c in names or not _is_call(c) else str(parse_transform(c)) for c in sort]
        check_storable(schema, name)
        return cls(name, logical_schema(schema), tuple(transforms), tuple(sort),
                   **{k: v for k, v in settings.items() if v is not None})

    def differences(self, asked: DatasetSpec, fields: tuple[str, ...] = (
            "schema", "partition_by", "sort_by", "segment_rows", "compression")) -> list[str]:
        """How ``asked`` differs from this spec in ``fields``, one phrase each, e.g.
        ``partition by 'region' (asked for 'day(ts)')``; empty when they agree."""
        def text(spec: DatasetSpec, name: str) -> str:
            value = getattr(spec, name)
            if name == "schema":
                return ", ".join(f"{f.name}: {type_name(f.type)}" for f in value)
            if name in ("partition_by", "sort_by"):
                return ", ".join(str(v) for v in value) or "(none)"
            return str(value)

        out = []
        for name in fields:
            mine, theirs = text(self, name), text(asked, name)
            if mine != theirs:
                out.append(f"{name.replace('_', ' ')} {mine!r} (asked for {theirs!r})")
        return out

    def with_schema(self, schema: pa.Schema) -> DatasetSpec:
        return replace(self, schema=logical_schema(schema))

    def to_json(self) -> str:
        return json.dumps({
            "format": SPEC_FORMAT_VERSION,
            "name": self.name,
            "schema": schema_to_json(self.schema),
            "partition_by": [str(t) for t in self.partition_by],
            "sort_by": list(self.sort_by),
            "segment_rows": self.segment_rows,
            "compression": self.compression,
            "created": self.created,
        })

    @classmethod
    def from_json(cls, text: str) -> DatasetSpec:
        value = json.loads(text)
        if value.get("format", 0) > SPEC_FORMAT_VERSION:
            raise SpecError(f"dataset spec format {value['format']} is newer than this build reads")
        return cls(value["name"], schema_from_json(value["schema"]),
                   tuple(parse_transform(t) for t in value["partition_by"]),
                   tuple(value["sort_by"]), int(value["segment_rows"]), value["compression"],
                   float(value.get("created", 0.0)))

    def partition_key(self, values: tuple[Any, ...]) -> str:
        """The text key of a partition, e.g. ``MonthYear=198012`` (empty when unpartitioned)."""
        parts = []
        for t, v in zip(self.partition_by, values, strict=True):
            text = _NULL_KEY if v is None else quote(str(v), safe="")
            if text == _NULL_KEY and v is not None:
                text = quote(_NULL_KEY, safe="").replace("_", "%5F")  # the string "__null__" is not NULL
            parts.append(f"{t.field_name}={text}")
        return "/".join(parts)
