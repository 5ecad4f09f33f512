"""Dataset names and dataset creation, through the real console script on both stores.

* Names that differ only in case are one name, as in SQL: a second one is refused, and every
  command resolves a name the way SQL does.
* A dataset is created by its first commit: an ingest that commits nothing leaves nothing, and
  options that differ from an existing dataset's are refused instead of ignored (also for the
  loser of a race to create it).
* Commands that destroy data ask on a terminal and need ``--yes`` without one; the demo never
  replaces a dataset it did not make; dropping gives the embedded store's space back.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pyarrow as pa
import pytest
from reliability_helpers import Run, run_cli, write_events

import colonnade
from colonnade.errors import DatasetExistsError, DatasetNotFoundError, SchemaError
from colonnade.store import Store


def cli(uri: str, *args: str, stdin: str | None = None) -> Run:
    return run_cli(["--store", uri, *args], stdin=stdin)


def count(uri: str, dataset: str) -> str:
    run = cli(uri, "sql", f'SELECT count(*) AS n FROM "{dataset}"', "--format", "csv")
    assert run.status == 0, run
    return run.stdout


def test_names_that_differ_only_in_case_are_one_name(module_store: Store, store_uri: str,
                                                      name: str, tmp_path: Path) -> None:
    lower, upper = f"{name}_weird", f"{name}_WEIRD"
    assert cli(store_uri, "ingest", lower, str(write_events(tmp_path / "a.csv", range(3)))).status == 0
    refused = cli(store_uri, "ingest", upper, str(write_events(tmp_path / "b.csv", range(10, 15))))
    assert refused.status == 1 and refused.stdout == ""
    assert refused.stderr == (f"error: dataset {upper!r} would collide with dataset {lower!r}: names "
                              f"that differ only in case are one name in SQL (to use it, say {lower!r})\n")
    assert module_store.datasets().count(lower) == 1 and upper not in module_store.datasets()
    assert count(store_uri, upper) == "n\n3\n"  # SQL folds the name: the one dataset

    # every command resolves a name as SQL does
    mixed = f"{name}_Mixed"
    module_store.create_dataset(mixed, pa.schema([("id", pa.int64())])).append(pa.table({"id": [7]}))
    described = cli(store_uri, "describe", mixed.lower(), "--json")
    assert described.status == 0 and f'"name": "{mixed}"' in described.stdout, described
    assert cli(store_uri, "verify", mixed.upper()).status == 0
    assert module_store.dataset(mixed.lower()).name == mixed and mixed.upper() in module_store
    with pytest.raises(DatasetExistsError) as info:
        module_store.create_dataset(mixed.lower(), pa.schema([("id", pa.int64())]))
    assert info.value.existing == mixed


def test_two_stores_racing_to_create_names_that_differ_in_case(module_store: Store, name: str) -> None:
    """Two clients (separate connections) creating `Name` and `NAME`: exactly one exists."""
    other = colonnade.connect(module_store.uri) if module_store.uri.startswith("cassandra") else \
        colonnade.connect(module_store.chunk_store.path)  # type: ignore[attr-defined]
    try:
        first = other.new_dataset(f"{name}_Race", pa.schema([("id", pa.int64())]))
        second = module_store.new_dataset(f"{name}_RACE", pa.schema([("id", pa.int64())]))
        assert first.append(pa.table({"id": [1]})).version == 1
        with pytest.raises(DatasetExistsError):
            second.append(pa.table({"id": [2]}))
        assert [n for n in module_store.datasets() if n.lower() == f"{name}_race"] == [f"{name}_Race"]
    finally:
        other.close()


def test_names_colliding_in_an_older_store_never_answer_for_each_other(tmp_path: Path) -> None:
    """Stores written before names were case-insensitive may hold `weird` and `WEIRD`: SQL must
    not silently read one for the other (the embedded store, written behind Colonnade's back)."""
    path = tmp_path / "old.db"
    with colonnade.connect(str(path)) as store:
        store.create_dataset("weird", pa.schema([("id", pa.int64())])).append(pa.table({"id": [1, 2]}))
        store.create_dataset("other", pa.schema([("id", pa.int64())])).append(pa.table({"id": [9]}))
    con = sqlite3.connect(path)
    spec = con.execute("SELECT spec FROM datasets WHERE name = 'other'").fetchone()[0]
    with con:
        con.execute("UPDATE datasets SET name = 'WEIRD', spec = ? WHERE name = 'other'",
                    (spec.replace('"other"', '"WEIRD"'),))
        for table in ("commits", "segments", "chunks"):
            con.execute(f"UPDATE {table} SET dataset = 'WEIRD' WHERE dataset = 'other'")
    con.close()
    uri = str(path)
    for spelling in ("weird", "WEIRD", "Weird"):
        run = cli(uri, "sql", f'SELECT count(*) FROM "{spelling}"')
        assert run.status == 1 and run.stdout == "" and "Traceback" not in run.stderr, run
    ambiguous = cli(uri, "describe", "Weird")
    assert ambiguous.status == 1 and "ambiguous" in ambiguous.stderr and "'WEIRD'" in ambiguous.stderr
    assert cli(uri, "describe", "WEIRD").status == 0  # the exact name still names one


def test_a_failed_first_ingest_creates_no_dataset(module_store: Store, store_uri: str, name: str,
                                                  tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("id,v\n1,2.5\n2,x\n")
    bad_schema = tmp_path / "s.txt"
    bad_schema.write_text("id: int64\nv: float64\n")
    failed = cli(store_uri, "ingest", name, str(bad), "--schema", str(bad_schema), "--partition-by", "id")
    assert failed.status == 1 and f"{bad}:3: column v" in failed.stderr, failed
    assert name not in module_store
    listed = cli(store_uri, "datasets", "--json")
    assert listed.status == 0 and f'"{name}"' not in listed.stdout
    # the same name then takes whatever options the first successful ingest gives it
    good = write_events(tmp_path / "good.csv", range(4))
    assert cli(store_uri, "ingest", name, str(good), "--partition-by", "cat").status == 0
    assert [str(t) for t in module_store.dataset(name).spec.partition_by] == ["identity(cat)"]


def test_options_that_differ_from_the_dataset_are_refused(module_store: Store, store_uri: str,
                                                          name: str, tmp_path: Path) -> None:
    first = write_events(tmp_path / "a.csv", range(6))
    assert cli(store_uri, "ingest", name, str(first), "--partition-by", "cat", "--sort-by", "id",
               "--segment-rows", "1000").status == 0
    more = write_events(tmp_path / "b.csv", range(6, 9))
    for options, phrase in ((["--partition-by", "day"], "partition by 'identity(cat)' (asked for 'identity(day)')"),
                            (["--sort-by", "v"], "sort by 'id' (asked for 'v')"),
                            (["--segment-rows", "10"], "segment rows '1000' (asked for '10')")):
        refused = cli(store_uri, "ingest", name, str(more), *options)
        assert refused.status == 1 and refused.stdout == "", refused
        assert refused.stderr.count("\n") == 1 and phrase in refused.stderr, refused.stderr
    assert module_store.dataset(name).version == 1
    same = cli(store_uri, "ingest", name, str(more), "--partition-by", "cat", "--sort-by", "id")
    assert same.status == 0 and module_store.dataset(name).version == 2


def test_the_loser_of_a_race_to_create_commits_only_into_the_same_spec(module_store: Store,
                                                                       name: str) -> None:
    schema = pa.schema([("id", pa.int64()), ("cat", pa.string())])
    winner = module_store.new_dataset(name, schema, partition_by="cat")
    same = module_store.new_dataset(name, schema, partition_by="cat")
    other = module_store.new_dataset(name, schema, partition_by="id")
    rows = pa.table({"id": [1, 2], "cat": ["a", "b"]})
    assert name not in module_store  # nothing is recorded before a commit
    assert winner.append(rows).version == 1
    with pytest.raises(SchemaError, match="created meanwhile by another writer with partition by"):
        other.append(pa.table({"id": [3], "cat": ["c"]}))
    assert same.append(pa.table({"id": [4], "cat": ["d"]})).version == 2
    assert sorted(module_store.dataset(name).to_arrow().column("id").to_pylist()) == [1, 2, 4]


def test_create_dataset_get_or_create(module_store: Store, name: str) -> None:
    schema = pa.schema([("id", pa.int64()), ("cat", pa.string())])
    made = module_store.create_dataset(name, schema, partition_by="cat", segment_rows=100)
    made.append(pa.table({"id": [1], "cat": ["a"]}))
    again = module_store.create_dataset(name, schema, partition_by="cat", exist_ok=True)
    assert again.name == name and again.version == 1 and again.spec.segment_rows == 100
    with pytest.raises(DatasetExistsError):
        module_store.create_dataset(name, schema, partition_by="cat")
    with pytest.raises(SchemaError, match="partition by"):
        module_store.create_dataset(name, schema, partition_by="id", exist_ok=True)
    with pytest.raises(SchemaError, match="schema"):
        module_store.create_dataset(name, pa.schema([("id", pa.int32()), ("cat", pa.string())]),
                                    partition_by="cat", exist_ok=True)


def test_drop_without_a_terminal_needs_yes(module_store: Store, store_uri: str, name: str,
                                           tmp_path: Path) -> None:
    assert cli(store_uri, "ingest", name, str(write_events(tmp_path / "a.csv", range(5)))).status == 0
    for stdin in ("n\n", "y\n", None):  # a pipe saying no, a pipe saying yes, /dev/null
        refused = cli(store_uri, "drop", name, stdin=stdin)
        assert refused.status == 1 and refused.stdout == "", refused
        assert refused.stderr == (f"error: not confirmed: drop dataset {name!r} (5 rows) from "
                                  f"{store_uri} needs --yes when stdin is not a terminal\n")
        assert name in module_store
    dropped = cli(store_uri, "drop", name, "--yes")
    assert dropped.status == 0 and dropped.stdout.startswith(f"dropped dataset {name!r}"), dropped
    assert name not in module_store


def test_drop_and_vacuum_give_the_space_back(tmp_path: Path) -> None:
    uri = str(tmp_path / "s.db")
    big = tmp_path / "big.csv"
    big.write_text("id,note\n" + "".join(f"{i},{i * 7919:x}{'q' * (i % 50)}{i ** 3}\n" for i in range(150_000)))
    assert cli(uri, "ingest", "big", str(big)).status == 0
    assert cli(uri, "ingest", "small", str(write_events(tmp_path / "a.csv", range(3)))).status == 0
    size = Path(uri).stat().st_size
    assert size > 1_000_000
    dropped = cli(uri, "drop", "big", "--yes")
    assert dropped.status == 0 and "freed " in dropped.stdout, dropped
    assert Path(uri).stat().st_size < size / 5, "the file shrinks when a dataset is dropped"
    vacuumed = cli(uri, "vacuum")  # every dataset
    assert vacuumed.status == 0 and "removed 0 orphan segments of dataset 'small'" in vacuumed.stdout


def test_a_store_of_an_older_release_is_converted_to_give_space_back(tmp_path: Path) -> None:
    """Files made before incremental vacuum (auto_vacuum=NONE) are converted by one VACUUM."""
    path = tmp_path / "old.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE datasets (name TEXT PRIMARY KEY, spec TEXT NOT NULL, created REAL NOT NULL)")
    con.close()
    with colonnade.connect(str(path)) as store:
        ds = store.create_dataset("t", pa.schema([("s", pa.string())]))
        ds.append(pa.table({"s": [f"{i:x}{i ** 5}" * 3 for i in range(100_000)]}))
    assert sqlite3.connect(path).execute("PRAGMA auto_vacuum").fetchone()[0] == 0
    size = path.stat().st_size
    assert cli(str(path), "drop", "t", "--yes").status == 0
    assert path.stat().st_size < size / 5
    assert sqlite3.connect(path).execute("PRAGMA auto_vacuum").fetchone()[0] == 2


def test_the_demo_never_replaces_a_dataset_it_did_not_make(tmp_path: Path) -> None:
    uri = str(tmp_path / "s.db")
    assert cli(uri, "ingest", "gdelt", str(write_events(tmp_path / "a.csv", range(5)))).status == 0
    refused = cli(uri, "demo", "--rows", "500")
    assert refused.status == 1 and "did not create" in refused.stderr, refused
    with colonnade.connect(uri) as store:
        assert store.dataset("gdelt").snapshot().rows == 5
        store.drop_dataset("gdelt")
        store.create_dataset("gdelt", pa.schema([("id", pa.int64())]))  # empty, but someone's
    assert cli(uri, "demo", "--rows", "500").status == 1
    with colonnade.connect(uri) as store:
        store.drop_dataset("gdelt")
    for _ in range(2):  # the demo replaces its own dataset, run after run
        assert cli(uri, "demo", "--rows", "500").status == 0
    with colonnade.connect(uri) as store:
        assert store.dataset("gdelt").snapshot().rows == 500


def test_version_pins_name_datasets_as_sql_does(module_store: Store, name: str) -> None:
    ds = module_store.create_dataset(f"{name}_Pinned", pa.schema([("id", pa.int64())]))
    ds.append(pa.table({"id": [1]}))
    ds.append(pa.table({"id": [2]}))
    query = f"SELECT count(*) AS n FROM {name}_pinned"
    assert module_store.sql(query, versions={f"{name}_PINNED": 1}).to_pylist() == [{"n": 1}]
    with pytest.raises(DatasetNotFoundError):
        module_store.sql(query, versions={f"{name}_nowhere": 1})
