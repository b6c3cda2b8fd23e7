"""What the Quickstart's search adds over random search at equal trials, over several seeds.

The Quickstart (``examples/digits_evolution.py``) runs regularized evolution and then random
search for the same number of trained trials, and compares the best of each: one seed, one
comparison. This benchmark repeats that comparison for ``--seeds`` seeds (the strategies'
seeds 0, 1, ...), each one exactly as the example runs it: its space, its strategy's settings,
its evaluator, ``n_trials``, the process pool with two trials at a time (on the pool, the order
in which trials finish also steers evolution, as in the example).

Training in the example is seeded and one-threaded, so a network gets the same metrics
whenever it is trained. A trial whose network was trained before (by this benchmark, in any
seed) therefore takes its metrics from a table instead of training again
(``benchmarks/data/digits_quickstart_table.json``, written after every search); a network is the
architecture without the choices of the blocks beyond its depth, which build nothing. Every
other trial trains, as a Quickstart trial does. ``--quick`` trains one network of the table
again and checks that it gets the table's metrics (``retrained_equal``), then compares the
strategies for one seed at 4 trials each (a smoke run: it leaves the table as it is).

Reported over the seeds: the mean test accuracy of each strategy's best trial (chosen by
validation accuracy, as the example chooses) and its mean validation accuracy; how often
evolution's best is better, equal or worse than random's (on test, and on validation, which the
search optimises); how often evolution's best was one of its random draws (the trials asked
before its population filled); the mean over seeds of the median test accuracy of each
strategy's trials (how much of its budget the search spends on good networks); the mean number
of trials that tie at each one's best validation accuracy (the validation split is small, and
the engine ranks ties by trial id, so in evolution a tie goes to its random draws); the best
network of the table; the networks trained, the seconds, the cores and the load average.

    PYTHONPATH=. python benchmarks/search_vs_random.py [--seeds 5] [--trials N] [--quick]

Last line: one JSON object with ``seeds``, ``trials``, ``evolution_best_test_mean``,
``random_best_test_mean``, ``evolution_best_val_mean``, ``random_best_val_mean``,
``evolution_vs_random_test``, ``evolution_vs_random_val`` ({better, equal, worse}),
``evolution_best_is_a_random_draw``, ``evolution_median_test_mean``, ``random_median_test_mean``,
``evolution_at_best_val_mean``, ``random_at_best_val_mean``, ``per_seed``, ``table_networks``,
``networks_trained``, ``seconds``, ``cores``, ``load_average``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from nasforge.engine import Experiment
from nasforge.engine.evaluator import BaseEvaluator, Report
from nasforge.strategy import RandomStrategy, RegularizedEvolution

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "benchmarks/data/digits_quickstart_table.json"
#: the metrics kept per network (train_seconds is not a property of the network)
KEPT = ("accuracy", "test_accuracy", "params")


def _example() -> Any:
    """Returns the Quickstart's example module (its space, evaluator, strategy, config)."""
    spec = importlib.util.spec_from_file_location(
        "digits_evolution", ROOT / "examples/digits_evolution.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # also sets one torch thread, as in the example
    return module


def network_key(arch: dict[str, Any]) -> str:
    """Returns the table key of an architecture: its decisions as JSON, without the choices of
    the first stage's blocks beyond ``depth`` (``nf.Repeat`` builds only ``depth`` blocks)."""
    kept = {
        k: v
        for k, v in arch.items()
        if not (k.startswith("stage1.") and int(k.split(".")[1]) >= arch["depth"])
    }
    return json.dumps(kept, sort_keys=True)


def an_arch(ex: Any, key: str) -> dict[str, Any]:
    """Returns an architecture of the network ``key`` (the blocks it does not build take their
    first candidate)."""
    arch = json.loads(key)
    for d in ex.space.search_space().decisions:
        arch.setdefault(d.label, d.values[0])
    return arch


class TableOrTrain(BaseEvaluator):
    """Returns a network's metrics from the table when it was trained before, else trains it
    with the example's evaluator (the table is read in the engine's process; the pool's forked
    workers inherit it)."""

    default_metric = "accuracy"
    metric_names = KEPT

    def __init__(self, inner: BaseEvaluator, table: dict[str, dict[str, float]]) -> None:
        self.inner, self.table = inner, table

    def evaluate(self, space: Any, arch: dict[str, Any], report: Report) -> dict[str, float]:
        """Returns the table's metrics of ``arch``'s network, or those of training it."""
        known = self.table.get(network_key(arch))
        if known is not None:
            return dict(known)
        metrics = self.inner.evaluate(space, arch, report)
        return {k: float(metrics[k]) for k in KEPT}

    def config(self) -> dict[str, Any]:
        """Returns the example evaluator's settings."""
        return {"type": "table-or-train", "inner": self.inner.config()}


def search(
    ex: Any, strategy: Any, table: dict[str, dict[str, float]], n_trials: int, directory: Path
) -> list[Any]:
    """Returns the trials of one search run as the example runs it, in the order they were
    asked, after adding the networks it trained to ``table``."""
    settings = dict(ex.config, n_trials=n_trials, directory=directory, time_budget=None)
    exp = Experiment(ex.space, TableOrTrain(ex.evaluator, table), strategy, progress="off",
                     save_weights=False, **settings)  # fmt: skip
    exp.run()
    trials = sorted(exp.trials(), key=lambda t: t.id)
    for t in trials:
        if t.status == "done":
            table.setdefault(network_key(t.arch), {k: t.metrics[k] for k in KEPT})
    return trials


def compare(ex: Any, table: dict[str, dict[str, float]], seed: int, n_trials: int,
            root: Path) -> dict[str, Any]:  # fmt: skip
    """Returns one seed's figures: each strategy's best trial (by validation accuracy), the
    median test accuracy of its trials, and whether evolution's best was a random draw."""
    template = ex.strategy
    evolution = RegularizedEvolution(
        population_size=template.population_size, sample_size=template.sample_size, seed=seed
    )
    out: dict[str, Any] = {"seed": seed}
    for name, strategy in (("evolution", evolution), ("random", RandomStrategy(seed=seed))):
        trials = search(ex, strategy, table, n_trials, root / f"{name}-{seed}")
        done = [t for t in trials if t.status == "done"]
        best = max(done, key=lambda t: t.metrics["accuracy"])  # the first of equals, as best()
        out[name] = {
            "best_val": round(best.metrics["accuracy"], 4),
            "best_test": round(best.metrics["test_accuracy"], 4),
            "median_test": round(statistics.median(t.metrics["test_accuracy"] for t in done), 4),
            # the validation split is small: several trials can tie at the best, and the
            # earliest of them is the best (as the engine ranks), a random draw in evolution
            "at_best_val": sum(t.metrics["accuracy"] == best.metrics["accuracy"] for t in done),
        }
        if name == "evolution":  # asked before the population filled: one more per extra slot
            n_draws = template.population_size + ex.config["concurrency"] - 1
            out["best_is_a_random_draw"] = best.id in [t.id for t in trials[:n_draws]]
    return out


def _tally(a: list[float], b: list[float]) -> dict[str, int]:
    return {
        "better": sum(x > y for x, y in zip(a, b)),
        "equal": sum(x == y for x, y in zip(a, b)),
        "worse": sum(x < y for x, y in zip(a, b)),
    }


def _write(table: dict[str, dict[str, float]]) -> None:
    tmp = TABLE.with_suffix(".tmp")
    tmp.write_text(json.dumps(table, indent=0, sort_keys=True) + "\n")
    tmp.replace(TABLE)  # a crash never leaves half a table


def main() -> None:
    """Prints one line per seed, then the summary as one JSON object."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--trials", type=int, default=None, help="default: the example's")
    parser.add_argument("--quick", action="store_true", help="retrain one network; 1 seed of 4")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    ex = _example()
    n_trials = args.trials or ex.config["n_trials"]
    table = json.loads(TABLE.read_text()) if TABLE.exists() else {}
    result: dict[str, Any] = {}
    start = time.perf_counter()
    if args.quick:
        args.seeds, n_trials = 1, 4
        if table:  # the table still holds what a trial gets: train one network of it again
            key = sorted(table)[len(table) // 2]
            again = ex.evaluator.evaluate(ex.space, an_arch(ex, key), lambda *a, **k: None)
            result["retrained_equal"] = {k: again[k] for k in KEPT} == table[key]
    known = len(table)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(args.seeds):
            runs.append(compare(ex, table, seed, n_trials, Path(tmp)))
            print(json.dumps(runs[-1]), flush=True)
            if not args.quick:
                _write(table)
    keys = ("best_val", "best_test", "median_test", "at_best_val")
    evo = {k: [r["evolution"][k] for r in runs] for k in keys}
    rnd = {k: [r["random"][k] for r in runs] for k in keys}
    best_key = max(table, key=lambda k: (table[k]["accuracy"], table[k]["test_accuracy"]))
    result.update(
        seeds=args.seeds,
        trials=n_trials,
        evolution_best_test_mean=round(statistics.mean(evo["best_test"]), 4),
        random_best_test_mean=round(statistics.mean(rnd["best_test"]), 4),
        evolution_best_val_mean=round(statistics.mean(evo["best_val"]), 4),
        random_best_val_mean=round(statistics.mean(rnd["best_val"]), 4),
        evolution_vs_random_test=_tally(evo["best_test"], rnd["best_test"]),
        evolution_vs_random_val=_tally(evo["best_val"], rnd["best_val"]),
        evolution_best_is_a_random_draw=sum(r["best_is_a_random_draw"] for r in runs),
        evolution_median_test_mean=round(statistics.mean(evo["median_test"]), 4),
        random_median_test_mean=round(statistics.mean(rnd["median_test"]), 4),
        evolution_at_best_val_mean=round(statistics.mean(evo["at_best_val"]), 2),
        random_at_best_val_mean=round(statistics.mean(rnd["at_best_val"]), 2),
        table_best={
            "val": round(table[best_key]["accuracy"], 4),
            "test": round(table[best_key]["test_accuracy"], 4),
        },  # fmt: skip
        per_seed=runs,
        table_networks=len(table),
        networks_trained=len(table) - known,
        seconds=round(time.perf_counter() - start, 1),
        cores=len(os.sched_getaffinity(0)),
        load_average=round(os.getloadavg()[0], 1),
    )
    print(json.dumps(result))


if __name__ == "__main__":
    sys.exit(main())
