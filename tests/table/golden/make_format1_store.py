"""Writes ``commit-format-1.db``: a store whose commit log is in commit format 1 (kept to prove
that later builds read it). Run once with the build that wrote format 1; kept for the record.

    python tests/table/golden/make_format1_store.py tests/table/golden/commit-format-1.db
"""

from __future__ import annotations

import datetime as dt
import sys

import pyarrow as pa

import colonnade

path = sys.argv[1]
with colonnade.connect(path) as store:
    ds = store.create_dataset("events", pa.schema([("id", pa.int64()), ("cat", pa.string()),
                                                   ("day", pa.date32())]), partition_by="cat",
                              segment_rows=2)
    ds.append(pa.table({"id": [1, 2, 3], "cat": ["a", "b", "a"],
                        "day": [dt.date(2024, 1, d) for d in (1, 2, 3)]}), source="golden:first")
    ds.append(pa.table({"id": [4, 5], "cat": ["b", "c"], "day": [dt.date(2024, 2, 1), None]}))
    ds.append(pa.table({"id": [6], "cat": ["a"], "day": [dt.date(2024, 3, 1)], "score": [0.5]}),
              schema_mode="merge")
    store.dataset("events").overwrite(pa.table({"id": [7, 8], "cat": ["z", "z"],
                                                 "day": [dt.date(2024, 4, 1)] * 2,
                                                 "score": [1.5, None]}))
