"""The ``colonnade`` Spark data source against a real local Spark, on both stores: round trips,
pushdown seen in the segments a read plans, the study's queries answered as DuckDB answers
them, one commit per write whatever fails, and one-line errors at planning."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

import pyarrow as pa
import pytest

from colonnade.store import Store

ROWS = 12_000
NAMES = [f"ACTOR{i}" for i in range(30)]
SCHEMA = pa.schema([("MonthYear", pa.int32()), ("Actor1Name", pa.string()), ("AvgTone", pa.float64()),
                    ("NumArticles", pa.int64()), ("Day", pa.date32()), ("Code", pa.uint16())])
QUERIES = {
    "Q1": "SELECT count(NumArticles) AS n FROM gdelt",
    "Q2": "SELECT Actor1Name, avg(AvgTone) AS tone FROM gdelt GROUP BY Actor1Name "
          "ORDER BY tone DESC, Actor1Name LIMIT 10",
    "Q3": "SELECT avg(AvgTone) AS a, min(AvgTone) AS lo, max(AvgTone) AS hi FROM gdelt WHERE MonthYear = 198012",
}


def gdelt_rows(rows: int = ROWS, seed: int = 7) -> pa.Table:
    rng = random.Random(seed)
    return pa.table({
        "MonthYear": pa.array([198001 + i % 12 for i in range(rows)], pa.int32()),
        "Actor1Name": [None if rng.random() < 0.05 else rng.choice(NAMES) for _ in range(rows)],
        "AvgTone": [None if rng.random() < 0.02 else round(rng.uniform(-10, 10), 3) for _ in range(rows)],
        "NumArticles": [None if rng.random() < 0.03 else rng.randint(1, 500) for _ in range(rows)],
        "Day": [dt.date(1980, 1 + i % 12, 1 + i % 28) for i in range(rows)],
        "Code": pa.array([rng.randint(0, 60000) for _ in range(rows)], pa.uint16()),
    }, schema=SCHEMA)


@pytest.fixture(scope="module")
def gdelt(module_store: Store) -> Store:
    ds = module_store.create_dataset("gdelt", SCHEMA, partition_by="MonthYear", segment_rows=500)
    ds.append(gdelt_rows())
    return module_store


def load(spark: Any, store: Store, name: str = "gdelt", fmt: str = "colonnade", **options: str) -> Any:
    reader = spark.read.format(fmt).option("store", store.uri)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(name)


def rows_of(table: pa.Table) -> list[tuple[Any, ...]]:
    return [tuple(r.values()) for r in table.to_pylist()]


def spark_rows(df: Any) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in df.collect()]


def close(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> bool:
    return len(a) == len(b) and all(
        len(x) == len(y) and all(u == v or (isinstance(u, float) and v is not None and abs(u - v) < 1e-9)
                                 for u, v in zip(x, y, strict=True)) for x, y in zip(a, b, strict=True))


def test_every_row_and_type_reads_back_as_stored(spark: Any, gdelt: Store, fmt: str) -> None:
    df = load(spark, gdelt, fmt=fmt)
    assert [(f.name, f.dataType.simpleString()) for f in df.schema] == [
        ("MonthYear", "int"), ("Actor1Name", "string"), ("AvgTone", "double"), ("NumArticles", "bigint"),
        ("Day", "date"), ("Code", "int")]  # no unsigned types in Spark: uint16 is read as int
    got = sorted(spark_rows(df), key=repr)
    want = sorted(rows_of(gdelt.sql("SELECT * FROM gdelt")), key=repr)
    assert got == want


@pytest.mark.parametrize("query", sorted(QUERIES))
def test_the_study_queries_answer_as_duckdb_does(spark: Any, gdelt: Store, query: str, fmt: str) -> None:
    load(spark, gdelt, fmt=fmt).createOrReplaceTempView("gdelt")
    got = spark_rows(spark.sql(QUERIES[query]))
    want = rows_of(gdelt.sql(QUERIES[query]))
    assert close(got, want), (got, want)


@pytest.mark.parametrize("where", [
    "MonthYear = 198012",
    "MonthYear IN (198003, 198004) AND NumArticles > 400",
    "NOT (MonthYear IN (198001, 198002))",  # NULL semantics of NOT IN
    "NumArticles <=> 17 OR AvgTone IS NULL",  # not pushed: Spark evaluates the OR itself
    "Actor1Name LIKE 'ACTOR1%' AND NOT (Actor1Name LIKE '%5')",
    "Actor1Name IS NULL AND MonthYear >= 198010",
    "Day = DATE'1980-03-03'",
    "NOT (AvgTone > 0) AND Code < 1000",
])
def test_filters_pushed_or_not_select_the_rows_duckdb_selects(spark: Any, gdelt: Store, where: str, fmt: str) -> None:
    load(spark, gdelt, fmt=fmt).createOrReplaceTempView("gdelt")
    sql = f"SELECT MonthYear, Actor1Name, AvgTone, NumArticles, Day, Code FROM gdelt WHERE {where}"
    got = sorted(spark_rows(spark.sql(sql)), key=repr)
    want = sorted(rows_of(gdelt.sql(sql.replace("<=>", "IS NOT DISTINCT FROM"))), key=repr)
    assert got and got == want


def test_a_read_asks_the_store_for_the_columns_the_query_uses(spark: Any, gdelt: Store) -> None:
    df = load(spark, gdelt).where("MonthYear = 198012").select("AvgTone")
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert '"columns":["AvgTone"]' in plan and '"op":"eq","col":"MonthYear","value":198012' in plan
    assert "ColumnarToRow" in plan  # Spark takes the batches as column vectors
    assert sorted(map(tuple, df.collect()), key=repr) == sorted(
        ((r["AvgTone"],) for r in gdelt.sql("SELECT AvgTone FROM gdelt WHERE MonthYear = 198012").to_pylist()),
        key=repr)


def _helpers_of(pid: int) -> list[int]:
    """The reader's helper processes a process started."""
    from pathlib import Path

    found = []
    for proc in Path("/proc").iterdir():
        try:
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (proc / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and b"colonnade.spark.helper" in command:
            found.append(int(proc.name))
    return found


def test_one_helper_process_plans_and_reads_for_the_spark_jvm(spark: Any, gdelt: Store) -> None:
    """Planning (on the driver) and reading (in tasks) load the reader's classes through
    different class loaders; both use the one helper the JVM started."""
    df = load(spark, gdelt).where("MonthYear = 198012").select("AvgTone")
    assert len(df.collect()) == len(gdelt.sql("SELECT AvgTone FROM gdelt WHERE MonthYear = 198012"))
    jvm = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    assert len(_helpers_of(jvm)) == 1


def test_a_pushed_filter_prunes_the_segments_a_read_plans(spark: Any, gdelt: Store, fmt: str) -> None:
    """One input partition per segment (partitionBytes 1): the partitions Spark plans are the
    segments that survive partition and min/max pruning — the same ones a SQL scan reads."""
    df = load(spark, gdelt, fmt=fmt, partitionBytes="1")
    total = gdelt.dataset("gdelt").snapshot().segments
    assert df.rdd.getNumPartitions() == len(total) > 12
    one_month = df.where("MonthYear = 198012")
    expected = gdelt.explain("SELECT * FROM gdelt WHERE MonthYear = 198012").totals()["segments_scanned"]
    assert one_month.rdd.getNumPartitions() == expected == len(total) // 12
    # min/max pruning inside the partitions: no segment holds a NumArticles > 500
    from pyspark.sql.datasource import GreaterThan

    from colonnade.spark.source import ColonnadeDataSource

    reader = ColonnadeDataSource({"store": gdelt.uri, "path": "gdelt"}).reader(df.schema)
    assert list(reader.pushFilters([GreaterThan(("NumArticles",), 500)])) == []
    assert reader.partitions() == []
    assert df.where("NumArticles > 500").count() == 0


def test_a_read_is_pinned_to_one_version(spark: Any, store: Store, fmt: str) -> None:
    ds = store.create_dataset("pinned", pa.schema([("k", pa.int64())]))
    ds.append(pa.table({"k": list(range(100))}))
    ds.append(pa.table({"k": list(range(100, 150))}))
    first = load(spark, store, "pinned", fmt, version="1")
    latest = load(spark, store, "pinned", fmt)
    ds.append(pa.table({"k": list(range(150, 160))}))  # after load(): not seen by `latest`
    assert first.count() == 100
    assert latest.count() == 150
    assert load(spark, store, "pinned", fmt).count() == 160


def test_write_round_trip_append_and_overwrite(spark: Any, store: Store) -> None:
    df = spark.createDataFrame(gdelt_rows(3000).drop_columns(["Code"]).to_pandas())
    (df.write.format("colonnade").option("store", store.uri).option("partitionBy", "MonthYear")
     .option("sortBy", "Actor1Name").mode("append").save("copy"))
    ds = store.dataset("copy")
    assert [str(t) for t in ds.spec.partition_by] == ["identity(MonthYear)"] and ds.spec.sort_by == ("Actor1Name",)
    assert [c.kind for c in ds.history()] == ["append"]
    assert ds.history()[0].info["writer"] == "spark"
    assert store.sql("SELECT count(*) AS n FROM copy").to_pylist() == [{"n": 3000}]
    df.limit(10).write.format("colonnade").option("store", store.uri).mode("append").save("copy")
    assert store.sql("SELECT count(*) AS n FROM copy").to_pylist() == [{"n": 3010}]
    df.limit(7).write.format("colonnade").option("store", store.uri).mode("overwrite").save("copy")
    assert store.sql("SELECT count(*) AS n FROM copy").to_pylist() == [{"n": 7}]
    assert [c.kind for c in store.dataset("copy").history()] == ["append", "append", "overwrite"]
    back = sorted(spark_rows(load(spark, store, "copy")), key=repr)
    assert back == sorted(spark_rows(df.limit(7)), key=repr)


def test_merge_schema_adds_the_new_columns_in_the_same_commit(spark: Any, store: Store) -> None:
    store.create_dataset("wide", pa.schema([("k", pa.int64()), ("s", pa.string())])).append(
        pa.table({"k": [1, 2], "s": ["a", "b"]}))
    df = spark.createDataFrame([(3, 0.5)], "k long, extra double")
    with pytest.raises(Exception, match="does not match dataset 'wide'.*extra: double is not in the dataset"):
        df.write.format("colonnade").option("store", store.uri).mode("append").save("wide")
    df.write.format("colonnade").option("store", store.uri).option("mergeSchema", "true").mode("append").save("wide")
    got = store.sql("SELECT k, s, extra FROM wide ORDER BY k").to_pylist()
    assert got == [{"k": 1, "s": "a", "extra": None}, {"k": 2, "s": "b", "extra": None},
                   {"k": 3, "s": None, "extra": 0.5}]
    assert store.dataset("wide").version == 2


def _failing(partition: int, first_attempt_only: bool) -> Any:
    def fn(batches: Any) -> Any:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        yield from batches
        if ctx.partitionId() == partition and (ctx.attemptNumber() == 0 or not first_attempt_only):
            raise RuntimeError("injected task failure")
    return fn


def test_a_failing_task_commits_nothing(spark: Any, store: Store) -> None:
    ds = store.create_dataset("keep", pa.schema([("k", pa.int64())]))
    ds.append(pa.table({"k": [1, 2, 3]}))
    df = spark.range(0, 4000, numPartitions=4).withColumnRenamed("id", "k")
    broken = df.mapInArrow(_failing(2, first_attempt_only=False), df.schema)
    with pytest.raises(Exception, match="injected task failure"):
        broken.write.format("colonnade").option("store", store.uri).mode("append").save("keep")
    with pytest.raises(Exception, match="injected task failure"):
        broken.write.format("colonnade").option("store", store.uri).mode("overwrite").save("keep")
    with pytest.raises(Exception, match="injected task failure"):
        broken.write.format("colonnade").option("store", store.uri).mode("append").save("never_made")
    assert store.dataset("keep").version == 1
    assert store.sql("SELECT sum(k) AS s FROM keep").to_pylist() == [{"s": 6}]
    assert "never_made" not in store
    # the other tasks' segments were removed by the abort, or are orphans that vacuum removes
    live = store.dataset("keep").snapshot().segments
    store.dataset("keep").vacuum(grace_seconds=0)
    stored = store.chunk_store.get_segments("keep", sorted({s.partition for s in live}))
    assert sorted(r.segment for r in stored) == sorted(s.segment for s in live)


def test_a_retried_task_is_committed_once(spark: Any, store: Store) -> None:
    df = spark.range(0, 4000, numPartitions=4).withColumnRenamed("id", "k")
    flaky = df.mapInArrow(_failing(1, first_attempt_only=True), df.schema)
    flaky.write.format("colonnade").option("store", store.uri).mode("append").save("retried")
    got = store.sql("SELECT count(*) AS n, count(DISTINCT k) AS d, sum(k) AS s FROM retried").to_pylist()
    assert got == [{"n": 4000, "d": 4000, "s": sum(range(4000))}]
    assert store.dataset("retried").version == 1


def test_two_attempts_of_one_partition_are_not_both_committed(store: Store) -> None:
    """Speculation: two attempts of a partition both finish; the commit takes one and removes
    the other's segments."""
    from pyspark.sql.types import LongType, StructField, StructType

    from colonnade.spark.source import plan_write

    writer = plan_write(store.uri, "spec", {}, StructType([StructField("k", LongType())]), False)
    batch = pa.record_batch({"k": pa.array(range(10), pa.int64())})
    first, second = writer.write(iter([batch])), writer.write(iter([batch]))
    assert first.partition == second.partition
    writer.commit([first, second])
    assert store.sql("SELECT count(*) AS n FROM spec").to_pylist() == [{"n": 10}]
    assert store.dataset("spec").vacuum(grace_seconds=0).orphans == 0  # already removed


@pytest.mark.parametrize(("options", "name", "message"), [
    ({}, "missing", "dataset 'missing' does not exist"),
    ({"version": "99"}, "gdelt", "version 99"),
    ({"version": "x"}, "gdelt", "version must be a whole number, not 'x'"),
])
def test_bad_reads_fail_at_planning_with_one_line(spark: Any, gdelt: Store, options: dict[str, str],
                                                   name: str, message: str, fmt: str) -> None:
    jobs = spark.sparkContext.statusTracker().getJobIdsForGroup()
    with pytest.raises(Exception) as err:
        load(spark, gdelt, name, fmt, **options).collect()
    assert message in str(err.value)
    if fmt == "colonnade":  # the JVM reader's error is the message alone
        assert str(err.value).strip().splitlines()[0].endswith(message) or message in str(err.value).splitlines()[0]
        assert "Traceback" not in str(err.value)
    assert spark.sparkContext.statusTracker().getJobIdsForGroup() == jobs  # no task ran


def test_an_unknown_store_fails_at_planning(spark: Any, tmp_path: Any) -> None:
    with pytest.raises(Exception, match="unknown store scheme 'nosuch'|not a store"):
        spark.read.format("colonnade").option("store", "nosuch://x/y").load("gdelt")
    with pytest.raises(Exception, match=r"no store: pass \.option\(\"store\", URI\)"):
        spark.read.format("colonnade").load("gdelt")


def test_a_dataframe_of_another_schema_is_refused_before_any_task(spark: Any, gdelt: Store) -> None:
    df = spark.createDataFrame([(1, "x")], "MonthYear string, Other string")
    with pytest.raises(Exception) as err:
        df.write.format("colonnade").option("store", gdelt.uri).mode("append").save("gdelt")
    text = str(err.value)
    assert "the DataFrame does not match dataset 'gdelt'" in text
    assert "MonthYear: string can't be stored in a int32 column" in text
    assert "Other: string is not in the dataset" in text
    assert "AvgTone: float64 is missing from the DataFrame" in text
    assert gdelt.dataset("gdelt").version == 1


def test_a_corrupt_chunk_fails_the_read_naming_it(spark: Any, store: Store, raw_store: Any, fmt: str) -> None:
    ds = store.create_dataset("damaged", pa.schema([("k", pa.int64()), ("s", pa.string())]))
    ds.append(pa.table({"k": list(range(1000)), "s": [f"v{i}" for i in range(1000)]}))
    segment = ds.snapshot().segments[0]
    raw_store.flip_chunk_byte("damaged", segment, "k")
    with pytest.raises(Exception) as err:
        load(spark, store, "damaged", fmt).select("k").collect()
    assert "dataset 'damaged'" in str(err.value) and segment.segment in str(err.value)
    if fmt == "colonnade":  # the JVM reader reads only the column asked for
        assert load(spark, store, "damaged", fmt).select("s").count() == 1000


def test_a_plan_names_the_nodes_holding_each_group(store: Store) -> None:
    """Spark's preferred locations: on Cassandra, the replicas of the group's chunks."""
    from colonnade.spark.helper import answer
    from colonnade.spark.reading import SegmentGroup

    ds = store.create_dataset("placed", pa.schema([("p", pa.int64()), ("k", pa.int64())]), partition_by="p")
    ds.append(pa.table({"p": [i % 3 for i in range(300)], "k": list(range(300))}))
    reply = answer({"op": "plan", "options": {"store": store.uri, "path": "placed", "partitionBytes": "1"},
                    "columns": ["k"], "filters": [{"op": "eq", "col": "p", "value": 1}]})
    assert reply["version"] == 1 and len(reply["partitions"]) == 1
    group = SegmentGroup.from_text(reply["partitions"][0]["group"])
    assert [e.partition for e in group.entries] == [s.partition for s in ds.snapshot().segments
                                                   if s.values == (1,)]
    hosts = reply["partitions"][0]["hosts"]
    if store.uri.startswith("cassandra://"):
        node = store.uri.split("://", 1)[1].split("/", 1)[0].split(":")[0]
        assert hosts == [node]
    else:
        assert hosts == []


def test_the_readme_example_runs_as_written(spark: Any, tmp_path: Any) -> None:
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    start = text.index("## Scaling out on Spark")
    block = re.search(r"```python\n(.*?)```", text[start:], re.S)
    assert block and "sqlite:///scaling-out.db" in block.group(1)
    # the example's relative path is the Spark JVM's (started elsewhere): an absolute one here
    code = block.group(1).replace("sqlite:///scaling-out.db", f"sqlite:///{tmp_path}/scaling-out.db")
    exec(compile(code, "README.md", "exec"), {})


def test_strings_stored_with_and_without_dictionaries_read_back_alike(spark: Any, store: Store, fmt: str) -> None:
    """Within one input partition some segments keep a column as a dictionary and others not:
    the reader hands Spark the same strings either way."""
    ds = store.create_dataset("mixed", pa.schema([("k", pa.int64()), ("s", pa.string())]), segment_rows=1000)
    ds.append(pa.table({"k": list(range(2000)), "s": [None if i % 7 == 0 else f"few{i % 3}" for i in range(2000)]}))
    ds.append(pa.table({"k": list(range(2000, 4000)), "s": [f"unique-{i}" for i in range(2000, 4000)]}))
    assert {bool(s.dictionary) for s in ds.snapshot().segments} == {True, False}
    for options in ({"minPartitions": "1"}, {"partitionBytes": "1"}):
        df = load(spark, store, "mixed", fmt, **options)
        got = sorted(map(tuple, df.collect()), key=repr)
        assert got == sorted(rows_of(store.sql("SELECT k, s FROM mixed")), key=repr)
        assert df.where("s = 'few1'").count() == sum(1 for i in range(2000) if i % 7 and i % 3 == 1)


def _typed_rows(first: int, rows: int, distinct: int, seed: int) -> pa.Table:
    """Every type Spark reads, a tenth of each column null, ``distinct`` values per column (few:
    stored as dictionaries; many: plain)."""
    import decimal

    rng = random.Random(seed)

    def col(make: Any) -> list[Any]:
        values = [make(rng.randrange(distinct)) for _ in range(rows)]
        return [None if rng.random() < 0.1 else v for v in values]

    epoch = dt.datetime(2020, 1, 1)
    return pa.table({
        "k": pa.array(range(first, first + rows), pa.int64()),
        "b": pa.array(col(lambda i: i % 2 == 0), pa.bool_()),
        "i8": pa.array(col(lambda i: i % 200 - 100), pa.int8()),
        "i16": pa.array(col(lambda i: i * 7 % 60000 - 30000), pa.int16()),
        "i32": pa.array(col(lambda i: i * 1_000_003 % 2**32 - 2**31), pa.int32()),
        "i64": pa.array(col(lambda i: i * 10**12 - 2**62), pa.int64()),
        "u8": pa.array(col(lambda i: 255 - i % 256), pa.uint8()),
        "u32": pa.array(col(lambda i: 2**32 - 1 - i), pa.uint32()),
        "u64": pa.array(col(lambda i: 2**64 - 1 - i), pa.uint64()),
        "f32": pa.array(col(lambda i: i / 8 - 3.5), pa.float32()),
        "f64": pa.array(col(lambda i: i / 3 - 1e6), pa.float64()),
        "s": pa.array(col(lambda i: f"s{i}-é" * (i % 3)), pa.string()),
        "bin": pa.array(col(lambda i: bytes([i % 256, 0, i % 7])), pa.binary()),
        "d": pa.array(col(lambda i: dt.date(1970, 1, 1) + dt.timedelta(days=i - 500)), pa.date32()),
        "ts": pa.array(col(lambda i: (epoch + dt.timedelta(microseconds=i * 1_000_001)).replace(
            tzinfo=dt.UTC)), pa.timestamp("us", "UTC")),
        "ntz": pa.array(col(lambda i: epoch + dt.timedelta(microseconds=i * 999_983)), pa.timestamp("us")),
        "dec": pa.array(col(lambda i: decimal.Decimal(i * 37 - 900) / 100), pa.decimal128(10, 2)),
    })


def test_every_type_with_nulls_reads_back_stored_plain_or_as_a_dictionary(spark: Any, store: Store,
                                                                          fmt: str) -> None:
    """Each type Spark reads, with nulls, from segments that store each column as a dictionary
    (few distinct values) and from segments that store it plain (many): the JVM reader reads
    both forms from Arrow's memory itself."""
    import decimal

    parts = [_typed_rows(0, 2000, 5, 1), _typed_rows(2000, 2000, 1_000_000, 2)]
    ds = store.create_dataset("typed", parts[0].schema, segment_rows=1000)
    for part in parts:
        ds.append(part)
    # what the JVM reader is sent: per batch, which columns come as dictionaries
    from colonnade.spark.reading import plan_groups, read_group

    schema = ds.schema_at(ds.snapshot())
    sent = [frozenset(f.name for f in batch.schema if pa.types.is_dictionary(f.type))
            for group in plan_groups(store, "typed", ds.snapshot().version, schema.names, None, 1 << 30, 1)
            for batch in read_group(store, "typed", schema, schema.names, None, group, as_stored=True)]
    # (unsigned integers are widened, so sent plain; a segment holds too few rows for int8 to
    # be anything but a dictionary)
    assert set(schema.names) - {"k", "b", "dec", "u8", "u32", "u64"} <= sent[0] and sent[-1] <= {"i8"}, sent
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    got = spark_rows(load(spark, store, "typed", fmt).selectExpr(
        "k", "b", "i8", "i16", "i32", "i64", "u8", "u32", "cast(u64 as string)", "f32", "f64", "s", "hex(bin)",
        "d", "unix_micros(ts)", "unix_micros(cast(ntz as timestamp))", "cast(dec as string)"))
    epoch = dt.datetime(1970, 1, 1)

    def micros(t: dt.datetime) -> int:
        return (t.replace(tzinfo=None) - epoch) // dt.timedelta(microseconds=1)

    def expected(name: str, v: Any) -> Any:
        if v is None:
            return None
        if name == "u64":
            return str(v)
        if name == "f32":
            return float(pa.scalar(v, pa.float32()).as_py())
        if name == "bin":
            return v.hex().upper()
        if name in ("ts", "ntz"):
            return micros(v)
        if name == "dec":
            return str(decimal.Decimal(v))
        return v

    want = [tuple(expected(n, v) for n, v in row.items()) for part in parts for row in part.to_pylist()]
    assert sorted(got, key=lambda r: r[0]) == want


def test_bench_spark_runs_and_checks_its_answers(spark: Any, tmp_path: Any, monkeypatch: Any) -> None:
    from colonnade.bench import spark as study

    monkeypatch.delenv("COLONNADE_CACHE_MB", raising=False)  # the bench sets it: restored after

    report = study.main(rows=3000, out=tmp_path, repeats=1, plan_segments=40, echo=lambda _: None)
    assert set(report["queries"]) == {"Q1", "Q2", "Q3", study.READ_ALL}
    assert all(t["parquet"] > 0 and t["embedded"] > 0 for t in report["queries"].values())
    assert report["planning"]["embedded"]["segments"] == 40
    assert (tmp_path / "spark.md").read_text().count("| Q") == 3 and (tmp_path / "spark.png").exists()


@pytest.mark.parametrize(("sql", "from_metadata"), [
    ("SELECT count(NumArticles) AS n FROM gdelt", True),
    ("SELECT count(*) AS n, min(MonthYear) AS lo, max(MonthYear) AS hi FROM gdelt WHERE MonthYear >= 198006", True),
    ("SELECT count(*) AS n, max(NumArticles) AS hi FROM gdelt WHERE NumArticles > 250", False),
    ("SELECT count(DISTINCT Actor1Name) AS n FROM gdelt", False),
    ("SELECT MonthYear, count(*) AS n FROM gdelt GROUP BY MonthYear ORDER BY MonthYear", False),
])
def test_aggregates_statistics_decide_are_answered_at_planning(spark: Any, gdelt: Store, sql: str,
                                                               from_metadata: bool) -> None:
    load(spark, gdelt).createOrReplaceTempView("gdelt")
    df = spark.sql(sql)
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert ("aggregate from metadata" in plan) == from_metadata, plan
    assert close(spark_rows(df), rows_of(gdelt.sql(sql)))


def test_a_count_from_metadata_follows_deletes(spark: Any, store: Store) -> None:
    ds = store.create_dataset("shrinking", pa.schema([("p", pa.int64()), ("k", pa.int64())]), partition_by="p")
    ds.append(pa.table({"p": [i % 4 for i in range(400)], "k": [None if i % 5 == 0 else i for i in range(400)]}))
    ds.delete("k > 300")
    load(spark, store, "shrinking").createOrReplaceTempView("shrinking")
    for sql in ("SELECT count(k) AS n FROM shrinking", "SELECT count(*) AS n FROM shrinking WHERE p = 2"):
        assert spark_rows(spark.sql(sql)) == rows_of(store.sql(sql))


def _sorted_close(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]]) -> bool:
    def key(row: tuple[Any, ...]) -> str:
        return repr(tuple(round(v, 6) if isinstance(v, float) else v for v in row))
    return close(sorted(got, key=key), sorted(want, key=key))


@pytest.mark.parametrize(("sql", "pushed"), [
    (QUERIES["Q2"], True),
    (QUERIES["Q3"], True),
    ("SELECT MonthYear, Actor1Name, count(*) AS n, count(AvgTone) AS c, sum(NumArticles) AS s, sum(AvgTone) AS t, "
     "min(Day) AS d, max(Code) AS m, avg(NumArticles) AS a FROM gdelt WHERE MonthYear >= 198006 "
     "GROUP BY MonthYear, Actor1Name", True),
    ("SELECT Actor1Name, min(Actor1Name) AS lo, max(AvgTone) AS hi FROM gdelt WHERE Actor1Name LIKE 'ACTOR2%' "
     "GROUP BY Actor1Name HAVING count(*) > 10", True),
    ("SELECT count(*) AS n, max(NumArticles) AS hi FROM gdelt WHERE NumArticles > 250", True),
    ("SELECT count(*) AS n, sum(AvgTone) AS s, avg(NumArticles) AS a FROM gdelt WHERE MonthYear = 190001", True),
    ("SELECT MonthYear, count(*) AS n FROM gdelt WHERE MonthYear = 190001 GROUP BY MonthYear", True),
    # what the tasks don't compute: Spark aggregates the rows they read
    ("SELECT count(DISTINCT Actor1Name) AS n FROM gdelt", False),
    ("SELECT MonthYear % 3 AS k, count(*) AS n FROM gdelt GROUP BY MonthYear % 3", False),
    ("SELECT Actor1Name, sum(AvgTone * 2) AS s FROM gdelt GROUP BY Actor1Name", False),
    ("SELECT MonthYear, sum(NumArticles) AS s FROM gdelt WHERE NumArticles > 400 OR AvgTone IS NULL "
     "GROUP BY MonthYear", False),
])
def test_aggregations_pushed_to_the_tasks_answer_as_duckdb_does(spark: Any, gdelt: Store, sql: str,
                                                                pushed: bool) -> None:
    load(spark, gdelt).createOrReplaceTempView("gdelt")
    df = spark.sql(sql)
    plan = df._jdf.queryExecution().executedPlan().toString()
    # a task that aggregates hands Spark its groups, not its rows
    assert ('"aggregate":{"group_by":' in plan) == pushed and "aggregate from metadata" not in plan, plan
    got, want = spark_rows(df), rows_of(gdelt.sql(sql))
    assert _sorted_close(got, want), (got, want)


def test_a_pushed_aggregation_reads_a_pinned_version(spark: Any, store: Store) -> None:
    ds = store.create_dataset("growing", pa.schema([("k", pa.string()), ("v", pa.int64())]))
    ds.append(pa.table({"k": ["a", "b", "a"], "v": [1, 2, 3]}))
    df = load(spark, store, "growing")
    df.createOrReplaceTempView("growing")
    sql = "SELECT k, sum(v) AS s, count(*) AS n FROM growing GROUP BY k"
    ds.append(pa.table({"k": ["a", "c"], "v": [10, 20]}))  # after load(): not seen
    assert sorted(spark_rows(spark.sql(sql))) == [("a", 4, 2), ("b", 2, 1)]


def test_option_push_aggregates_false_leaves_aggregations_to_spark(spark: Any, gdelt: Store) -> None:
    load(spark, gdelt, pushAggregates="false").createOrReplaceTempView("gdelt")
    for sql in (QUERIES["Q1"], QUERIES["Q2"]):
        df = spark.sql(sql)
        plan = df._jdf.queryExecution().executedPlan().toString()
        assert '"aggregate"' not in plan and "aggregate from metadata" not in plan, plan
        assert close(spark_rows(df), rows_of(gdelt.sql(sql)))


def test_a_schema_given_to_a_read_is_checked_against_the_dataset(spark: Any, gdelt: Store) -> None:
    """The JVM reader hands Spark the stored values as they are: a given schema must name columns
    with their types (else one line at load, and the session goes on)."""
    reader = spark.read.format("colonnade").option("store", gdelt.uri)
    df = reader.schema("MonthYear int, AvgTone double").load("gdelt")
    assert sorted(spark_rows(df.where("MonthYear = 198012")), key=repr) == sorted(
        rows_of(gdelt.sql("SELECT MonthYear, AvgTone FROM gdelt WHERE MonthYear = 198012")), key=repr)
    with pytest.raises(Exception) as err:
        reader.schema("MonthYear string, Nope int, AvgTone double").load("gdelt").collect()
    assert ("the schema given to read dataset 'gdelt' does not match it: MonthYear is integer, not string; "
            "Nope is not in the dataset") in str(err.value)
    assert "Traceback" not in str(err.value)
    assert spark_rows(load(spark, gdelt).selectExpr("count(*)")) == [(ROWS,)]
