"""Three nodes, replication 3, QUORUM: one node down is invisible to users; two down fail fast
and commit nothing; after a restart everything is readable."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
import pytest

import colonnade
from colonnade.cluster.cassandra import LocalCluster
from colonnade.errors import StoreError, UnavailableError

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

OFFSET = 10  # nodes on 127.0.0.11-13, beside any development node on 127.0.0.1


def _rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "city": pa.array([["Lyon", "Nantes", "Paris", "Lille"][i % 4] for i in ids]),
        "fare": pa.array([float(i % 97) / 4 for i in ids]),
    })


@pytest.fixture(scope="module")
def cluster() -> LocalCluster:
    directory = Path(os.environ.get("COLONNADE_TEST_CLUSTER_DIR", Path.home() / ".cache/colonnade/test-cluster3"))
    c = LocalCluster(directory=directory, nodes=3, heap="768M", address_offset=OFFSET)
    c.stop()
    c.clear()
    try:
        c.start()
        yield c
    finally:  # also when a node fails to start: leave none running
        c.stop()


def _answers(store: colonnade.Store) -> list[tuple[object, ...]]:
    t = store.sql("SELECT city, count(*) AS n, sum(fare) AS s FROM trips GROUP BY city ORDER BY city")
    return [tuple(r.values()) for r in t.to_pylist()]


def test_quorum_survives_one_node_and_fails_cleanly_without_two(cluster: LocalCluster) -> None:
    hosts = ",".join(cluster.contact_points)
    uri = f"cassandra://{hosts}/multinode?replication=3&consistency=QUORUM&request_timeout=10"
    store = colonnade.connect(uri)
    try:
        first = _rows(0, 20_000)
        ds = store.create_dataset("trips", first.schema, partition_by="city", segment_rows=4096)
        ds.append(first)
        expected_one = _answers(store)

        # one node down: ingest and queries succeed, answers unchanged
        cluster.stop_node(3)
        assert _answers(store) == expected_one
        second = _rows(20_000, 10_000)
        result = ds.append(second)
        assert result.version == 2
        both = pa.concat_tables([first, second])
        expected_two = _answers(store)
        assert sum(r[1] for r in expected_two) == both.num_rows

        # two nodes down: the append fails within a bound, naming the consistency level
        cluster.stop_node(2)
        start = time.monotonic()
        with pytest.raises(StoreError) as failure:
            ds.append(_rows(30_000, 5_000))
        elapsed = time.monotonic() - start
        assert elapsed < 120, f"the failing ingest took {elapsed:.0f} s"
        message = str(failure.value)
        assert "QUORUM" in message, message
        if isinstance(failure.value, UnavailableError):
            assert failure.value.required == 2 and failure.value.alive == 1
            assert "2 required" in message and "1 alive" in message
    finally:
        store.close()

    # after restarting, everything committed is readable, and the failed append left nothing
    cluster.start_node(2)
    cluster.start_node(3)
    store = colonnade.connect(uri)
    try:
        ds = store.dataset("trips")
        assert ds.version == 2
        assert _answers(store) == expected_two
        checked, problems = ds.verify()
        assert checked > 0 and problems == []
    finally:
        store.drop_dataset("trips")
        store.close()
