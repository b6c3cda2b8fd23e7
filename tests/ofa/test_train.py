"""Tests of supernet training: plans, sampled sub-networks with distillation, resume."""

from __future__ import annotations

import pytest
import torch

from nasforge.errors import ConfigError, StoreError
from nasforge.ofa.mobilenet import OFAMobileNetV3
from nasforge.ofa.record import open_ofa_store, stage_from_dict
from nasforge.ofa.spaces import Stage
from nasforge.ofa.train import TrainConfig, evaluate, train, training_plan
from nasforge.run.store import DB_NAME, Store
from tests.ofa.conftest import tiny_spec


def _data(n=24):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, 1, 16, 16, generator=g)
    y = (x.mean(dim=(1, 2, 3)) > 0).long() + (x[:, 0, 0, 0] > 1).long()
    return x, y


def test_plans():
    """OFA gets full + five shrinking stages; CompOFA full + one; epochs are split evenly."""
    ofa = training_plan(OFAMobileNetV3(tiny_spec("ofa")), 2, 7)
    assert [s.name for s in ofa] == ["full", "kernel", "depth-1", "depth-2", "width-1", "width-2"]
    assert sum(s.epochs for s in ofa[1:]) == 7
    comp = training_plan(OFAMobileNetV3(tiny_spec("compofa")), 2, 7)
    assert [(s.name, s.epochs) for s in comp] == [("full", 2), ("compound", 7)]
    with pytest.raises(ConfigError):
        training_plan(OFAMobileNetV3(tiny_spec("ofa")), 1, 3)


def test_shrinking_trains_subnets_with_distillation():
    """A shrinking step changes the weights of layers only smaller sub-networks use (the kernel
    transforms) and the teacher stays the full network."""
    net = OFAMobileNetV3(tiny_spec("ofa"))
    before = {k: v.clone() for k, v in net.state_dict().items()}
    plan = training_plan(net, 1, 5)
    logs = train(net, _data(), plan, TrainConfig(batch_size=12, n_subnets=2))
    assert [r["stage"] for r in logs] == [s.name for s in plan]
    after = net.state_dict()
    assert not torch.equal(after["stages.0.1.dw_conv.transforms.7to5"],
                           before["stages.0.1.dw_conv.transforms.7to5"])  # fmt: skip
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in logs)
    acc = evaluate(net, net.search_space().smallest(), _data(), _data()[0])
    assert 0.0 <= acc <= 1.0


class _Crash(Exception):
    """Stands for a kill in the middle of an epoch."""


def _crash_at(stage, epoch):
    def progress(s, e, step, n, loss):
        if (s, e) == (stage, epoch):
            raise _Crash

    return progress


def test_resume_gives_the_same_weights(tmp_path):
    """A run killed in the middle of an epoch and resumed from its store ends with the same
    weights as an unbroken run, and its store holds one row per epoch and says finished."""
    data = _data()
    cfg = TrainConfig(batch_size=12, n_subnets=2)
    torch.manual_seed(0)
    a = OFAMobileNetV3(tiny_spec("compofa"))
    plan = [Stage("full", None, 1), *training_plan(a, 0, 2)]
    torch.manual_seed(0)
    b = OFAMobileNetV3(tiny_spec("compofa"))
    train(a, data, plan, cfg)
    with pytest.raises(_Crash):  # killed during the second epoch of the compound stage
        train(b, data, plan, cfg, directory=tmp_path, progress=_crash_at("compound", 1))
    store = open_ofa_store(tmp_path)
    assert [(r["stage"], r["epoch"]) for r in store.progress()] == [
        ("full", 0),
        ("compound", 0),
    ]
    store.close()
    torch.manual_seed(1)
    c = OFAMobileNetV3(tiny_spec("compofa"))  # fresh process: weights come from the checkpoint
    logs = train(c, data, plan, cfg, directory=tmp_path)
    assert [(r["stage"], r["epoch"]) for r in logs] == [
        ("full", 0),
        ("compound", 0),
        ("compound", 1),
    ]
    for k, v in a.state_dict().items():
        assert torch.equal(v, c.state_dict()[k]), k
    store = open_ofa_store(tmp_path)
    assert store.progress() == logs and store.state() == "finished"
    final = torch.load(store.artifact("supernet"), weights_only=True)
    assert all(torch.equal(v, final[k]) for k, v in a.state_dict().items())
    assert [stage_from_dict(d) for d in store.config()["ofa"]["plan"]] == plan
    store.close()
    # superseded checkpoints are dropped; the last of each stage stays
    kept = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert kept == ["00-full-e001.pt", "01-compound-e002.pt"]
    state = torch.load(tmp_path / "checkpoints" / kept[-1], weights_only=True)
    assert set(state) == {"model", "teacher", "optimizer", "scheduler"}


def test_probes_are_recorded_and_do_not_change_training(tmp_path):
    """Probe accuracies of the largest and smallest networks land in each epoch row, and
    probing leaves the trained weights unchanged."""
    data = _data()
    cfg = TrainConfig(batch_size=12, n_subnets=2)
    nets = []
    for probe in (None, data):
        torch.manual_seed(0)
        net = OFAMobileNetV3(tiny_spec("compofa"))
        plan = [Stage("full", None, 1), *training_plan(net, 0, 1)]
        d = tmp_path / ("p" if probe else "n")
        logs = train(net, data, plan, cfg, directory=d, probe_data=probe)
        nets.append(net)
    assert {k for k in logs[-1] if k.startswith("acc_")} == {"acc_largest", "acc_smallest"}
    assert all(0.0 <= v <= 1.0 for r in logs for k, v in r.items() if k.startswith("acc_"))
    for k, v in nets[0].state_dict().items():
        assert torch.equal(v, nets[1].state_dict()[k]), k


def test_foreign_changed_or_corrupted_directories(tmp_path):
    """A multi-trial experiment, a run with other settings and a corrupted database each give
    a StoreError, and nothing is overwritten."""
    data = _data()
    cfg = TrainConfig(batch_size=12, n_subnets=1)
    net = OFAMobileNetV3(tiny_spec("compofa"))
    plan = [Stage("full", None, 1)]
    Store.create(tmp_path / "trials", {"kind": "multitrial"}).close()
    with pytest.raises(StoreError, match="not an OFA run"):
        train(net, data, plan, cfg, directory=tmp_path / "trials")
    train(net, data, plan, cfg, directory=tmp_path / "run")
    with pytest.raises(StoreError, match="different train"):
        train(net, data, plan, TrainConfig(batch_size=6), directory=tmp_path / "run")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / DB_NAME).write_bytes(b"not a database at all" * 100)
    with pytest.raises(StoreError):
        train(net, data, plan, cfg, directory=tmp_path / "bad")
    (tmp_path / "run" / "checkpoints" / "00-full-e001.pt").write_bytes(b"garbage")
    with pytest.raises(StoreError, match="cannot read checkpoint"):
        train(net, data, plan, cfg, directory=tmp_path / "run")


def test_a_diverging_training_stops_with_a_divergence_error(tmp_path):
    """A learning rate that blows the loss up stops OFA training with a DivergenceError; the
    record has no supernet artifact and says failed."""
    from nasforge.errors import DivergenceError

    torch.manual_seed(0)
    net = OFAMobileNetV3(tiny_spec("compofa"))
    plan = [Stage("full", None, 2)]
    with pytest.raises(DivergenceError, match="stage 'full'"):
        train(net, _data(), plan, TrainConfig(batch_size=12, lr=1e12), directory=tmp_path)
    store = open_ofa_store(tmp_path)
    assert store.artifact("supernet") is None and store.state() == "failed"
    store.close()
