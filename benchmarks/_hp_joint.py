"""The joint architecture + hyperparameter search of ``benchmarks/hparams.py``, on MNIST-1D.

Data: MNIST-1D as the ranking benchmarks generate it (8,000 signals of length 40, seed 42),
1,000 signals to train, 1,000 to validate, 3,000 to test: few training signals, so that both
the network and its training decide the accuracy (the digits' ceiling hid both).

The space (``Conv1DSpace``): a stem convolution, then ``depth`` in {1, 2, 3} blocks (a
``Repeat``), each a convolution with its own kernel in {3, 5, 7, 9} (a ``LayerChoice``), batch
norm and ReLU, at ``width`` in {8, 16, 32, 64} channels, a stride-2 convolution after the
first block, global average pooling and a linear head; and the training's ``lr`` (log-uniform
in [1e-4, 1e-1], Adam), ``weight_decay`` (log-uniform in [1e-6, 1e-2]) and ``batch_size``
(integer, log-uniform in [16, 256]). Each trial trains ``epochs`` epochs.

Three searches of equal trials, each with the ``auto`` strategy (which picks TPE for the joint
and the architecture spaces, a GP for the three ranges):

    joint      the whole space
    arch_only  the architecture, trained at Adam's usual defaults (lr 1e-3, no weight decay,
               batch 64)
    hp_only    the three ranges, on the middle architecture (depth 2, width 32, kernels 5)

The score of a search is the test accuracy of its best trial by validation accuracy. A seed
changes the initialisation, the batch order and the strategy's seed (the data split is fixed).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

import nasforge as nf
from nasforge.data.mnist1d import mnist1d_tensors
from nasforge.engine import Experiment
from nasforge.space import hparams
from nasforge.strategy import get_strategy

__all__ = ["Conv1DSpace", "MODES", "DEFAULTS", "FIXED_ARCH", "search"]

MODES = ("joint", "arch_only", "hp_only")
#: the training of an architecture-only search: Adam's usual defaults
DEFAULTS: dict[str, Any] = {"lr": 1e-3, "weight_decay": 0.0, "batch_size": 64}
#: the architecture of a hyperparameter-only search: the middle of each choice
FIXED_ARCH: dict[str, Any] = {"depth": 2, "width": 32, "kernel": 5}
_DATA = {"num_samples": 8000, "seed": 42}
_SPLIT = (1000, 1000, 3000)


def _block(c_in: int, c_out: int, k: int, stride: int = 1) -> nn.Module:
    return nn.Sequential(
        nn.Conv1d(c_in, c_out, k, stride, padding=k // 2, bias=False),
        nn.BatchNorm1d(c_out),
        nn.ReLU(),
    )


class Conv1DSpace(nf.ModelSpace):
    """Returns the 1-D CNN space of the module doc; ``arch`` False fixes the architecture to
    ``FIXED_ARCH``, ``hp`` False leaves the training to ``DEFAULTS``."""

    def __init__(self, arch: bool = True, hp: bool = True) -> None:
        super().__init__()
        width = nf.choice((8, 16, 32, 64), label="width") if arch else FIXED_ARCH["width"]
        kernels = (3, 5, 7, 9)

        def block(i: int) -> nn.Module:
            if not arch:
                return _block(width, width, FIXED_ARCH["kernel"])
            return nf.LayerChoice(
                {f"k{k}": (lambda k=k: _block(width, width, k)) for k in kernels},
                label=f"kernel{i}",
            )

        self.stem = _block(1, width, 5)
        depth = nf.choice((1, 2, 3), label="depth") if arch else FIXED_ARCH["depth"]
        self.first = block(0)
        self.down = _block(width, width, 3, stride=2)
        self.rest = nf.Repeat(lambda i: block(i + 1), depth) if arch else nn.Sequential(
            *[block(i + 1) for i in range(depth)]
        )  # fmt: skip
        self.head = nn.Linear(width, 10)
        if hp:  # read by the evaluator through nf.hparams(model)
            self.lr = nf.uniform(1e-4, 1e-1, log=True, label="lr")
            self.weight_decay = nf.uniform(1e-6, 1e-2, log=True, label="weight_decay")
            self.batch_size = nf.integer(16, 256, log=True, label="batch_size")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.rest(self.down(self.first(self.stem(x))))
        return self.head(x.mean(-1))


def _splits() -> tuple[tuple[torch.Tensor, torch.Tensor], ...]:
    x, y = mnist1d_tensors(_DATA)
    a, b, c = _SPLIT
    b, c = a + b, a + b + c  # the ends of validation and test
    return (x[:a], y[:a]), (x[a:b], y[a:b]), (x[b:c], y[b:c])


class Evaluator:
    """Returns validation and test accuracy of a frozen model after ``epochs`` epochs of Adam
    at its ``lr``, ``weight_decay`` and ``batch_size`` (``DEFAULTS`` where the space has
    none); picklable, seeded."""

    def __init__(self, epochs: int, seed: int) -> None:
        self.epochs, self.seed = epochs, seed

    def __call__(self, model: nn.Module, report: Any) -> dict[str, float]:
        torch.set_num_threads(1)
        (xtr, ytr), (xva, yva), (xte, yte) = _splits()
        hp = {**DEFAULTS, **hparams(model)}
        gen = torch.Generator().manual_seed(self.seed)
        opt = torch.optim.Adam(model.parameters(), lr=hp["lr"], weight_decay=hp["weight_decay"])
        loss_fn = nn.CrossEntropyLoss()
        bs = int(hp["batch_size"])
        for _ in range(self.epochs):
            model.train()
            order = torch.randperm(len(xtr), generator=gen)
            for i in range(0, len(order), bs):
                idx = order[i : i + bs]
                opt.zero_grad(set_to_none=True)
                loss_fn(model(xtr[idx]), ytr[idx]).backward()
                opt.step()
        model.eval()
        with torch.no_grad():
            val = float((model(xva).argmax(1) == yva).float().mean())
            test = float((model(xte).argmax(1) == yte).float().mean())
        if not torch.isfinite(torch.tensor(val)):
            val = 0.0
        return {"accuracy": val, "test_accuracy": test}


def search(mode: str, seed: int, n_trials: int, epochs: int, tmp: Path) -> tuple[float, float]:
    """Returns (test accuracy % of the best trial by validation accuracy, seconds) of one
    search (a picklable job for a process pool)."""
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    start = time.perf_counter()
    exp = Experiment(
        Conv1DSpace(arch=mode != "hp_only", hp=mode != "arch_only"),
        Evaluator(epochs, seed),
        get_strategy("auto", seed=seed),
        directory=tmp / f"mnist1d-{mode}-{seed}",
        n_trials=n_trials,
        metric="accuracy",
        executor="inprocess",
        progress="off",
        save_weights=False,
        threads=1,
    ).run()
    best = exp.best()[0]
    acc = round(100.0 * best.metrics["test_accuracy"], 3)
    logging.warning("mnist1d %s seed %d: %.2f%% (%s)", mode, seed, acc, best.arch)
    return acc, time.perf_counter() - start
