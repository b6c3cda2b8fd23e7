"""Batch norm over the whole batch of a data-parallel step, on the CPU as on GPUs.

On several ranks each rank normalises its shard by the shard's own statistics by default, as
DistributedDataParallel does; the replicas' running statistics are averaged after each epoch.
``sync_bn=True`` (a setting of the search loop) instead normalises every shard by the
statistics of the whole batch, so N ranks compute what one process with the whole batch does
(PyTorch's ``nn.SyncBatchNorm`` does this on GPUs only). The forward pass sums, per channel,
each shard's count, sum and sum of squares across ranks; the backward pass sums the two
per-channel reductions the input's gradient needs::

    forward    mean = S1 / n,  var = S2 / n - mean^2      (S1, S2, n summed over ranks)
               y = gamma * (x - mean) / sqrt(var + eps) + beta
    backward   dx = gamma / sqrt(var + eps) * (dy - (D1 + xhat * D2) / n)
               D1 = sum(dy), D2 = sum(dy * xhat)          (summed over ranks)

gamma's and beta's own gradients stay each rank's share, summed with every other weight's
by the step's gradient all-reduce. Only the gradient steps synchronise (:func:`synced`):
batch norm outside them (a validation pass, recalibration, a model extracted for export) is
the plain module, so no collective runs where not every rank is.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from nasforge.runtime.distributed import Ranks

__all__ = ["convert", "synced"]


def _whole_batch(x: torch.Tensor, ranks: Ranks) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Returns (per-channel mean, biased variance, rows) of the batch whose shards the ranks
    hold, from one all-reduce of each shard's count, sum and sum of squares."""
    dims = [d for d in range(x.dim()) if d != 1]
    c = x.shape[1]
    with torch.no_grad():
        flat = torch.cat([x.sum(dims), (x * x).sum(dims)]).double()
        flat = torch.cat([flat, flat.new_tensor([float(x.numel() // c)])])
        ranks.all_reduce_tensors([flat])
        n = float(flat[-1])
        mean = flat[:c] / n
        var = (flat[c : 2 * c] / n - mean * mean).clamp_min(0)
    return mean.to(x.dtype), var.to(x.dtype), n


class _SyncNorm(torch.autograd.Function):
    """Returns x normalised by the whole batch's mean and inverse std (see the module
    docstring); its backward sums the two reductions the input's gradient needs."""

    @staticmethod
    def forward(
        ctx: Any, x: torch.Tensor, mean: torch.Tensor, invstd: torch.Tensor, n: float,
        ranks: Ranks,
    ) -> torch.Tensor:  # fmt: skip
        shape = [1, x.shape[1]] + [1] * (x.dim() - 2)
        xhat = (x - mean.view(shape)) * invstd.view(shape)
        ctx.save_for_backward(xhat, invstd)
        ctx.ranks, ctx.n, ctx.shape = ranks, n, shape
        ctx.dims = [d for d in range(x.dim()) if d != 1]
        return xhat

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[Any, ...]:
        xhat, invstd = ctx.saved_tensors
        c = xhat.shape[1]
        flat = torch.cat([g.sum(ctx.dims), (g * xhat).sum(ctx.dims)]).double()
        ctx.ranks.all_reduce_tensors([flat])
        d1, d2 = flat[:c].to(g.dtype), flat[c:].to(g.dtype)
        s = ctx.shape
        dx = invstd.view(s) * (g - (d1.view(s) + xhat * d2.view(s)) / ctx.n)
        return dx, None, None, None, None


class _Synced:
    """Mixed into a batch-norm module by :func:`convert`: its training forward normalises by
    the whole batch's statistics while :func:`synced` is active. An input of fewer channels
    than the module has (an elastic batch norm of once-for-all's supernet) uses the first
    ones of its affine parameters and running statistics, as the elastic module does."""

    _nf_ranks: Ranks | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bn: Any = self
        ranks = bn._nf_ranks
        if ranks is None or not bn.training or not ranks.distributed:
            return super().forward(x)  # type: ignore[misc, no-any-return]
        mean, var, n = _whole_batch(x, ranks)
        xhat = _SyncNorm.apply(x, mean, torch.rsqrt(var + bn.eps), n, ranks)
        c = x.shape[1]  # all of a plain batch norm's channels; the first c of an elastic one's
        if bn.track_running_stats and bn.running_mean is not None:
            with torch.no_grad():  # the whole batch's statistics, as one process's
                bn.num_batches_tracked += 1
                m = bn.momentum if bn.momentum is not None else 1.0 / float(bn.num_batches_tracked)
                bn.running_mean[:c].mul_(1 - m).add_(m * mean)
                bn.running_var[:c].mul_(1 - m).add_(m * var * n / max(1.0, n - 1))
        if bn.affine:
            shape = [1, c] + [1] * (x.dim() - 2)
            return xhat * bn.weight[:c].view(shape) + bn.bias[:c].view(shape)
        return xhat  # type: ignore[no-any-return]


def convert(module: nn.Module) -> int:
    """Returns how many batch-norm modules of ``module`` were made synchronisable (in place:
    same parameters, buffers and state-dict keys; plain batch norm until :func:`synced`)."""
    n = 0
    for m in module.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and not isinstance(m, _Synced):
            m.__class__ = type(f"Synced{type(m).__name__}", (_Synced, type(m)), {})
            n += 1
    return n


@contextmanager
def synced(module: nn.Module, ranks: Ranks) -> Iterator[None]:
    """Runs a block (a gradient step's passes) in which ``module``'s converted batch norms
    normalise by the statistics of the whole batch across ``ranks``; every rank must run it."""
    bns = [m for m in module.modules() if isinstance(m, _Synced)]
    for m in bns:
        m._nf_ranks = ranks
    try:
        yield
    finally:
        for m in bns:
            m._nf_ranks = None
