"""The weight-sharing toolkit every supernet uses: one protocol, one batch-norm recalibration,
one accuracy loop.

A *weight-sharing supernet* (a one-shot :class:`~nasforge.oneshot.supernet.Supernet`, an
once-for-all :class:`~nasforge.ofa.mobilenet.OFAMobileNetV3`, a pipeline-trained chain space)
can make any architecture of its space active and hand it out as a plain module whose weights
are copies of its own (:class:`WeightSharing`). A sub-network's batch-norm statistics differ
from the shared ones, so it is measured after :func:`recalibrate_bn`; :func:`accuracy` is the
one evaluation loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol, runtime_checkable

import torch
from torch import nn

__all__ = ["WeightSharing", "recalibrate_bn", "accuracy"]


@runtime_checkable
class WeightSharing(Protocol):
    """What a weight-sharing supernet offers to searches and evaluations."""

    def activate(self, arch: Mapping[str, object]) -> None:
        """Makes the supernet compute architecture ``arch``."""
        ...

    def extract(self, arch: Mapping[str, object]) -> nn.Module:
        """Returns ``arch`` as a plain module with weights copied from the supernet."""
        ...


@torch.no_grad()
def recalibrate_bn(
    model: nn.Module, images: torch.Tensor | Iterable[torch.Tensor], batch_size: int = 256
) -> None:
    """Resets every batch norm's running statistics of ``model`` and re-estimates them as the
    cumulative average over ``images`` (a tensor, cut into batches, or an iterable of
    batches), in train mode; restores the module's mode and momenta afterwards.

    Invariants: only batch-norm buffers change; the statistics equal those of one pass over
    the given batches with ``momentum=None``.
    """
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    momenta = [bn.momentum for bn in bns]
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative average over the calibration batches
    was = model.training
    model.train()
    if isinstance(images, torch.Tensor):
        whole = images
        images = (whole[i : i + batch_size] for i in range(0, len(whole), batch_size))
    for x in images:
        model(x)
    model.train(was)
    for bn, m in zip(bns, momenta):
        bn.momentum = m


@torch.no_grad()
def accuracy(
    model: nn.Module,
    data: tuple[torch.Tensor, torch.Tensor] | Iterable[tuple[torch.Tensor, torch.Tensor]],
    batch_size: int = 256,
    device: str | torch.device | None = None,
) -> float:
    """Returns the top-1 accuracy of ``model`` in eval mode on ``data``: an ``(x, y)`` pair
    of tensors (cut into batches) or an iterable of such batches (a DataLoader); the module's
    mode is restored afterwards."""
    was = model.training
    model.eval()
    if isinstance(data, tuple) and len(data) == 2 and isinstance(data[0], torch.Tensor):
        xs, ys = data  # names of their own: the loop below rebinds x and y as it reads batches
        data = (
            (xs[i : i + batch_size], ys[i : i + batch_size]) for i in range(0, len(xs), batch_size)
        )
    correct = total = 0
    for x, y in data:
        if device is not None:
            x, y = x.to(device), y.to(device)
        correct += int((model(x).argmax(-1) == y).sum())
        total += len(y)
    model.train(was)
    return correct / max(1, total)
