"""A multi-trial search whose trials run as Ray tasks on a cluster (docs/cluster.md, section 3).

The only cluster-specific part is ``config["executor"]``: Ray, the cluster's address, and how
often Ray runs a trial again after its worker or node died. ``address: "auto"`` takes the
address from ``RAY_ADDRESS`` on the first run; the run's record keeps the address it joined,
and ``nasforge resume DIR`` goes back to that cluster.

    RAY_ADDRESS=127.0.0.1:6379 nasforge run examples/ray_cluster.py --dir runs/ray_cluster
    nasforge resume runs/ray_cluster --n-trials 16

Each trial stands in for training: it sleeps ``NASFORGE_EXAMPLE_SLEEP`` seconds (default 0.5)
and scores the architecture with a fixed formula, so the example needs no data and no GPU.
"""

import os
import time

from nasforge.space.search_space import Decision, SearchSpace

space = SearchSpace(
    [
        Decision("width", "value", (16, 32, 64, 128)),
        Decision("depth", "value", (1, 2, 3, 4)),
        Decision("op", "value", ("conv3x3", "conv5x5", "sep5x5")),
    ]
)
strategy = {"name": "random", "seed": 0}
config = {
    "metric": "accuracy",
    "n_trials": 12,
    "concurrency": 3,  # trials at a time: at most the cluster's CPUs / cpus_per_trial
    "executor": {"name": "ray", "address": "auto", "max_retries": 3},
    "progress": "off",
}


def evaluate(arch, report):
    """Returns a made-up accuracy of ``arch`` after a pretend training of a few epochs."""
    time.sleep(float(os.environ.get("NASFORGE_EXAMPLE_SLEEP", "0.5")))
    bonus = {"conv3x3": 0.0, "conv5x5": 0.01, "sep5x5": 0.015}[arch["op"]]
    accuracy = 0.7 + 0.04 * arch["depth"] ** 0.5 + 0.03 * (arch["width"] / 128) + bonus
    report(accuracy - 0.05, step=1)
    return {"accuracy": accuracy}
