"""Counting a model's parameters and multiply-adds, the way the NAS papers' tables do.

Multiply-adds ("Mult-Adds", "MAdds", "FLOPs" in most NAS papers) are counted for every
convolution and fully connected layer by forward hooks on one example input: a convolution
costs ``out_h * out_w * out_channels * (in_channels / groups) * k_h * k_w``, a linear layer
``in_features * out_features`` per output row. Batch norm, activations, pooling, additions and
biases are not counted, as in the papers (their cost is a few percent at most).
Parameters are all parameters of the model (the papers count auxiliary heads out: the hub's
models have none).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

__all__ = ["Profile", "profile"]


@dataclass(frozen=True)
class Profile:
    """Returns nothing; the size and cost of a model on one input."""

    params: int
    madds: int


def _conv_madds(m: nn.Conv2d | nn.Conv1d, out: torch.Tensor) -> int:
    kernel = 1
    for k in m.kernel_size:
        kernel *= k
    per_position = (m.in_channels // m.groups) * kernel
    return int(out[0].numel()) * per_position  # out[0]: out_channels × spatial positions


def _linear_madds(m: nn.Linear, out: torch.Tensor) -> int:
    rows = out[0].numel() // m.out_features  # rows of one sample (tokens), 1 for a classifier
    return rows * m.in_features * m.out_features


def profile(model: nn.Module, example: torch.Tensor | tuple[Any, ...]) -> Profile:
    """Returns the parameters and multiply-adds of ``model`` on ``example`` (batch of one; a
    batch of ``B`` counts ``B`` times the first sample's cost once, so pass one sample).

    The model is run once in eval mode under ``torch.no_grad``; its training mode is restored.
    """
    total = [0]

    def hook(module: nn.Module, inputs: Any, output: Any) -> None:
        if isinstance(output, torch.Tensor):
            if isinstance(module, (nn.Conv1d, nn.Conv2d)):
                total[0] += _conv_madds(module, output)
            elif isinstance(module, nn.Linear):
                total[0] += _linear_madds(module, output)

    handles = [
        m.register_forward_hook(hook)
        for m in model.modules()
        if isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Linear))
    ]
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            model(*example) if isinstance(example, tuple) else model(example)
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    return Profile(sum(p.numel() for p in model.parameters()), total[0])
