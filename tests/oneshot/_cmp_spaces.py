"""Chain spaces for the model-parallel tests (module level, so spawned workers import them)."""

from __future__ import annotations

import os

import torch
from torch import nn

import nasforge as nf


class Chain(nf.ModelSpace):
    """A stem, three blocks with a LayerChoice each (two share a label), a head: a chain."""

    def __init__(self, bn: bool = True) -> None:
        super().__init__()
        norm = (lambda: nn.BatchNorm2d(4)) if bn else nn.Identity
        self.stem = nn.Conv2d(1, 4, 3, padding=1)
        self.blocks = nn.ModuleList(
            nf.LayerChoice(
                {
                    "conv": lambda: nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), norm()),
                    "pool": lambda: nn.AvgPool2d(3, 1, 1),
                    "id": nn.Identity,
                },
                label="op" if i < 2 else "op_last",
            )
            for i in range(3)
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(4 * 8 * 8, 3))

    def chain(self) -> list[nn.Module]:
        """Returns the modules in forward order."""
        return [self.stem, *self.blocks, self.head]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for m in self.chain():
            x = m(x)
        return x


class _Die(nn.Module):
    """Identity, except that the process of model-parallel rank 1 exits on its 3rd call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import torch.distributed as dist

        if dist.is_initialized() and dist.get_rank() == 1:
            self.calls += 1
            if self.calls == 3:
                os._exit(7)  # a hard death: no traceback, no clean-up
        return x


class DyingChain(Chain):
    """A Chain whose last unit kills the worker process of rank 1 mid-search."""

    def __init__(self) -> None:
        super().__init__()
        self.die = _Die()

    def chain(self) -> list[nn.Module]:
        return [*super().chain(), self.die]


class _Raise(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not torch.is_grad_enabled():
            return x  # node finding and accuracy run without grad
        raise RuntimeError("boom in partition")


class RaisingChain(Chain):
    """A Chain whose last unit raises during training (a worker thread's error)."""

    def __init__(self) -> None:
        super().__init__()
        self.bad = _Raise()

    def chain(self) -> list[nn.Module]:
        return [*super().chain(), self.bad]
