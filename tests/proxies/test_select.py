"""Ranking sampled architectures by a proxy: distinct, seeded, best first."""

import pytest
import torch

from nasforge.errors import ConfigError
from nasforge.proxies import rank_by_proxy, score_arch
from nasforge.space.search_space import arch_id
from nasforge.spaces.bench_cell import BenchCellSpace


def test_rank_by_proxy_returns_distinct_archs_best_first_and_is_seeded() -> None:
    """Scores match score_arch, come sorted descending, and the same seed repeats the list."""
    space = BenchCellSpace(channels=4)
    x, y = torch.randn(8, 1, 12, 12), torch.randint(0, 10, (8,))
    ranked = rank_by_proxy(space, "synflow", x, y, n_samples=5, seed=2)
    assert len({arch_id(a) for a, _ in ranked}) == 5
    scores = [s for _, s in ranked]
    assert scores == sorted(scores, reverse=True)
    arch, best = ranked[0]
    assert best == score_arch(space, arch, "synflow", x, y, seed=2)
    assert ranked == rank_by_proxy(space, "synflow", x, y, n_samples=5, seed=2)
    with pytest.raises(ConfigError, match="n_samples"):
        rank_by_proxy(space, "synflow", x, y, n_samples=0)
