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

As a search (``search(space, "fewshot", data)``, a run file's ``strategy: {name: fewshot}``),
:class:`FewShotSpos` runs the same recipe through the search loop: the first ``split_epoch``
epochs (default half) train the one supernet as SPOS does, then it is split on the decisions
``split_on`` (default: the first decision with the most candidates) and every later step
trains a uniform path in the sub-supernet that holds it; SPOS's evolution ends the search,
each candidate scored in its own sub-supernet. The supernet itself holds the architectures of
the first combination, the others are held sub-supernets (:meth:`Supernet.hold`), so the
record, checkpoints, resume and export are the loop's.
"""

from __future__ import annotations

import copy
import itertools
import logging
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import torch
from torch import nn

from nasforge.errors import ConfigError
from nasforge.oneshot import selection
from nasforge.oneshot.algorithms import register_algorithm
from nasforge.oneshot.budgeted import budget_of, draw
from nasforge.oneshot.common import (
    Batch,
    SearchConfig,
    activate,
    batches,
    check_optional_int,
    weight_optimizer,
    weight_step,
)
from nasforge.oneshot.selection import EvolutionSettings, Selection
from nasforge.oneshot.spos import Spos, SposInput, SposLayer, SposRepeat
from nasforge.oneshot.supernet import Algorithm, Supernet
from nasforge.space.search_space import Arch

__all__ = [
    "FewShot",
    "FewShotSettings",
    "FewShotSpos",
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


@dataclass
class FewShotSettings(EvolutionSettings):
    """Returns nothing; the settings of a few-shot search: where and when the supernet splits,
    and SPOS's evolution and selection."""

    # the decisions whose candidates split the supernet (one or two labels); None: the first
    # decision with the most candidates
    split_on: list[str] | None = None
    # epochs of one-shot training before the split; None: half of ``epochs`` (rounded down)
    split_epoch: int | None = None

    def check(self) -> None:
        """Raises ConfigError on a bad evolution or selection setting, ``split_on`` that is not
        one or two labels, or ``split_epoch`` that is not an int >= 0 or None."""
        super().check()
        on = self.split_on
        if on is not None and (
            isinstance(on, str)
            or not isinstance(on, Sequence)
            or not 1 <= len(on) <= 2
            or not all(isinstance(d, str) for d in on)
        ):
            raise ConfigError(
                f"split_on must be a list of one or two decision labels (or null for the "
                f"decision with the most candidates), got {on!r}"
            )
        check_optional_int("split_epoch", self.split_epoch, 0, "epochs before the split",
                           "half of epochs")  # fmt: skip


@register_algorithm
class FewShotSpos(Algorithm):
    """Few-shot SPOS (see the module docstring): single-path steps on the one supernet, then,
    after ``split_epoch`` epochs, in the sub-supernet that holds each sampled path; the search
    ends with SPOS's evolution, each candidate scored in its own sub-supernet."""

    name = "fewshot"
    settings_class = FewShotSettings
    uses_val = False
    learns_arch = False
    budget_rule = "reject"
    layer = SposLayer
    input = SposInput
    repeat = SposRepeat

    @staticmethod
    def split_on(space: Any, cfg: SearchConfig) -> tuple[str, ...]:
        """Returns the decisions of ``space`` (the model space) the supernet splits on:
        ``split_on``, or the first decision with the most candidates.

        Raises:
            ConfigError: a label of ``split_on`` is not a decision of the space.
        """
        decisions = space.search_space().decisions
        given = cast(FewShotSettings, cfg.algo).split_on
        if given is None:
            return (max(decisions, key=len).label,)  # max keeps the first of equals
        labels = [d.label for d in decisions]
        unknown = [d for d in given if d not in labels]
        if unknown or len(set(given)) != len(given):
            raise ConfigError(
                f"split_on {list(given)} must name distinct decisions of the space {labels}"
            )
        return tuple(given)

    @staticmethod
    def split_epoch(cfg: SearchConfig) -> int:
        """Returns the epochs of one-shot training before the split."""
        given = cast(FewShotSettings, cfg.algo).split_epoch
        return cfg.epochs // 2 if given is None else given

    @classmethod
    def check_space(cls, space: Any, cfg: SearchConfig) -> None:
        """Raises ConfigError when ``split_on`` names no distinct decisions of ``space`` or
        ``split_epoch`` lies beyond ``epochs``."""
        cls.split_on(space, cfg)
        if cls.split_epoch(cfg) > cfg.epochs:
            raise ConfigError(
                f"split_epoch {cls.split_epoch(cfg)} is beyond the search's {cfg.epochs} epochs; "
                "lower it or leave it null (half of epochs)"
            )

    @classmethod
    def prepare(cls, net: Supernet, split: Any, cfg: SearchConfig) -> None:
        """Checks the selection, and gives ``net`` one held copy of itself per combination of
        the split decisions' candidates but the first (which ``net`` holds).

        Raises:
            ConfigError: the selection cannot score the space.
        """
        selection.check(net.space, split.train, cfg)
        on = cls.split_on(net.space, cfg)
        by_label = {d.label: d for d in net.space.search_space().decisions}
        combos = list(itertools.product(*(by_label[d].values for d in on)))
        # copies first, each with its own memo: the space is shared, not copied
        subs = [copy.deepcopy(net, {id(net.space): net.space}) for _ in combos[1:]]
        for sub, combo in zip(subs, combos[1:]):
            net.hold(sub, dict(zip(on, combo)))
        logger.info("fewshot: %d sub-supernets on %s after epoch %d", len(combos), list(on),
                    cls.split_epoch(cfg))  # fmt: skip

    @classmethod
    def step(
        cls, net: Supernet, state: Any, train: Batch, val: Any, cfg: SearchConfig
    ) -> tuple[float, float | None]:
        """Returns (train loss, None) after one weight step of a uniformly sampled path, in the
        supernet before the split and in the sub-supernet that holds it after."""
        ss = net.space.search_space()
        arch = draw(net, lambda: ss.sample(state.rng))  # within the budget, if any
        sub = net if state.epoch < cls.split_epoch(cfg) else net.holder(arch)
        activate(sub, arch)
        return weight_step(sub, state.opt_w, train, cfg), None

    @classmethod
    def after_epoch(cls, net: Supernet, state: Any, split: Any, cfg: SearchConfig) -> dict:
        """Splits the supernet after epoch ``split_epoch``: each held sub-supernet starts
        from its weights and their momentum; returns no numbers."""
        if state.epoch + 1 == cls.split_epoch(cfg):
            copy_into_held(net, state.opt_w)
        return {}

    @classmethod
    def current_arch(cls, net: Supernet) -> Arch:
        """Returns SPOS's: the space's default architecture (which ``net`` itself holds, as
        the first combination of the split), activated."""
        return Spos.current_arch(net)

    @classmethod
    def finish(
        cls, net: Supernet, split: Any, cfg: SearchConfig
    ) -> tuple[Arch, list[tuple[Arch, float]]]:
        """Returns the best architecture of SPOS's evolution, each candidate scored in the
        sub-supernet that holds it, and every architecture it scored."""
        sel = Selection(net.space, net.holder, split.train, split.val, cfg)
        budget = budget_of(net)
        return selection.evolve(sel, cfg, None if budget is None else budget.fits)


def copy_into_held(net: Supernet, opt: torch.optim.Optimizer) -> None:
    """Copies ``net``'s model (weights, buffers, and the momentum ``opt`` keeps for them) into
    each sub-supernet it holds."""
    state = net.model.state_dict()
    for sub in net.held:
        sub = cast(Supernet, sub)
        sub.model.load_state_dict(state)
        for p, q in zip(net.model.parameters(), sub.model.parameters()):
            kept = opt.state.get(p, {})
            if "momentum_buffer" in kept:
                opt.state[q]["momentum_buffer"] = kept["momentum_buffer"].clone()
