"""Samples kept current by the commits of their dataset, on every store: after appends, stream
micro-batches, deletes, compactions and overwrites, each stratum's population equals the
dataset's rows in it, the live sample rows are rows of the dataset and as many as recorded, and
the sample records the dataset version it represents. A crash between the dataset's commit and
the sample's leaves the sample behind, never used for the newer version, and caught up later."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from colonnade import Store
from colonnade.encoding.chunk import FLAG_DICTIONARY
from colonnade.errors import DatasetExistsError, SchemaError
from colonnade.storage.base import ChunkRef
from colonnade.table.commits import position_id
from colonnade.table.dataset import SampleWarning
from colonnade.table.sample import _commit, state_of
from colonnade.table.writer import column_stats_from_text


def _rows(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    geo = rng.zipf(1.5, n) % 30
    return pa.table({"geo": pa.array([f"g{g}" for g in geo]),
                     "pub": pa.array(rng.integers(0, 3, n)),
                     "bid": pa.array(rng.gamma(2.0, 1.0, n)),
                     "id": pa.array(np.arange(n) + seed * 1_000_000)})


def _check(store: Store, sample: str = "imps_by_geo_pub", deleted: bool = False) -> None:
    """The invariants of a current sample (see the module docstring); a delete may have taken
    a stratum's sample rows below K (``deleted``: no rebuild since)."""
    base = store.dataset("imps")
    s = store.dataset(sample)
    state = state_of(s, s.snapshot())
    assert state.base_version == base.snapshot().version
    con = duckdb.connect()
    con.register("b", base.to_arrow())
    con.register("s", s.to_arrow())
    con.register("t", state.strata_table())
    population = {(g, p): n for g, p, n in con.sql("SELECT geo, pub, count(*) FROM b GROUP BY ALL").fetchall()}
    recorded = {st.values: st.population for st in state.strata.by_id.values() if st.population}
    assert recorded == population
    live = dict(con.sql("SELECT __stratum, count(*) FROM s JOIN t USING (__stratum) "
                        "WHERE __u <= __t GROUP BY ALL").fetchall())
    assert {h: n for h, n in live.items()} == {
        st.id: st.kept for st in state.strata.by_id.values() if st.kept}
    strays = con.sql("SELECT count(*) FROM s WHERE (id, geo, pub, bid) NOT IN "
                     "(SELECT (id, geo, pub, bid) FROM b)").fetchall()[0][0]
    dead = con.sql("SELECT count(*) FROM s JOIN t USING (__stratum) WHERE __u <= __t AND id NOT IN "
                   "(SELECT id FROM b)").fetchall()[0][0]
    assert dead == 0 and strays == 0
    for st in state.strata.by_id.values():  # every stratum keeps min(K, N) rows at least
        if st.population and not deleted:
            assert st.kept >= min(state.settings.min_per_stratum, st.population)


def _unavailable(*args: object, **kwargs: object) -> None:
    raise OSError("store unavailable")


def test_sample_follows_appends_streams_deletes_and_compactions(store: Store) -> None:
    ds = store.create_dataset("imps", _rows(1, 0).schema)
    ds.append(_rows(20_000, 1))
    info = store.create_sample("imps", ["geo", "pub"], 0.05, min_per_stratum=20, seed=3)
    assert info.name == "imps_by_geo_pub" and info.rows > 0.05 * 20_000
    _check(store)
    for i in range(3):
        ds.append(_rows(5_000, 10 + i))
    ds.append(_rows(2_000, 20), kind="stream", positions={position_id("t", 0): 2_000})
    _check(store)
    result = ds.delete("bid > 5 OR geo = 'g2'")
    assert result.rows_deleted > 0
    _check(store, deleted=True)
    ds.append(_rows(500, 30))
    ds.compact()
    _check(store, deleted=True)
    raw = store.dataset("imps_by_geo_pub").snapshot().rows
    assert raw == store.samples("imps")[0].rows  # compaction dropped the rows that left it
    ds.overwrite(_rows(3_000, 40))
    _check(store)


def test_sample_options_are_checked(store: Store) -> None:
    store.create_dataset("imps", _rows(1, 0).schema).append(_rows(100, 1))
    with pytest.raises(SchemaError, match="no column 'nope'"):
        store.create_sample("imps", "geo,nope", 0.1)
    with pytest.raises(SchemaError, match="between 0 and 1"):
        store.create_sample("imps", "geo", 1.5)
    store.create_sample("imps", "geo", 0.1, name="s1")
    with pytest.raises((SchemaError, DatasetExistsError), match="s1"):
        store.create_sample("imps", "pub", 0.1, name="s1")
    store.drop_sample("s1")
    assert store.samples("imps") == [] and "s1" not in store


def test_a_failed_maintenance_leaves_the_sample_behind_until_caught_up(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    ds = store.create_dataset("imps", _rows(1, 0).schema)
    ds.append(_rows(5_000, 1))
    store.create_sample("imps", "geo,pub", 0.05, min_per_stratum=20)
    behind = store.dataset("imps_by_geo_pub").snapshot().version

    monkeypatch.setattr("colonnade.table.sample._commit", _unavailable)
    with pytest.warns(SampleWarning, match="stay at an earlier version: store unavailable"):
        ds.append(_rows(1_000, 2))
    monkeypatch.undo()
    s = store.dataset("imps_by_geo_pub")
    assert s.snapshot().version == behind
    assert state_of(s, s.snapshot()).base_version == ds.snapshot().version - 1
    ds.append(_rows(1_000, 3))  # the next commit catches it up with both appends
    _check(store)


def test_a_failure_while_sampling_an_append_warns_and_the_next_commit_catches_up(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """An append samples its rows on a thread of its own: an error there leaves the append
    committed, the sample behind (with a warning), and the next commit brings it up to date."""
    from colonnade.table.strata import Strata

    ds = store.create_dataset("imps", _rows(1, 0).schema)
    ds.append(_rows(5_000, 1))
    store.create_sample("imps", "geo,pub", 0.05, min_per_stratum=20)
    behind = store.dataset("imps_by_geo_pub").snapshot().version

    monkeypatch.setattr(Strata, "admit", _unavailable)
    with pytest.warns(SampleWarning, match="store unavailable"):
        result = ds.append(_rows(3_000, 2))
    monkeypatch.undo()
    assert result.version == ds.snapshot().version and ds.snapshot().rows == 8_000
    assert store.dataset("imps_by_geo_pub").snapshot().version == behind
    ds.append(_rows(1_000, 3))
    _check(store)


def test_a_failed_sample_commit_stops_every_writer_of_the_append(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """With two samples, the first one's commit failing: the rows written for the second are
    dropped as well (no writer thread left), both stay behind and catch up on the next commit."""
    import threading

    ds = store.create_dataset("imps", _rows(1, 0).schema)
    ds.append(_rows(5_000, 1))
    store.create_sample("imps", "geo,pub", 0.05, min_per_stratum=20)
    store.create_sample("imps", "geo", 0.05, min_per_stratum=20)

    monkeypatch.setattr("colonnade.table.sample._commit", _unavailable)
    with pytest.warns(SampleWarning, match="store unavailable"):
        ds.append(_rows(3_000, 2))
    monkeypatch.undo()
    assert not [t for t in threading.enumerate() if t.name.startswith("colonnade-store-writer")]
    assert all(info.base_version == ds.snapshot().version - 1 for info in store.samples("imps"))
    ds.append(_rows(1_000, 3))
    _check(store)
    assert all(info.base_version == ds.snapshot().version for info in store.samples("imps"))


def test_a_failed_append_leaves_the_sample_as_it_was(store: Store) -> None:
    """An append samples and writes its sample rows as it goes: when it fails part-way, none
    of them is committed, and its sampling thread is gone."""
    import threading

    ds = store.create_dataset("imps", _rows(1, 0).schema)
    ds.append(_rows(5_000, 1))
    store.create_sample("imps", "geo,pub", 0.05, min_per_stratum=20)
    before = store.dataset("imps_by_geo_pub").snapshot()

    def batches() -> Iterator[pa.RecordBatch]:
        yield from _rows(300_000, 2).to_batches(max_chunksize=50_000)  # admitted, sample rows written
        raise OSError("source went away")

    with pytest.raises(OSError, match="source went away"):
        ds.append(batches())
    after = store.dataset("imps_by_geo_pub").snapshot()
    assert (after.version, after.rows) == (before.version, before.rows)
    assert ds.snapshot().rows == 5_000
    assert not [t for t in threading.enumerate() if t.name.startswith("colonnade-sample")]
    ds.append(_rows(1_000, 3))
    _check(store)


@pytest.mark.parametrize("point", ["after_commit:1", "before_commit:2"])
def test_a_crash_between_the_two_commits_is_caught_up(store: Store, tmp_path: Path, point: str) -> None:
    ds = store.create_dataset("imps", _rows(1, 0).schema)
    ds.append(_rows(5_000, 1))
    store.create_sample("imps", "geo,pub", 0.05, min_per_stratum=20)
    pacsv.write_csv(_rows(3_000, 2), tmp_path / "more.csv")
    run = subprocess.run([str(Path(sys.executable).with_name("colonnade")), "--store", store.uri, "ingest", "imps",
                          str(tmp_path / "more.csv")], env={**os.environ, "COLONNADE_FAULTS": point},
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == -9, run.stderr
    base = store.dataset("imps")
    s = store.dataset("imps_by_geo_pub")
    assert base.snapshot().rows == 8_000
    assert state_of(s, s.snapshot()).base_version == base.snapshot().version - 1
    [info] = store.samples("imps")
    assert info.base_version == base.snapshot().version - 1  # listed as it is: behind
    from colonnade.table.sample import catch_up

    catch_up(base, s)
    _check(store)


def test_an_append_racing_another_catches_the_sample_up_from_the_log(store: Store) -> None:
    """An append samples its rows as it writes them; when another commit lands between the
    version it read and its own, what it sampled is dropped and the sample catches up from the
    log (both appends' rows, once each)."""
    ds = store.create_dataset("imps", _rows(1, 0).schema)
    ds.append(_rows(5_000, 1))
    store.create_sample("imps", "geo,pub", 0.05, min_per_stratum=20)
    other = store.dataset("imps")
    raced = []

    def race(batch: pa.RecordBatch) -> None:
        if not raced:
            raced.append(other.append(_rows(2_000, 2)).version)

    result = ds.append(_rows(3_000, 3), on_batch=race)
    assert raced and result.version == raced[0] + 1
    _check(store)
    assert store.dataset("imps").snapshot().rows == 10_000


def test_a_sample_committed_to_during_an_append_is_caught_up_from_the_log(store: Store) -> None:
    """Another writer commits to the sample (here: compacts it) while an append samples its
    rows: the append's sample commit conflicts, what it sampled is dropped, and the sample
    catches up from the log."""
    ds = store.create_dataset("imps", _rows(1, 0).schema)
    ds.append(_rows(5_000, 1))
    store.create_sample("imps", "geo,pub", 0.05, min_per_stratum=20)
    for seed in (2, 3):
        ds.append(_rows(2_000, seed))
    compacted = []

    def compact(batch: pa.RecordBatch) -> None:
        if not compacted:
            compacted.append(store.dataset("imps_by_geo_pub").compact().version)

    ds.append(_rows(3_000, 4), on_batch=compact)
    s = store.dataset("imps_by_geo_pub")
    assert compacted[0] is not None and [c.kind for c in s.history(compacted[0] - 1)] == ["compact", "sample"]
    _check(store)


def test_an_append_its_sample_took_reads_no_log_after_committing_and_a_sample_made_meanwhile_catches_up(
        store: Store) -> None:
    """An append whose rows its sample admitted reads the base's log twice, when it starts and
    when it commits (the samples listed at its version are those of the version before it plus
    its own), not again after, and the sample's once, when it starts (its commit takes that as
    the latest); a sample made by another writer while the append wrote is listed at the
    version it commits, and caught up from the log."""
    ds = store.create_dataset("imps", _rows(1, 0).schema)
    ds.append(_rows(5_000, 1))
    store.create_sample("imps", "geo,pub", 0.05, min_per_stratum=20)
    ds.append(_rows(1_000, 2))
    raw = store.chunk_store
    calls: list[tuple[str, str]] = []
    spied = {n: getattr(raw, n) for n in ("follow_commits", "list_checkpoints")}
    for name, real in spied.items():
        setattr(raw, name, lambda dataset, *a, _n=name, _r=real, **k: calls.append((_n, dataset)) or _r(dataset, *a, **k))
    try:
        ds.append(_rows(1_000, 3))
        assert sorted(calls) == [("follow_commits", "imps")] * 2 + [("follow_commits", "imps_by_geo_pub")]
    finally:
        for name, real in spied.items():
            setattr(raw, name, real)
    _check(store)
    other = Store(store.chunk_store)
    made = []

    def make(batch: pa.RecordBatch) -> None:
        if not made:
            made.append(other.create_sample("imps", "pub", 0.1, min_per_stratum=5).name)

    result = ds.append(_rows(1_000, 4), on_batch=make)
    _check(store)
    made_meanwhile = store.dataset(made[0])
    state = state_of(made_meanwhile, made_meanwhile.snapshot())
    assert state.base_version == result.version
    assert sum(st.population for st in state.strata.by_id.values()) == ds.snapshot().rows == 8_000


@pytest.mark.parametrize("sort_by", [None, "geo"])
def test_string_keys_are_hashed_once_and_each_segment_keeps_its_own_values(
        store: Store, sort_by: str | None) -> None:
    """An append's string key columns are dictionary-encoded once, for the strata and the writer
    alike (a sort column is left to the writer): each segment stores only the values it holds,
    so its statistics bound them, and the sample is what it must be, null keys included."""
    rows = _rows(40_000, 5)
    geo = sorted(rows.column("geo").to_pylist())  # in order: each segment holds a narrow range
    geo[-3_000:] = [None] * 3_000
    rows = rows.set_column(0, "geo", pa.array(geo))
    ds = store.create_dataset("imps", rows.schema, segment_rows=4_096, sort_by=sort_by)
    ds.append(rows.slice(0, 100))
    store.create_sample("imps", ["geo", "pub"], 0.05, min_per_stratum=20, seed=3)
    result = ds.append(rows.slice(100).to_batches(max_chunksize=5_000))  # sharing a dictionary
    _check(store)
    written = rows.slice(100).column("geo").to_pylist()
    expected = sorted((min(part, default=None), max(part, default=None), len(part)) for part in (
        [g for g in written[at:at + 4_096] if g is not None] for at in range(0, len(written), 4_096)))
    segments = [s for s in ds.snapshot().segments if s.segment not in
                {e.segment for e in ds.snapshot(result.version - 1).segments}]
    stats = [column_stats_from_text(s.stats)["geo"] for s in segments]
    assert sorted((st.min, st.max, st.rows - st.nulls) for st in stats) == expected
    assert ds.to_arrow().sort_by("id").column("geo").to_pylist() == geo


def test_the_batches_of_an_append_share_one_dictionary_per_key_column(monkeypatch: pytest.MonkeyPatch) -> None:
    """Later batches are looked up in the first batch's dictionary, which grows (earlier values
    keep their indices) when one brings new values, and starts again past its limit; every
    batch reads back as it came, nulls included."""
    from colonnade.schema.spec import DatasetSpec
    from colonnade.table import sample_rows

    monkeypatch.setattr(sample_rows, "SHARED_DICTIONARY", 8)
    schema = pa.schema([("geo", pa.string()), ("n", pa.int64())])
    encoding = sample_rows.KeyEncoding(DatasetSpec.create("t", schema), ["geo"])
    values = [["a", "b", "a", None], ["b", "a", "a", "b"], ["c", None, "a", "d"],
              [f"v{i}" for i in range(12)], ["v1", "v2", "v1", "v3"]]
    out = [encoding(pa.record_batch([pa.array(v), pa.array(range(len(v)))], schema=schema)) for v in values]
    assert [b.column(0).to_pylist() for b in out] == values
    dictionaries = [b.column(0).dictionary.to_pylist() for b in out]
    assert dictionaries[0] == dictionaries[1] == ["a", "b"]  # no new values: the same one
    assert dictionaries[2] == ["a", "b", "c", "d"]  # grown, earlier indices kept
    assert dictionaries[3] == [f"v{i}" for i in range(12)]  # past the limit: a new one
    assert dictionaries[4] == dictionaries[3]


def test_sample_rows_of_an_append_are_one_segment_and_a_build_s_go_through_a_writer(store: Store) -> None:
    """Sample rows fewer than a segment's (an append's share) are stored as one segment; more
    (a build from a dataset) are cut into segments by a writer. Both kinds read back alike."""
    ds = store.create_dataset("imps", _rows(1, 0).schema, segment_rows=1_000)
    ds.append(_rows(6_000, 1))
    store.create_sample("imps", "geo,pub", 0.3, min_per_stratum=20)
    s = store.dataset("imps_by_geo_pub")
    built = s.snapshot()
    assert built.rows > 1_000 and len(built.segments) >= 2
    assert all(e.rows <= 1_000 for e in built.segments)
    ds.append(_rows(600, 2))
    [added] = [e for e in s.snapshot().segments if e.segment not in {b.segment for b in built.segments}]
    assert 0 < added.rows < 1_000
    _check(store)


def test_a_sample_stores_the_keys_its_strata_compared(store: Store) -> None:
    """Keys are single precision and stored as ``float32`` (half a double's random bytes): the
    live keys a reader gets back from the stored rows are, stratum by stratum, exactly those
    the appending process holds, with the same thresholds and counts."""
    from colonnade.table.sample import _COMMITTED

    ds = store.create_dataset("imps", _rows(1, 0).schema)
    ds.append(_rows(3_000, 1))
    store.create_sample("imps", "geo,pub", 0.05, min_per_stratum=20, seed=3)
    for i in range(4):
        ds.append(_rows(4_000, 10 + i))
    _, held = _COMMITTED[ds.sample_datasets["imps_by_geo_pub"][1]]  # the appends' own strata
    s = store.dataset("imps_by_geo_pub")
    snapshot = s.snapshot()
    assert s.schema_at(snapshot).field("__u").type == pa.float32()
    assert held.threshold.min() < 1.0 and (held.threshold > 0.05).any()  # strata of both kinds
    strata = state_of(s, snapshot).strata
    strata.ensure_live()  # read from the stored rows
    read = strata.by_id
    for i, mine in held.by_id.items():
        assert read[i] == mine and read[i].keys == mine.keys
    _check(store)


def test_a_sample_made_with_double_keys_keeps_them_until_rebuilt(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sample whose ``__u`` column is a double (as samples were made before) is still kept
    current by appends, deletes and compactions, its rows written as doubles; a rebuild (here
    by an overwrite) stores single-precision keys."""
    from colonnade.table import sample as sample_module

    made = sample_module.sample_schema
    monkeypatch.setattr(sample_module, "sample_schema", lambda schema: pa.schema(
        [f.with_type(pa.float64()) if f.name == "__u" else f for f in made(schema)]))
    ds = store.create_dataset("imps", _rows(1, 0).schema)
    ds.append(_rows(5_000, 1))
    store.create_sample("imps", "geo,pub", 0.05, min_per_stratum=20, seed=3)
    monkeypatch.undo()
    for i in range(3):
        ds.append(_rows(3_000, 10 + i))
    s = store.dataset("imps_by_geo_pub")
    assert s.schema_at(s.snapshot()).field("__u").type == pa.float64()
    assert s.to_arrow().schema.field("__u").type == pa.float64()
    _check(store)
    ds.delete("bid > 5")
    ds.append(_rows(1_000, 20))
    ds.compact()
    _check(store, deleted=True)
    ds.overwrite(_rows(3_000, 40))
    s = store.dataset("imps_by_geo_pub")
    assert s.schema_at(s.snapshot()).field("__u").type == pa.float32()
    _check(store)


def test_sample_segments_store_the_stratum_column_plain(store: Store) -> None:
    """The stratum id column of sample rows is stored plain (as a dictionary it is larger and
    slower to write), by a build's writer and by an append's single segment alike."""
    ds = store.create_dataset("imps", _rows(1, 0).schema, segment_rows=1_000)
    ds.append(_rows(6_000, 1))
    store.create_sample("imps", "geo,pub", 0.3, min_per_stratum=20)
    ds.append(_rows(600, 2))
    s = store.dataset("imps_by_geo_pub")
    segments = s.snapshot().segments
    assert len(segments) >= 3
    refs = [ChunkRef(e.partition, column, e.segment, e.bucket) for e in segments for column in ("__stratum", "geo")]
    flags = {(ref.segment, ref.column): data[5] for ref, data in s.store.get_chunks(s.name, refs)}
    assert len(flags) == len(refs)
    assert all(not f & FLAG_DICTIONARY for (_, column), f in flags.items() if column == "__stratum")
    assert all(f & FLAG_DICTIONARY for (_, column), f in flags.items() if column == "geo")
    _check(store)


def test_builds_and_catch_ups_write_their_rows_as_they_come(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A build or a catch-up holds at most HOLD_ROWS sample rows: beyond, it writes the live
    ones as it goes (here every 50), and the sample is what it must be."""
    monkeypatch.setattr("colonnade.table.sample.HOLD_ROWS", 50)
    ds = store.create_dataset("imps", _rows(1, 0).schema, segment_rows=500)
    ds.append(_rows(4_000, 1))
    store.create_sample("imps", "geo,pub", 0.2, min_per_stratum=10)
    built = store.dataset("imps_by_geo_pub").snapshot()
    assert built.rows >= 800 and len(built.segments) >= 2
    _check(store)
    monkeypatch.setattr("colonnade.table.sample._commit", _unavailable)  # left behind...
    with pytest.warns(SampleWarning):
        ds.append(_rows(1_500, 2))
    monkeypatch.setattr("colonnade.table.sample._commit", _commit)
    ds.append(_rows(1_500, 3))  # ... and caught up from the log: two appends, one commit
    _check(store)


def test_an_append_copies_the_rows_its_admissions_took_once_and_only_the_live_ones(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """An append admits its rows a part at a time (here every 400), and copies the rows it took
    out of its batches after the last part, only those no later part evicted; or, once the
    batches they pin hold more than PICKED_INPUT_ROWS rows (here 1: at every part), as it goes.
    The samples (same seed, same rows) are the same either way, and hold no row evicted by the
    append that wrote it."""
    monkeypatch.setattr("colonnade.table.sample.ADMIT_WHILE_WRITING", 400)
    taken: dict[int, list[tuple[list[int], int]]] = {}
    for at, pinned in enumerate([1 << 30, 1]):
        monkeypatch.setattr("colonnade.table.sample_rows.PICKED_INPUT_ROWS", pinned)
        name = f"imps{at}"
        ds = store.create_dataset(name, _rows(1, 0).schema, segment_rows=100_000)
        store.create_sample(name, "geo,pub", 0.05, min_per_stratum=20, seed=3)
        taken[pinned] = []
        for seed in range(1, 4):
            ds.append(pa.Table.from_batches(_rows(3_000, seed).to_batches(max_chunksize=200)))
            s = store.dataset(f"{name}_by_geo_pub")
            state = state_of(s, s.snapshot())
            assert state.base_version == ds.snapshot().version
            rows = s.to_arrow()
            live = state.strata.live(rows.column("__stratum").to_numpy(), rows.column("__u").to_numpy())
            taken[pinned].append((sorted(rows.column("id").to_pylist()), int(live.sum())))
    assert taken[1 << 30] == taken[1]
    rows, live = taken[1][0]
    assert live == len(rows) > 0  # the first append wrote no row it evicted itself


def test_an_append_reads_samples_it_met_before_on_its_sampling_thread(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first append of a process reads its samples before writing; later ones read them on
    the sampling thread while they write. A sample dropped and made again under its name on
    other columns meanwhile is maintained on its new columns."""
    import threading

    from colonnade.table import sample as sample_module

    readers: list[str] = []
    real = sample_module.state_of

    def state_of(*args: object, **kwargs: object) -> object:
        readers.append(threading.current_thread().name)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(sample_module, "state_of", state_of)
    ds = store.create_dataset("imps", _rows(1, 0).schema)
    ds.append(_rows(2_000, 1))
    store.create_sample("imps", "geo,pub", 0.05, min_per_stratum=20, name="s")
    readers.clear()
    ds.append(_rows(2_000, 2))
    assert readers and not any(r.startswith("colonnade-sample") for r in readers)
    readers.clear()
    ds.append(_rows(2_000, 3))
    assert readers and all(r.startswith("colonnade-sample") for r in readers)
    _check(store, "s")
    store.drop_sample("s")
    store.create_sample("imps", "pub", 0.05, min_per_stratum=20, name="s")
    ds.append(_rows(2_000, 4))
    s = store.dataset("s")
    state = state_of(s, s.snapshot())
    assert state.base_version == ds.snapshot().version and state.settings.on == ("pub",)
    table = ds.to_arrow()
    expected: dict[tuple[object, ...], int] = {}
    for p in table.column("pub").to_pylist():
        expected[(p,)] = expected.get((p,), 0) + 1
    assert {st.values: st.population for st in state.strata.by_id.values() if st.population} == expected


def test_dropping_a_dataset_drops_its_samples(store: Store) -> None:
    store.create_dataset("imps", _rows(1, 0).schema).append(_rows(1_000, 1))
    store.create_sample("imps", "geo", 0.1)
    store.drop_dataset("imps")
    assert "imps_by_geo" not in store and store.samples() == []
