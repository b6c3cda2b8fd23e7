"""One-shot search on a real GPU (skipped without one): the supernet trains on the device, and
the run's record and artifacts load on the CPU."""

from __future__ import annotations

import math

import pytest
import torch

import nasforge as nf
from nasforge.data import load_digits
from nasforge.oneshot import OneShotSearch, search

from ._spaces import tiny_cell_space

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


@pytest.mark.parametrize("algo", ["darts", "nasb", "spos"])
def test_search_trains_on_the_gpu(algo: str) -> None:
    """Every algorithm runs on cuda: the supernet's weights and architecture parameters live
    there, losses stay finite, and the arch freezes."""
    g = torch.Generator().manual_seed(0)
    data = torch.randn(96, 1, 8, 8, generator=g), torch.randint(0, 3, (96,), generator=g)
    space = tiny_cell_space()
    result = search(space, algo, data, epochs=2, batch_size=16, device="cuda", cycles=4,
                    population=2, progress="off")  # fmt: skip
    assert all(p.is_cuda for p in result.supernet.parameters())
    assert all(math.isfinite(r["train_loss"]) for r in result.history)
    assert nf.freeze(space, result.arch)(data[0][:2]).shape == (2, 3)


def test_oneshot_run_on_the_gpu_records_cpu_artifacts(tmp_path) -> None:
    """A recorded NASB search on cuda over sklearn's digits: the found architecture beats
    chance on inherited weights, and load_model rebuilds it on the CPU."""
    from nasforge.spaces import digits_cell_space

    run = OneShotSearch(digits_cell_space(), "nasb", "digits", directory=tmp_path / "run",
                        epochs=3, batch_size=64, device="cuda", progress="off").run()  # fmt: skip
    (best,) = run.best(1)
    assert best.status == "done" and best.metrics["accuracy"] > 0.5
    from nasforge.run.export import export_top

    (folder,) = export_top(tmp_path / "run", 1, out=tmp_path / "export")
    model = nf.load_model(folder)
    x = torch.stack([load_digits().val[i][0] for i in range(4)])
    assert model(x).shape == (4, 10)
    assert all(p.device.type == "cpu" for p in model.parameters())
