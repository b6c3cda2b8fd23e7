"""Mixed parallelism and its data-parallel baseline (synchronised batch norm: tested in
tests/runtime/test_sync_bn.py): workers stay identical replicas (2 gloo processes)."""

from __future__ import annotations

import pytest
import torch

from nasforge.engine.crossmodel.mixed import run_gloo, subnet_accuracy, train_worker
from tests.engine.test_crossmodel_supergraph import TinySpos


def _run2(fn) -> dict[int, object]:  # noqa: ANN001 - test helper
    return dict(enumerate(run_gloo(2, fn, timeout=120)))


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
