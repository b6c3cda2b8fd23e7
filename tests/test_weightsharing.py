"""The shared weight-sharing helpers: accuracy over every batch of a tensor pair."""

from __future__ import annotations

import torch
from torch import nn

from nasforge.weightsharing import accuracy


class _Echo(nn.Module):
    """Predicts class 1 for a positive first feature, class 0 otherwise."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([-x[:, 0], x[:, 0]], dim=1)


def test_accuracy_scores_every_batch_of_a_tensor_pair() -> None:
    """270 samples in batches of 256 are all scored (not only the first batch)."""
    x = torch.ones(270, 2)
    x[256:, 0] = -1.0  # the last 14 samples are class 0 ...
    y = torch.ones(270, dtype=torch.long)  # ... but labelled 1: 256 / 270 correct
    assert accuracy(_Echo(), (x, y), batch_size=256) == 256 / 270
    assert accuracy(_Echo(), (x, y), batch_size=7) == 256 / 270
