"""DARTS (Liu et al. 2019), first order: softmax-weighted mixed ops over every candidate.

    m(x)      = sum_k softmax(alpha)_k * o_k(x)                  a LayerChoice
    node      = sum_i edge_i                                     an InputChoice fed by edges
    input(xs) = n_chosen * sum_i softmax(beta)_i * x_i           any other InputChoice
    repeat(x) = sum_d softmax(gamma)_d * y_d                     y_d: output after d blocks

One search step (first order, alternate): a validation batch updates the architecture parameters
with Adam, then a training batch updates the weights with momentum SGD (cosine schedule), the
settings of Appendix C of the NASB paper.
"""

from __future__ import annotations

from typing import Any

import torch

from nasforge.oneshot.algorithms import register_algorithm
from nasforge.oneshot.common import SearchConfig, arch_step, weight_step
from nasforge.oneshot.supernet import Algorithm, MixedInput, MixedLayer, MixedRepeat, Supernet

__all__ = ["Darts", "DartsLayer", "DartsInput", "DartsRepeat", "darts_step"]


class DartsLayer(MixedLayer):
    """Returns the softmax(alpha)-weighted sum of every candidate's output."""

    def mixed_forward(self, *args: Any) -> torch.Tensor:
        w = torch.softmax(self.arch(), dim=0)
        out = None
        for k, cand in enumerate(self.candidates()):
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
    """The DARTS mixed ops; a step updates alpha on a validation batch, then the weights (no
    settings of its own: the loop's learning rates are all it reads)."""

    name = "darts"
    layer = DartsLayer
    input = DartsInput
    repeat = DartsRepeat

    @classmethod
    def step(
        cls, net: Supernet, state: Any, train: Any, val: Any, cfg: SearchConfig
    ) -> tuple[float, float | None]:
        """Returns (train loss, val loss) of one first-order DARTS step."""
        return darts_step(net, state.opt_w, state.opt_a, train, val, cfg)


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
