"""Retention by time: a dataset property that says how long rows are kept, by a time column.

``set_retention(ds, "90d", on="day")`` commits the property (``set_properties``: schema changes
and properties are commits too); :func:`apply_retention` deletes the rows whose time column is
older than ``now - retention`` through :func:`colonnade.table.deletion.delete` (so partitions
wholly older go without reading their data when the dataset is partitioned by that column).
Every compaction runs it first; ``expire`` may run it too. A delete that loses to a concurrent
commit of the partitions it read (a stream appending old rows) is tried again on the new state.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from colonnade.config import parse_duration
from colonnade.errors import CommitConflictError, SchemaError
from colonnade.sqlnames import quoted
from colonnade.table.commits import Commit, SetProperties, Snapshot

if TYPE_CHECKING:
    from colonnade.table.dataset import CommitResult, Dataset
    from colonnade.table.deletion import DeleteResult

#: The property key (its value: {"column": ..., "duration": "90d", "seconds": ...}, or None).
RETENTION = "retention"
#: Times a retention delete is tried again after losing to a concurrent commit.
RETRIES = 3


@dataclass(frozen=True)
class Retention:
    column: str
    duration: str
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {"column": self.column, "duration": self.duration, "seconds": self.seconds}


def retention_of(snapshot: Snapshot) -> Retention | None:
    """The retention set as of ``snapshot``, if any."""
    value = snapshot.properties.get(RETENTION)
    if not isinstance(value, dict):
        return None
    return Retention(str(value["column"]), str(value["duration"]), float(value["seconds"]))


def set_retention(ds: Dataset, retain: str | None, on: str | None = None) -> CommitResult:
    """Keep rows for ``retain`` (``90d``, ``12h``...) by time column ``on`` (a date or timestamp
    column of the dataset), or no longer limit it (``retain`` None or ``"none"``): one commit."""
    snapshot = ds.snapshot()
    if retain is None or retain.strip().lower() == "none":
        value: dict[str, Any] | None = None
    else:
        seconds = parse_duration(retain)
        schema = ds.schema_at(snapshot)
        if on is None:
            raise SchemaError(f"dataset {ds.name!r}: a retention needs the time column it is measured on")
        if on not in schema.names:
            raise SchemaError(f"dataset {ds.name!r} has no column {on!r}")
        type_ = schema.field(on).type
        if not (pa.types.is_date(type_) or pa.types.is_timestamp(type_)):
            raise SchemaError(f"retention column {on!r} of dataset {ds.name!r} is {type_}, "
                              "not a date or timestamp")
        value = Retention(on, retain.strip(), seconds).to_dict()
    commit = Commit.new("set_properties", info={RETENTION: value})
    return ds.commit(commit.with_actions(SetProperties({RETENTION: value})), reads=ds.reads(snapshot))


def cutoff_predicate(retention: Retention, type_: pa.DataType, now: float) -> str:
    """The SQL predicate of the rows older than ``now - retention``."""
    cutoff = dt.datetime.fromtimestamp(now - retention.seconds, tz=dt.UTC)
    column = quoted(retention.column)
    if pa.types.is_date(type_):
        # a day is older than the cutoff when all of it is: it ended by the cutoff's day
        return f"{column} < DATE '{cutoff.date().isoformat()}'"
    if pa.types.is_timestamp(type_) and type_.tz is not None:
        return f"{column} < TIMESTAMPTZ '{cutoff.isoformat()}'"
    return f"{column} < TIMESTAMP '{cutoff.replace(tzinfo=None).isoformat()}'"


def apply_retention(ds: Dataset, now: float | dt.datetime | None = None) -> DeleteResult | None:
    """Delete the rows older than the dataset's retention (None when it has none)."""
    from colonnade.table.deletion import delete

    retention = retention_of(ds.snapshot())
    if retention is None:
        return None
    moment = time.time() if now is None else now.timestamp() if isinstance(now, dt.datetime) else float(now)
    for attempt in range(RETRIES + 1):
        snapshot = ds.snapshot()
        schema = ds.schema_at(snapshot)
        if retention.column not in schema.names:
            raise SchemaError(f"retention column {retention.column!r} is not in dataset {ds.name!r}")
        where = cutoff_predicate(retention, schema.field(retention.column).type, moment)
        try:
            return delete(ds, where, info={RETENTION: retention.duration})
        except CommitConflictError:
            if attempt == RETRIES:
                raise
    return None
