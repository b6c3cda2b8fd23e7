"""An experiment used by the kill-and-resume test: run as a script it searches into argv[1]
(argv[2] executor, default inprocess; $NF_TEST_KEEP keep_checkpoints, default 5); imported,
it gives the same definitions."""

import os
import sys
import time

import torch.nn as nn

import nasforge as nf
from nasforge.engine import Experiment
from nasforge.strategy import get_strategy


class TinyNet(nf.ModelSpace):
    """A small space: 3 widths x 2 activations x 3 depths."""

    def __init__(self):
        super().__init__()
        c = nf.choice([4, 8, 16], label="width")
        self.inp = nn.Linear(4, c)
        self.act = nf.LayerChoice({"relu": nn.ReLU, "tanh": nn.Tanh}, label="act")
        self.blocks = nf.Repeat(lambda i: nn.Linear(c, c), nf.choice([1, 2, 3], label="depth"))


def evaluate(model, report):
    """A deterministic metric from the parameter count, slow enough to be killed mid-run."""
    n = sum(p.numel() for p in model.parameters())
    time.sleep(float(os.environ.get("NF_TEST_SLEEP", "0.15")))
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


if __name__ == "__main__":
    keep = int(os.environ.get("NF_TEST_KEEP", "5"))
    executor = sys.argv[2] if len(sys.argv) > 2 else "inprocess"
    make(sys.argv[1], executor, keep_checkpoints=keep).run()
