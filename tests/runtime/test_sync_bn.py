"""Synchronised batch norm (``runtime.sync_bn``) over 2 gloo ranks equals batch norm on the
whole batch: outputs, input gradients, summed weight gradients and running statistics."""

from __future__ import annotations

import tempfile
from typing import Any

import torch
from torch import nn

from nasforge.runtime import sync_bn
from nasforge.runtime.procgroup import LocalGroup, file_rendezvous, join_group


def _case() -> tuple[torch.Tensor, torch.Tensor, nn.BatchNorm2d]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 3, 4, 4, generator=g)
    gy = torch.randn(8, 3, 4, 4, generator=g)
    bn = nn.BatchNorm2d(3)
    with torch.no_grad():
        bn.weight.copy_(torch.tensor([1.0, 2.0, 0.5]))
    return x, gy, bn


def _rank(rank: int, folder: str) -> tuple[Any, ...]:
    torch.set_num_threads(1)
    ranks = join_group(rank, 2, file_rendezvous(folder))
    x, gy, bn = _case()
    assert sync_bn.convert(bn) == 1
    xs = x[rank * 4 : (rank + 1) * 4].clone().requires_grad_(True)
    with sync_bn.synced(bn, ranks):
        y = bn(xs)
        (y * gy[rank * 4 : (rank + 1) * 4]).sum().backward()
    return y.detach(), xs.grad, bn.weight.grad, bn.running_mean.clone(), bn.running_var.clone()


def test_two_ranks_with_half_a_batch_each_compute_batch_norm_of_the_whole_batch() -> None:
    """Each rank's outputs and input gradients are the whole batch's rows; the weight
    gradients sum to the whole batch's; the running statistics are the whole batch's."""
    with tempfile.TemporaryDirectory() as folder:
        with LocalGroup(2, _rank, (folder,), folder=folder, what="rank", timeout_s=120,
                        start_method="fork") as group:  # fmt: skip
            out = group.results()
    x, gy, bn = _case()
    x.requires_grad_(True)
    y = bn(x)
    (y * gy).sum().backward()
    torch.testing.assert_close(torch.cat([out[0][0], out[1][0]]), y.detach())
    torch.testing.assert_close(torch.cat([out[0][1], out[1][1]]), x.grad)
    torch.testing.assert_close(out[0][2] + out[1][2], bn.weight.grad)
    for r in (0, 1):
        torch.testing.assert_close(out[r][3], bn.running_mean)
        torch.testing.assert_close(out[r][4], bn.running_var)


def test_outside_synced_a_converted_batch_norm_is_the_plain_module() -> None:
    """Without ``synced`` (validation, recalibration, export) nothing collective runs."""
    x, _, bn = _case()
    plain = nn.BatchNorm2d(3)
    plain.load_state_dict(bn.state_dict())
    sync_bn.convert(bn)
    torch.testing.assert_close(bn(x), plain(x))
    assert list(bn.state_dict()) == list(plain.state_dict())
