"""Data-parallel once-for-all runs from the command line: ``nasforge run FILE --nproc 2`` of an
``ofa`` run file (training, then the deployment search with a predictor) on gloo over
loopback writes one record, rank 0's, with what one process writes; a stop reaches both ranks
after the same epoch and a resume at another N finishes the run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from nasforge.cli import main
from nasforge.run.store import Store
from tests.runwait import wait_for_run
from tests.stopwait import HOLD

pytestmark = pytest.mark.slow

#: a small learning rate: at 0.1 this network's first steps amplify float32 rounding (the
#: order of the ranks' sums) ~50 times per step, so the runs drift apart by 1e-3 within an
#: epoch (in float64 they agree to 1e-16: the data-parallel step is exact, not the floats)

RUN_FILE = """\
kind: ofa
space: compofa
data: data.pt
width_mult: 0.25
full_epochs: 1
shrink_epochs: 1
n_subnets: 2
batch_size: 40
lr: 0.005
threads: 1
probes: false
sync_bn: true
search: {targets: [2], latency: flops, accuracy: predictor, n_pairs: 6, population: 4,
         generations: 1}
"""


ROOT = Path(__file__).resolve().parents[2]


def _data(folder: Path) -> None:
    """Writes ``data.pt``: 120 28x28 images and 2 classes a simple rule separates."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(120, 1, 28, 28, generator=g)
    torch.save({"x": x, "y": (x.mean(dim=(1, 2, 3)) > 0).long()}, folder / "data.pt")


def _record(directory: Path) -> tuple[list, dict[str, torch.Tensor]]:
    """Returns the run's picks (architecture, accuracy) and its supernet's weights."""
    with Store.open(directory) as store:
        assert store.state() == "finished"
        picks = [(t.arch, t.metrics["accuracy"]) for t in store.trials() if t.id in store.picks()]
        weights = torch.load(store.artifact("supernet"), weights_only=True)
    return picks, weights


def test_nproc_2_ofa_run_writes_one_record_with_one_process_result(tmp_path) -> None:
    """`--nproc 2` of an ofa run file: one record, rank 0's; the supernet's weights within
    the float tolerance of one process's, and the same pick with the same accuracy."""
    _data(tmp_path)
    run_file = tmp_path / "ofa.yaml"
    run_file.write_text(RUN_FILE)
    two, one = tmp_path / "two", tmp_path / "one"
    assert main(["run", str(run_file), "--nproc", "2", "--dir", str(two)]) == 0
    assert main(["run", str(run_file), "--dir", str(one)]) == 0
    (picks2, w2), (picks1, w1) = _record(two), _record(one)
    assert len(picks1) == 1 and picks2 == picks1
    assert w2.keys() == w1.keys()
    assert max(float((w2[k] - w1[k]).abs().max()) for k in w1) < 1e-4
    assert sorted(p.name for p in two.iterdir()) == sorted(p.name for p in one.iterdir())


PY_RUN_FILE = (
    "import os\n" + HOLD + "kind = 'ofa'\n"
    "data = os.path.join(os.path.dirname(__file__), 'data.pt')\n"
    "config = {'space': 'compofa', 'width_mult': 0.25, 'full_epochs': 1, 'shrink_epochs': 1,\n"
    "          'n_subnets': 2, 'batch_size': 40, 'lr': 0.005, 'threads': 1, 'probes': False,\n"
    "          'sync_bn': True, 'callbacks': [HOLD_FIRST_ROW]}\n"
)


def test_a_stop_reaches_both_ranks_and_resume_at_one_process_finishes(tmp_path) -> None:
    """A `--nproc 2` ofa run held after its first epoch: `nasforge stop` stops both ranks
    there (exit 0, recorded stopped, one epoch); `resume --nproc 1` finishes it with the
    weights of an uninterrupted 2-rank run, within the float tolerance."""
    _data(tmp_path)
    run_file = tmp_path / "ofa.py"
    run_file.write_text(PY_RUN_FILE)
    directory = tmp_path / "run"
    env = {**os.environ, "NF_HOLD": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "nasforge", "run", str(run_file), "--nproc",
                             "2", "--dir", str(directory)], env=env)  # fmt: skip
    try:
        assert wait_for_run(directory, lambda s: s.n_progress() >= 1, timeout=300)
        assert main(["stop", str(directory)]) == 0
        assert proc.wait(300) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with Store.open(directory) as store:
        assert store.state() == "stopped" and store.n_progress() == 1
    assert main(["resume", str(directory), "--nproc", "1"]) == 0
    whole = tmp_path / "whole"
    assert main(["run", str(run_file), "--nproc", "2", "--dir", str(whole)]) == 0
    (_, w1), (_, w2) = _record(directory), _record(whole)
    assert max(float((w2[k] - w1[k]).abs().max()) for k in w1) < 1e-4
