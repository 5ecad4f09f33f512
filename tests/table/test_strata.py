"""The sample's keep rule: appended in any batches, a stratum keeps exactly the rows the batch
definition (key ≤ max(F, K-th smallest key)) keeps, and its state survives a round trip."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from colonnade.table import strata_compiled
from colonnade.table.row_keys import Keys
from colonnade.table.strata import Strata, Stratum


@pytest.fixture(autouse=True, params=["compiled", "numpy"])
def admission(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs with the compiled admission and with the NumPy one."""
    if request.param == "numpy":
        monkeypatch.setattr(strata_compiled, "AVAILABLE", False)
    return str(request.param)


def _kept_by_definition(keys: np.ndarray, k: int, f: float) -> np.ndarray:
    if len(keys) <= k:
        return np.ones(len(keys), dtype=bool)
    return keys <= max(f, float(np.sort(keys)[k - 1]))


@pytest.mark.parametrize("seed", range(40))
def test_batches_keep_what_the_definition_keeps(seed: int) -> None:
    rng = np.random.default_rng(seed)
    k, f = int(rng.choice([1, 5, 50])), float(rng.choice([0.01, 0.1, 0.5]))
    n = int(rng.integers(0, 3000))
    ids = rng.integers(0, 6, n)
    keys = rng.random(n)
    if seed % 3 == 0:  # keys equal, or a few units in the last place apart (ties when merged)
        keys = np.floor(keys * 20) / 20 + rng.integers(0, 8, n) * np.spacing(keys)
    strata = Strata(f, k, [Stratum(i, (f"s{i}",)) for i in range(6)])
    cuts = np.sort(rng.integers(0, n + 1, int(rng.integers(0, 8))))
    admitted = np.zeros(n, dtype=bool)
    for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), n], strict=True):
        positions, found = strata.admit(ids[a:b], Keys.given(keys[a:b]))
        assert (found == keys[a:b][positions]).all()
        admitted[a + positions] = True
    for h in range(6):
        mine = ids == h
        expected = _kept_by_definition(keys[mine], k, f)
        threshold = strata.by_id[h].threshold
        live = admitted[mine] & (keys[mine] <= threshold)  # evicted rows drop out logically
        assert (live == expected).all()
        assert strata.by_id[h].population == mine.sum()
        assert strata.by_id[h].kept == expected.sum()


@pytest.mark.parametrize("seed", range(12))
def test_many_strata_with_large_ids_keep_and_track_what_the_definition_keeps(seed: int) -> None:
    # strata ids up to millions: a key's order among its stratum's (2 id + key, a float) then
    # has fewer bits, and keys a few units in the last place apart tie in it; the kept rows,
    # thresholds and live keys must still be the definition's, batch after batch
    rng = np.random.default_rng(seed)
    k, f = int(rng.choice([2, 5, 20])), float(rng.choice([0.01, 0.05, 0.2]))
    offset = int(rng.choice([0, 1 << 10, 1 << 20, 3_000_000]))
    count = int(rng.integers(1, 120))
    ids_of = offset + np.sort(rng.choice(50_000, count, replace=False))
    weights = rng.pareto(1.0, count) + 0.05
    n = int(rng.integers(500, 6000))
    ids = ids_of[rng.choice(count, n, p=weights / weights.sum())]
    keys = rng.random(n)
    if seed % 2 == 0:
        keys = np.floor(keys * 40) / 40 + rng.integers(0, 4, n) * np.spacing(keys)
    strata = Strata(f, k, [Stratum(int(i), (int(i),)) for i in ids_of])
    admitted = np.zeros(n, dtype=bool)
    cuts = np.sort(rng.integers(0, n + 1, int(rng.integers(1, 10))))
    for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), n], strict=True):
        positions, found = strata.admit(ids[a:b], Keys.given(keys[a:b]))
        assert (np.diff(positions) > 0).all() and (found == keys[a:b][positions]).all()
        admitted[a + positions] = True
        by_id = strata.by_id
        for h in np.unique(ids[:b]).tolist():
            mine = ids[:b] == h
            expected = _kept_by_definition(keys[:b][mine], k, f)
            state = by_id[h]
            assert (admitted[:b][mine] & (keys[:b][mine] <= state.threshold) == expected).all()
            assert state.kept == expected.sum() and state.population == mine.sum()
            if state.threshold > f:
                assert state.keys == sorted(keys[:b][mine][expected].tolist())


@pytest.mark.parametrize("low", [0.0, 0.5, 0.9])
def test_a_stratum_whose_keys_defy_the_bound_is_merged_whole(low: float) -> None:
    # many rows of one stratum at once: candidates are first looked for under a bound that
    # uniform keys pass K times but for a chance in millions; keys all above it (low > 0)
    # must still give what the definition keeps
    rng = np.random.default_rng(3)
    k, f = 50, 0.01
    keys = low + (1 - low) * rng.random(1000)
    strata = Strata(f, k, [Stratum(0, ("a",)), Stratum(1, ("b",))])
    ids = np.repeat([0, 1], [1000, 10])
    keys = np.concatenate([keys, rng.random(10)])
    positions, found = strata.admit(ids, Keys.given(keys))
    assert (found == keys[positions]).all()
    for h in (0, 1):
        mine = ids == h
        admitted = np.zeros(len(ids), dtype=bool)
        admitted[positions] = True
        live = admitted[mine] & (keys[mine] <= strata.by_id[h].threshold)
        assert (live == _kept_by_definition(keys[mine], k, f)).all()
        assert strata.by_id[h].kept == (k if h == 0 else 10)


@pytest.mark.parametrize("f", [0.01, 0.1, 1 / 3])
def test_drawn_keys_are_single_precision_and_keep_what_the_definition_keeps(f: float) -> None:
    """Keys drawn for rows (by the compiled admission and by NumPy's) are single-precision
    values below 1, as a sample stores them, and the strata keep what the definition keeps
    of them."""
    rng = np.random.default_rng(7)
    k = 5
    strata = Strata(f, k, [Stratum(i, (f"s{i}",)) for i in range(40)])
    ids = np.minimum(rng.zipf(1.3, 60_000), 40) - 1
    drawn = np.zeros(len(ids))
    admitted = np.zeros(len(ids), dtype=bool)
    for part in np.array_split(np.arange(len(ids)), 5):
        positions, keys = strata.admit(ids[part], Keys.drawn(len(part), rng))
        assert (keys == keys.astype(np.float32)).all() and (keys < 1).all() and (keys >= 0).all()
        drawn[part[positions]], admitted[part[positions]] = keys, True
    for h, st in strata.by_id.items():
        mine = ids == h
        live = admitted & mine & (drawn <= st.threshold)
        assert live.sum() == st.kept >= min(k, mine.sum())
        if st.threshold < 1:  # the K-th smallest live key, or F
            assert st.threshold == max(f, np.sort(drawn[live])[k - 1])


@pytest.mark.parametrize("floor", [0.01, 0.1, 1 / 3, 0.5 + 2**-40])
def test_rounded_keys_stay_on_their_side_of_the_floor(floor: float) -> None:
    """A key drawn at most at the floor F is rounded to a single-precision value at most at F,
    one drawn above it to one above it, however close to F (F itself need not be single)."""
    from colonnade.table.row_keys import BELOW_ONE, single

    f32 = np.float32(floor)
    lo, hi = np.nextafter(np.nextafter(f32, np.float32(0)), np.float32(0)), np.nextafter(np.nextafter(f32, np.float32(1)), np.float32(1))
    x = np.concatenate([np.linspace(float(lo), float(hi), 4001), [floor, np.nextafter(floor, 0), np.nextafter(floor, 1)]])
    low = x <= floor
    r = single(x, floor, low)
    assert (r == r.astype(np.float32)).all()
    assert (r[low] <= floor).all() and (r[~low] > floor).all()
    assert np.abs(r - x).max() <= 2 * float(np.spacing(f32))
    assert single(np.array([1 - 2**-60, 0.0]), floor, np.array([False, True])).tolist() == [BELOW_ONE, 0.0]


def test_ids_group_rows_by_their_key_columns_nulls_included() -> None:
    strata = Strata(0.1, 5)
    batch = pa.table({"a": ["x", "y", None, "x", None], "b": [1, 1, 2, 1, 2], "c": [9, 8, 7, 6, 5]})
    ids = strata.ids(batch, ["a", "b"])
    assert ids[0] == ids[3] and ids[2] == ids[4] and len(set(ids.tolist())) == 3
    assert {s.values for s in strata.by_id.values()} == {("x", 1), ("y", 1), (None, 2)}
    again = strata.ids(pa.table({"a": ["y"], "b": [1]}), ["a", "b"])
    assert again.tolist() == [ids[1]]


@pytest.mark.parametrize("seed", range(6))
def test_dictionary_key_columns_get_the_ids_their_values_get(seed: int) -> None:
    """Key columns given as dictionary arrays (chunks with dictionaries of their own, values
    unused by the rows, nulls, values met for the first time) get the ids the same values get
    as plain strings, and only the combinations rows have become strata."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(30)] + [None]
    plain, encoded = Strata(0.1, 5), Strata(0.1, 5)
    for _ in range(4):
        chunks = []
        for _ in range(int(rng.integers(1, 4))):
            n = int(rng.integers(1, 200))
            a = rng.choice(words[: int(rng.integers(2, 31))], n).tolist()
            b = rng.choice(words[:4] + [None], n).tolist()
            chunks.append(pa.record_batch({"a": a, "b": b, "c": list(range(n))}))
        table = pa.Table.from_batches(chunks)
        expected = plain.ids(table, ["a", "b"])
        as_dictionaries = pa.Table.from_batches([
            pa.record_batch({"a": pa.array(c.column(0).to_pylist() + words[:-1]).dictionary_encode()[: c.num_rows],
                             "b": c.column(1).dictionary_encode(), "c": c.column(2)}) for c in chunks])
        got = encoded.ids(as_dictionaries, ["a", "b"])
        assert [encoded.values[i] for i in got] == [plain.values[i] for i in expected]
        assert sorted(map(str, encoded.by_values)) == sorted(map(str, plain.by_values))


def test_state_round_trips_through_properties() -> None:
    strata = Strata(0.05, 3)
    strata.admit(strata.ids(pa.table({"a": ["p"] * 10 + ["q"] * 2}), ["a"]),
                 Keys.given(np.linspace(0.9, 0.0, 12)))
    again = Strata.from_properties(strata.changed_properties(), 0.05, 3)
    assert {s.id: s for s in again.by_id.values()} == strata.by_id


def test_blocks_hold_every_stratum_of_theirs_and_override_states_recorded_one_by_one() -> None:
    """States are recorded in blocks of BLOCK strata, each block whole whenever one of its
    strata changes; one-stratum states (as earlier samples recorded them) are read, and a block
    recorded later wins over them."""
    from colonnade.table.strata import BLOCK, STRATUM_PREFIX

    strata = Strata(0.05, 3)
    names = [f"s{i}" for i in range(BLOCK + 10)]
    strata.admit(strata.ids(pa.table({"a": names * 2}), ["a"]), Keys.given(np.linspace(0.9, 0.0, 2 * len(names))))
    recorded = strata.changed_properties()
    assert sorted(k for k in recorded if k.startswith("strata:")) == ["strata:0", "strata:1"]
    strata.committed()
    strata.admit(strata.ids(pa.table({"a": ["s3"]}), ["a"]), Keys.given(np.array([0.5])))
    later = strata.changed_properties()
    assert [k for k in later if k.startswith("strata:")] == ["strata:0"]  # only the block that changed
    assert Strata.from_properties({**recorded, **later}, 0.05, 3).by_id == strata.by_id
    # one-stratum states of an earlier build: read, and overridden by a block recorded since
    old = {k: v for k, v in recorded.items() if not k.startswith("strata:")}
    old |= {f"{STRATUM_PREFIX}{i}": f"[{n},{k},{t!r}]" for i, n, k, t in zip(
        range(len(names)), recorded_population(recorded), [2] * len(names), [1.0] * len(names), strict=True)}
    assert Strata.from_properties(old, 0.05, 3).by_id[3].population == 2
    assert Strata.from_properties({**old, **later}, 0.05, 3).by_id[3].population == 3


def recorded_population(properties: dict[str, str]) -> list[int]:
    from colonnade.table.strata import _block_states

    return [int(n) for b in (0, 1) for n in _block_states(properties[f"strata:{b}"])[0]]


def test_blocks_recorded_as_lists_are_read() -> None:
    """Samples recorded their blocks as JSON lists before they were packed: such a block reads
    as the packed one of the same states, and a packed block recorded later overrides it."""
    import json

    strata = Strata(0.05, 3)
    strata.admit(strata.ids(pa.table({"a": [f"s{i % 40}" for i in range(300)]}), ["a"]),
                 Keys.given(np.random.default_rng(1).random(300)))
    packed = strata.changed_properties()
    lists = {**packed, "strata:0": json.dumps({"population": strata.population.tolist(),
                                               "kept": strata.kept.tolist(),
                                               "threshold": strata.threshold.tolist()})}
    assert "packed" in packed["strata:0"] and len(packed["strata:0"]) < len(lists["strata:0"])
    assert Strata.from_properties(lists, 0.05, 3).by_id == Strata.from_properties(packed, 0.05, 3).by_id
    strata.committed()
    strata.admit(strata.ids(pa.table({"a": ["s1"] * 5}), ["a"]), Keys.given(np.full(5, 0.001)))
    later = strata.changed_properties()
    assert Strata.from_properties({**lists, **later}, 0.05, 3).by_id[1].population == \
        strata.by_id[1].population


@pytest.mark.parametrize("fraction", [0.01, 0.2])
def test_drawn_keys_are_uniform_and_admit_a_fraction(fraction: float) -> None:
    rng = np.random.default_rng(5)
    strata = Strata(fraction, 50, [Stratum(0, ("big",)), Stratum(1, ("small",))])
    ids = np.zeros(400_000, dtype=np.int64)
    ids[::1000] = 1  # 400 rows
    positions, keys = strata.admit(ids, Keys.drawn(len(ids), rng))
    big = ids[positions] == 0
    expected = fraction * 399_600
    assert abs(big.sum() - expected) < 5 * np.sqrt(expected)  # a Bernoulli(F) sample
    assert (keys[big] <= fraction).all() and abs(keys[big].mean() - fraction / 2) < 0.02 * fraction
    assert strata.by_id[1].kept == (ids[positions] == 1).sum() >= 50
    assert strata.by_id[0].population == 399_600 and strata.by_id[1].population == 400
