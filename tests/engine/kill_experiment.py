"""An experiment used by the kill-and-resume tests: run as a script it searches into argv[1]
(argv[2] executor, default inprocess; $NF_TEST_KEEP keep_checkpoints, default 5); imported,
it gives the same definitions, and :func:`kill_after` runs the script and SIGKILLs it. Only
the killed script's trials sleep (0.15 s each): the runs a test makes in its own process, the
references and the resumes, record the same trials without waiting."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch.nn as nn

import nasforge as nf
from nasforge.engine import Experiment
from nasforge.errors import StoreError
from nasforge.run.store import DB_NAME, Store
from nasforge.strategy import get_strategy

ROOT = Path(__file__).resolve().parents[2]


class TinyNet(nf.ModelSpace):
    """A small space: 3 widths x 2 activations x 3 depths."""

    def __init__(self):
        super().__init__()
        c = nf.choice([4, 8, 16], label="width")
        self.inp = nn.Linear(4, c)
        self.act = nf.LayerChoice({"relu": nn.ReLU, "tanh": nn.Tanh}, label="act")
        self.blocks = nf.Repeat(lambda i: nn.Linear(c, c), nf.choice([1, 2, 3], label="depth"))


def evaluate(model, report):
    """A deterministic metric from the parameter count; each trial sleeps $NF_TEST_SLEEP
    seconds (none unless set: :func:`kill_after` sets 0.15 s, slow enough to be killed
    mid-run)."""
    n = sum(p.numel() for p in model.parameters())
    time.sleep(float(os.environ.get("NF_TEST_SLEEP", "0")))
    report(n / 1000)
    return {"default": (n % 97) / 97, "params": float(n)}


def make(directory, executor="inprocess", n_trials=14, keep_checkpoints=5):
    """Returns the experiment both the killed and the uninterrupted runs use."""
    return Experiment(
        TinyNet(),
        evaluate,
        get_strategy("evolution", population_size=4, sample_size=2, seed=7),
        directory=directory,
        n_trials=n_trials,
        executor=executor,
        concurrency=2,
        progress="off",
        keep_checkpoints=keep_checkpoints,
    )


def n_finished(directory):
    """Returns how many trials of the run in ``directory`` have finished (0 before its
    database exists or while its tables are being created)."""
    if not (Path(directory) / DB_NAME).exists():
        return 0
    try:
        with Store.open(directory) as s:
            return sum(t.status != "running" for t in s.trials())
    except StoreError:
        return 0


def kill_after(directory, n_done, executor="inprocess", keep=None, timeout=60.0):
    """Returns the trials recorded by this script, run into ``directory``, once it was killed
    with SIGKILL after ``n_done`` trials finished (``keep``: its keep_checkpoints)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.setdefault("NF_TEST_SLEEP", "0.15")  # trials slow enough to be killed among them
    if keep is not None:
        env["NF_TEST_KEEP"] = str(keep)
    proc = subprocess.Popen([sys.executable, __file__, str(directory), executor], env=env, cwd=ROOT)
    try:
        end = time.monotonic() + timeout
        while n_finished(directory) < n_done and time.monotonic() < end:
            time.sleep(0.05)
        assert n_finished(directory) >= n_done, "the run made no progress"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    with Store.open(directory) as s:
        return s.trials()


if __name__ == "__main__":
    keep = int(os.environ.get("NF_TEST_KEEP", "5"))
    executor = sys.argv[2] if len(sys.argv) > 2 else "inprocess"
    make(sys.argv[1], executor, keep_checkpoints=keep).run()
