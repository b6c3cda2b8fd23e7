"""Operator batching applied by the engine: a classification search over a frozen backbone
runs its trials merged, measured, recorded, with the metrics of independent trials."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import nasforge as nf
from nasforge.data import load_digits
from nasforge.engine import Experiment
from nasforge.engine.classification import ClassificationEvaluator
from nasforge.engine.crossmodel.plan import events
from nasforge.run.store import Store


class FrozenDigits(nf.ModelSpace):
    """A fixed frozen conv backbone on 8x8 digits and a searched adapter and head (12 archs)."""

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(11)
        self.backbone = nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.Flatten())
        with torch.no_grad():
            for p in self.backbone.parameters():
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)
        self.backbone.requires_grad_(False)
        w = nf.choice((16, 24, 32), label="width")
        self.adapter = nn.Sequential(
            nn.Linear(8 * 6 * 6, w),
            nf.LayerChoice({"relu": nn.ReLU(), "tanh": nn.Tanh()}, label="act"),
        )
        self.head = nf.LayerChoice(
            {"linear": nn.Linear(w, 10), "mlp": nn.Sequential(nn.Linear(w, w), nn.ReLU(),
                                                           nn.Linear(w, 10))},
            label="head",
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.adapter(self.backbone(x)))


class _Reordered(FrozenDigits):
    """The same space whose forward is not its modules in order: merging must fail."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.adapter(self.backbone(x)) * 0.5)


def _search(tmp_path, name: str, crossmodel, space=None):
    data = load_digits(seed=0)
    ev = ClassificationEvaluator(data=data, epochs=2, batch_size=64, lr=3e-3, seed=0)
    exp = Experiment(
        space or FrozenDigits(), ev, "grid", directory=tmp_path / name, executor="inprocess",
        crossmodel=crossmodel, progress="off",
    )  # fmt: skip
    exp.run()
    with Store.open(tmp_path / name) as store:
        return {t.arch_id: t for t in store.trials()}, events(store)


def test_merged_search_equals_independent_search(tmp_path) -> None:
    """Every architecture gets the accuracies it gets alone; the run records the merge."""
    off, ev_off = _search(tmp_path, "off", False)
    on, ev_on = _search(tmp_path, "on", True)
    assert sorted(on) == sorted(off) and len(on) == 12
    for aid, t in off.items():
        m = on[aid].metrics
        assert m["accuracy"] == pytest.approx(t.metrics["accuracy"], abs=1 / 270 + 1e-9)
        assert m["test_accuracy"] == pytest.approx(t.metrics["test_accuracy"], abs=1 / 270 + 1e-9)
        assert m["params"] == t.metrics["params"]
        assert len(on[aid].intermediates) == 2
    kinds = [e["event"] for e in ev_on]
    assert kinds[:3] == ["applied", "measured", "measured"] and kinds[3] in ("kept", "reverted")
    assert ev_on[0]["optimization"] == "opbatch"
    assert [e["event"] for e in ev_off] == ["off"]


def test_merged_checkpoints_hold_the_trained_weights(tmp_path) -> None:
    """A merged trial's checkpoint loads into its frozen model and reproduces its accuracy."""
    on, _ = _search(tmp_path, "on", {"supergraph": False})
    t = max(on.values(), key=lambda r: r.id)
    model = nf.freeze(FrozenDigits(), t.arch)
    state = torch.load(tmp_path / "on" / t.checkpoint, weights_only=True)
    model.load_state_dict(state)
    from nasforge.weightsharing import accuracy

    val = load_digits(seed=0).val
    xs = torch.stack([val[i][0] for i in range(len(val))])
    ys = torch.tensor([int(val[i][1]) for i in range(len(val))])
    got = accuracy(model, (xs, ys), batch_size=len(xs))  # one batch: see the report
    assert got == pytest.approx(t.metrics["accuracy"], abs=1e-9)


def test_a_space_that_cannot_be_split_falls_back(tmp_path) -> None:
    """A forward that is not its modules in order: the groups run one by one, recorded."""
    trials, evs = _search(tmp_path, "fb", True, _Reordered())
    assert "fell_back" in [e["event"] for e in evs]
    assert all(t.status == "done" for t in trials.values())


def test_merged_trials_run_on_the_configured_gpu(tmp_path, monkeypatch) -> None:
    """With GPU 1 of a (fake) two-GPU list given to in-process trials, merged training asks
    the trial's placement for its device, and every trial, merged or alone, records GPU 1."""
    from nasforge.engine.crossmodel import groups
    from nasforge.runtime import devices

    monkeypatch.setattr(devices, "visible_gpus", lambda: [0, 1])
    asked = []

    def spy(device):
        asked.append(devices.trial_placement())
        return devices.resolve_device(device)  # cpu here: the fake GPU is not there

    monkeypatch.setattr(groups, "resolve_device", spy)
    ev = ClassificationEvaluator(data=load_digits(seed=0), epochs=1, lr=3e-3, seed=0)
    exp = Experiment(FrozenDigits(), ev, "grid", directory=tmp_path / "g", executor="inprocess",
                     progress="off", gpus_per_trial=1, devices=[1])  # fmt: skip
    exp.run()
    assert asked and all(p is not None and p.devices == (1,) for p in asked)
    assert all(t.placement["devices"] == [1] for t in exp.trials())
    with Store.open(tmp_path / "g") as store:
        assert events(store)[0]["optimization"] == "opbatch"  # the trials did run merged


def test_planning_leaves_cuda_uninitialised(monkeypatch) -> None:
    """Looking for a frozen prefix (in the engine's process, before the pool forks GPU trial
    workers) saves and restores no GPU generator: that would initialise CUDA, after which forked
    workers cannot use their GPUs (seen on an H100: every trial of examples/gpu_trials.yaml was
    refused)."""
    from nasforge.engine.crossmodel.groups import has_frozen_prefix

    def touched(*args, **kwargs):
        raise AssertionError("the planner touched CUDA's generator state")

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)  # as on a GPU machine
    monkeypatch.setattr(torch.cuda, "get_rng_state", touched)
    assert has_frozen_prefix(FrozenDigits(), {"seed": 0}) is True
