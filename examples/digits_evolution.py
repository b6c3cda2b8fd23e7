"""Regularized evolution on the handwritten digits, trials run by the process-pool executor.

Run:  python examples/digits_evolution.py [--trials 30] [--random 30] [--out runs/digits_evolution]
  or: nasforge run examples/digits_evolution.py     (the search only; this file is also an
                                                     experiment file: space, evaluator,
                                                     strategy and config at module level)

The search (evolution, ``--trials`` trained architectures, 2 at a time) optimises validation
accuracy. To show what the search adds, the script then runs random search on the same space
with the same training recipe and as many trained architectures (``--random``, by default as
many as the search trained: ``--trials``, or fewer when its time budget ran out; also through
the engine, 2 at a time), and prints the *test* accuracy of each
one's best (chosen by validation accuracy, as a user would choose), the median test accuracy of
the random architectures, and whether evolution's best is one of its random draws: the
``population_size`` trials that fill its starting population, and the one more asked while the
last of them trains (two run at once), which are random too. It exits with status 1 if the
search's best does not beat the random median. One run is one seed, and on the pool the order
in which trials finish also steers evolution: what search adds over random at equal trials, on
average, is measured over many seeds by ``benchmarks/search_vs_random.py``. Its time on two
cores is the README's Quickstart figure, measured by ``benchmarks/quickstart.py``.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from pathlib import Path

import torch

from nasforge.data import load_digits
from nasforge.engine import Experiment
from nasforge.engine.classification import ClassificationEvaluator
from nasforge.run.export import export_top
from nasforge.run.status import print_status
from nasforge.spaces import DigitsCNN
from nasforge.strategy import RegularizedEvolution

torch.set_num_threads(1)  # one thread per trial: the pool runs two trials on two cores

#: The space: widths from tiny to comfortable, so that the choice matters after short training.
space = DigitsCNN(widths=(4, 8, 16, 32), depths=(1, 2, 3), dropouts=(0.0, 0.5))
#: Loaded once in the engine's process; forked workers inherit it (nothing is pickled).
data = load_digits(seed=0)
evaluator = ClassificationEvaluator(data, epochs=3, batch_size=64, lr=3e-3, seed=0)
strategy = RegularizedEvolution(population_size=10, sample_size=3, seed=0)
config = {
    "n_trials": 30,
    "executor": "pool",
    "concurrency": 2,
    "metric": "accuracy",
    "time_budget": 150,
    "directory": "runs/digits_evolution",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=config["n_trials"])
    parser.add_argument("--random", type=int, help="random archs (default: as the search)")
    parser.add_argument("--out", type=Path, default=Path(config["directory"]))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    ss = space.search_space()
    logging.info("space: %d decisions, %d architectures", len(ss), ss.size)
    start = time.perf_counter()
    settings = dict(config, n_trials=args.trials, directory=args.out / "evolution")
    search = Experiment(space, evaluator, strategy, **settings).run()
    best = search.best(1)[0]
    t_search = time.perf_counter() - start
    n_search = sum(t.status == "done" for t in search.trials())  # fewer if the budget ran out
    print_status(args.out / "evolution", limit=10)
    baseline = Experiment(
        space,
        evaluator,
        "random",
        n_trials=args.random or n_search,
        executor="pool",
        concurrency=2,
        directory=args.out / "random",
    ).run()
    random_test = [t.metrics["test_accuracy"] for t in baseline.trials() if t.status == "done"]
    median_random = statistics.median(random_test)
    random_best = baseline.best(1)[0]
    n_draws = strategy.population_size + config["concurrency"] - 1  # asked before it filled
    draws = sorted(t.id for t in search.trials())[:n_draws]
    (exported,) = export_top(args.out / "evolution", k=1)
    summary = {
        "best_arch": best.arch,
        "best_val_accuracy": round(best.metrics["accuracy"], 4),
        "best_test_accuracy": round(best.metrics["test_accuracy"], 4),
        "median_random_test_accuracy": round(median_random, 4),
        "n_search": n_search,
        "n_random": len(random_test),
        "random_best_val_accuracy": round(random_best.metrics["accuracy"], 4),
        "random_best_test_accuracy": round(random_best.metrics["test_accuracy"], 4),
        "best_is_a_random_draw": best.id in draws,
        "beats_median_random": best.metrics["test_accuracy"] > median_random,
        "search_seconds": round(t_search, 1),
        "total_seconds": round(time.perf_counter() - start, 1),
        "exported": str(exported),
    }
    print(json.dumps(summary))
    return 0 if summary["beats_median_random"] else 1


if __name__ == "__main__":
    sys.exit(main())
