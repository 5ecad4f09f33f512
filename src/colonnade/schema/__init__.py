"""Dataset specs, partition transforms and the schema language."""

from colonnade.schema.spec import DatasetSpec
from colonnade.schema.transforms import (
           Bucket,
           Day,
           Identity,
           Month,
           Transform,
           Truncate,
           parse_transform,
)
from colonnade.schema.types import parse_schema_text, schema_text

__all__ = ["Bucket", "DatasetSpec", "Day", "Identity", "Month", "Transform", "Truncate",
           "parse_schema_text", "parse_transform", "schema_text"]
