"""Tests of the pipeline kind of run: checkpoints at segment boundaries, a stop there, and a
resume (after a stop or a SIGKILL) that ends bitwise as an uninterrupted run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from nasforge.cli import main
from nasforge.errors import DivergenceError
from nasforge.parallel.runner import PipelineSettings, PipelineTraining
from nasforge.run.store import Store
from tests.parallel.conftest import stage_pids
from tests.runwait import wait_for_run

SPACE = {"n_blocks": 3, "n_candidates": 2, "hidden": 8}


class _Stop(Exception):
    """What the test's stop hook raises at a boundary (as the run's stop request would)."""


def _record(directory: Path) -> tuple[dict[str, torch.Tensor], list[float], list, str]:
    """Returns a finished run's supernet, recorded losses, trials (arch, metrics) and state."""
    with Store.open(directory) as s:
        weights = load_file(str(s.artifact("supernet")))
        losses = [r["loss"] for r in s.progress()]
        trials = [(t.arch, t.metrics) for t in s.trials()]
        return weights, losses, trials, s.state()


def _alive(pid: int) -> bool:
    """Returns True while process ``pid`` runs (a zombie, dead but not reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _assert_same_run(a: Path, b: Path, steps: int) -> None:
    wa, la, ta, sa = _record(a)
    wb, lb, tb, sb = _record(b)
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert la == lb and len(la) == steps and ta == tb and sa == sb == "finished"


def test_a_stop_at_a_boundary_resumes_to_the_uninterrupted_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run stopped by its stop hook at the first boundary keeps that checkpoint and the rows
    of its steps; rows a kill left unwritten are recorded again from the checkpoint; `nasforge
    resume` ends with the supernet, losses and trials of an uninterrupted run."""
    settings = PipelineSettings(steps=8, pipeline=1, batch_size=4, n_eval=2, checkpoint_every=3)
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    PipelineTraining(settings=settings, space_kwargs=SPACE, directory=whole).run()

    def stop(self: PipelineTraining) -> None:
        raise _Stop

    monkeypatch.setattr(PipelineTraining, "check_stop", stop, raising=False)
    with pytest.raises(_Stop):
        PipelineTraining(settings=settings, space_kwargs=SPACE, directory=broken).run()
    monkeypatch.undo()
    assert [p.name for p in (broken / "checkpoints").iterdir()] == ["pipeline_step3.pt"]
    with Store.open(broken, readonly=False) as s:
        assert [r["step"] for r in s.progress()] == [1, 2, 3] and not s.trials()
        s.truncate_progress(1)  # as if killed between the checkpoint and its rows
    assert main(["resume", str(broken)]) == 0
    _assert_same_run(whole, broken, 8)
    assert not list((broken / "checkpoints").glob("pipeline_step*"))  # the artifact replaced it
    assert main(["resume", str(broken)]) == 0  # finished: nothing to do
    _assert_same_run(whole, broken, 8)


_SLOW_SPACE = '''
import os, time
import torch.nn as nn
import nasforge as nf


class Nap(nn.Module):
    """Sleeps NF_SLOW seconds per forward: a run slow enough to be killed mid-way."""

    def forward(self, x):
        time.sleep(float(os.environ.get("NF_SLOW", "0")))
        return x


class SlowNet(nf.ModelSpace):
    def __init__(self, hidden=8):
        super().__init__()
        acts = [nn.ReLU, nn.Tanh]
        self.b0 = nf.LayerChoice(
            [nn.Sequential(nn.Linear(64, hidden), a(), Nap()) for a in acts], label="block0")
        self.b1 = nf.LayerChoice(
            [nn.Sequential(nn.Linear(hidden, hidden), a()) for a in acts], label="block1")
        self.b2 = nf.LayerChoice([nn.Linear(hidden, 10) for _ in acts], label="block2")

    def forward(self, x):
        return self.b2(self.b1(self.b0(x.flatten(1))))
'''


@pytest.mark.slow
def test_sigkill_of_a_two_stage_run_then_resume_is_bitwise_uninterrupted(tmp_path: Path) -> None:
    """A 2-stage csp run killed with SIGKILL after some checkpoints takes its stage processes
    with it; `nasforge resume` continues from the last checkpoint and ends with the supernet
    artifact and recorded losses of an uninterrupted run, bitwise."""
    root = Path(__file__).resolve().parents[2]
    (tmp_path / "slowspace.py").write_text(_SLOW_SPACE)
    f = tmp_path / "pipe.toml"
    f.write_text(
        'kind = "pipeline"\nspace = "slowspace:SlowNet"\nsteps = 40\npipeline = 2\n'
        "batch_size = 4\nn_eval = 2\ncheckpoint_every = 4\n"
    )
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    env = dict(os.environ, PYTHONPATH=f"{root}{os.pathsep}{tmp_path}", OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "nasforge.cli", "run", str(f), "--dir"]
    subprocess.run([*cmd, str(whole)], env=env, check=True, timeout=600)
    proc = subprocess.Popen([*cmd, str(broken)], env={**env, "NF_SLOW": "0.1"})
    try:
        assert wait_for_run(broken, lambda s: s.n_progress() >= 8, timeout=300)
        stages = stage_pids(proc.pid)
        assert len(stages) == 2
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    deadline = time.monotonic() + 30
    while any(map(_alive, stages)) and time.monotonic() < deadline:
        time.sleep(0.1)  # the kernel kills them with their parent (PR_SET_PDEATHSIG)
    assert not any(map(_alive, stages)), "stage processes outlived the killed run"
    with Store.open(broken) as s:
        done = s.n_progress()
        assert s.state() == "interrupted" and 8 <= done < 40 and not s.trials()
    assert main(["resume", str(broken)]) == 0
    _assert_same_run(whole, broken, 40)


def test_a_diverging_run_keeps_no_training_state(tmp_path: Path) -> None:
    """A run whose loss becomes NaN after some checkpoints ends failed with no weights: its
    training states would only diverge again (a resume keeps lr), so they are removed."""
    settings = PipelineSettings(steps=32, pipeline=1, batch_size=8, lr=5.0, checkpoint_every=2)
    kw = {"n_blocks": 4, "n_candidates": 3, "hidden": 16}
    with pytest.raises(DivergenceError) as err:
        PipelineTraining(settings=settings, space_kwargs=kw, directory=tmp_path / "d").run()
    assert err.value.step >= 2  # past the first checkpoint
    with Store.open(tmp_path / "d") as s:
        assert s.state() == "failed" and s.n_progress() >= 2
    assert not list((tmp_path / "d").rglob("*.pt")) and not list(tmp_path.rglob("*.safetensors"))
