"""The shortlist's choice and settings (pure)."""

import pytest

from nasforge.errors import ConfigError
from nasforge.twostage.shortlist import Candidate, ShortlistSettings, choose


def _c(i: int, score: float, key: str, params: float = 10.0) -> Candidate:
    return Candidate({"x": i}, f"id{i}", key, score, {"params": params, "flops": params * 2})


def test_choose_keeps_the_best_within_budget_one_per_function() -> None:
    """Best first, ties in the given order; over-budget and repeated functions left out."""
    cands = [_c(0, 0.5, "a"), _c(1, 0.9, "b", params=99), _c(2, 0.7, "a"), _c(3, 0.7, "c"),
             _c(4, 0.5, "d"), _c(5, 0.1, "e")]  # fmt: skip
    got = choose(cands, 3, {"params": 50})
    assert [c.arch_id for c in got] == ["id2", "id3", "id4"]  # id0 computes id2's function
    assert [c.arch_id for c in choose(cands, 10, None)] == ["id1", "id2", "id3", "id4", "id5"]
    assert choose(cands, 3, {"flops": 1}) == []


def test_by_size_fills_its_slots_with_the_largest_the_scores_left() -> None:
    """by_size of k go to the largest candidates (FLOPs) the best scores did not take, within
    the budget and one per function; by_size 0 is the scores alone, k the sizes alone."""
    cands = [_c(0, 0.9, "a", 10), _c(1, 0.8, "b", 20), _c(2, 0.7, "c", 30), _c(3, 0.6, "d", 40),
             _c(4, 0.5, "a", 50)]  # fmt: skip
    ids = lambda got: [c.arch_id for c in got]  # noqa: E731
    assert ids(choose(cands, 3, None)) == ["id0", "id1", "id2"]
    assert ids(choose(cands, 3, None, by_size=1)) == ["id0", "id1", "id3"]
    assert ids(choose(cands, 3, None, by_size=2)) == ["id0", "id3", "id2"]  # id4 computes id0's
    assert ids(choose(cands, 3, {"params": 35}, by_size=2)) == ["id0", "id2", "id1"]
    assert ids(choose(cands, 3, None, by_size=3)) == ["id4", "id3", "id2"]


def test_settings_take_the_one_shot_settings_beside_their_own_and_refuse_bad_ones() -> None:
    """Unknown keys are the algorithm's settings; a bad k, pool or budget is one line."""
    s = ShortlistSettings.from_mapping({"algorithm": "spos", "k": 2, "pool": 5, "epochs": 3})
    assert s.settings == {"epochs": 3} and s.data()["k"] == 2
    assert ShortlistSettings.from_mapping(s.data()) == s
    for bad, words in [({"k": 0}, "k must be"), ({"k": 9, "pool": 4}, "pool >= k"),
                       ({"budget": {"latency": 3}}, "latency budget belongs to a one-shot"),
                       ({"budget": {"memory": 3}}, "bounds 'memory'"),
                       ({"budget": {"params": -1}}, "number > 0"), ([1], "a mapping"),
                       ({"k": 4, "by_size": 5}, "by_size \\(5\\) is more than k"),
                       ({"by_size": -1}, "by_size must be an int >= 0")]:  # fmt: skip
        with pytest.raises(ConfigError, match=words):
            ShortlistSettings.from_mapping(bad)  # type: ignore[arg-type]
