"""Tests of the supernet view (chains of LayerChoice blocks only) and of its learning."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from torch import nn

import nasforge as nf
from nasforge.errors import ConfigError
from nasforge.parallel.config import RunConfig, digits
from nasforge.parallel.runtime import train_sequential
from nasforge.parallel.supernet import ChoiceSupernet, arch_to_subnet, layer_table, n_candidates
from nasforge.parallel.train import TrainResult, subnet_model


class _WithStem(nf.ModelSpace):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(4, 4)
        self.block = nf.LayerChoice([nn.Linear(4, 4), nn.Linear(4, 4)], label="b")


class _WithValue(nf.ModelSpace):
    def __init__(self) -> None:
        super().__init__()
        w = nf.choice([4, 8], label="w")
        self.block = nf.LayerChoice([nn.Linear(4, w), nn.Linear(4, w)], label="b")


def test_choice_supernet_layout() -> None:
    """m blocks x n candidates, keyed (block, candidate); arch dicts map to index tuples."""
    space = ChoiceSupernet(n_blocks=3, n_candidates=4, hidden=8)
    assert n_candidates(space) == [4, 4, 4]
    assert sorted(layer_table(space)) == [(b, c) for b in range(3) for c in range(4)]
    assert arch_to_subnet(space, {"block0": 3, "block1": 0, "block2": 2}) == (3, 0, 2)


def test_non_chain_spaces_are_refused() -> None:
    """Parameters outside the blocks or non-layer decisions give a ConfigError saying why."""
    with pytest.raises(ConfigError, match="outside every LayerChoice"):
        n_candidates(_WithStem())
    with pytest.raises(ConfigError, match="not LayerChoices"):
        n_candidates(_WithValue())
    with pytest.raises(ConfigError, match="n_blocks >= 2"):
        ChoiceSupernet(n_blocks=1)


def test_middle_candidates_start_as_identity() -> None:
    """A fresh middle-block candidate returns its input; block 0 and the head do not."""
    torch.manual_seed(0)
    space = ChoiceSupernet(n_blocks=4, n_candidates=5, hidden=8)
    x = torch.randn(3, 8)
    for b in (1, 2):
        for cand in space.blocks[b].candidates():
            assert torch.equal(cand(x), x)
    assert space.blocks[0].candidate(0)(torch.randn(3, 64)).shape == (3, 8)


def test_first_block_normalises_each_sample() -> None:
    """Block 0's candidates see each sample's features at zero mean and unit variance."""
    torch.manual_seed(0)
    space = ChoiceSupernet(n_blocks=3, n_candidates=2, hidden=8)
    x = torch.rand(4, 64)
    for cand in space.blocks[0].candidates():
        assert torch.allclose(cand(3.0 * x + 1.0), cand(x), atol=1e-3)  # eps=1e-5 in the norm
        assert isinstance(cand[0], nn.Linear)


def test_digits_are_standardised_on_the_training_part() -> None:
    """digits(n) gives zero mean and unit spread per non-constant pixel over the first n."""
    x, y = digits(1400)
    assert x.shape == (1797, 64) and y.shape == (1797,) and x.dtype == np.float32
    sd = x[:1400].std(0)
    live = sd > 0
    assert np.allclose(x[:1400].mean(0), 0.0, atol=1e-5)
    assert np.allclose(sd[live], 1.0, atol=1e-4)


def _held_out_digits(n_train: int) -> tuple[np.ndarray, ...]:
    """Returns sklearn digits split at n_train, standardised with the training part's stats."""
    d = load_digits()
    x, y = d.data.astype(np.float64), d.target
    mu, sd = x[:n_train].mean(0), x[:n_train].std(0)
    x = ((x - mu) / np.where(sd > 0, sd, 1.0)).astype(np.float32)
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def test_documented_deep_supernet_learns() -> None:
    """The docs' example (8 blocks x 4 candidates, hidden 32, 64 steps, lr 0.05) learns.

    Before the residual middle blocks it stayed at ln 10 = 2.3026 and every subnet predicted
    one class (held-out accuracy 0.10). Pipeline runs equal this sequential run bitwise
    (tests/parallel/test_runtime.py), so this is the pipeline's learning too.
    """
    torch.set_num_threads(1)
    xtr, ytr, xte, yte = _held_out_digits(1400)
    kw = {"n_blocks": 8, "n_candidates": 4, "hidden": 32}
    cfg = RunConfig(ChoiceSupernet, kw, steps=64, n_stages=1, lr=0.05, momentum=0.9,
                    batch_size=16, data=(xtr, ytr))  # fmt: skip
    result = train_sequential(cfg)
    assert float(np.mean(result["losses"][-16:])) < 2.1  # measured 1.74; chance is 2.30
    space = ChoiceSupernet(**kw)
    state = TrainResult(cfg, result["losses"], result["state"], 1.0, 0.0).space_state_dict()
    space.load_state_dict(state)
    ss, accs = space.search_space(), []
    with torch.no_grad():
        for seed in range(8):
            logits = subnet_model(space, ss.sample(seed))(torch.as_tensor(xte))
            accs.append(float((logits.argmax(1).numpy() == yte).mean()))
    assert np.mean(accs) > 0.3, accs  # measured 0.50 (8 subnets); chance is 0.10
