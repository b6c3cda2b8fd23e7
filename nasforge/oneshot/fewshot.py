"""Few-shot supernets (Zhao et al., ICML 2021): the one-shot SPOS supernet split on the candidate
operations of one or two decisions into sub-supernets, each started from the trained supernet.

A sub-supernet holds every weight of the space but only ever trains, and scores, the
architectures whose split decisions take its operations, so those architectures no longer
share weights with the others there. With ``K`` candidates per split decision there are ``K``
(one decision) or ``K^2`` (two) sub-supernets.

    net = train_single_path(supernet(space, "spos"), uniform_paths(space, 0), data, cfg, steps)
    few = split_supernet(net, ["e3_0"])                  # 5 copies of the trained supernet
    train_fewshot(few, data, cfg, steps_per_sub, seed=0) # each trains its own slice
    model = few.extract(arch)                            # the sub-supernet of arch, extracted

The budget is the caller's: Zhao et al. train the one-shot supernet, split it, then train each
sub-supernet further; ``benchmarks/ranking.py`` spends on the one-shot part and on the
sub-supernets together as many steps as the one-shot supernet it compares against.
"""

from __future__ import annotations

import copy
import itertools
import logging
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from nasforge.errors import ConfigError
from nasforge.oneshot import selection
from nasforge.oneshot.common import Batch, SearchConfig, activate, batches, weight_optimizer
from nasforge.oneshot.selection import Selection
from nasforge.oneshot.supernet import Supernet
from nasforge.space.search_space import Arch

__all__ = [
    "FewShot",
    "uniform_paths",
    "train_single_path",
    "split_supernet",
    "train_fewshot",
    "evolve_fewshot",
]

logger = logging.getLogger(__name__)


@dataclass
class FewShot:
    """Returns nothing; the split decisions and one sub-supernet per combination of their
    operations."""

    decisions: tuple[str, ...]
    subnets: dict[tuple[Any, ...], Supernet]

    def net_for(self, arch: Mapping[str, Any]) -> Supernet:
        """Returns the sub-supernet that holds ``arch`` (by its split decisions' values)."""
        return self.subnets[tuple(arch[d] for d in self.decisions)]

    def extract(self, arch: Mapping[str, Any]) -> nn.Module:
        """Returns ``arch`` frozen with weights inherited from its sub-supernet."""
        return self.net_for(arch).extract(arch)


def uniform_paths(
    net: Supernet, seed: int, fixed: Mapping[str, Any] | None = None
) -> Iterator[Arch]:
    """Yields endless uniform architectures of ``net``'s space, ``fixed`` decisions set."""
    space, rng = net.space.search_space(), random.Random(seed)
    while True:
        yield {**space.sample(rng), **(fixed or {})}


def train_single_path(
    net: Supernet,
    paths: Iterator[Arch] | Callable[[], list[Arch]],
    data: Batch,
    cfg: SearchConfig,
    steps: int,
    seed: int,
) -> Supernet:
    """Returns ``net`` after ``steps`` single-path weight steps on shuffled batches of
    ``data``: each step activates the next path of ``paths`` (or sums the gradients of the
    paths a callable returns), momentum SGD and cosine schedule of ``cfg``, gradients clipped.

    Raises:
        ConfigError: ``steps`` is below 1.
    """
    if steps < 1:
        raise ConfigError(f"steps must be >= 1, got {steps}")
    opt, sched = weight_optimizer(net.weights(), cfg, steps)
    g = torch.Generator().manual_seed(seed)
    net.train()
    done = 0
    while done < steps:
        for x, y in batches(data, cfg.batch_size, g):
            archs = paths() if callable(paths) else [next(paths)]
            opt.zero_grad(set_to_none=True)
            for arch in archs:
                activate(net, arch)
                (nn.functional.cross_entropy(net(x), y) / len(archs)).backward()
            nn.utils.clip_grad_norm_(net.weights(), cfg.grad_clip)
            opt.step()
            sched.step()
            done += 1
            if done == steps:
                break
    return net


def split_supernet(net: Supernet, decisions: Sequence[str]) -> FewShot:
    """Returns the few-shot split of a trained supernet: a copy of ``net`` per combination of
    the operations of ``decisions``.

    Raises:
        ConfigError: a decision is not a label of the space, or more than two are given.
    """
    space = {d.label: d for d in net.space.search_space().decisions}
    unknown = [d for d in decisions if d not in space]
    if unknown or not 1 <= len(decisions) <= 2:
        raise ConfigError(
            f"split on one or two decisions of {sorted(space)}, got {list(decisions)}"
        )
    combos = itertools.product(*(space[d].values for d in decisions))
    return FewShot(tuple(decisions), {c: copy.deepcopy(net) for c in combos})


def train_fewshot(
    few: FewShot, data: Batch, cfg: SearchConfig, steps_per_sub: int, seed: int
) -> FewShot:
    """Returns ``few`` after training each sub-supernet ``steps_per_sub`` single-path steps on
    the architectures it holds (its split decisions fixed, the rest uniform)."""
    for i, (combo, sub) in enumerate(few.subnets.items()):
        fixed = dict(zip(few.decisions, combo))
        train_single_path(sub, uniform_paths(sub, seed + i, fixed), data, cfg, steps_per_sub,
                          seed + i)  # fmt: skip
    return few


def evolve_fewshot(
    few: FewShot,
    train: Batch,
    val: Batch,
    cfg: SearchConfig,
    allowed: Callable[[Arch], bool] | None = None,
) -> tuple[Arch, list[tuple[Arch, float]]]:
    """Returns the best architecture of a regularized evolution (``cfg``'s population, cycles,
    tournament and seed) and every evaluation with its validation accuracy: SPOS's evolution
    (:func:`nasforge.oneshot.selection.evolve`, compared by ``cfg.selection``), each
    architecture scored in its own sub-supernet. Architectures ``allowed`` rejects are not
    scored and lose every tournament.
    """
    space = next(iter(few.subnets.values())).space
    return selection.evolve(Selection(space, few.net_for, train, val, cfg), cfg, allowed)
