"""Exports carry their space; runs started from Python resume from the command line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from nasforge.cli import main
from nasforge.run.export import export_top, load_model
from nasforge.run.store import Store
from tests.runwait import wait_for_run

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys

import pytest
import torch

from nasforge.data import load_digits
from nasforge.engine import Experiment
from nasforge.engine.classification import ClassificationEvaluator
from nasforge.spaces import DigitsCNN

torch.set_num_threads(1)
space = DigitsCNN(widths=(4, 8), depths=(1, 2), dropouts=(0.0, 0.5))
data = load_digits(seed=0)
evaluator = ClassificationEvaluator(data, epochs=1, batch_size=128, lr=3e-3, seed=0)

if __name__ == "__main__":
    Experiment(space, evaluator, "random", n_trials=int(sys.argv[2]), executor="inprocess",
               directory=sys.argv[1], progress="off").run()
"""


@pytest.mark.slow
def test_export_of_a_space_built_with_arguments_loads_without_the_space(tmp_path: Path) -> None:
    """An architecture of DigitsCNN(widths=..., dropouts=(0.0, 0.5)) exports and loads with
    `load_model(folder)` alone: the export carries the constructor's arguments."""
    script = tmp_path / "search.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    d = tmp_path / "run"
    subprocess.run([sys.executable, str(script), str(d), "4"], env=env, check=True, cwd=tmp_path)
    folders = export_top(d, 3)
    assert len(folders) == 3
    for folder in folders:
        meta = json.loads((folder / "arch.json").read_text())
        assert meta["space"]["kwargs"]["dropouts"] == [0.0, 0.5]
        model = load_model(folder)
        saved = torch.load(folder / "weights.pt", weights_only=True)
        assert all(torch.equal(v, saved[k]) for k, v in model.state_dict().items())
        assert model(torch.zeros(2, 1, 8, 8)).shape == (2, 10)


@pytest.mark.slow
def test_a_run_started_from_python_resumes_from_the_command_line(tmp_path: Path, capsys) -> None:
    """A script's Experiment killed with SIGKILL is continued by `nasforge resume DIR`: the
    record finds the script's space and evaluator again; status first says how to resume."""
    script = tmp_path / "search.py"
    script.write_text(SCRIPT)
    d = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, str(script), str(d), "6"], env=env, cwd=tmp_path)
    try:
        assert wait_for_run(d, lambda s: s.counts().get("done", 0) >= 2)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    capsys.readouterr()
    assert main(["status", str(d)]) == 0
    out = capsys.readouterr().out
    assert "interrupted:" in out and "of 6 trials done" in out
    assert f"resume with: nasforge resume {d}" in out
    assert main(["resume", str(d)]) == 0
    with Store.open(d) as s:
        assert s.state() == "finished"
        assert sum(t.status == "done" for t in s.trials()) == 6
