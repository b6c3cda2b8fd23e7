"""Mixed parallelism and its data-parallel baseline: synchronised batch norm equals batch norm
on the whole batch; mixed workers stay identical replicas (2 gloo processes)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from nasforge.engine.crossmodel.mixed import (
    SyncBatchNorm2d,
    run_gloo,
    subnet_accuracy,
    train_worker,
)
from tests.engine.test_crossmodel_supergraph import TinySpos


def _run2(fn) -> dict[int, object]:  # noqa: ANN001 - test helper
    return dict(enumerate(run_gloo(2, fn, timeout=120)))


def _bn_case(rank: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 3, 4, 4, generator=g)
    gy = torch.randn(8, 3, 4, 4, generator=g)
    bn = SyncBatchNorm2d(3)
    with torch.no_grad():
        bn.weight.copy_(torch.tensor([1.0, 2.0, 0.5]))
    xs = x[rank * 4 : (rank + 1) * 4].clone().requires_grad_(True)
    y = bn(xs)
    (y * gy[rank * 4 : (rank + 1) * 4]).sum().backward()
    return y.detach(), xs.grad, bn.weight.grad


def test_sync_batchnorm_equals_batchnorm_on_the_whole_batch() -> None:
    """Two workers with half a batch each get the full batch's outputs and input gradients;
    their weight gradients sum to the full batch's."""
    out = _run2(_bn_case)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 3, 4, 4, generator=g).requires_grad_(True)
    gy = torch.randn(8, 3, 4, 4, generator=g)
    bn = nn.BatchNorm2d(3)
    with torch.no_grad():
        bn.weight.copy_(torch.tensor([1.0, 2.0, 0.5]))
    y = bn(x)
    (y * gy).sum().backward()
    torch.testing.assert_close(torch.cat([out[0][0], out[1][0]]), y.detach())
    torch.testing.assert_close(torch.cat([out[0][1], out[1][1]]), x.grad)
    torch.testing.assert_close(out[0][2] + out[1][2], bn.weight.grad)


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(2)
    return torch.randn(64, 1, 12, 12, generator=g), torch.randint(10, (64,), generator=g)


def test_a_failing_worker_is_a_worker_error() -> None:
    """A worker that raises surfaces as a WorkerError with its traceback; none is left."""
    from nasforge.errors import WorkerError

    def boom(rank: int) -> int:
        if rank == 1:
            raise ValueError("worker one broke")
        return rank

    with pytest.raises(WorkerError, match="worker one broke"):
        run_gloo(2, boom, timeout=60)


@pytest.mark.parametrize("mode", ["mixed", "dp"])
def test_workers_stay_identical_replicas(mode: str) -> None:
    """After training, both workers hold the same super-graph weights."""
    x, y = _data()
    out = _run2(lambda r: train_worker(r, 2, TinySpos(), x, y, mode, 8, 0.05, 0)[0])
    for k, v in out[0].items():
        torch.testing.assert_close(v, out[1][k], msg=k)
    acc = subnet_accuracy(TinySpos(), out[0], x, (x, y), k=3, bn_batches=1, batch_size=16)
    assert 0.0 <= acc <= 1.0
