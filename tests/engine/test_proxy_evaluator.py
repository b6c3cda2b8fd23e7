"""A multi-trial run with a proxy: the filter's archs are trained, each recording its proxy."""

import pytest
import torch

from nasforge.engine import Experiment
from nasforge.engine.proxy_evaluator import ProxyEvaluator
from nasforge.errors import ConfigError
from nasforge.proxies import score_arch, top_by_proxy
from nasforge.space.search_space import arch_id
from nasforge.spaces.bench_cell import BenchCellSpace
from nasforge.strategy import RandomStrategy


def _n_params(model: torch.nn.Module, report) -> dict:  # noqa: ANN001 - the engine's report
    return {"accuracy": float(sum(p.numel() for p in model.parameters()))}


def test_a_filtered_run_trains_the_proxy_best_and_records_the_proxy(tmp_path) -> None:
    """Sample 6, keep the best 2 by synflow, run them: those 2 are the trials, with their values."""
    space = BenchCellSpace(channels=4)
    x, y = torch.randn(8, 1, 12, 12), torch.randint(0, 10, (8,))
    kept = top_by_proxy(space, "synflow", x, y, n_samples=6, keep=2, seed=0)
    exp = Experiment(
        space,
        ProxyEvaluator(_n_params, "synflow", x, y, seed=0),
        RandomStrategy(seed=0, initial=kept),
        directory=tmp_path / "run",
        n_trials=len(kept),
        metric="accuracy",
        executor="inprocess",
        progress="off",
    ).run()
    trials = sorted(exp.best(10), key=lambda t: t.id)
    assert [arch_id(t.arch) for t in trials] == [arch_id(a) for a in kept]
    for t in trials:
        assert t.metrics["proxy_synflow"] == pytest.approx(
            score_arch(space, t.arch, "synflow", x, y)
        )
        assert t.metrics["accuracy"] > 0


def test_proxy_evaluator_refuses_unknown_proxies_and_mismatched_batches() -> None:
    """A typo or a batch without a target per input is a ConfigError naming the value."""
    x, y = torch.randn(4, 1, 8, 8), torch.zeros(4, dtype=torch.long)
    with pytest.raises(ConfigError, match="synflwo"):
        ProxyEvaluator(_n_params, "synflwo", x, y)
    with pytest.raises(ConfigError, match="3 targets"):
        ProxyEvaluator(_n_params, "snip", x, y[:3])
