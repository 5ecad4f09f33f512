"""The bounded memo the query layer keeps its per-text findings in."""

from __future__ import annotations

import threading

import pytest

from colonnade.query.memo import Memo


def test_a_value_is_computed_once_and_none_is_a_value() -> None:
    memo: Memo[str, int | None] = Memo()
    calls: list[str] = []

    def compute(key: str, value: int | None) -> int | None:
        calls.append(key)
        return value
    assert memo.get("a", lambda: compute("a", None)) is None
    assert memo.get("a", lambda: compute("a", 1)) is None  # None was kept, not computed again
    assert memo.get("b", lambda: compute("b", 2)) == 2
    assert memo.get("b", lambda: compute("b", 3)) == 2
    assert calls == ["a", "b"]


def test_an_error_is_raised_and_nothing_kept() -> None:
    memo: Memo[str, int] = Memo()

    def fail() -> int:
        raise ValueError("no")
    with pytest.raises(ValueError, match="no"):
        memo.get("a", fail)
    assert len(memo) == 0
    assert memo.get("a", lambda: 5) == 5


def test_a_full_memo_is_emptied_and_never_holds_more_than_its_size() -> None:
    memo: Memo[int, int] = Memo(size=4)
    for i in range(10):
        assert memo.get(i, lambda i=i: i * i) == i * i  # type: ignore[misc]
        assert 1 <= len(memo) <= 4
    assert len(memo) == 2  # emptied at 4, 8: holds 8 and 9
    assert memo.get(9, lambda: -1) == 81 and memo.get(0, lambda: -1) == -1


def test_threads_sharing_a_small_memo_always_get_the_values_for_their_keys() -> None:
    memo: Memo[int, int] = Memo(size=8)
    wrong: list[tuple[int, int]] = []

    def work(seed: int) -> None:
        for i in range(20_000):
            key = (i * 7 + seed) % 50
            found = memo.get(key, lambda key=key: key + 1000)  # type: ignore[misc]
            if found != key + 1000:
                wrong.append((key, found))
            if len(memo) > 8:
                wrong.append((-1, len(memo)))
    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong
