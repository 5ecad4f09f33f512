"""The compiled admission (``colonnade.table._strata``) against the NumPy one: given the same keys,
the same rows, keys, strata states and live keys, batch after batch; and bad buffers refused
with an error, not read past."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from colonnade.table import strata_compiled
from colonnade.table.row_keys import Keys
from colonnade.table.strata import Strata, Stratum


def test_the_compiled_admission_is_built() -> None:
    # `make setup` compiles it; without a compiler the NumPy code admits, more slowly
    assert strata_compiled.AVAILABLE
    assert Strata(0.1, 5).compiled


def _pair(f: float, k: int, count: int) -> tuple[Strata, Strata]:
    made = [Strata(f, k, [Stratum(i, (f"s{i}",)) for i in range(count)]) for _ in range(2)]
    made[0].compiled = False
    return made[0], made[1]


def _live(strata: Strata) -> list[tuple[int, float]]:
    live = strata.ensure_live()
    return sorted(zip(live.ids.tolist(), live.keys.tolist(), strict=True))


@pytest.mark.parametrize("seed", range(60))
def test_given_the_same_keys_both_admissions_agree(seed: int) -> None:
    rng = np.random.default_rng(seed)
    k = int(rng.choice([1, 2, 5, 50]))
    f = float(rng.choice([0.001, 0.01, 0.1, 0.5]))
    count = int(rng.integers(1, 3000))
    weights = rng.pareto(float(rng.choice([0.7, 1.5])), count) + 0.01
    reference, mine = _pair(f, k, count)
    for _ in range(int(rng.integers(1, 10))):
        n = int(rng.integers(0, 40_000))
        ids = rng.choice(count, n, p=weights / weights.sum())
        keys = rng.random(n)
        if seed % 3 == 0:  # ties: equal keys, keys a few ulps apart, keys exactly at F
            keys = np.floor(keys * 50) / 50 + rng.integers(0, 4, n) * np.spacing(keys)
            keys[rng.random(n) < 0.01] = f
        expected = reference.admit(ids, Keys.given(keys))
        found = mine.admit(ids, Keys.given(keys))
        assert np.array_equal(expected[0], found[0]) and np.array_equal(expected[1], found[1])
        assert np.array_equal(reference.population, mine.population)
        assert np.array_equal(reference.kept, mine.kept)
        assert np.array_equal(reference.threshold, mine.threshold)
        assert np.array_equal(reference.dirty, mine.dirty)
        assert _live(reference) == _live(mine)
        if rng.random() < 0.3:  # some rows deleted between appends
            gone = rng.choice(count, 3)
            for strata in (reference, mine):
                strata.remove(np.repeat(gone, 1))


def test_dictionary_ids_agree_and_new_values_make_new_strata() -> None:
    rng = np.random.default_rng(3)
    reference, mine = Strata(0.1, 5), Strata(0.1, 5)
    reference.compiled = False
    for batch in range(6):
        n = 20_000
        geo = pa.array(rng.choice([f"g{i}" for i in range(20 + batch * 10)], n)).dictionary_encode()
        pub = pa.array(rng.choice([f"p{i}" for i in range(40)] + [None], n)).dictionary_encode()
        table = pa.table({"geo": geo, "pub": pub})
        assert np.array_equal(reference.ids(table, ["geo", "pub"]), mine.ids(table, ["geo", "pub"]))
        plain = pa.table({"geo": geo.cast(pa.string()), "n": rng.integers(0, 30, n)})
        assert np.array_equal(reference.ids(plain, ["geo", "n"]), mine.ids(plain, ["geo", "n"]))
    assert reference.values == mine.values


def test_drawn_keys_follow_the_seed() -> None:
    found = []
    for _ in range(2):
        strata = Strata(0.05, 10, [Stratum(i, (i,)) for i in range(50)])
        ids = np.random.default_rng(1).integers(0, 50, 100_000)
        found.append(strata.admit(ids, Keys.drawn(len(ids), np.random.default_rng(9))))
    assert np.array_equal(found[0][0], found[1][0]) and np.array_equal(found[0][1], found[1][1])


def test_ids_outside_the_strata_are_refused() -> None:
    strata = Strata(0.1, 5, [Stratum(i, (i,)) for i in range(3)])
    with pytest.raises(ValueError, match="outside the strata"):
        strata.admit(np.array([0, 1, 7]), Keys.given(np.array([0.5, 0.5, 0.5])))
    with pytest.raises(ValueError, match="outside its column"):
        strata_compiled.combined_ids([np.array([0, 5], dtype=np.int32)], [3], np.zeros(3, dtype=np.int64))
    with pytest.raises(ValueError, match="an entry per combination"):
        strata_compiled.combined_ids([np.array([0, 1]), np.array([0, 1])], [2, 2], np.zeros(3, dtype=np.int64))


@pytest.mark.parametrize("seed", range(40))
def test_the_compiled_string_lookup_agrees_with_index_in(seed: int) -> None:
    rng = np.random.default_rng(seed)
    kind = pa.large_string() if seed % 3 == 0 else pa.string()
    words = ["", "a", "CA", "pub17", "exactly8", "a longer value of many bytes", "ünïcode", "CA "]
    words += [f"w{i}" * int(rng.integers(1, 6)) for i in range(int(rng.integers(0, 300)))]
    words = list(dict.fromkeys(words))
    dictionary = pa.array(words, kind)
    values = [None if rng.random() < 0.1 else words[int(rng.integers(0, len(words)))]
              for _ in range(int(rng.integers(0, 3000)))]
    column = pa.array(values, kind)
    if len(column) > 10 and seed % 2:
        column = column.slice(int(rng.integers(0, 7)), len(column) - 10)  # at a bit offset
    found = strata_compiled.string_indices(column, dictionary)
    assert found is not None
    expected = pc.index_in(column, value_set=dictionary)
    assert found.equals(expected.cast(pa.int32()))
    assert found.null_count == column.null_count
    # a value not in the dictionary: None (the caller grows it)
    missing = pa.concat_arrays([column, pa.array(["not there"], kind)])
    assert strata_compiled.string_indices(missing, dictionary) is None
    # not strings: None (pc.index_in looks them up)
    assert strata_compiled.string_indices(column.cast(pa.binary()), dictionary.cast(pa.binary())) is None


def test_string_offsets_outside_their_data_are_refused() -> None:
    from colonnade.table import _strata

    out = np.empty(2, dtype=np.int32)
    data = np.frombuffer(b"abcd", dtype=np.uint8)
    with pytest.raises(ValueError, match="outside their data"):
        _strata.lookup(np.array([0, 2, 9], dtype=np.int32), data, None, 0, np.array([0, 2], dtype=np.int32),
                       data, out)
    with pytest.raises(ValueError, match="outside their data"):
        _strata.lookup(np.array([0, 2, 4], dtype=np.int32), data, None, 0, np.array([0, 3, 1], dtype=np.int32),
                       data, out)
    with pytest.raises(ValueError, match="inconsistent sizes"):
        _strata.lookup(np.array([0, 2, 4], dtype=np.int32), data, np.zeros(0, dtype=np.uint8), 0,
                       np.array([0, 2], dtype=np.int32), data, out)
    with pytest.raises(TypeError, match="the same for both"):
        _strata.lookup(np.array([0, 2, 4], dtype=np.int32), data, None, 0, np.array([0, 2], dtype=np.int64),
                       data, out)
