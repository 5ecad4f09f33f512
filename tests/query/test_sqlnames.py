"""Names quoted into SQL text read back as themselves, whatever they hold."""

from __future__ import annotations

import duckdb
import pytest

from colonnade.sqlnames import quoted


@pytest.mark.parametrize("name", ["plain", "select", 'a"b', 'end"', "spaced name", "ünï", '""', "x;--"])
def test_a_quoted_name_reads_back_as_itself(name: str) -> None:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t ({quoted(name)} INTEGER)")
    con.execute(f"INSERT INTO t ({quoted(name)}) VALUES (7)")
    result = con.execute(f"SELECT {quoted(name)} FROM t")
    assert [d[0] for d in result.description] == [name]
    assert result.fetchall() == [(7,)]
