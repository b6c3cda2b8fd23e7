"""FairNAS: single-path training under strict fairness (Chu et al., ICCV 2021).

SPOS trains one uniformly drawn path per step, so within a stretch of training some candidates
get more updates than others, and a supernet's ranking leans towards what it happened to train
more. FairNAS takes the expectation out of it: each step draws ``m`` paths
(:meth:`~nasforge.space.SearchSpace.fair_sample`, ``m`` the most candidates any decision has)
in which every candidate of a decision with ``m`` candidates appears once (one with fewer
takes its own in rounds), accumulates the weight gradients of all ``m`` on the same batch,
and takes one optimizer step: step by step, every candidate is trained as often as the
others of its decision.

A step costs ``m`` forward and backward passes, so an epoch costs ``m`` SPOS epochs of
compute with the same number of weight updates. Under a hard budget a fair path that lies over
it is replaced by a uniform draw within it (fairness then holds among the candidates the budget
allows). The search after training is SPOS's: an evolution over the trained supernet, scored
by ``selection`` (:class:`~nasforge.oneshot.selection.EvolutionSettings`).
"""

from __future__ import annotations

from typing import Any

from nasforge.oneshot.algorithms import register_algorithm
from nasforge.oneshot.budgeted import budget_of
from nasforge.oneshot.common import (
    Batch,
    activate,
    apply_weights,
    reduce_weight_grads,
    weight_grads,
)
from nasforge.oneshot.spos import Spos
from nasforge.oneshot.supernet import Supernet

__all__ = ["FairNas"]


@register_algorithm
class FairNas(Spos):
    """SPOS's single-path mixed ops and evolution; a step trains ``m`` paths that together
    take every candidate of every decision once (module docstring), then steps once."""

    name = "fairnas"

    @classmethod
    def paths_per_step(cls, space: Any) -> int:
        """Returns ``m``: the paths a step trains, the most candidates of a decision."""
        return len(space.search_space().fair_sample(0))

    @classmethod
    def step(
        cls, net: Supernet, state: Any, train: Batch, val: Any, cfg: Any
    ) -> tuple[float, float | None]:
        """Returns (the mean training loss of the step's paths, None) after one weight step on
        the gradients of every path of a fair sample, accumulated on ``train``."""
        ss = net.space.search_space()
        paths = ss.fair_sample(state.rng)
        budget = budget_of(net)
        if budget is not None:
            paths = [
                a if budget.fits(a) else budget.draw(lambda: ss.sample(state.rng)) for a in paths
            ]
        total = 0.0
        for arch in paths:
            activate(net, arch)
            total += weight_grads(net, train, reduce=False)
        total = reduce_weight_grads(net, total)  # once: every rank's paths are the same
        apply_weights(net, state.opt_w, cfg)
        return total / len(paths), None
