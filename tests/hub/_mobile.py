"""What the mobile and transformer families' tests share: a short multi-trial search and the
one-shot supernets, run end to end on tiny inputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

import nasforge as nf
from nasforge.engine import Experiment
from nasforge.oneshot import search
from nasforge.strategy import RandomStrategy, RegularizedEvolution

__all__ = ["image_eval", "text_eval", "multi_trial", "one_shot"]


def _one_step(model: nn.Module, x: torch.Tensor, n_classes: int) -> float:
    """Returns minus the loss after one SGD step on a fixed random batch (a real, tiny train)."""
    gen = torch.Generator().manual_seed(0)
    y = torch.randint(0, n_classes, (x.shape[0],), generator=gen)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    model.train()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    with torch.no_grad():
        return -float(nn.functional.cross_entropy(model(x), y))


def image_eval(model: nn.Module, report: Any) -> float:
    """Returns the evaluator's score of an image model on four 3×32×32 images, 10 classes."""
    x = torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    return _one_step(model, x, 10)


def text_eval(model: nn.Module, report: Any) -> float:
    """Returns the evaluator's score of a text model on four sequences of 12 token ids < 100,
    5 classes."""
    x = torch.randint(0, 100, (4, 12), generator=torch.Generator().manual_seed(1))
    return _one_step(model, x, 5)


def multi_trial(space: Any, evaluator: Any, directory: Path, n_trials: int = 3) -> None:
    """Runs a random and an evolution search of ``n_trials`` each and checks their records:
    every trial finished with a finite score, on a valid architecture of the space."""
    ss = space.search_space()
    for name, strategy in (
        ("random", RandomStrategy(seed=0)),
        ("evolution", RegularizedEvolution(2, 2, seed=0)),
    ):
        exp = Experiment(
            space, evaluator, strategy, directory=directory / name, n_trials=n_trials,
            executor="inprocess", save_weights=False, progress="off", crossmodel=False,
            threads=1,
        ).run()  # fmt: skip
        trials = exp.trials()
        assert len(trials) == n_trials, (name, [t.error for t in trials])
        assert all(t.status in ("done", "cached") for t in trials), [t.error for t in trials]
        assert all(ss.validate(t.arch) == t.arch for t in trials)
        assert len({nf.arch_id(t.arch) for t in trials}) > 1  # it searched, not repeated one


def one_shot(space: Any, x: torch.Tensor, y: torch.Tensor, n_classes: int) -> None:
    """Builds SPOS's and NASB's supernets of ``space`` by searching one epoch on ``(x, y)``;
    each returns an architecture that freezes and classifies ``x``."""
    for algorithm in ("spos", "nasb"):
        result = search(
            space, algorithm, (x, y), epochs=1, batch_size=x.shape[0] // 2, progress="off",
            threads=1, population=2, cycles=2, sample_size=1, bn_batches=1,
        )  # fmt: skip
        model = nf.freeze(space, result.arch).eval()
        assert model(x).shape == (x.shape[0], n_classes)
        assert result.supernet is not None and len(result.history) == 1
