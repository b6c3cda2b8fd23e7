"""Tests of the subnet samplers and the bounded producer-consumer feed."""

from __future__ import annotations

import itertools

import pytest

from nasforge.errors import ArchitectureError, ConfigError
from nasforge.parallel.sampler import SubnetFeed, get_sampler


def _draw(name: str, seed: int, n: int = 60) -> list[tuple[int, ...]]:
    """Returns n subnets, telling a learning sampler each one's loss (the sum of its indices)."""
    sampler = get_sampler(name, [3, 4, 5], seed, lag=4)
    out = []
    for seq, subnet in enumerate(itertools.islice(sampler, n)):
        out.append(subnet)
        getattr(sampler, "report", lambda s, v: None)(seq, float(sum(subnet)))
    return out


@pytest.mark.parametrize("name", ["uniform", "evolution", "fair"])
def test_same_seed_same_sequence(name: str) -> None:
    """A sampler gives the same subnets for the same seed (and losses), others for another."""
    a, b, c = _draw(name, 7), _draw(name, 7), _draw(name, 8)
    assert a == b and a != c
    assert all(0 <= s[i] < n for s in a for i, n in enumerate([3, 4, 5]))


def test_evolution_feed_learns_from_the_losses() -> None:
    """The evolution sampler is the engine's regularized evolution fed each loss `lag` subnets
    late: with loss = the sum of the indices, its last 100 subnets have a clearly lower sum
    than the uniform sampler's (0.69 of it with seed 0)."""
    evo, uni = _draw("evolution", 0, 200), _draw("uniform", 0, 200)
    assert sum(map(sum, evo[-100:])) < 0.8 * sum(map(sum, uni[-100:]))


def test_evolution_feed_waits_for_the_loss_it_needs() -> None:
    """Asking subnet lag+s before the loss of subnet s arrived times out with a clear error."""
    from nasforge.parallel.sampler import StrategyFeed
    from nasforge.strategy import RegularizedEvolution

    feed = StrategyFeed(RegularizedEvolution(4, 2, 0), [2, 2], lag=2, timeout=0.2)
    it = iter(feed)
    next(it), next(it)
    with pytest.raises(ConfigError, match="loss of subnet 0 did not arrive"):
        next(it)


def test_feed_yields_in_order_through_a_small_queue() -> None:
    """The feed hands out sequence ids 0..n-1 in order even with a queue of one slot."""
    ref = list(itertools.islice(get_sampler("uniform", [2, 2], 0), 20))
    feed = SubnetFeed(get_sampler("uniform", [2, 2], 0), [2, 2], total=20, maxsize=1)
    assert [feed.get(i) for i in range(20)] == ref
    assert feed.get(3) == ref[3]  # already retrieved ids stay available
    feed.close()


def test_feed_reports_a_bad_subnet() -> None:
    """A source naming a missing candidate makes get() raise ArchitectureError."""
    feed = SubnetFeed(iter([[0, 1], [0, 5]]), [2, 2], total=2)
    assert feed.get(0) == (0, 1)
    with pytest.raises(ArchitectureError, match="candidate 5 in block 1"):
        feed.get(1)
    with pytest.raises(ConfigError):
        get_sampler("bayes", [2], 0)
