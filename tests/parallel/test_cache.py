"""Tests of the pure LRU layer-cache policy: budget, pinning, hits, evictions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nasforge.errors import ConfigError
from nasforge.parallel.cache import LayerCache, prefetch_plan


def test_hits_misses_and_lru_eviction() -> None:
    """A miss loads, a hit counts, and the least recently used unpinned layer goes first."""
    c = LayerCache(2)
    assert c.access("a") == (False, [])
    c.release(["a"])
    assert c.access("b") == (False, [])
    c.release(["b"])
    assert c.access("a") == (True, [])  # a is now most recent
    c.release(["a"])
    assert c.access("c") == (False, ["b"])
    assert (c.hits, c.misses, c.evictions) == (1, 3, 1)
    assert c.hit_rate == 0.25


def test_pinned_layers_are_never_evicted() -> None:
    """Prefetch skips what does not fit around pinned layers; access then fails loudly."""
    c = LayerCache(2)
    c.access("a")
    c.access("b")
    assert c.prefetch(["c"]) == ([], [])
    with pytest.raises(ConfigError, match="full of pinned"):
        c.access("c")
    with pytest.raises(ConfigError):
        LayerCache(0)


@given(st.lists(st.tuples(st.sampled_from("pfr"), st.integers(0, 6)), max_size=60))
def test_budget_holds_under_any_sequence(ops: list[tuple[str, int]]) -> None:
    """Residency never exceeds capacity and hits + misses equals accesses."""
    c = LayerCache(3)
    accesses = 0
    for op, key in ops:
        if op == "p":
            c.prefetch([key, key + 1])
        elif op == "f" and len(c.pinned) < 3:
            c.access(key)
            accesses += 1
        else:
            c.release([key])
        assert len(c.resident) <= 3
        assert c.pinned <= set(c.resident)
    assert c.hits + c.misses == accesses


def test_prefetch_plan_takes_the_nearest_tasks_within_capacity() -> None:
    """The plan lists predicted layers nearest task first, each once, skips pinned ones and
    cuts the far end where pinned + planned reach the capacity."""
    tasks = [["a", "b"], ["b", "c", "d"], ["e"]]
    assert prefetch_plan(tasks, capacity=6, pinned={"a"}) == ["b", "c", "d", "e"]
    assert prefetch_plan(tasks, capacity=4, pinned={"a"}) == ["b", "c", "d"]
    assert prefetch_plan(tasks, capacity=2, pinned={"x", "y"}) == []
    assert prefetch_plan([], capacity=3) == []


@given(
    st.lists(st.lists(st.integers(0, 9), max_size=4), max_size=5),
    st.integers(1, 8),
    st.sets(st.integers(0, 9), max_size=3),
)
def test_prefetch_plan_is_a_prefix_that_fits(tasks: list, capacity: int, pinned: set) -> None:
    """The plan is a prefix of the deduplicated unpinned layers and fits next to the pinned."""
    plan = prefetch_plan(tasks, capacity, pinned)
    wanted = [x for x in dict.fromkeys(x for t in tasks for x in t) if x not in pinned]
    assert plan == wanted[: len(plan)]
    assert len(pinned | set(plan)) <= max(capacity, len(pinned))
    assert len(plan) == max(0, min(len(wanted), capacity - len(pinned)))


def test_prefetch_accounting_counts_used_and_wasted_layers() -> None:
    """A prefetched layer accessed later counts as used; one evicted unused counts as wasted;
    the prefetched fraction is prefetches over all loads."""
    c = LayerCache(2)
    c.prefetch(["a", "b"])
    c.access("a")  # used
    c.release(["a"])
    c.access("c")  # a miss: evicts b, which was never used
    assert (c.prefetches, c.prefetch_used, c.prefetch_wasted, c.misses) == (2, 1, 1, 1)
    assert c.prefetched_fraction == 2 / 3
    c.access("c")  # a hit on a layer loaded on demand: not a prefetch's use
    assert c.prefetch_used == 1
