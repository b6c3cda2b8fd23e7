"""A two-stage search used by the kill-and-resume tests: run as a script it searches into
argv[1]; imported, it gives the same definitions. $NF_TEST_SLOW (seconds, none unless set)
slows every forward pass of the space, so that only the killed script is slow enough to be
killed in the stage a test wants; the runs a test makes in its own process record the same.
$NF_TEST_STOPPER (default ``asha``) is stage 2's stopper."""

import os
import sys
import time

import torch
from torch import nn

import nasforge as nf
from nasforge.engine.classification import ClassificationEvaluator
from nasforge.twostage import TwoStageSearch


class Slow(nn.Module):
    """Returns its input, after sleeping $NF_TEST_SLOW seconds (none unless set)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(float(os.environ.get("NF_TEST_SLOW", "0")))
        return x


class DigitsNet(nf.ModelSpace):
    """An MLP on 8x8 digits: 2 hidden layers x 2 activations x 2 depths x 2 heads (16)."""

    def __init__(self):
        super().__init__()
        c = 16
        self.inp = nn.Sequential(nn.Flatten(), Slow())
        self.hidden = nf.LayerChoice({"wide": lambda: nn.Linear(64, c),
                                      "two": lambda: nn.Sequential(nn.Linear(64, 32), nn.ReLU(),
                                                                   nn.Linear(32, c))},
                                     label="hidden")  # fmt: skip
        self.act = nf.LayerChoice({"relu": nn.ReLU, "tanh": nn.Tanh}, label="act")
        self.blocks = nf.Repeat(lambda i: nn.Sequential(nn.Linear(c, c), nn.ReLU()),
                                nf.choice([1, 2], label="depth"))  # fmt: skip
        self.head = nf.LayerChoice({"fc": lambda: nn.Linear(c, 10),
                                    "fc2": lambda: nn.Sequential(nn.Linear(c, c), nn.ReLU(),
                                                                 nn.Linear(c, 10))},
                                   label="head")  # fmt: skip

    def forward(self, x):
        return self.head(self.blocks(self.act(self.hidden(self.inp(x)))))


def make(directory, executor="inprocess"):
    """Returns the search every run of a test makes: SPOS (3 epochs) shortlists 4 of the 12
    architectures it scores, the engine trains them 3 epochs one at a time, under ASHA, or
    with no stopper when $NF_TEST_STOPPER is ``none`` (then stage 2 confirms its best 2: it
    trains them again from another seed)."""
    stopper = os.environ.get("NF_TEST_STOPPER", "asha")
    return TwoStageSearch(
        DigitsNet(),
        ClassificationEvaluator("digits", epochs=3, batch_size=64, lr=0.01),
        "digits",
        {
            "algorithm": "spos",
            "k": 4,
            "pool": 12,
            "epochs": 3,
            "batch_size": 64,
            "cycles": 6,
            "population": 4,
            "sample_size": 2,
            "selection": "loss",
        },  # fmt: skip
        stopper=None if stopper == "none" else {"rule": stopper, "max_resource": 3},
        executor=executor,
        concurrency=1,
        threads=1,
        progress="off",
        directory=directory,
    )


if __name__ == "__main__":
    make(sys.argv[1]).run()
