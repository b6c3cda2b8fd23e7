"""SPOS: single-path one-shot (Guo et al. 2020).

Training: every step samples one architecture uniformly from the space and trains only its path
(the sampled candidate of each LayerChoice, the sampled inputs of each InputChoice, the sampled
number of blocks of each Repeat; a node's unchosen edges are not computed at all).

Search: regularized evolution over the trained supernet; each candidate is scored with inherited
weights on validation data after its batch-norm statistics are recalibrated on training
batches, and compared by ``selection`` (:mod:`nasforge.oneshot.selection`: by default a hybrid
of the supernet's loss and a zero-cost proxy; ``accuracy`` is the paper's). The evolution is
the engine's :class:`~nasforge.strategy.RegularizedEvolution`, driven
by ask/tell on arch dicts exactly as an experiment drives it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import torch

from nasforge.oneshot import selection
from nasforge.oneshot.algorithms import register_algorithm
from nasforge.oneshot.budgeted import budget_of, draw
from nasforge.oneshot.common import Batch, activate, recalibrate_bn, weight_step
from nasforge.oneshot.selection import EvolutionSettings, Selection
from nasforge.oneshot.supernet import Algorithm, MixedInput, MixedLayer, MixedRepeat, Supernet
from nasforge.space.search_space import Arch
from nasforge.weightsharing import PathInput, PathLayer, PathRepeat

__all__ = [
    "Spos",
    "SposLayer",
    "SposInput",
    "SposRepeat",
    "activate",
    "recalibrate_bn",
    "evolve",
]

logger = logging.getLogger(__name__)


class SposLayer(MixedLayer, PathLayer):
    """Returns the chosen candidate's output (the single-path rule of
    :class:`~nasforge.weightsharing.PathLayer`); a zero placeholder for a node's unchosen
    edge."""

    chosen: int = 0
    _nf_skip: bool = False  # not a plain name: a candidate may be called "skip"

    def mixed_forward(self, *args: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        if self._nf_skip:
            return self.zeros(args[0])
        out: torch.Tensor = self.path(*args, **kwargs)
        return out


class SposInput(MixedInput, PathInput):
    """Returns the reduction of the chosen inputs; a node's unchosen edges are not computed."""

    chosen: list[int] = [0]

    def follow(self, arch: Mapping[str, Any]) -> None:
        """Picks ``arch``'s inputs, and marks this node's other edges to be skipped."""
        super().follow(arch)
        for i, e in enumerate(self.edges):
            assert isinstance(e, SposLayer), type(e).__name__  # a SPOS supernet's edges
            e._nf_skip = i not in self.chosen

    def mixed_forward(self, inputs: list[torch.Tensor]) -> torch.Tensor:
        return self.path(inputs)


class SposRepeat(MixedRepeat, PathRepeat):
    """Returns the output after the chosen number of blocks (the smallest candidate depth until
    a path is activated: 0 blocks may not be a depth of the space)."""

    chosen: int = 0

    def __init__(self, rep: Any, net: Any) -> None:
        super().__init__(rep, net)
        self.chosen = self.depths[0]

    def forward(self, x: Any) -> Any:
        return self.path(x)


@register_algorithm
class Spos(Algorithm):
    """The single-path mixed ops; a step trains one uniformly sampled path, and the search
    ends with an evolution over the trained supernet (its settings: the evolution's and
    selection's, :class:`~nasforge.oneshot.selection.EvolutionSettings`)."""

    name = "spos"
    settings_class = EvolutionSettings
    uses_val = False
    learns_arch = False
    budget_rule = "reject"
    layer = SposLayer
    input = SposInput
    repeat = SposRepeat

    @classmethod
    def step(
        cls, net: Supernet, state: Any, train: Batch, val: Any, cfg: Any
    ) -> tuple[float, float | None]:
        """Returns (train loss, None) after one weight step of a uniformly sampled path (drawn
        again while over the budget)."""
        ss = net.space.search_space()
        activate(net, draw(net, lambda: ss.sample(state.rng)))  # within the budget, if any
        return weight_step(net, state.opt_w, train, cfg), None

    @classmethod
    def prepare(cls, net: Supernet, split: Any, cfg: Any) -> None:
        """Checks, before training, that the selection can score the space."""
        selection.check(net.space, split.train, cfg)

    @classmethod
    def current_arch(cls, net: Supernet) -> Arch:
        """Returns the space's default architecture, activated (SPOS has no argmax)."""
        arch = net.space.search_space().default()
        activate(net, arch)
        return arch

    @classmethod
    def finish(cls, net: Supernet, split: Any, cfg: Any) -> tuple[Arch, list[tuple[Arch, float]]]:
        """Returns the best architecture of an evolution over the trained supernet (none over
        the budget asked is scored), and every architecture it scored."""
        budget = budget_of(net)
        arch, _, history = evolve(net, split.train, split.val, cfg,
                                  None if budget is None else budget.fits)  # fmt: skip
        return arch, history


def evolve(
    net: Supernet,
    train: Batch,
    val: Batch,
    cfg: Any,
    allowed: Callable[[Arch], bool] | None = None,
) -> tuple[Arch, float, list[tuple[Arch, float]]]:
    """Returns the best architecture found by evolution over the trained supernet (compared by
    ``cfg.algo.selection``, :mod:`nasforge.oneshot.selection`), its validation accuracy
    (inherited weights, recalibrated batch norm) and every evaluation with its validation
    accuracy.

    Invariants: ``cfg.algo.cycles`` asks and tells of a seeded regularized evolution (a tournament
    of ``min(sample_size, population)``); an architecture asked again is scored once.
    """
    sel = Selection(net.space, lambda arch: net, train, val, cfg)
    best, history = selection.evolve(sel, cfg, allowed)
    return best, sel.inherited(best)[0], history
