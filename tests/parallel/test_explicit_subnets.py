"""Pipeline runs given an explicit subnet sequence (RunConfig.subnets), e.g. a fair one."""

from __future__ import annotations

import pytest
import torch

from nasforge.parallel.config import RunConfig
from nasforge.parallel.fair_sampler import fair_subnets
from nasforge.parallel.supernet import ChoiceSupernet
from nasforge.parallel.train import train_supernet


@pytest.mark.slow  # a launch; CSP's bitwise two-stage test (test_runtime.py) stays fast
def test_csp_on_an_explicit_fair_sequence_is_bitwise_sequential() -> None:
    """CSP on 2 stages trains the given fair sequence exactly as sequential training does."""
    torch.set_num_threads(1)
    cfg = RunConfig(ChoiceSupernet, {"n_blocks": 4, "n_candidates": 3, "hidden": 16})
    cfg.subnets = [list(s) for s in fair_subnets([3] * 4, 8, seed=5)]
    common = {"steps": 8, "batch_size": 8, "lr": 0.05}
    ref = train_supernet(cfg, pipeline=1, **common)
    run = train_supernet(cfg, pipeline=2, policy="csp", **common)
    assert run.losses == ref.losses
    assert all(torch.equal(run.state[k], v) for k, v in ref.state.items())
