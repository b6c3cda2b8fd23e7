"""Tests of the pure device-memory model: resident bytes per policy and the batch a budget buys."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nasforge.errors import ConfigError
from nasforge.parallel.csp import static_partition
from nasforge.parallel.memory import (
    StageMemory,
    cache_capacity,
    max_batch,
    policy_batch,
    stage_memory,
)

M, N = 8, 16  # blocks, candidates per block
PARAM = [[1000.0 * (1 + c % 3) for c in range(N)] for _ in range(M)]
ACT = [[40.0 * (1 + c % 2) for c in range(N)] for _ in range(M)]
IO = [[10.0] * N for _ in range(M)]


def test_csp_cache_is_smaller_than_bsp_partition() -> None:
    """CSP keeps 3 subnets' stage layers; BSP every candidate of the stage's blocks."""
    blocks = [0, 1]
    csp = stage_memory("csp", blocks, PARAM, ACT, IO, window=4, bulk=4)
    bsp = stage_memory("bsp", blocks, PARAM, ACT, IO, window=4, bulk=4)
    assert cache_capacity(2, 3.0) == 6
    assert csp.params == 6 * 3000.0  # the six largest layers of the stage
    assert bsp.params == sum(PARAM[0]) + sum(PARAM[1])
    assert csp.params < bsp.params and csp.fixed == 3 * csp.params  # state_factor 2


def test_activation_bytes_with_and_without_recomputation() -> None:
    """Recompute keeps stage inputs per subnet in flight plus one subnet's activations."""
    blocks = [2, 3]
    rec = stage_memory("bsp", blocks, PARAM, ACT, IO, window=4, bulk=4)
    assert rec.per_sample == 4 * 10.0 + 2 * 80.0
    asp = stage_memory("asp", blocks, PARAM, ACT, IO, window=4, bulk=4)
    assert asp.per_sample == 4 * 2 * 80.0  # PipeDream: no recompute, every subnet's activations
    assert asp.fixed == rec.fixed + 3 * 2 * 3000.0  # plus 3 stashed weight versions
    off = stage_memory("bsp", blocks, PARAM, ACT, IO, window=4, bulk=4, recompute=False)
    assert off.per_sample == asp.per_sample


@given(
    fixed=st.floats(0, 1e6),
    per=st.floats(1, 1e4),
    budget=st.floats(1, 1e7),
    mult=st.integers(1, 8),
)
@settings(max_examples=200)
def test_max_batch_is_the_largest_that_fits(
    fixed: float, per: float, budget: float, mult: int
) -> None:
    """The batch fits the budget and one more multiple does not (0: nothing fits)."""
    mem = StageMemory(fixed=fixed, per_sample=per, params=fixed)
    b = max_batch(budget, mem, mult)
    assert b % mult == 0 and b >= 0
    if fixed > budget:
        assert b == 0
    else:
        assert mem.used(b) <= budget * (1 + 1e-12)
        assert mem.used(b + mult) > budget


def test_policy_batch_orders_policies_and_refuses_a_supernet_too_big() -> None:
    """At equal memory CSP gets the largest batch; a partition above the budget gets 0."""
    part = static_partition(M, 4)
    budget = 2 * (sum(PARAM[0]) + sum(PARAM[1])) * 3  # twice BSP's resident bytes per stage
    batches = {p: policy_batch(p, part, PARAM, ACT, IO, budget)[0] for p in ("csp", "bsp", "asp")}
    assert batches["csp"] > batches["bsp"] > batches["asp"] > 0
    small = 3 * 6 * 3000.0 * 1.5  # holds the CSP cache, not the BSP partition
    assert policy_batch("bsp", part, PARAM, ACT, IO, small)[0] == 0
    assert policy_batch("csp", part, PARAM, ACT, IO, small)[0] > 0


def test_bad_inputs_raise_config_error() -> None:
    """Unknown policy, empty stage, bad budget: ConfigError naming the value."""
    with pytest.raises(ConfigError, match="'gpipe'"):
        stage_memory("gpipe", [0], PARAM, ACT, IO, window=1, bulk=1)
    with pytest.raises(ConfigError, match="at least one block"):
        stage_memory("csp", [], PARAM, ACT, IO, window=1, bulk=1)
    with pytest.raises(ConfigError, match="budget"):
        max_batch(0, StageMemory(1.0, 1.0, 1.0))


@given(
    sizes=st.lists(st.lists(st.integers(0, 50), min_size=1, max_size=5), min_size=1, max_size=4),
    cache=st.floats(0.5, 6.0),
)
@settings(max_examples=100)
def test_csp_never_holds_more_parameters_than_bsp(sizes: list[list[int]], cache: float) -> None:
    """Whatever the layer sizes and cache budget, the cache is a subset of the partition."""
    blocks = list(range(len(sizes)))
    zeros = [[0.0] * len(r) for r in sizes]
    ones = [[1.0] * len(r) for r in sizes]
    csp = stage_memory("csp", blocks, sizes, ones, zeros, window=2, bulk=2, cache_subnets=cache)
    bsp = stage_memory("bsp", blocks, sizes, ones, zeros, window=2, bulk=2)
    assert csp.params <= bsp.params
