"""What a Spark read does on our side without Spark: the helper process's pinned snapshots
(kept per dataset and version, never served for another dataset of the same name or for an
expired version) and the aggregations its tasks compute, on both stores."""

from __future__ import annotations

import pyarrow as pa
import pytest

from colonnade.errors import VersionNotFoundError
from colonnade.spark import aggregates
from colonnade.spark.reading import SegmentGroup, pinned, plan_groups
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


def test_a_task_s_aggregation_merges_runs_and_groups_dictionaries_by_their_indices(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Segments of 50 rows, runs of 120: each run spans segments with their own dictionaries
    (some keys plain, as a segment of distinct values is stored), and runs are merged."""
    monkeypatch.setattr(aggregates, "RUN_ROWS", 120)
    keys = [None if i % 17 == 0 else f"key{(i * 7) % 9}" for i in range(1000)]
    keys[300:350] = [f"unique{i}" for i in range(50)]  # a segment of distinct strings
    values = [None if i % 11 == 0 else i - 400 for i in range(1000)]
    ds = store.create_dataset("g", SCHEMA, segment_rows=50)
    ds.append(pa.table({"k": keys, "v": values}, schema=SCHEMA))
    stored, snapshot, schema = pinned(store, "g", None)
    groups = plan_groups(store, stored, snapshot.version, ["k", "v"], None, 1 << 30, 1)
    assert len(groups) == 1 and len(groups[0].entries) == 20
    aggregation = {"group_by": ["k"], "aggregates": [
        {"fn": "countstar"}, {"fn": "count", "col": "v"}, {"fn": "sum", "col": "v"}, {"fn": "min", "col": "v"},
        {"fn": "max", "col": "k"}]}
    got = aggregates.aggregate_group(store, stored, schema, aggregation, None, groups[0])
    assert got.schema.types == [pa.string(), pa.int64(), pa.int64(), pa.int64(), pa.int64(), pa.string()]
    want = store.sql("SELECT k, count(*), count(v), sum(v)::BIGINT, min(v), max(k) FROM g GROUP BY k")
    assert sorted(got.to_pylist(), key=repr) == sorted(
        ({"k": r[0], **{f"agg_{i}": x for i, x in enumerate(r[1:], 1)}} for r in (tuple(d.values()) for d in want.to_pylist())),
        key=repr)
    no_rows = aggregates.aggregate_group(store, stored, schema, {"group_by": [], "aggregates": aggregation["aggregates"]},
                                         None, SegmentGroup((), None, 0))
    assert no_rows.to_pylist() == [{"agg_1": 0, "agg_2": 0, "agg_3": None, "agg_4": None, "agg_5": None}]


def test_a_sum_beyond_int64_fails_with_one_line(store: Store) -> None:
    ds = store.create_dataset("big", SCHEMA)
    ds.append(pa.table({"k": ["a", "a"], "v": [2**62, 2**62]}, schema=SCHEMA))
    stored, snapshot, schema = pinned(store, "big", None)
    group = plan_groups(store, stored, snapshot.version, ["v"], None, 1 << 30, 1)[0]
    with pytest.raises(Exception, match="aggregate out of range"):
        aggregates.aggregate_group(store, stored, schema, {"group_by": [], "aggregates": [{"fn": "sum", "col": "v"}]},
                                   None, group)
