"""Trials on a real GPU (skipped without one): the pool gives two trials half of GPU 0 each,
and they compute there at the same time. Each run is a fresh process, as a user's is: pool
workers are forked, so the engine's process must not have touched CUDA."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from nasforge.run.store import Store
from tests.engine.gpu_trials import most_at_once, rows

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

ROOT = Path(__file__).resolve().parents[2]

SHARE = """
import sys, torch
from nasforge.engine import Experiment
from nasforge.runtime.devices import trial_device
from tests.engine.gpu_trials import SPACE, WhereEvaluator

class OnGpu(WhereEvaluator):
    def evaluate(self, space, arch, report):
        x = torch.ones(512, 512, device=trial_device())
        assert float((x @ x)[0, 0]) == 512.0  # computed on the trial's device
        return super().evaluate(space, arch, report)

Experiment(SPACE, OnGpu(sys.argv[1], seconds=1.0), "grid", directory=sys.argv[2],
           executor="pool", concurrency=4, gpus_per_trial=0.5, devices=[0],
           progress="off", crossmodel=False).run()
"""


def _python(*args: str) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, *args], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]


def test_two_pool_trials_share_gpu_zero(tmp_path) -> None:
    """gpus_per_trial=0.5 on GPU 0: each child sees CUDA_VISIBLE_DEVICES=0 and computes on
    cuda:0, and two trials (never three) hold it at one moment."""
    out = tmp_path / "seen"
    out.mkdir()
    _python("-c", SHARE, str(out), str(tmp_path / "run"))
    seen = rows(out)
    assert len(seen) == 8 and {r["device"] for r in seen} == {"cuda:0"}
    assert {r["env"] for r in seen} == {"0"}
    assert most_at_once(seen) == {0: 2}


def test_the_gpu_example_trains_on_the_gpu(tmp_path) -> None:
    """examples/gpu_trials.yaml as printed: 4 classification trials, half a GPU each, all done,
    two at a time, each recorded on GPU 0."""
    _python("-m", "nasforge.cli", "run", "examples/gpu_trials.yaml", "--dir", str(tmp_path / "r"))
    with Store.open(tmp_path / "r") as store:
        trials = store.trials()
    assert len(trials) == 4 and all(t.status == "done" for t in trials)
    assert all(t.placement["devices"] == [0] and t.placement["gpus"] == 0.5 for t in trials)
    at_once = [sum(1 for u in trials if u.started <= t.started < u.finished) for t in trials]
    assert max(at_once) == 2
