"""A search of a space of ranges by a model-based strategy (gp, cmaes, auto), used by the
kill-and-resume tests: run as a script it searches into argv[1] with strategy argv[2];
imported, it gives the same definitions. Each trial of the killed script sleeps
$NF_TEST_SLEEP seconds (the tests set 0.15), so it can be killed among them; the runs a test
makes in its own process record the same trials without waiting."""

import math
import os
import sys
import time

from nasforge.engine import Experiment
from nasforge.space.search_space import SearchSpace
from nasforge.strategy import get_strategy

#: each strategy's settings: few random start-up trials, so that the model proposes most
SETTINGS = {
    "gp": {"n_startup_trials": 3},
    "cmaes": {"popsize": 4},
    "auto": {},
}


def space():
    """Returns three floats (one log) and an integer."""
    return SearchSpace.from_spec(
        {
            "x": {"uniform": [-2.0, 2.0]},
            "y": {"uniform": [-1.0, 3.0]},
            "lr": {"uniform": [1e-4, 1e-1], "log": True},
            "k": {"integer": [0, 10]},
        }
    )


def evaluate(arch, report):
    """Returns a smooth function of the four values (Rosenbrock plus two bowls)."""
    time.sleep(float(os.environ.get("NF_TEST_SLEEP", "0")))
    x, y = arch["x"], arch["y"]
    bowls = (math.log10(arch["lr"]) + 2) ** 2 + (arch["k"] - 4) ** 2 / 10
    return (1 - x) ** 2 + 10 * (y - x * x) ** 2 + bowls


def make(directory, name, n_trials=16):
    """Returns the experiment the killed, the resumed and the uninterrupted runs use (16
    trials: auto's GP hands its 15th ask to TPE, so a resume replays that too)."""
    return Experiment(
        space(),
        evaluate,
        get_strategy(name, seed=3, **SETTINGS[name]),
        directory=directory,
        n_trials=n_trials,
        mode="min",
        executor="inprocess",
        progress="off",
        threads=1,
    )


if __name__ == "__main__":
    make(sys.argv[1], sys.argv[2]).run()
