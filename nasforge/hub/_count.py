"""Counting a model's parameters and multiply-adds, the way the NAS papers' tables do.

Multiply-adds ("Mult-Adds", "MAdds", "FLOPs" in most NAS papers) are counted for every
convolution and every matrix product on one example input, at the level of torch's operators
(``torch.utils.flop_counter``), so that layers which call ``F.conv2d`` on sliced weights (the
once-for-all space's elastic layers) and the products inside attention (``q @ kᵀ``,
``attn @ v``) count as well as ``nn.Conv2d`` and ``nn.Linear``: a convolution costs
``out_h * out_w * out_channels * (in_channels / groups) * k_h * k_w``, a linear layer
``in_features * out_features`` per output row, a product of ``n×k`` by ``k×m`` ``n * k * m``.
Batch norm, activations, pooling, additions and biases are not counted, as in the papers
(their cost is a few percent at most). Parameters are all parameters of the model (the papers
count auxiliary heads out: the hub's models have none).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

__all__ = ["Profile", "profile"]


@dataclass(frozen=True)
class Profile:
    """Returns nothing; the size and cost of a model on one input."""

    params: int
    madds: int


def profile(model: nn.Module, example: torch.Tensor | tuple[Any, ...]) -> Profile:
    """Returns the parameters and multiply-adds of ``model`` on ``example`` (batch of one; a
    batch of ``B`` counts ``B`` times the first sample's cost once, so pass one sample).

    The model is run once in eval mode under ``torch.no_grad``; its training mode is restored.
    """
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            model(*example) if isinstance(example, tuple) else model(example)
    finally:
        model.train(was_training)
    # the counter reports FLOPs, two per multiply-add
    return Profile(sum(p.numel() for p in model.parameters()), counter.get_total_flops() // 2)
