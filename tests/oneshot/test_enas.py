"""ENAS (nasforge/oneshot/enas.py): the LSTM controller, its learning, and ENAS as a run."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
from torch import nn

import nasforge as nf
from nasforge.cli import main
from nasforge.errors import ConfigError
from nasforge.oneshot import config_for, search, supernet
from nasforge.oneshot.cmp import check_parallel
from nasforge.oneshot.enas import Controller, Enas
from nasforge.oneshot.runner import OneShot
from nasforge.oneshot.search import initial_state
from nasforge.run.export import load_model
from nasforge.run.store import Store
from tests.runwait import HOLD_FORWARD, wait_until

from .test_runner import _write


class Zero(nn.Module):
    """Returns zeros: a path that carries nothing (its network guesses)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)


class TwoOps(nf.ModelSpace):
    """One decision between a useful layer and one that throws the input away, then another
    decision that hardly matters."""

    def __init__(self) -> None:
        super().__init__()
        self.op = nf.LayerChoice({"zero": Zero, "linear": lambda: nn.Linear(8, 8)}, label="op")
        self.act = nf.LayerChoice({"relu": nn.ReLU, "tanh": nn.Tanh}, label="act")
        self.fc = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.act(self.op(x)))


def _data(n: int = 384) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, 8, generator=g)
    return x, (x[:, 0] + 0.5 * x[:, 1] > 0).long()


def test_controller_samples_inside_the_space_and_repeats_with_the_seed() -> None:
    """Samples are valid architectures; the same generator state gives the same samples; the
    log-probability of a sample is the sum of its decisions' and the strengths are
    distributions."""
    space = TwoOps().search_space()
    ctrl = Controller(space)
    a = [ctrl.arch(random.Random(3)) for _ in range(3)]
    assert a[0] == a[1] == a[2] and space.validate(a[0]) == a[0]
    drawn = {json.dumps(ctrl.arch(r)) for r in [random.Random(5)] for _ in range(40)}
    assert len(drawn) == 4  # near-uniform at start: every one of the 4 architectures appears
    positions, log_p, entropy = ctrl.sample(random.Random(0))
    log_p, entropy = log_p.detach(), entropy.detach()
    assert float(log_p) < 0 and 0 < float(entropy) <= 2 * torch.log(torch.tensor(2.0)) + 1e-6
    assert all(abs(sum(p) - 1) < 1e-5 for p in ctrl.strengths().values())


def test_enas_learns_to_prefer_the_useful_op() -> None:
    """After a short search (a warm-up of two uniform epochs of four) the controller
    gives the useful op clearly more probability than the op that throws the input away (it
    starts near one half), and picks it; its reward grows."""
    start = supernet(TwoOps(), "enas").arch_weights()["op"]
    assert abs(start[1] - 0.5) < 0.1
    res = search(
        TwoOps(), "enas", _data(), epochs=4, warmup_epochs=2, batch_size=32, progress="off",
        w_lr=0.05, controller_steps=30, final_samples=8,
    )  # fmt: skip
    p_linear = res.history[-1]["arch_weights"]["op"][1]
    assert p_linear > 0.75, res.history[-1]
    assert res.arch["op"] == "linear"
    rewards = [r["reward"] for r in res.history]
    assert rewards[0] is None  # the first of the two warm-up epochs trains uniform paths only
    assert rewards[-1] > rewards[1], rewards


def test_enas_warmup_trains_uniform_paths_and_leaves_the_controller_alone() -> None:
    """During the warm-up the controller takes no step (its weights stay bitwise, rows carry
    no reward); by default the warm-up is 3/4 of the epochs; an accuracy reward lies in [0, 1],
    a loss reward (minus a cross-entropy) below 0."""
    data = _data()
    kw = {"batch_size": 32, "progress": "off", "controller_steps": 5, "final_samples": 3}
    cfg = config_for("enas", epochs=2, warmup_epochs=3, batch_size=32, controller_steps=5)
    policy = initial_state(TwoOps(), Enas, data, cfg)[1].net.policy
    start = {k: v.clone() for k, v in policy.state_dict().items()}
    res = search(TwoOps(), "enas", data, epochs=2, warmup_epochs=3, **kw)
    after = res.supernet.policy.state_dict()
    assert all(torch.equal(start[k], after[k]) for k in start if torch.is_tensor(start[k]))
    assert [r["reward"] for r in res.history] == [None, None]
    assert TwoOps().search_space().validate(res.arch) == res.arch
    assert Enas.warmup_epochs(config_for("enas", epochs=5)) == 3
    assert Enas.warmup_epochs(config_for("enas", epochs=158)) == 118
    assert Enas.warmup_epochs(config_for("enas", epochs=5, warmup_epochs=0)) == 0
    acc = search(TwoOps(), "enas", data, epochs=1, controller_reward="accuracy", **kw)
    loss = search(TwoOps(), "enas", data, epochs=1, controller_batch=64, **kw)
    assert 0 <= acc.history[0]["reward"] <= 1 and loss.history[0]["reward"] < 0


def test_enas_settings_are_checked() -> None:
    """Impossible ENAS settings, a misspelt name and a model-parallel ENAS search are
    ConfigErrors that say what to do."""
    with pytest.raises(ConfigError, match="final_samples"):
        OneShot("enas", final_samples=0)
    with pytest.raises(ConfigError, match="controller_lr"):
        OneShot("enas", controller_lr=0.0)
    with pytest.raises(ConfigError, match="warmup_epochs must be an int >= 0"):
        OneShot("enas", warmup_epochs=-1)
    with pytest.raises(ConfigError, match="controller_reward must be 'loss'"):
        OneShot("enas", controller_reward="acc")
    with pytest.raises(ConfigError, match="controller_batch must be an int >= 1"):
        OneShot("enas", controller_batch=0)
    with pytest.raises(ConfigError, match="did you mean 'enas'"):
        OneShot("enass")
    with pytest.raises(ConfigError, match="architecture gradients"):  # no model-parallel ENAS
        check_parallel(2, 1, "cmp", "thread", OneShot("enas").config, "enas")


def test_enas_run_file_runs_exports_and_loads(tmp_path: Path, capsys) -> None:
    """`nasforge run` of a file with strategy enas records the search (progress rows with
    the controller's reward, every final sample as a trial), and ENAS's recorded pick is what
    exports and loads."""
    f = _write(tmp_path, {"name": "enas", "controller_steps": 3, "final_samples": 3})
    d = tmp_path / "run"
    assert main(["run", str(f), "--dir", str(d)]) == 0
    with Store.open(d) as store:
        cfg, trials, rows = store.config(), store.trials(), store.progress()
        picks = store.picks()
    assert cfg["oneshot"]["strategy"]["name"] == "enas"
    assert [r["epoch"] for r in rows] == [1, 2] and all("reward" in r for r in rows)
    assert {t.evaluation for t in trials} == {"inherited"} and len(trials) >= 2
    capsys.readouterr()
    assert main(["export", str(d), "--top", "1"]) == 0
    path = capsys.readouterr().out.split()[0]
    meta = json.loads((Path(path) / "arch.json").read_text())
    # ENAS's own pick is what exports (issue 50, item 3), not the best-scoring final sample
    (pick,) = [t for t in trials if t.id in picks]
    assert meta["arch"] == pick.arch
    if meta["weights"]:
        assert isinstance(load_model(path), nn.Module)


@pytest.mark.slow
def test_enas_sigkill_then_resume_is_bitwise_uninterrupted(tmp_path: Path) -> None:
    """An ENAS run killed with SIGKILL mid-search and resumed ends with the same supernet and
    controller weights, bitwise, and the same pick as an uninterrupted run (one thread)."""
    import os
    import signal
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    f = _write(tmp_path, {"name": "enas", "controller_steps": 4, "final_samples": 4})
    f.write_text(
        f.read_text().replace('"bn_batches": 2}', '"bn_batches": 2, "threads": 1}')
        .replace("epochs\": 2", "epochs\": 5")
        .replace("    def forward(self, x):\n", "    def forward(self, x):\n" + HOLD_FORWARD)
    )  # fmt: skip
    whole, broken, mark = tmp_path / "whole", tmp_path / "broken", tmp_path / "mark"
    cmd = [sys.executable, "-m", "nasforge.cli", "run", str(f), "--dir"]
    subprocess.run([*cmd, str(whole)], env=dict(os.environ, PYTHONPATH=str(root)), check=True)
    env = dict(os.environ, PYTHONPATH=str(root), NF_HOLD_AT="30", NF_MARK=str(mark))
    proc = subprocess.Popen([*cmd, str(broken)], env=env)
    try:  # killed inside a step, a few epochs in
        assert wait_until(mark.exists, timeout=120)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    with Store.open(broken) as s:
        assert s.state() == "interrupted" and 2 <= s.n_progress() < 5 and not s.trials()
    assert main(["resume", str(broken)]) == 0
    a = torch.load(whole / "artifacts" / "supernet.pt", weights_only=True)
    b = torch.load(broken / "artifacts" / "supernet.pt", weights_only=True)
    assert any(k.startswith("policy.") for k in a)  # the controller is saved with the supernet
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) if torch.is_tensor(a[k]) else a[k] == b[k] for k in a)
    with Store.open(whole) as s1, Store.open(broken) as s2:
        assert [r["reward"] for r in s1.progress()] == [r["reward"] for r in s2.progress()]
        assert [t.arch for t in s1.trials()] == [t.arch for t in s2.trials()]
