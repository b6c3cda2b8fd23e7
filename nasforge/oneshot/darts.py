"""DARTS (Liu et al. 2019), first order: softmax-weighted mixed ops over every candidate.

    m(x)      = sum_k softmax(alpha)_k * o_k(x)                  a LayerChoice
    node      = sum_i edge_i                                     an InputChoice fed by edges
    input(xs) = n_chosen * sum_i softmax(beta)_i * x_i           any other InputChoice
    repeat(x) = sum_d softmax(gamma)_d * y_d                     y_d: output after d blocks

One search step (first order, alternate): a validation batch updates the architecture parameters
with Adam, then a training batch updates the weights with momentum SGD (cosine schedule), the
settings of Appendix C of the NASB paper.

How the search ends is the setting ``pick``: ``"argmax"`` (the paper's: each layer keeps its
strongest non-zero candidate) or ``"perturbation"`` (DARTS-PT, Wang et al. 2021, without its
fine-tuning between edges): each layer keeps the candidate whose removal from the trained
supernet's mixture lowers its validation accuracy most, one supernet evaluation per layer and
candidate, so a choice rests on what the candidate contributes rather than on its softmax
weight, which first-order DARTS moves little (``docs/oneshot.md``, "DARTS on a fresh draw").
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch

from nasforge.errors import ConfigError
from nasforge.oneshot.algorithms import register_algorithm
from nasforge.oneshot.common import SearchConfig, arch_step, weight_step
from nasforge.oneshot.supernet import Algorithm, MixedInput, MixedLayer, MixedRepeat, Supernet
from nasforge.space.search_space import Arch
from nasforge.weightsharing import accuracy

__all__ = [
    "Darts",
    "DartsSettings",
    "DartsLayer",
    "DartsInput",
    "DartsRepeat",
    "darts_step",
    "perturbation_arch",
]

logger = logging.getLogger(__name__)
PICKS = ("argmax", "perturbation")


@dataclass
class DartsSettings:
    """Returns nothing; the settings of DARTS: ``pick``, how the search ends (module
    docstring)."""

    pick: str = "argmax"

    def check(self) -> None:
        """Raises ConfigError on an unknown ``pick``."""
        if self.pick not in PICKS:
            raise ConfigError(
                f"pick must be 'argmax' (the strongest candidate) or 'perturbation' (the one "
                f"whose removal hurts the supernet most), got {self.pick!r}"
            )


class DartsLayer(MixedLayer):
    """Returns the softmax(alpha)-weighted sum of every candidate's output (but the one at
    position ``removed``, when set: perturbation-based selection)."""

    removed: int | None = None

    def mixed_forward(self, *args: Any) -> torch.Tensor:
        w = torch.softmax(self.arch(), dim=0)
        out = None
        for k, cand in enumerate(self.candidates()):
            if k == self.removed:
                continue
            y = w[k] * cand(*args)
            out = y if out is None else out + y
        assert out is not None
        return out


class DartsInput(MixedInput):
    """Returns the sum of a node's edges (already weighted), or a softmax-weighted input mix."""

    def mixed_forward(self, inputs: list[torch.Tensor]) -> torch.Tensor:
        if self.edges:
            return self.reduce(list(inputs), len(inputs))
        w = torch.softmax(self.arch(), dim=0)
        out = self.reduce([w[i] * x for i, x in enumerate(inputs)], 1)
        return out * self.n_chosen if self.reduction == "sum" else out


class DartsRepeat(MixedRepeat):
    """Returns the softmax-weighted sum of the outputs after each candidate depth."""

    def forward(self, x: Any) -> Any:
        w = torch.softmax(self.arch(), dim=0)
        outs = self.outputs(x, max(self.depths))
        return sum(w[i] * outs[d] for i, d in enumerate(self.values))


@register_algorithm
class Darts(Algorithm):
    """The DARTS mixed ops; a step updates alpha on a validation batch, then the weights; the
    search ends by its setting ``pick`` (module docstring)."""

    name = "darts"
    settings_class = DartsSettings
    layer = DartsLayer
    input = DartsInput
    repeat = DartsRepeat

    @classmethod
    def step(
        cls, net: Supernet, state: Any, train: Any, val: Any, cfg: SearchConfig
    ) -> tuple[float, float | None]:
        """Returns (train loss, val loss) of one first-order DARTS step."""
        return darts_step(net, state.opt_w, state.opt_a, train, val, cfg)

    @classmethod
    def finish(cls, net: Supernet, split: Any, cfg: Any) -> tuple[Arch, list[tuple[Arch, float]]]:
        """Returns the argmax architecture, or by ``pick: perturbation`` the one of
        :func:`perturbation_arch`; no architecture scored on the way."""
        if cfg.algo.pick == "perturbation":
            return perturbation_arch(net, split.val), []
        return net.export(), []


def perturbation_arch(net: Supernet, val: tuple[torch.Tensor, torch.Tensor]) -> Arch:
    """Returns the architecture whose every layer decision keeps the candidate whose removal
    from the mixture lowers the supernet's accuracy on ``val`` most (ties: the stronger
    softmax weight); the zero op is never kept, and input and depth decisions are the
    argmax's. Each decision is scored on the whole supernet, the others left mixed."""
    arch = dict(net.export())
    layers: dict[str, list[DartsLayer]] = {}
    for m in net.mixed():
        if isinstance(m, DartsLayer):
            layers.setdefault(m.label, []).append(m)
    for label, same in layers.items():
        strength = net.strength(same[0])
        scores = {}
        for k in same[0].exportable():
            for m in same:
                m.removed = k
            try:
                scores[k] = accuracy(net, val, ranks=net.ranks)
            finally:
                for m in same:
                    m.removed = None
        best = min(scores, key=lambda k: (scores[k], -float(strength[k])))
        logger.debug("darts pick %s: accuracy without each candidate %s", label, scores)
        arch[label] = same[0].names[best]
    return net.space.search_space().validate(arch)


def darts_step(
    net: Supernet,
    opt_w: torch.optim.Optimizer,
    opt_a: torch.optim.Optimizer,
    train_batch: tuple[torch.Tensor, torch.Tensor],
    val_batch: tuple[torch.Tensor, torch.Tensor],
    cfg: SearchConfig,
) -> tuple[float, float]:
    """Returns (train loss, val loss) of one first-order DARTS step: alpha on the validation
    batch, then the weights on the training batch."""
    val_loss = arch_step(net, opt_a, val_batch)
    train_loss = weight_step(net, opt_w, train_batch, cfg)
    return train_loss, val_loss
