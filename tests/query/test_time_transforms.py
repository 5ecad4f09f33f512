"""year() and hour() partitions prune like month() and day(): answers equal DuckDB's over the
same rows, and a range scans only the partitions it can match."""

from __future__ import annotations

import datetime as dt

import duckdb
import pyarrow as pa
import pytest

from colonnade.store import Store

START = dt.datetime(2021, 12, 31, 22, 0)


def rows() -> pa.Table:
    ts = [START + dt.timedelta(minutes=37 * i) for i in range(400)]  # ~10 days, 2 years
    return pa.table({"id": list(range(400)), "ts": pa.array(ts, pa.timestamp("us"))})


@pytest.mark.parametrize(("spec", "query", "partitions"), [
    ("year(ts)", "SELECT count(*) AS n FROM t WHERE ts >= TIMESTAMP '2022-01-01'", 1),
    ("year(ts)", "SELECT count(*) AS n FROM t WHERE ts < TIMESTAMP '2022-01-01'", 1),
    ("hour(ts)", "SELECT count(*) AS n, sum(id) AS s FROM t WHERE ts >= TIMESTAMP '2022-01-03 05:00' "
                 "AND ts < TIMESTAMP '2022-01-03 08:00'", 3),
    ("hour(ts)", "SELECT id FROM t WHERE ts = TIMESTAMP '2022-01-01 00:15:00' ORDER BY id", 1),
])
def test_year_and_hour_partitions_prune(store: Store, spec: str, query: str, partitions: int) -> None:
    data = rows()
    store.create_dataset("t", data.schema, partition_by=spec).append(data)
    con = duckdb.connect()
    con.register("t", data)
    assert store.sql(query).to_pylist() == con.sql(query).to_arrow_table().to_pylist()
    totals = store.explain(query).totals()
    assert totals["partitions_scanned"] == partitions, totals
    assert totals["partitions_total"] > partitions
