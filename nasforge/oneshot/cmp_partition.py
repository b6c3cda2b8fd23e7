"""A one-shot supernet as a chain of *units*, and its split into M consecutive partitions
balanced by measured per-unit time (consecutive model parallel, NASB-CMP §2.2).

A unit maps a tuple of tensors to a tuple of tensors; running the units in order computes the
supernet's forward. Which spaces split:

    cell networks    a model with ``stem``, ``cells`` and ``classifier`` (DartsCellSpace):
                     stem | cell 0 | ... | cell n-1 | classifier; the state between units is
                     the pair (s0, s1) of the last two cell outputs, as in the space's forward
    chain spaces     a space whose ``chain()`` returns its modules in forward order, each
                     taking and returning one tensor (the space's forward is their chain)
    nn.Sequential    its children

The balance is the pipeline package's min-max partition
(:func:`nasforge.oneshot.cmp_schedule.balanced_partition`, the same as
``nasforge.parallel.csp.balanced_partition``) over each unit's measured time of one
consecutive step (forward and backward of the architecture pass and of the weight pass).

Invariants: the units of a supernet are the same objects in the same order on every call; a
partition is a contiguous, non-empty range of units and the partitions cover every unit.
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Iterable, Sequence
from typing import Any

import torch
from torch import nn

from nasforge.errors import ConfigError, ScheduleError, SpaceError
from nasforge.oneshot.cmp_schedule import balanced_partition
from nasforge.oneshot.supernet import Supernet

__all__ = ["units", "unit_costs", "phase_costs", "partition", "owned_names", "run", "backward"]

Tensors = tuple[torch.Tensor, ...]


class _Stem(nn.Module):
    """Returns (s, s): the stem's output twice, the first two states of a cell network."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        stem = model.stem
        assert isinstance(stem, nn.Module), "a cell network's stem is a module"
        self.stem = stem

    def forward(self, x: torch.Tensor) -> Tensors:
        s = self.stem(x)
        return s, s


class _Cell(nn.Module):
    """Returns (s1, cell(s0, s1)): one cell step of a cell network."""

    def __init__(self, cell: nn.Module) -> None:
        super().__init__()
        self.cell = cell

    def forward(self, s0: torch.Tensor, s1: torch.Tensor) -> Tensors:
        return s1, self.cell(s0, s1)


class _Head(nn.Module):
    """Returns (logits,): the classifier on the globally pooled last state."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        classifier = model.classifier
        assert isinstance(classifier, nn.Module), "a cell network's classifier is a module"
        self.classifier = classifier

    def forward(self, s0: torch.Tensor, s1: torch.Tensor) -> Tensors:
        return (self.classifier(s1.mean(dim=(2, 3))),)


class _One(nn.Module):
    """Returns (module(x),): a one-tensor module as a unit."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, x: torch.Tensor) -> Tensors:
        return (self.module(x),)


def units(net: Supernet) -> list[nn.Module]:
    """Returns the supernet's forward as a chain of units (see the module docstring).

    Raises:
        SpaceError: the space is none of the forms that split.
    """
    cached = getattr(net, "_cmp_units", None)
    if cached is not None:
        return cached
    model = net.model
    chain = getattr(model, "chain", None)
    if all(hasattr(model, a) for a in ("stem", "cells", "classifier")):  # the cell network
        cells: Iterable[nn.Module] = getattr(model, "cells")  # noqa: B009 - a ModuleList
        out: list[nn.Module] = [_Stem(model), *(_Cell(c) for c in cells), _Head(model)]
    elif callable(chain):
        out = [_One(m) for m in chain()]
    elif isinstance(model, nn.Sequential):
        out = [_One(m) for m in model]
    else:
        raise SpaceError(
            f"model parallel search splits a DartsCellSpace, an nn.Sequential, or a space with a "
            f"chain() method returning its modules in forward order; {type(model).__name__} is "
            "none of these: add chain() to it, or search it on one device (model_parallel=1)"
        )
    object.__setattr__(net, "_cmp_units", out)  # not submodules: the state dict is unchanged
    return out


def owned_names(net: Supernet, mods: Sequence[nn.Module]) -> set[str]:
    """Returns the state-dict keys of ``net`` whose tensors live in ``mods``."""
    inside = {id(t) for m in mods for t in (*m.parameters(), *m.buffers())}
    named = {**dict(net.named_parameters()), **dict(net.named_buffers())}
    return {k for k, t in named.items() if id(t) in inside}


def run(mods: Sequence[nn.Module], x: Tensors) -> Tensors:
    """Returns the state after running ``mods`` in order on ``x``."""
    for m in mods:
        x = m(*x)
    return x


def backward(outs: Sequence[torch.Tensor], grads: Sequence[Any], inputs: Any = None) -> None:
    """Backpropagates ``grads`` into ``outs`` (pairs without a gradient, or whose output needs
    none, are skipped)."""
    pairs = [(o, g) for o, g in zip(outs, grads) if g is not None and o.requires_grad]
    if pairs:
        torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs], inputs=inputs)


def phase_costs(
    net: Supernet, batch: tuple[torch.Tensor, torch.Tensor], repeats: int = 3
) -> list[dict[str, float]]:
    """Returns, per unit, the median time (s) of each phase's sub-task on ``batch``: ``F_A``,
    ``B_A`` (architecture parameters in the graph) and ``F_w``, ``B_w`` (weights only).

    Measured on a deep copy, so ``net`` (its weights, batch-norm statistics and gates) is
    untouched.
    """
    net = copy.deepcopy(net)
    object.__setattr__(net, "_cmp_units", None)
    mods = units(net)
    net.algorithm.draw_gates(net)
    x, y = batch
    samples: list[dict[str, list[float]]] = [
        {p: [] for p in ("F_A", "B_A", "F_w", "B_w")} for _ in mods
    ]
    alphas = net.arch_parameters()
    for _ in range(repeats):
        for arch_pass in (True, False):
            fwd, bwd = ("F_A", "B_A") if arch_pass else ("F_w", "B_w")
            for a in alphas:
                a.requires_grad_(arch_pass)
            state: Tensors = (x,)
            graphs = []
            for i, m in enumerate(mods):
                inp = tuple(t.detach().requires_grad_(i > 0) for t in state)
                t0 = time.perf_counter()
                state = m(*inp)
                samples[i][fwd].append(time.perf_counter() - t0)
                graphs.append((inp, state))
            grads: Any = (nn.functional.cross_entropy(state[0], y),)
            for i in range(len(mods) - 1, -1, -1):
                inp, out = graphs[i]
                t0 = time.perf_counter()
                if i == len(mods) - 1:
                    grads[0].backward()
                else:
                    backward(out, grads)
                samples[i][bwd].append(time.perf_counter() - t0)
                grads = tuple(t.grad for t in inp)
            net.zero_grad(set_to_none=True)
    for a in alphas:
        a.requires_grad_(True)
    return [{p: statistics.median(v) for p, v in s.items()} for s in samples]


def unit_costs(
    net: Supernet, batch: tuple[torch.Tensor, torch.Tensor], repeats: int = 3
) -> list[float]:
    """Returns each unit's median time (s) of one consecutive step on ``batch`` (the sum of
    its four phases' sub-tasks, :func:`phase_costs`)."""
    return [sum(c.values()) for c in phase_costs(net, batch, repeats)]


def partition(costs: Sequence[float], m: int) -> tuple[range, ...]:
    """Returns ``m`` contiguous unit ranges that minimise the largest partition's cost.

    Raises:
        ConfigError: ``m`` is not an int in ``[1, number of units]``.
    """
    try:
        return balanced_partition(list(costs), m, "units", "partitions")
    except ScheduleError as exc:
        raise ConfigError(
            f"model_parallel={m!r} partitions cannot split {len(costs)} units (a cell network "
            f"has stem, cells and classifier); use an int from 1 to {len(costs)}"
        ) from exc
