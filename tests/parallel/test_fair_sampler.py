"""Tests of strict-fairness sampling: rounds without replacement, seeds, effect on CSP."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nasforge.errors import ConfigError
from nasforge.parallel.csp import static_partition
from nasforge.parallel.fair_sampler import FairSampler, fair_subnets
from nasforge.parallel.simulator import bubble_floor, layer_orders, sequential_trace, simulate


@given(st.lists(st.integers(1, 6), min_size=1, max_size=5), st.integers(0, 99))
def test_every_round_uses_each_candidate_once(ncand: list[int], seed: int) -> None:
    """Within each block's round of n_b subnets, every candidate appears exactly once."""
    subs = fair_subnets(ncand, 3 * max(ncand), seed)
    assert subs == fair_subnets(ncand, 3 * max(ncand), seed)  # seeded
    for b, n in enumerate(ncand):
        for k in range(3 * max(ncand) // n):
            assert sorted(s[b] for s in subs[k * n : (k + 1) * n]) == list(range(n))


def test_fair_sequence_has_fewer_dependencies_and_keeps_the_order() -> None:
    """Fair subnets of one round share no layer: CSP's dependency floor and bubble drop."""
    m, n, d = 8, 8, 4
    rng = random.Random(0)
    uniform = [tuple(rng.randrange(n) for _ in range(m)) for _ in range(48)]
    fair = fair_subnets([n] * m, 48, seed=0)
    assert Counter(c for s in fair for c in s) == Counter({c: 48 for c in range(n)})
    part = static_partition(m, d)
    fwd, bwd = [[1] * n] * m, [[2] * n] * m
    assert bubble_floor(fair, part, fwd, bwd) < bubble_floor(uniform, part, fwd, bwd)
    res = simulate(fair, part, fwd, bwd, "csp", record_trace=True)
    assert layer_orders(res.trace) == layer_orders(sequential_trace(fair))
    assert res.bubble_ratio < simulate(uniform, part, fwd, bwd, "csp").bubble_ratio


def test_empty_block_is_refused() -> None:
    """A block without candidates raises ConfigError naming the list."""
    with pytest.raises(ConfigError, match=r"\[3, 0\]"):
        FairSampler([3, 0])
