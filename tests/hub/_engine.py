"""The engine runs shared by the hub's family tests: a short multi-trial search and a short
one-shot search on tiny random inputs (these check that a space works end to end, not what
it learns)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from nasforge.engine import Experiment
from nasforge.oneshot import search


def tiny_data(n: int = 16, shape: tuple[int, ...] = (3, 8, 8), classes: int = 10) -> tuple:
    """Returns ``(X, y)``: ``n`` seeded random inputs of ``shape`` and labels."""
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, *shape, generator=g), torch.randint(0, classes, (n,), generator=g)


def multi_trial(space: Any, strategy: str, directory: Path, n_trials: int = 3, **data: Any) -> Any:
    """Returns the experiment after ``n_trials`` trials of ``strategy``, each one training step
    of a frozen architecture in this process."""
    x, y = tiny_data(**data)

    def evaluate(model: torch.nn.Module, report: Any) -> dict[str, float]:
        torch.nn.functional.cross_entropy(model(x), y).backward()
        with torch.no_grad():  # one plain SGD step (torch.optim's first import is slow)
            for p in model.parameters():
                if p.grad is not None:
                    p -= 0.01 * p.grad
            accuracy = (model(x).argmax(1) == y).float().mean().item()
        return {"accuracy": accuracy}

    exp = Experiment(
        space,
        evaluate,
        strategy,
        n_trials=n_trials,
        metric="accuracy",
        directory=directory,
        executor="inprocess",
        progress="off",
        save_weights=False,
    )
    return exp.run()


def one_shot(space: Any, algorithm: str, **data: Any) -> Any:
    """Returns the result of one epoch of a one-shot ``algorithm`` on ``space`` (SPOS's
    evolution cut to 4 architectures and 2 cycles, its hybrid selection's reference to 4
    architectures: 200 by default, each recalibrated and scored, which took 40 s of a deep
    space's test)."""
    spos = {"population": 4, "cycles": 2, "sample_size": 2, "bn_batches": 1,
            "selection_reference": 4}  # fmt: skip
    settings = spos if algorithm == "spos" else {}
    data_ = tiny_data(**data)
    return search(space, algorithm, data_, epochs=1, batch_size=8, progress="off", **settings)
