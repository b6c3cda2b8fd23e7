"""A search over hyperparameters as ranges, tracked in TensorBoard while it runs.

    nasforge run examples/hparams_search.py
    nasforge export runs/hparams_search --to mlflow mlruns      # afterwards, into MLflow

The space is a mapping: lists are value choices, ``uniform``/``integer`` are ranges (``log``
spreads samples over the decades). ``evaluate`` gets the architecture dict.
"""

import math

space = {
    "optimizer": ["sgd", "adam"],
    "lr": {"uniform": [1e-4, 1e-1], "log": True},
    "dropout": {"uniform": [0.0, 0.5]},
    "warmup": {"integer": [0, 100], "step": 10},
}
strategy = {"name": "tpe", "n_startup_trials": 5}
config = {
    "n_trials": 12,
    "executor": "inprocess",
    "metric": "accuracy",
    "callbacks": [{"type": "tensorboard", "logdir": "runs/hparams_search_tb"}],
}


def evaluate(arch, report):
    """Returns a made-up accuracy that peaks at lr 3e-3, dropout 0.1, warmup 30 (a stand-in
    for training: replace it with your own loop reading ``arch``)."""
    acc = 0.9 - 0.05 * (math.log10(arch["lr"]) + 2.5) ** 2 - 0.2 * (arch["dropout"] - 0.1) ** 2
    acc -= abs(arch["warmup"] - 30) / 1000 + (0.01 if arch["optimizer"] == "sgd" else 0.0)
    for epoch in range(1, 4):
        report({"accuracy": acc * epoch / 3})
    return {"accuracy": acc}
