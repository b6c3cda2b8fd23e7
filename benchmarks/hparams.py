"""Hyperparameters in the search, measured three ways (issues 40 and 52).

1. ``regret``: five test functions (``benchmarks/_hp_functions.py``: Branin, Hartmann-6,
   Styblinski-Tang 4-D, Levy 10-D, and a mixed function of two floats, an integer and a
   categorical), minimised, 100 evaluations x 20 seeds, for ``nasforge_auto`` (the default for
   spaces with ranges), ``nasforge_tpe``, Optuna's ``TPESampler`` (``optuna_tpe``) and
   ``GPSampler`` (``optuna_gp``) with their defaults, and ``random``: the mean over seeds of
   (best value found - the function's minimum). Targets: ``nasforge_auto`` <= 0.2 x
   ``optuna_tpe`` on Branin and Hartmann-6, <= ``optuna_tpe`` on the others.
2. ``ask_ms``: per sampler, the median milliseconds of one ask on Hartmann-6 after 100 and
   after 1,000 told trials (``ask_ms[sampler]["100"]``, ``["1000"]``): the price of each.
3. The joint architecture + hyperparameter search on MNIST-1D (``benchmarks/_hp_joint.py``: a
   1-D CNN space whose depth, width and kernels are choices and whose ``lr``, weight decay and
   batch size are ranges), against architecture-only and hyperparameter-only searches of as
   many trials, over seeds: ``joint_vs_arch_only`` and ``joint_vs_hp_only`` are the mean paired
   differences of test accuracy (joint minus other, points), ``significance`` the one-sided
   paired t-tests. Target: joint beats both with p < 0.05. Default: 5 seeds x 100 trials x
   10 epochs per search (about 70 minutes of one core); at 40 trials the joint search was
   level with both (docs/hparams.md: both budgets, measured).

Last line: one JSON object (``regret``, ``ask_ms``, the joint fields, the run's settings and
load). Run: PYTHONPATH=. python benchmarks/hparams.py [--quick] [--workers 2]
(--quick: 2 seeds of 30 evaluations on the functions, asks at 100 trials only, 2 seeds of 6
trials x 2 epochs of the joint search).
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the _hp_* siblings

import _hp_functions as hpf  # noqa: E402
import _hp_joint as hpj  # noqa: E402


def _pool(workers: int) -> ProcessPoolExecutor:
    """Returns a pool of ``workers`` spawned processes (each search seeded, one thread: the
    same results at any worker count)."""
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))


def _quiet() -> None:
    """Returns None after silencing the libraries' per-run lines (also in pool workers)."""
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr)
    for name in ("nasforge", "optuna"):
        logging.getLogger(name).setLevel(logging.ERROR)
    import torch

    torch.set_num_threads(1)


def _best(function: str, sampler: str, seed: int, n: int, tmp: Path) -> tuple[float, float]:
    """Returns (regret, seconds) of one search (a job for the pool)."""
    _quiet()
    start = time.perf_counter()
    best = hpf.best_found(function, sampler, seed, n, tmp)
    return best - hpf.FUNCTIONS[function][2], time.perf_counter() - start


def regrets(n_seeds: int, n: int, tmp: Path, workers: int) -> dict[str, Any]:
    """Returns the mean regret per function per sampler, the spread and the seconds."""
    jobs = [(f, s, k) for f in hpf.FUNCTIONS for s in hpf.SAMPLERS for k in range(n_seeds)]
    with _pool(workers) as pool:
        futs = {job: pool.submit(_best, *job, n, tmp) for job in jobs}
        got = {job: fut.result() for job, fut in futs.items()}
    out: dict[str, Any] = {"regret": {}, "regret_sd": {}, "seconds": {}}
    for f in hpf.FUNCTIONS:
        runs = {s: [got[(f, s, k)][0] for k in range(n_seeds)] for s in hpf.SAMPLERS}
        out["regret"][f] = {s: float(f"{statistics.mean(v):.4g}") for s, v in runs.items()}
        out["regret_sd"][f] = {
            s: float(f"{statistics.stdev(v):.4g}") if len(v) > 1 else 0.0 for s, v in runs.items()
        }
        out["seconds"][f] = {
            s: round(sum(got[(f, s, k)][1] for k in range(n_seeds)), 1) for s in hpf.SAMPLERS
        }
        logging.warning("%s: %s", f, out["regret"][f])
    return out


def _ask(sampler: str, n_told: int) -> float:
    _quiet()
    return hpf.ask_ms(sampler, n_told, n_asks=3 if n_told >= 1000 else 5)


def ask_costs(sizes: tuple[int, ...], workers: int) -> dict[str, dict[str, float]]:
    """Returns ask milliseconds per sampler per history size."""
    with _pool(workers) as pool:
        futs = {(s, n): pool.submit(_ask, s, n) for s in hpf.SAMPLERS for n in sizes}
        return {s: {str(n): futs[(s, n)].result() for n in sizes} for s in hpf.SAMPLERS}


def _paired(a: list[float], b: list[float]) -> tuple[float, float | None]:
    """Returns the mean of ``a - b`` and the one-sided paired t-test p-value (a > b)."""
    diffs = [x - y for x, y in zip(a, b)]
    mean = statistics.mean(diffs)
    if len(diffs) < 2 or statistics.pstdev(diffs) == 0:
        return mean, None
    from scipy import stats

    return mean, float(stats.ttest_rel(a, b, alternative="greater").pvalue)


def _search(mode: str, seed: int, n: int, epochs: int, tmp: Path) -> tuple[float, float]:
    _quiet()
    return hpj.search(mode, seed, n, epochs, tmp)


def joint_search(n_seeds: int, n: int, epochs: int, tmp: Path, workers: int) -> dict[str, Any]:
    """Returns the three searches' per-seed scores and the paired comparisons."""
    jobs = [(m, s) for s in range(n_seeds) for m in hpj.MODES]
    with _pool(workers) as pool:
        futs = {job: pool.submit(_search, *job, n, epochs, tmp) for job in jobs}
        results = {job: fut.result() for job, fut in futs.items()}
    scores = {m: [results[(m, s)][0] for s in range(n_seeds)] for m in hpj.MODES}
    secs = {m: round(sum(results[(m, s)][1] for s in range(n_seeds)), 1) for m in hpj.MODES}
    arch_diff, arch_p = _paired(scores["joint"], scores["arch_only"])
    hp_diff, hp_p = _paired(scores["joint"], scores["hp_only"])

    def verdict(diff: float, p: float | None) -> str:
        if p is None:
            return "no spread to test"
        side = "joint better" if diff > 0 else "joint not better"
        return f"{side}; {'significant' if p < 0.05 else 'not significant'} at 5% (p={p:.4f})"

    return {
        "joint_vs_arch_only": round(arch_diff, 3),
        "joint_vs_hp_only": round(hp_diff, 3),
        "significance": {
            "test": f"one-sided paired t-test over {n_seeds} seeds",
            "joint_vs_arch_only": verdict(arch_diff, arch_p),
            "joint_vs_hp_only": verdict(hp_diff, hp_p),
            "p_joint_vs_arch_only": arch_p,
            "p_joint_vs_hp_only": hp_p,
        },
        "test_accuracy_pct": scores,
        "mean_test_accuracy_pct": {k: round(statistics.mean(v), 3) for k, v in scores.items()},
        "joint_seconds": secs,
        "joint_trials": n,
        "joint_epochs": epochs,
        "joint_seeds": n_seeds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer seeds, evaluations, trials")
    parser.add_argument("--skip-functions", action="store_true")
    parser.add_argument("--skip-asks", action="store_true")
    parser.add_argument("--skip-joint", action="store_true")
    parser.add_argument("--seeds", type=int, default=None, help="seeds of the functions (20)")
    parser.add_argument("--joint-seeds", type=int, default=None, help="seeds of the joint (5)")
    parser.add_argument("--joint-trials", type=int, default=None, help="trials per search (100)")
    parser.add_argument("--joint-epochs", type=int, default=None, help="epochs per trial (10)")
    parser.add_argument("--workers", type=int, default=1, help="processes (each one thread)")
    args = parser.parse_args()
    _quiet()
    quick = args.quick
    result: dict[str, Any] = {"load_average_before": round(os.getloadavg()[0], 1)}
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_functions:
            seeds, n = args.seeds or (2 if quick else 20), 30 if quick else 100
            result.update(regrets(seeds, n, Path(tmp), args.workers))
            result["evaluations"], result["seeds"] = n, seeds
            reg = result["regret"]
            result["target_met"] = {
                f: reg[f]["nasforge_auto"]
                <= (0.2 if f in ("branin", "hartmann6") else 1.0) * reg[f]["optuna_tpe"]
                for f in reg
            }
        if not args.skip_asks:
            result["ask_ms"] = ask_costs((100,) if quick else (100, 1000), args.workers)
        if not args.skip_joint:
            result.update(
                joint_search(
                    args.joint_seeds or (2 if quick else 5),
                    args.joint_trials or (6 if quick else 100),
                    args.joint_epochs or (2 if quick else 10),
                    Path(tmp),
                    args.workers,
                )
            )
    result["load_average_after"] = round(os.getloadavg()[0], 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
