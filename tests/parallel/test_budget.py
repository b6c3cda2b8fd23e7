"""The largest batch a run fits in a device-memory budget, from the space's measured layers."""

from __future__ import annotations

import pytest

from nasforge.errors import ConfigError
from nasforge.parallel.budget import fit_batch, layer_bytes
from nasforge.parallel.config import RunConfig
from nasforge.parallel.supernet import ChoiceSupernet
from nasforge.parallel.train import train_supernet

SPACE = {"n_blocks": 4, "n_candidates": 6, "hidden": 64}


def _cfg(**kw) -> RunConfig:
    return RunConfig(ChoiceSupernet, dict(SPACE), n_stages=2, **kw)


def test_layer_bytes_are_the_layers_own_sizes() -> None:
    """A hidden Linear(64, 64) candidate holds 64*64+64 float parameters, outputs 64 floats per
    sample and saves something for backward; every block has a row per candidate."""
    params, acts, ios = layer_bytes(_cfg())
    assert [len(r) for r in params] == [6, 6, 6, 6]
    assert params[1][0] >= (64 * 64 + 64) * 4
    assert ios[1][0] == 64 * 4
    assert all(a > 0 for row in acts for a in row)


def test_csp_fits_a_larger_batch_than_bsp_in_the_same_budget() -> None:
    """Under one budget, CSP (a cache of 1 subnet's layers) fits a larger batch than BSP (every
    candidate resident); the batch is the largest that fits: one more sample would not."""
    budget = 1.2e6
    csp, csp_mems = fit_batch(_cfg(policy="csp", cache_subnets=1.0), budget)
    bsp, bsp_mems = fit_batch(_cfg(policy="bsp"), budget)
    assert csp > bsp >= 1
    for batch, mems in ((csp, csp_mems), (bsp, bsp_mems)):
        assert all(m.used(batch) <= budget for m in mems)
        assert any(m.used(batch + 1) > budget for m in mems)


def test_a_budget_below_the_parameters_is_a_clear_error() -> None:
    """A budget smaller than the resident parameters and their optimizer state fits no batch."""
    with pytest.raises(ConfigError, match="does not fit one sample under policy 'bsp'"):
        fit_batch(_cfg(policy="bsp"), 1e4)
    with pytest.raises(ConfigError, match="must be > 0"):
        fit_batch(_cfg(), 0)


def test_train_supernet_trains_with_the_batch_the_budget_gives() -> None:
    """memory_budget replaces batch_size with the fitted batch, and training runs with it."""
    cfg = _cfg(policy="csp", cache_subnets=1.0)
    want, _ = fit_batch(cfg, 1.2e6)
    result = train_supernet(
        dict(SPACE), steps=4, pipeline=1, cache_subnets=1.0, memory_budget=1.2e6, batch_size=8
    )
    assert result.config.batch_size != 8 and len(result.losses) == 4
    one_stage, _ = fit_batch(RunConfig(ChoiceSupernet, dict(SPACE), n_stages=1,
                                       cache_subnets=1.0), 1.2e6)  # fmt: skip
    assert result.config.batch_size == one_stage and want >= 1
