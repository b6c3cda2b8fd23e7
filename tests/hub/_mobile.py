"""What the mobile and transformer families' tests add to :mod:`tests.hub._engine`: both
searches (random, evolution) or both path supernets (SPOS, NASB) with their checks, and a
text evaluator for TextNAS (token ids, not images)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

import nasforge as nf
from nasforge.engine import Experiment

from ._engine import multi_trial, one_shot, tiny_data

__all__ = ["both_searches", "both_supernets", "text_searches"]


def _check(space: Any, exp: Any, n_trials: int) -> None:
    ss = space.search_space()
    trials = exp.trials()
    assert len(trials) == n_trials, [t.error for t in trials]
    assert all(t.status in ("done", "cached") for t in trials), [t.error for t in trials]
    assert all(ss.validate(t.arch) == t.arch for t in trials)
    assert len({nf.arch_id(t.arch) for t in trials}) > 1  # it searched, not repeated one


def both_searches(space: Any, directory: Path, **data: Any) -> None:
    """Runs a random and an evolution search of 3 trials each (one training step per trial);
    every trial finished, on a valid and not always the same architecture."""
    for strategy in ("random", "evolution"):
        _check(space, multi_trial(space, strategy, directory / strategy, **data), 3)


def both_supernets(space: Any, n_classes: int, **data: Any) -> None:
    """Searches one epoch with SPOS's and with NASB's supernet of ``space``; each finds an
    architecture that freezes and classifies."""
    x, _ = tiny_data(**data)
    for algorithm in ("spos", "nasb"):
        result = one_shot(space, algorithm, **data)
        assert result.supernet is not None and len(result.history) == 1
        model = nf.freeze(space, result.arch).eval()
        assert model(x[:2]).shape == (2, n_classes)


def _text_evaluate(model: torch.nn.Module, report: Any) -> dict[str, float]:
    """Returns the accuracy after one SGD step on 8 seeded sequences of 12 token ids < 100."""
    g = torch.Generator().manual_seed(0)
    x, y = torch.randint(0, 100, (8, 12), generator=g), torch.randint(0, 5, (8,), generator=g)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p -= 0.01 * p.grad
        return {"accuracy": (model(x).argmax(1) == y).float().mean().item()}


def text_searches(space: Any, directory: Path) -> None:
    """Runs a random and an evolution search of a text space (token ids, 5 classes)."""
    for strategy in ("random", "evolution"):
        exp = Experiment(
            space, _text_evaluate, strategy, n_trials=3, metric="accuracy",
            directory=directory / strategy, executor="inprocess", progress="off",
            save_weights=False,
        ).run()  # fmt: skip
        _check(space, exp, 3)
