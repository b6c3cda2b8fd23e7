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
from nasforge.oneshot.common import Batch, SearchConfig, accuracy, batches, weight_optimizer
from nasforge.oneshot.spos import activate, recalibrate_bn
from nasforge.oneshot.supernet import Supernet
from nasforge.space.search_space import Arch, arch_id
from nasforge.strategy import RegularizedEvolution
from nasforge.weightsharing import accuracy_and_loss

__all__ = [
    "FewShot",
    "uniform_paths",
    "train_single_path",
    "split_supernet",
    "train_fewshot",
    "evolve_fewshot",
]

logger = logging.getLogger(__name__)
#: what evolution is told of an architecture ``allowed`` rejects (finite, below any score)
_REJECTED = -1e9


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
    metric: str = "accuracy",
    fitness: Callable[[Arch, float], float] | None = None,
) -> tuple[Arch, list[tuple[Arch, float]]]:
    """Returns the best architecture of a regularized evolution (``cfg``'s population, cycles,
    tournament and seed) scored on validation data in its own sub-supernet (batch norm
    recalibrated on ``cfg.bn_batches`` training batches), and every evaluation. The score is
    the ``metric``: ``"accuracy"`` or ``"loss"`` (minus the cross-entropy, a finer score of the
    same weights); ``fitness(arch, score)``, when given, turns it into what evolution ranks
    (e.g. a rank aggregation with a zero-cost proxy). Architectures ``allowed`` rejects score
    ``-1e9``, below any score.

    Raises:
        ConfigError: an unknown ``metric``.
    """
    if metric not in ("accuracy", "loss"):
        raise ConfigError(f"metric must be 'accuracy' or 'loss', got {metric!r}")
    space = next(iter(few.subnets.values())).space.search_space()
    strategy = RegularizedEvolution(cfg.population, min(cfg.sample_size, cfg.population),
                                    cfg.seed)  # fmt: skip
    strategy.setup(space)
    seen: dict[str, float] = {}
    history: list[tuple[Arch, float]] = []
    for _ in range(cfg.cycles):
        arch = strategy.ask()
        assert arch is not None  # regularized evolution is never exhausted
        key = arch_id(arch)
        if key not in seen:
            if allowed is not None and not allowed(arch):
                seen[key] = _REJECTED
            else:
                net = few.net_for(arch)
                activate(net, arch)
                recalibrate_bn(net, train, cfg.batch_size, cfg.bn_batches, cfg.seed)
                score = (accuracy(net, val) if metric == "accuracy"
                         else -accuracy_and_loss(net, val, 1024)[1])  # fmt: skip
                seen[key] = score if fitness is None else fitness(arch, score)
                history.append((arch, seen[key]))
        strategy.tell(arch, seen[key])
    best = max(history, key=lambda h: h[1])[0] if history else space.default()
    return best, history
