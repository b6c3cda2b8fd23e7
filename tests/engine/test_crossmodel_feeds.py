"""Shared data applied by the engine: concurrent pool trials with one data spec read one
producer's batches and record what they record with their own loaders."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

import nasforge as nf
from nasforge.engine import Experiment
from nasforge.engine.crossmodel import shareddata
from nasforge.engine.crossmodel.plan import events
from nasforge.engine.crossmodel.shareddata import DataSpec, batches
from nasforge.engine.evaluator import BaseEvaluator
from nasforge.run.store import Store
from tests.engine.test_crossmodel_shareddata import SPEC  # registers the toy pipeline


class Tiny(nf.ModelSpace):
    """A linear model on 6x6 inputs with a searched hidden width."""

    def __init__(self) -> None:
        super().__init__()
        w = nf.choice((4, 8, 12, 16, 20, 24), label="w")
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(36, w), nn.ReLU(), nn.Linear(w, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class SpecEvaluator(BaseEvaluator):
    """Trains on ``batches(data_spec, data_batches)``; reports how many came shared."""

    default_metric = "loss"
    data_spec: DataSpec = SPEC
    data_batches = 30

    def evaluate(self, space: Any, arch: dict[str, Any], report: Any) -> dict[str, float]:
        torch.manual_seed(0)
        model = nf.freeze(space, arch)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loss = torch.zeros(())
        for x, y in batches(self.data_spec, self.data_batches):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        installed = shareddata._INSTALLED
        return {"loss": float(loss), "n_shared": float(installed[0].n_shared if installed else 0)}


def _search(tmp_path, name: str, crossmodel: Any) -> tuple[dict[str, Any], list[dict]]:
    exp = Experiment(
        Tiny(), SpecEvaluator(), "grid", directory=tmp_path / name, executor="pool",
        concurrency=2, crossmodel=crossmodel, progress="off", mode="min", save_weights=False,
    )  # fmt: skip
    exp.run()
    with Store.open(tmp_path / name) as store:
        return {t.arch_id: t.metrics for t in store.trials()}, events(store)


def test_shared_feed_gives_the_same_trials(tmp_path) -> None:
    """With sharing on, later trials read shared batches; every loss equals the unshared one."""
    off, ev_off = _search(tmp_path, "off", False)
    on, ev_on = _search(tmp_path, "on", True)
    assert sorted(on) == sorted(off) and len(on) == 6
    for aid, m in off.items():
        assert on[aid]["loss"] == m["loss"]
        assert m["n_shared"] == 0
    assert sum(m["n_shared"] for m in on.values()) >= 2 * 30  # the merged wave shared
    assert ev_on[0]["event"] == "applied" and ev_on[0]["optimization"] == "shareddata"
    assert ev_on[-1]["event"] in ("kept", "reverted")
    assert [e["event"] for e in ev_off] == ["off"]
