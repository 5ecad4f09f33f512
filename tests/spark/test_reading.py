"""What a Spark read does on our side without Spark: the helper process's pinned snapshots
(kept per dataset and version, never served for another dataset of the same name or for an
expired version), on both stores."""

from __future__ import annotations

import pyarrow as pa
import pytest

from colonnade.errors import VersionNotFoundError
from colonnade.spark.reading import pinned
from colonnade.store import Store

SCHEMA = pa.schema([("k", pa.string()), ("v", pa.int64())])


def test_a_pinned_snapshot_is_never_served_for_a_dataset_created_again_under_its_name(store: Store) -> None:
    store.create_dataset("d", SCHEMA).append(pa.table({"k": ["a", "b"], "v": [1, 2]}, schema=SCHEMA))
    assert pinned(store, "d", 1)[1].rows == 2
    assert pinned(store, "d", 1)[1].rows == 2  # kept
    store.drop_dataset("d")
    store.create_dataset("d", SCHEMA).append(pa.table({"k": ["c"], "v": [3]}, schema=SCHEMA))
    assert pinned(store, "d", 1)[1].rows == 1


def test_a_kept_snapshot_of_an_expired_version_is_refused(store: Store) -> None:
    ds = store.create_dataset("e", SCHEMA)
    for i in range(3):
        ds.append(pa.table({"k": ["a"], "v": [i]}, schema=SCHEMA))
    assert pinned(store, "e", 1)[1].rows == 1
    ds.expire(retain_last=1)
    with pytest.raises(VersionNotFoundError):
        pinned(store, "e", 1)
    assert pinned(store, "e", 3)[1].rows == 3
