"""One-shot search through the engine: `nasforge run/status/export/resume` on a one-shot file."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch

from nasforge.cli import main
from nasforge.data import split_dataset
from nasforge.engine import Store
from nasforge.errors import ConfigError, SpaceError, StoreError
from nasforge.oneshot.common import accuracy
from nasforge.oneshot.runner import OneShot, OneShotSearch
from nasforge.run.export import load_model
from nasforge.run.files import load_run_file as load_experiment
from tests.runwait import HOLD_FORWARD, wait_until

SPACE = """
import torch
from torch import nn
import nasforge as nf
from nasforge.data import split_dataset


class Net(nf.ModelSpace):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(1, 4, 3, padding=1)
        self.op = nf.LayerChoice(
            {"conv": lambda: nn.Conv2d(4, 4, 3, padding=1), "pool": lambda: nn.AvgPool2d(3, 1, 1)},
            label="op",
        )
        self.bn = nn.BatchNorm2d(4)
        self.blocks = nf.Repeat(lambda i: nn.Conv2d(4, 4, 1), (1, 2), label="depth")
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(self.blocks(torch.relu(self.bn(self.op(self.stem(x))))).mean((2, 3)))


def load():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(72, 1, 8, 8, generator=g)
    y = (x.mean((1, 2, 3)) > 0).long() + (x[:, 0, 0, 0] > 1).long()
    return split_dataset((x, y), seed=0, n_classes=3)
"""

EXPERIMENT = """
space = Net()
data = load()
strategy = STRATEGY
config = {"epochs": 2, "batch_size": 16, "progress": "log", "bn_batches": 2}
"""


def _write(tmp_path: Path, strategy: object) -> Path:
    f = tmp_path / "exp.py"
    f.write_text(SPACE + EXPERIMENT.replace("STRATEGY", repr(strategy)))
    return f


@pytest.mark.parametrize("strategy", ["nasb", {"name": "spos", "cycles": 4, "population": 2}])
def test_run_status_export_load(
    tmp_path: Path, capsys: pytest.CaptureFixture, caplog: pytest.LogCaptureFixture, strategy
) -> None:
    """`nasforge run` searches one-shot; status, export and load_model work on the record."""
    f = _write(tmp_path, strategy)
    d = tmp_path / "run"
    caplog.set_level(logging.INFO, logger="nasforge.engine")
    assert main(["run", str(f), "--dir", str(d)]) == 0
    shown = [r.getMessage() for r in caplog.records if r.name == "nasforge.engine"]
    assert any("epoch 2/2" in m and "train loss" in m and '{"op":' in m for m in shown)
    store = Store.open(d)
    cfg, trials, epochs = store.config(), store.trials(), store.progress()
    sup = torch.load(store.artifact("supernet"), weights_only=True)
    store.close()
    assert cfg["kind"] == "oneshot" and cfg["oneshot"]["strategy"]["config"]["epochs"] == 2
    found = trials[-1]  # SPOS records every architecture its evolution scored before it
    assert {t.status for t in trials} == {"done"} and len(found.intermediates) == 2
    assert {t.evaluation for t in trials} == {"inherited"}
    assert [r["epoch"] for r in epochs] == [1, 2] and all("arch" in r for r in epochs)
    assert any(k.startswith("arch_params") for k in sup)
    capsys.readouterr()
    assert main(["status", str(d)]) == 0
    out = capsys.readouterr().out
    assert "done" in out and "accuracy" in out
    assert main(["export", str(d), "--top", "1"]) == 0
    path = capsys.readouterr().out.split()[0]
    meta = json.loads((Path(path) / "arch.json").read_text())
    # the search's pick is exported first, whatever the accuracy of the candidates it scored
    assert meta["arch"] == found.arch and meta["trial"] == found.id and meta["weights"]
    model = load_model(path)  # the space is rebuilt from the reference the export carries
    saved = torch.load(d / found.checkpoint, weights_only=True)
    assert all(torch.equal(v, saved[k]) for k, v in model.state_dict().items())
    x, y = next(iter(torch.utils.data.DataLoader(_val_split(), batch_size=1000)))
    assert accuracy(model, (x, y)) == pytest.approx(found.metrics["accuracy"])
    if len(trials) > 1:  # a scored candidate's export has no weights: loading it says so
        assert main(["export", str(d), "--top", "2", "--out", str(tmp_path / "two")]) == 0
        second = capsys.readouterr().out.split()[1]
        with pytest.raises(StoreError, match="has no weights in this export"):
            load_model(second)


def _val_split():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(72, 1, 8, 8, generator=g)
    y = (x.mean((1, 2, 3)) > 0).long() + (x[:, 0, 0, 0] > 1).long()
    return split_dataset((x, y), seed=0, n_classes=3).val


def test_sigkill_mid_epoch_then_resume_is_bitwise_uninterrupted(tmp_path: Path) -> None:
    """A one-shot run killed with SIGKILL in the middle of an epoch and resumed with `nasforge
    resume` ends with the same supernet weights, bitwise, as an uninterrupted run (one
    thread); resuming a finished run changes nothing."""
    import os
    import signal
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    f = _write(tmp_path, "darts")
    f.write_text(
        f.read_text().replace('"bn_batches": 2}', '"bn_batches": 2, "threads": 1, '
                              '"checkpoint_every": 1}')
        .replace("epochs\": 2", "epochs\": 5")
        .replace("    def forward(self, x):\n", "    def forward(self, x):\n" + HOLD_FORWARD)
    )  # fmt: skip
    whole, broken, mark = tmp_path / "whole", tmp_path / "broken", tmp_path / "mark"
    cmd = [sys.executable, "-m", "nasforge.cli", "run", str(f), "--dir"]
    # a fresh process, as the killed one: the space's initial weights come from its import
    subprocess.run([*cmd, str(whole)], env=dict(os.environ, PYTHONPATH=str(root)), check=True)
    env = dict(os.environ, PYTHONPATH=str(root), NF_HOLD_AT="20", NF_MARK=str(mark))
    proc = subprocess.Popen([*cmd, str(broken)], env=env)
    try:  # killed inside a step of the third epoch, after a checkpoint inside that epoch
        assert wait_until(mark.exists, timeout=120)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    with Store.open(broken) as s:
        assert s.state() == "interrupted" and 2 <= s.n_progress() < 5 and not s.trials()
    assert main(["resume", str(broken)]) == 0
    a = torch.load(whole / "artifacts" / "supernet.pt", weights_only=True)
    b = torch.load(broken / "artifacts" / "supernet.pt", weights_only=True)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    with Store.open(whole) as s1, Store.open(broken) as s2:
        assert [r["arch"] for r in s1.progress()] == [r["arch"] for r in s2.progress()]
        first = s2.trials()
        assert [t.arch for t in s1.trials()] == [t.arch for t in first]
    assert main(["resume", str(broken)]) == 0
    with Store.open(broken) as s:
        assert s.trials() == first and s.state() == "finished"


def test_yaml_one_shot_with_data_reference(tmp_path: Path) -> None:
    """A YAML file names a space, a one-shot strategy with settings, and a data function."""
    (tmp_path / "osmod.py").write_text(SPACE)
    f = tmp_path / "exp.yaml"
    f.write_text(
        "space: osmod:Net\nstrategy: {name: nasb, epochs: 1, batch_size: 32, order: alternate}\n"
        "data: osmod:load\nprogress: 'off'\n"
    )
    exp = load_experiment(f, directory=tmp_path / "y")
    assert isinstance(exp, OneShotSearch) and exp.strategy.config.algo.order == "alternate"
    exp.run()
    assert exp.best(1)[0].metrics["test_accuracy"] >= 0


def test_shape_changing_value_choice_fails_before_training(tmp_path: Path) -> None:
    """A space whose value choice changes shapes is refused, naming the label, before a store."""
    f = tmp_path / "bad.py"
    f.write_text(
        SPACE.replace("nn.Linear(4, 3)", 'nn.Linear(4, nf.choice([3, 6], label="width"))')
        + "\nspace = Net()\ndata = load()\nstrategy = 'spos'\n"
    )
    with pytest.raises(SpaceError, match="width"):
        load_experiment(f, directory=tmp_path / "run")
    assert main(["run", str(f), "--dir", str(tmp_path / "run")]) == 2
    assert not (tmp_path / "run").exists()


def test_bad_one_shot_settings_are_config_errors(tmp_path: Path) -> None:
    """Unknown names and settings, missing data and multi-trial budgets are ConfigErrors."""
    with pytest.raises(ConfigError, match="nasb"):
        OneShot("nsab")
    with pytest.raises(ConfigError, match="epochs"):
        OneShot("nasb", epoch=3)
    f = _write(tmp_path, "nasb")
    with pytest.raises(ConfigError, match="n_trials"):
        load_experiment(f, n_trials=5)
    f.write_text(f.read_text().replace("data = load()", "data = None"))
    with pytest.raises(ConfigError, match="data"):
        load_experiment(f)


def test_a_one_shot_run_sets_its_thread_count(tmp_path: Path, monkeypatch) -> None:
    """Without `threads`, a one-shot run uses the library's default (NASFORGE_THREADS here),
    not torch's; with `threads`, that count."""
    f = _write(tmp_path, "nasb")
    monkeypatch.setenv("NASFORGE_THREADS", "1")
    torch.set_num_threads(2)
    load_experiment(f, directory=tmp_path / "a", epochs=1, progress="off").run()
    assert torch.get_num_threads() == 1
    monkeypatch.delenv("NASFORGE_THREADS")
    load_experiment(f, directory=tmp_path / "b", epochs=1, threads=2, progress="off").run()
    assert torch.get_num_threads() == 2
    torch.set_num_threads(1)


def test_a_diverging_search_stops_failed_and_exports_nothing(tmp_path: Path) -> None:
    """A learning rate that makes the loss NaN stops the search with a DivergenceError naming
    the epoch and step; the run is recorded failed, with no trial and no supernet."""
    from nasforge.errors import DivergenceError

    f = _write(tmp_path, "darts")
    exp = load_experiment(f, directory=tmp_path / "d", w_lr=1e9, grad_clip=1e12, progress="off")
    with pytest.raises(DivergenceError, match="epoch 1, step"):
        exp.run()
    with Store.open(tmp_path / "d") as store:
        assert store.state() == "failed" and not store.trials()
        assert store.artifact("supernet") is None
    assert main(["resume", str(tmp_path / "d")]) == 2  # it diverges again: exit status 2
