"""Hyperparameters in the search (issue 40), measured two ways.

1. Continuous test functions of the HPO literature, minimised: Branin (2-D, min 0.397887) and
   Hartmann-6 (6-D, min -3.32237). Each library gets 100 evaluations per run and 20 seeds:
   nasforge's TPE through the normal engine (``Experiment`` on a ``SearchSpace`` of two or six
   ``uniform`` ranges, in-process executor, its shipped defaults) and Optuna's ``TPESampler``
   with its defaults (``study.optimize`` on ``suggest_float``). Also random search (nasforge's)
   as the trivial baseline. Reported: ``regret`` = mean over seeds of (best value found - the
   function's minimum), per function per library (target: nasforge <= optuna).
   nasforge's TPE hands ranges to Optuna's own ``TPESampler`` as ``FloatDistribution``s, so the
   comparison checks that the wrapper (canonical 12-digit values, no-repeat asks, the engine's
   record) loses nothing against the library used directly; it is not two independent TPEs.

2. A joint search on the digits (scikit-learn's 1,797 8x8 images): the digits CNN space
   (width, depth, an operator per block, a skip) plus ``lr`` (log, Adam), ``weight_decay``
   (log) and ``dropout``, searched by TPE for 40 trials with the shipped classification
   evaluator (Adam, 4 epochs), against
       arch-only  the same architecture space at the evaluator's defaults (lr 1e-3, no weight
                  decay, no dropout), 40 trials;
       hp-only    the three hyperparameters on one fixed middle architecture (width 16, depth
                  2, conv3 everywhere, skip through stage 2), 40 trials.
   The score of a run is the test accuracy of its best trial by validation accuracy. Each seed
   changes the data split, the initialisation and the strategy's seed. ``joint_vs_arch_only``
   and ``joint_vs_hp_only`` are the mean paired differences (joint minus other, accuracy
   points), with a one-sided paired t-test's p-value beside each.

Last line: one JSON object. Run: PYTHONPATH=. python benchmarks/hparams.py [--quick]
(--quick: 5 seeds of the functions, 2 seeds and 12 trials of the digits search).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import multiprocessing
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import nn

import nasforge as nf
from nasforge.engine import Experiment
from nasforge.engine.classification import ClassificationEvaluator
from nasforge.space.search_space import SearchSpace
from nasforge.spaces.cnn import OPS, ConvBNReLU
from nasforge.strategy import get_strategy

# -- 1. test functions ---------------------------------------------------------------------------
BRANIN_MIN = 0.397887357729738
HARTMANN6_MIN = -3.32236801141551
_H6_A = [
    [10, 3, 17, 3.5, 1.7, 8],
    [0.05, 10, 17, 0.1, 8, 14],
    [3, 3.5, 1.7, 10, 17, 8],
    [17, 8, 0.05, 10, 0.1, 14],
]
_H6_P = [
    [1312, 1696, 5569, 124, 8283, 5886],
    [2329, 4135, 8307, 3736, 1004, 9991],
    [2348, 1451, 3522, 2883, 3047, 6650],
    [4047, 8828, 8732, 5743, 1091, 381],
]
_H6_ALPHA = [1.0, 1.2, 3.0, 3.2]


def branin(x: list[float]) -> float:
    """Returns the Branin function at ``x`` in [-5, 10] x [0, 15]."""
    x1, x2 = x
    b, c = 5.1 / (4 * math.pi**2), 5 / math.pi
    return (x2 - b * x1**2 + c * x1 - 6) ** 2 + 10 * (1 - 1 / (8 * math.pi)) * math.cos(x1) + 10


def hartmann6(x: list[float]) -> float:
    """Returns the Hartmann-6 function at ``x`` in [0, 1]^6."""
    total = 0.0
    for a, p, alpha in zip(_H6_A, _H6_P, _H6_ALPHA):
        inner = sum(ai * (xi - pi * 1e-4) ** 2 for ai, xi, pi in zip(a, x, p))
        total -= alpha * math.exp(-inner)
    return total


FUNCTIONS: dict[str, tuple[Any, list[tuple[float, float]], float]] = {
    "branin": (branin, [(-5.0, 10.0), (0.0, 15.0)], BRANIN_MIN),
    "hartmann6": (hartmann6, [(0.0, 1.0)] * 6, HARTMANN6_MIN),
}


def _nasforge_best(name: str, strategy: str, seed: int, n: int, tmp: Path) -> float:
    """Returns the lowest value nasforge's ``strategy`` found in ``n`` evaluations."""
    fn, bounds, _ = FUNCTIONS[name]
    space = SearchSpace.from_spec({f"x{i}": {"uniform": list(b)} for i, b in enumerate(bounds)})

    def evaluate(arch: dict[str, float], report: Any) -> float:
        return fn([arch[f"x{i}"] for i in range(len(bounds))])

    exp = Experiment(
        space,
        evaluate,
        get_strategy(strategy, seed=seed),
        directory=tmp / f"{name}-{strategy}-{seed}",
        n_trials=n,
        mode="min",
        executor="inprocess",
        progress="off",
        save_weights=False,
    ).run()
    return min(t.metrics["default"] for t in exp.trials() if t.metrics)


def _optuna_best(name: str, seed: int, n: int) -> float:
    """Returns the lowest value Optuna's default TPESampler found in ``n`` evaluations."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    fn, bounds, _ = FUNCTIONS[name]
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed))
    study.optimize(
        lambda t: fn([t.suggest_float(f"x{i}", lo, hi) for i, (lo, hi) in enumerate(bounds)]),
        n_trials=n,
    )
    return float(study.best_value)


def test_functions(n_seeds: int, n: int, tmp: Path) -> dict[str, Any]:
    """Returns the mean final regret per function per library, with per-seed spread."""
    out: dict[str, Any] = {"regret": {}, "regret_sd": {}, "seconds": {}}
    for name, (_, _, fmin) in FUNCTIONS.items():
        runs: dict[str, list[float]] = {"nasforge": [], "optuna": [], "random": []}
        secs: dict[str, float] = {}
        for lib in runs:
            start = time.perf_counter()
            for seed in range(n_seeds):
                if lib == "optuna":
                    best = _optuna_best(name, seed, n)
                else:
                    strategy = "tpe" if lib == "nasforge" else "random"
                    best = _nasforge_best(name, strategy, seed, n, tmp)
                runs[lib].append(best - fmin)
            secs[lib] = round(time.perf_counter() - start, 1)
            logging.warning("%s %s: mean regret %.4f", name, lib, statistics.mean(runs[lib]))
        out["regret"][name] = {k: round(statistics.mean(v), 5) for k, v in runs.items()}
        out["regret_sd"][name] = {k: round(statistics.stdev(v), 5) for k, v in runs.items()}
        out["seconds"][name] = secs
    return out


# -- 2. joint architecture + hyperparameter search on the digits --------------------------------
#: the fixed architecture of the hp-only search: the middle of each range of the space
FIXED_ARCH: dict[str, Any] = {"width": 16, "depth": 2, "op": "conv3", "stage2": "conv3", "skip": 1}


class DigitsJoint(nf.ModelSpace):
    """Returns the digits CNN space with lr, weight decay and dropout as ranges; ``arch``
    False fixes the architecture to ``FIXED_ARCH``, ``hp`` False leaves the three
    hyperparameters to the evaluator's defaults (no dropout)."""

    def __init__(self, arch: bool = True, hp: bool = True) -> None:
        super().__init__()

        def pick(label: str, values: tuple[Any, ...]) -> Any:
            return nf.choice(values, label=label) if arch else FIXED_ARCH[label]

        c = pick("width", (8, 16, 24))
        self.stem = ConvBNReLU(1, c, 3)
        if arch:
            ops = lambda c: nf.LayerChoice({k: partial(f, c) for k, f in OPS.items()})  # noqa: E731
            self.stage1: nn.Module = nf.Repeat(lambda i: ops(c), pick("depth", (1, 2, 3)))
            self.stage2 = ops(2 * c)
        else:
            op = OPS[FIXED_ARCH["op"]]
            self.stage1 = nn.Sequential(*[op(c) for _ in range(FIXED_ARCH["depth"])])
            self.stage2 = OPS[FIXED_ARCH["stage2"]](2 * c)
        self.down = ConvBNReLU(c, 2 * c, 3, stride=2)
        self.skip = pick("skip", (0, 1))
        self.pool = nn.AdaptiveAvgPool2d(1)
        p = nf.uniform(0.0, 0.5, label="dropout") if hp else 0.0
        self.dropout = nn.Dropout(p)
        self.fc = nn.Linear(2 * c, 10)
        if hp:  # read by the classification evaluator through nf.hparams(model)
            self.lr = nf.uniform(1e-4, 1e-1, log=True, label="lr")
            self.weight_decay = nf.uniform(1e-6, 1e-2, log=True, label="weight_decay")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = self.down(self.stage1(self.stem(x)))
        x = self.stage2(d) if self.skip else d
        return self.fc(self.dropout(torch.flatten(self.pool(x), 1)))


def _digits_run(mode: str, seed: int, n: int, epochs: int, tmp: Path) -> float:
    """Returns the test accuracy (%) of the best trial by validation accuracy."""
    space = DigitsJoint(arch=mode != "hp_only", hp=mode != "arch_only")
    exp = Experiment(
        space,
        ClassificationEvaluator("digits", epochs=epochs, seed=seed),
        get_strategy("tpe", seed=seed),
        directory=tmp / f"digits-{mode}-{seed}",
        n_trials=n,
        executor="inprocess",
        progress="off",
        save_weights=False,
        threads=1,
    ).run()
    best = exp.best()[0]
    return 100.0 * best.metrics["test_accuracy"]


def _paired(a: list[float], b: list[float]) -> tuple[float, float | None]:
    """Returns the mean of ``a - b`` and the one-sided paired t-test p-value (a > b)."""
    diffs = [x - y for x, y in zip(a, b)]
    mean = statistics.mean(diffs)
    if len(diffs) < 2 or statistics.pstdev(diffs) == 0:
        return mean, None
    from scipy import stats

    return mean, float(stats.ttest_rel(a, b, alternative="greater").pvalue)


def _timed_run(mode: str, seed: int, n: int, epochs: int, tmp: Path) -> tuple[float, float]:
    """Returns (test accuracy %, seconds) of one search (a picklable job for the pool)."""
    torch.set_num_threads(1)
    start = time.perf_counter()
    acc = round(_digits_run(mode, seed, n, epochs, tmp), 3)
    logging.warning("digits %s seed %d: %.2f%%", mode, seed, acc)
    return acc, time.perf_counter() - start


def joint_search(n_seeds: int, n: int, epochs: int, tmp: Path, workers: int = 1) -> dict[str, Any]:
    """Returns the three searches' per-seed scores and the paired comparisons; the
    ``3 * n_seeds`` searches run on ``workers`` processes (each seeded, one thread: the same
    scores at any worker count)."""
    modes = ("joint", "arch_only", "hp_only")
    jobs = [(m, s) for m in modes for s in range(n_seeds)]
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futs = [pool.submit(_timed_run, m, s, n, epochs, tmp) for m, s in jobs]
        results = dict(zip(jobs, (f.result() for f in futs)))
    scores = {m: [results[(m, s)][0] for s in range(n_seeds)] for m in modes}
    secs = {m: round(sum(results[(m, s)][1] for s in range(n_seeds)), 1) for m in modes}
    arch_diff, arch_p = _paired(scores["joint"], scores["arch_only"])
    hp_diff, hp_p = _paired(scores["joint"], scores["hp_only"])

    def verdict(diff: float, p: float | None) -> str:
        if p is None:
            return "no spread to test"
        side = "joint better" if diff > 0 else "joint not better"
        return f"{side}; {'significant' if p < 0.05 else 'not significant'} at 5% (p={p:.3f})"

    return {
        "joint_vs_arch_only": round(arch_diff, 3),
        "joint_vs_hp_only": round(hp_diff, 3),
        "significance": {
            "test": f"one-sided paired t-test over {n_seeds} seeds",
            "joint_vs_arch_only": verdict(arch_diff, arch_p),
            "joint_vs_hp_only": verdict(hp_diff, hp_p),
        },
        "test_accuracy_pct": scores,
        "mean_test_accuracy_pct": {k: round(statistics.mean(v), 3) for k, v in scores.items()},
        "digits_seconds": secs,
        "digits_trials": n,
        "digits_epochs": epochs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer seeds and trials")
    parser.add_argument("--skip-functions", action="store_true")
    parser.add_argument("--skip-digits", action="store_true")
    parser.add_argument("--digits-seeds", type=int, default=None)
    parser.add_argument("--workers", type=int, default=1, help="processes for the digits searches")
    parser.add_argument(
        "--digits-epochs", type=int, default=4, help="epochs of each digits trial (default 4)"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr)
    for name in ("nasforge", "optuna"):
        logging.getLogger(name).setLevel(logging.ERROR)
    torch.set_num_threads(1)
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_functions:
            result.update(test_functions(5 if args.quick else 20, 100, Path(tmp)))
            result["evaluations"], result["seeds"] = 100, 5 if args.quick else 20
            result["target_met"] = all(
                r["nasforge"] <= r["optuna"] for r in result["regret"].values()
            )
        if not args.skip_digits:
            n_seeds = args.digits_seeds or (2 if args.quick else 3)
            result.update(
                joint_search(
                    n_seeds, 12 if args.quick else 40, args.digits_epochs, Path(tmp), args.workers
                )
            )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
