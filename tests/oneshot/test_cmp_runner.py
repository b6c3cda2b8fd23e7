"""`model_parallel=M, schedule="cmp"` through `nasforge run/status/export/resume`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from nasforge.cli import main
from nasforge.engine import Store
from nasforge.errors import ConfigError
from nasforge.oneshot.runner import OneShotSearch
from nasforge.run.export import load_model
from tests.runwait import wait_for_run

FILE = """
import os, time
import torch
from nasforge.spaces import DartsCellSpace


class Slow(DartsCellSpace):
    def forward(self, x):
        time.sleep(float(os.environ.get("NF_SLOW", 0)))
        return super().forward(x)


def load():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 1, 8, 8, generator=g)
    return x, (x.mean((1, 2, 3)) > 0).long()


space = Slow(n_cells=3, channels=4, in_channels=1, n_classes=2, n_nodes=2, stem_multiplier=1)
data = load()
strategy = {"name": "nasb", "epochs": EPOCHS, "batch_size": 16}
config = {"progress": "off", "threads": 1, "bn_batches": 1PARALLEL}
"""


def _file(tmp_path: Path, name: str, parallel: str, epochs: int = 2) -> Path:
    f = tmp_path / f"{name}.py"
    f.write_text(FILE.replace("PARALLEL", parallel).replace("EPOCHS", str(epochs)))
    return f


def _supernet(d: Path) -> dict:
    return torch.load(d / "artifacts" / "supernet.pt", weights_only=True)


def test_cmp_run_is_recorded_like_a_one_device_run(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    """A CMP run file gives the one-device run's record: rows, trial, export, same supernet."""
    one = _file(tmp_path, "one", "")
    cmp = _file(tmp_path, "cmp", ', "model_parallel": 2, "schedule": "cmp"')
    assert main(["run", str(one), "--dir", str(tmp_path / "a")]) == 0
    assert main(["run", str(cmp), "--dir", str(tmp_path / "b")]) == 0
    a, b = _supernet(tmp_path / "a"), _supernet(tmp_path / "b")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    with Store.open(tmp_path / "a") as s1, Store.open(tmp_path / "b") as s2:
        assert s2.state() == "finished" and s2.config()["kind"] == "oneshot"
        assert [r["arch"] for r in s1.progress()] == [r["arch"] for r in s2.progress()]
        assert [t.arch for t in s1.trials()] == [t.arch for t in s2.trials()]
        assert s2.config()["oneshot"]["model_parallel"] == 2
    capsys.readouterr()
    assert main(["status", str(tmp_path / "b")]) == 0
    assert "oneshot run, finished" in capsys.readouterr().out
    assert main(["export", str(tmp_path / "b"), "--top", "1"]) == 0
    (folder,) = capsys.readouterr().out.split()
    model = load_model(folder)
    assert model(torch.randn(2, 1, 8, 8)).shape == (2, 2)


def test_parallel_settings_are_checked_before_the_record(tmp_path: Path) -> None:
    """Bad parallel settings fail with ConfigError before any directory is created."""
    x = torch.randn(8, 1, 8, 8)
    from tests.oneshot._spaces import tiny_cell_space

    for bad in ({"model_parallel": 0}, {"schedule": "gpipe", "model_parallel": 2},
                {"workers": "fibers", "model_parallel": 2}):  # fmt: skip
        with pytest.raises(ConfigError):
            OneShotSearch(tiny_cell_space(), "nasb", (x, torch.zeros(8).long()),
                          directory=tmp_path / "r", **bad)  # fmt: skip
    with pytest.raises(ConfigError, match="architecture gradients"):
        OneShotSearch(tiny_cell_space(), "spos", (x, torch.zeros(8).long()), model_parallel=2)
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_sigkill_then_resume_is_bitwise_uninterrupted(tmp_path: Path) -> None:
    """A CMP run killed with SIGKILL and resumed ends bitwise as the uninterrupted run (thread
    workers: a run file's space class is not importable by spawned processes)."""
    root = Path(__file__).resolve().parents[2]
    par = ', "model_parallel": 2, "schedule": "cmp", "workers": "thread"'
    f = _file(tmp_path, "cmp", par, epochs=4)
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    cmd = [sys.executable, "-m", "nasforge.cli", "run", str(f), "--dir"]
    subprocess.run([*cmd, str(whole)], env=dict(os.environ, PYTHONPATH=str(root)), check=True)
    env = dict(os.environ, PYTHONPATH=str(root), NF_SLOW="0.01")
    proc = subprocess.Popen([*cmd, str(broken)], env=env, start_new_session=True)
    try:
        wait_for_run(broken, lambda s: s.n_progress() >= 2)
        os.killpg(proc.pid, signal.SIGKILL)  # the run and its worker processes
    finally:
        proc.wait(30)
    with Store.open(broken) as s:
        assert s.state() == "interrupted" and 2 <= s.n_progress() < 4 and not s.trials()
    assert main(["resume", str(broken)]) == 0
    a, b = _supernet(whole), _supernet(broken)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
