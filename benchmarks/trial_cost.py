"""Where a trial's time goes, and whether early stopping saves time (issue 36).

Three measurements, all on the handwritten digits with a real optimizer (Adam):

1. Start-up per trial, on the in-process, pool and Ray executors: milliseconds between the
   engine dispatching a trial and the evaluator's first statement, plus from the evaluator's
   return to the trial being recorded (``Experiment.timings``; median over trials). The
   workload is the Quickstart's (``examples/digits_evolution.py``: its space, the built-in
   classification evaluator, 3 epochs, weights saved); the trivial evaluator (returns at
   once, the model still built and saved) is measured beside it.
2. ``training_share``: time inside the evaluator's training loop (its ``train_seconds``) over
   the trials' wall time (dispatch to record), for the Quickstart's workload on the pool.
3. ASHA against a full run: a digits MLP search, 24 architectures x at most 9 epochs, pool x 2,
   without a stopper and with ``stopper: asha`` (eta 3, rungs at 1 and 3 epochs), 9 seeds:
   ``asha_wall_over_full`` (wall) against ``asha_epochs_over_full`` (epochs trained), each the
   median over the seeds of one seed's ratio (a machine whose load changes during the run
   moves a total; the median of the seeds keeps the seeds that ran under the same load as
   their own comparison). The same
   24 architectures, the same training and the same rule (grace 1, eta 3, at most 9 epochs,
   2 at a time) then run under Ray Tune's ``ASHAScheduler`` (a local Ray of 2 CPUs, one CPU
   per trial) and Optuna's ``SuccessiveHalvingPruner``: ``ray_tune_wall_s`` and
   ``optuna_wall_s`` beside nasforge's own wall, in the same run. Optuna runs as its users
   run it, ``study.optimize(n_jobs=2)``: two threads of this process (torch releases the GIL
   in its kernels), an in-memory study, no process, log or record per trial; nasforge runs
   its defaults (pool x 2 of worker processes, a SQLite record, per-trial logs, weights
   saved). Every search trains the same 24 architectures with the same code, seed, epochs
   and one torch thread per trial; only the rule's timing-dependent decisions differ (the
   details give each search's epochs).

Run:  PYTHONPATH=. python benchmarks/trial_cost.py [--seeds 9] [--trials 8] [--no-ray] [--quick]
      [--asha-only] [--load N]
(--quick: 2 seeds of 9 architectures, 4 start-up trials, no Ray. --asha-only: the ASHA
comparison alone. --load N: N busy processes run beside the whole measurement, a steady load
that weighs on every search alike, where another job's load changes during a run; the run
starts once the load average has risen to 0.8 N.) nasforge's ASHA search and Optuna's take
turns going first, seed by seed.

Targets: pool start-up <= 50 ms/trial; training_share >= 0.85; asha_wall_over_full <=
asha_epochs_over_full + 0.15; nasforge's ASHA wall the lowest of the three. The line before the
last holds the details (trivial evaluator, means, per seed, machine load); the last line is
one JSON object with ``startup_ms_per_trial`` (executor -> ms), ``training_share``,
``asha_wall_over_full``, ``asha_epochs_over_full``, ``ray_tune_wall_s``, ``optuna_wall_s``,
and the peers' walls over nasforge's ASHA wall, ``optuna_over_nasforge`` and
``ray_tune_over_nasforge`` (above 1: nasforge is faster), each the median over the seeds of
one seed's ratio, ``epochs_trained`` (search -> the median over the seeds of the epochs it
trained: nasforge's ASHA, Optuna's and Ray Tune's rules promote by timing, so they need not
train as many) and ``optuna_over_nasforge_per_epoch`` (the same ratio of wall per epoch
trained: the comparison at equal epochs; ``optuna_over_nasforge_per_epoch_quartiles`` gives the
seeds' quartiles of that ratio, how far one seed's comparison moves). The details give, per
search and seed, the wall, the epochs trained and the best accuracy of a trial that trained all
9 epochs.
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

import torch
from torch import nn

import nasforge as nf
from nasforge.data import load_digits
from nasforge.engine import Experiment
from nasforge.engine.classification import ClassificationEvaluator
from nasforge.space import freeze
from nasforge.spaces import DigitsCNN
from nasforge.strategy import RandomStrategy

torch.set_num_threads(1)  # one thread per trial: two trials at a time on two cores

#: The Quickstart's space and evaluator (examples/digits_evolution.py).
QS_SPACE = DigitsCNN(widths=(4, 8, 16, 32), depths=(1, 2, 3), dropouts=(0.0, 0.5))
DATA = load_digits(seed=0)
QS_EVALUATOR = ClassificationEvaluator(DATA, epochs=3, batch_size=64, lr=3e-3, seed=0)
MAX_EPOCHS, ETA = 9, 3


def trivial(model: Any, report: Any) -> float:
    """Returns at once (the trivial evaluator: the model is still built and its weights saved)."""
    return 0.5


class DigitsMLP(nf.ModelSpace):
    """Returns an MLP on the flattened 8x8 digits: width, depth, activation and dropout chosen."""

    def __init__(self) -> None:
        super().__init__()
        width = nf.choice((32, 64, 128, 256), label="width")
        acts = {"relu": nn.ReLU, "tanh": nn.Tanh, "gelu": nn.GELU}
        self.inp = nn.Linear(64, width)
        self.act = nf.LayerChoice(acts, label="act")
        self.hidden = nf.Repeat(
            lambda i: nn.Sequential(nn.Linear(width, width), nn.ReLU()),
            nf.choice((0, 1, 2), label="depth"),
        )
        self.drop = nn.Dropout(nf.choice((0.0, 0.2), label="dropout"))
        self.out = nn.Linear(width, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.act(self.inp(torch.flatten(x, 1)))
        return self.out(self.drop(self.hidden(x)))


MLP_SPACE = DigitsMLP()


def _tensors(ds: Any) -> tuple[torch.Tensor, torch.Tensor]:
    xs, ys = zip(*(ds[i] for i in range(len(ds))))
    return torch.stack(xs), torch.stack([torch.as_tensor(y) for y in ys])


XTR, YTR = _tensors(DATA.train)
XVA, YVA = _tensors(DATA.val)


def train_epochs(model: nn.Module, epochs: int, seed: int, report: Any) -> float:
    """Returns the validation accuracy after training ``model`` with Adam for up to ``epochs``
    epochs, calling ``report(accuracy, epoch)`` after each (the stopping rule's hook)."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = nn.CrossEntropyLoss()
    acc = 0.0
    for epoch in range(1, epochs + 1):
        model.train()
        order = torch.randperm(len(XTR), generator=gen)
        for i in range(0, len(order), 64):
            idx = order[i : i + 64]
            opt.zero_grad(set_to_none=True)
            loss_fn(model(XTR[idx]), YTR[idx]).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            acc = float((model(XVA).argmax(1) == YVA).float().mean())
        report(acc, epoch)
    return acc


def mlp_evaluator(model: nn.Module, report: Any) -> float:
    """Returns the validation accuracy of an MLP after at most 9 epochs (nasforge's evaluator)."""
    torch.manual_seed(0)
    return train_epochs(model, MAX_EPOCHS, 0, lambda acc, epoch: report(acc))


def median_ms(values: list[float]) -> float:
    """Returns the median of seconds, in milliseconds."""
    return round(1000 * statistics.median(values), 1)


def overheads(exp: Experiment) -> tuple[list[float], list[float]]:
    """Returns per trial (start-up seconds, trial wall seconds) from the engine's timings."""
    startup, wall = [], []
    for t in exp.timings.values():
        if {"submitted", "entered", "returned", "recorded"} <= set(t):
            startup.append(t["entered"] - t["submitted"] + t["recorded"] - t["returned"])
            wall.append(t["recorded"] - t["submitted"])
    return startup, wall


def startup_run(executor: str, evaluator: Any, n: int, root: Path) -> dict[str, Any]:
    """Returns start-up figures of ``n`` Quickstart-space trials on ``executor``."""
    concurrency = 1 if executor == "inprocess" else 2
    exp = Experiment(
        QS_SPACE,
        evaluator,
        RandomStrategy(seed=0),
        directory=root / f"{executor}-{getattr(evaluator, '__name__', 'qs')}",
        n_trials=n,
        executor=executor if executor != "ray" else {"name": "ray", "init_kwargs": {"num_cpus": 2}},
        concurrency=concurrency,
        progress="off",
        retrain_duplicates=True,
    )
    start = time.perf_counter()
    exp.run()
    total = time.perf_counter() - start
    startup, wall = overheads(exp)
    train = [t.metrics.get("train_seconds", 0.0) for t in exp.trials() if t.metrics]
    return {
        "startup_ms": median_ms(startup),
        "startup_mean_ms": round(1000 * statistics.mean(startup), 1),
        "training_share": round(sum(train) / sum(wall), 3) if train else None,
        "wall_s": round(total, 2),
    }


def archs_for(seed: int, n: int) -> list[dict[str, Any]]:
    """Returns ``n`` distinct MLP architectures drawn with ``seed``."""
    ss, out, draw = MLP_SPACE.search_space(), [], 0
    while len(out) < n:
        arch = ss.sample(seed * 1000 + draw)
        draw += 1
        if arch not in out:
            out.append(arch)
    return out


def nasforge_search(
    archs: list[dict[str, Any]], stopper: Any, root: Path
) -> tuple[float, int, float]:
    """Returns (wall seconds, epochs trained, best accuracy of a trial trained all epochs) of
    the MLP search on the pool x 2."""
    exp = Experiment(
        MLP_SPACE,
        mlp_evaluator,
        RandomStrategy(seed=0, initial=archs),
        directory=root,
        n_trials=len(archs),
        executor="pool",
        concurrency=2,
        stopper=stopper,
        progress="off",
    )
    start = time.perf_counter()
    exp.run()
    wall = time.perf_counter() - start
    trials = exp.trials()
    best = max(t.metrics["default"] for t in trials if len(t.intermediates) == MAX_EPOCHS)
    return wall, sum(len(t.intermediates) for t in trials), best


def ray_tune_search(archs: list[dict[str, Any]], root: Path) -> tuple[float, int, float] | None:
    """Returns (wall seconds of ``Tuner.fit``, epochs, best accuracy after all epochs) under
    Ray Tune's ASHAScheduler, or None without Ray Tune."""
    if importlib.util.find_spec("ray") is None:
        return None
    import ray
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.ERROR)

    def trainable(config: dict[str, Any]) -> None:
        torch.set_num_threads(1)
        torch.manual_seed(0)
        model = freeze(MLP_SPACE, config["arch"])
        train_epochs(model, MAX_EPOCHS, 0, lambda acc, epoch: tune.report({"accuracy": acc}))

    scheduler = ASHAScheduler(
        time_attr="training_iteration", max_t=MAX_EPOCHS, grace_period=1, reduction_factor=ETA
    )
    tuner = tune.Tuner(
        tune.with_resources(trainable, {"cpu": 1}),
        param_space={"arch": tune.grid_search(archs)},
        tune_config=tune.TuneConfig(
            metric="accuracy", mode="max", scheduler=scheduler, max_concurrent_trials=2
        ),
        run_config=tune.RunConfig(storage_path=str(root), verbose=0),
    )
    start = time.perf_counter()
    results = tuner.fit()
    wall = time.perf_counter() - start
    epochs = sum(int(r.metrics.get("training_iteration", 0)) for r in results)
    best = max(
        r.metrics["accuracy"]
        for r in results
        if int(r.metrics.get("training_iteration", 0)) == MAX_EPOCHS
    )
    return wall, epochs, best


def optuna_search(archs: list[dict[str, Any]]) -> tuple[float, int, float] | None:
    """Returns (wall seconds, epochs, best accuracy after all epochs) under Optuna's
    SuccessiveHalvingPruner with n_jobs=2, or None without Optuna."""
    if importlib.util.find_spec("optuna") is None:
        return None
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    values = {d.label: list(d.values) for d in MLP_SPACE.search_space().decisions}
    study = optuna.create_study(
        direction="maximize",
        pruner=optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=ETA),
        sampler=optuna.samplers.RandomSampler(seed=0),
    )
    for arch in archs:
        study.enqueue_trial(arch)
    epochs, finals = [0], []

    def objective(trial: Any) -> float:
        arch = {label: trial.suggest_categorical(label, vals) for label, vals in values.items()}
        torch.manual_seed(0)
        model = freeze(MLP_SPACE, arch)

        def report(acc: float, epoch: int) -> None:
            epochs[0] += 1
            if epoch == MAX_EPOCHS:  # trained all epochs (a prune at the last rung saves none)
                finals.append(acc)
            trial.report(acc, epoch)
            if trial.should_prune():
                raise optuna.TrialPruned()

        return train_epochs(model, MAX_EPOCHS, 0, report)

    start = time.perf_counter()
    study.optimize(objective, n_trials=len(archs), n_jobs=2)
    return time.perf_counter() - start, epochs[0], max(finals)


def _guarded(fn: Any, *args: Any) -> Any:
    """Returns ``fn(*args)``, or None (the error printed to stderr) if the peer library
    fails here; the figure is then missing, not made up."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - a peer's failure must not lose nasforge's figures
        print(f"{getattr(fn, '__name__', fn)} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=None, help="seeds of the ASHA comparison")
    parser.add_argument("--trials", type=int, default=None, help="trials per start-up run")
    parser.add_argument("--no-ray", action="store_true", help="skip Ray and Ray Tune")
    parser.add_argument("--quick", action="store_true", help="2 seeds of 9 archs, no Ray")
    parser.add_argument(
        "--load", type=int, default=0, help="busy processes beside the run (a steady load)"
    )
    parser.add_argument(
        "--asha-only", action="store_true", help="skip the start-up runs (ASHA figures only)"
    )
    args = parser.parse_args()
    n_seeds = args.seeds or (2 if args.quick else 9)
    n_trials = args.trials or (4 if args.quick else 8)
    n_archs = 9 if args.quick else 24
    no_ray = args.no_ray or args.quick
    logging.basicConfig(level=logging.WARNING)
    spinners = background_load(args.load)
    load_before = os.getloadavg()[0]
    try:
        run(args, n_seeds, n_trials, n_archs, no_ray, load_before)
    finally:
        for proc in spinners:
            proc.terminate()
            proc.join()


def background_load(n: int) -> list[Any]:
    """Returns ``n`` started processes that each keep one core busy (a Python loop) until
    terminated: a steady load beside the benchmark, the same for every search (``--load``).
    Waits until the load average (a one-minute mean, so it lags) reaches 0.8 ``n``, at most
    180 s, so the first seed runs under the load the last one does."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_spin, daemon=True) for _ in range(n)]
    for proc in procs:
        proc.start()
    start = time.monotonic()
    while procs and os.getloadavg()[0] < 0.8 * n and time.monotonic() - start < 180:
        time.sleep(5)
    if procs:
        logging.warning("background load: %d busy processes, load average %.1f", n,
                        os.getloadavg()[0])  # fmt: skip
    return procs


def _spin() -> None:
    """Returns never: a busy loop (a ``--load`` process)."""
    x = 0
    while True:
        x = (x + 1) % 1000003


def run(
    args: argparse.Namespace,
    n_seeds: int,
    n_trials: int,
    n_archs: int,
    no_ray: bool,
    load_before: float,
) -> None:
    """Returns None after running the measurements and printing the details and the JSON."""
    executors = [] if args.asha_only else ["inprocess", "pool"] + ([] if no_ray else ["ray"])
    details: dict[str, Any] = {"startup": {}, "asha": []}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for ex in executors:
            details["startup"][ex] = {
                "quickstart": _guarded(startup_run, ex, QS_EVALUATOR, n_trials, root),
                "trivial": _guarded(startup_run, ex, trivial, n_trials, root),
            }
        asha_rule = {"rule": "asha", "min_resource": 1, "eta": ETA, "max_resource": MAX_EPOCHS}
        for seed in range(n_seeds):
            archs = archs_for(seed, n_archs)
            full = nasforge_search(archs, None, root / f"full-{seed}")
            # nasforge's ASHA and Optuna's take turns going first, so that a load that drifts
            # during a seed weighs on each side as often
            if seed % 2:
                opt = _guarded(optuna_search, archs)
                asha = nasforge_search(archs, asha_rule, root / f"asha-{seed}")
            else:
                asha = nasforge_search(archs, asha_rule, root / f"asha-{seed}")
                opt = _guarded(optuna_search, archs)
            tune_ = None if no_ray else _guarded(ray_tune_search, archs, root / f"tune-{seed}")
            print(json.dumps({"seed": seed, "full": full, "asha": asha, "tune": tune_,
                              "optuna": opt}), file=sys.stderr, flush=True)  # fmt: skip
            details["asha"].append(
                {
                    "seed": seed,
                    "nasforge_full": full,
                    "nasforge_asha": asha,
                    "ray_tune_asha": tune_,
                    "optuna_sh": opt,
                }
            )
    rows = details["asha"]

    def ratios(top: str, bottom: str, i: int) -> list[float] | None:
        """Returns ``top[i] / bottom[i]`` per seed, or None where a search is missing."""
        if any(r[top] is None or r[bottom] is None for r in rows):
            return None
        return [round(r[top][i] / r[bottom][i], 4) for r in rows]

    def median(values: list[float] | None) -> float | None:
        return None if values is None else round(statistics.median(values), 3)

    def per_epoch(r: dict[str, Any], key: str) -> float:
        return float(r[key][0] / max(r[key][1], 1))

    def total(key: str, i: int) -> float | None:
        vals = [r[key][i] for r in rows if r[key] is not None]
        return round(sum(vals), 2) if len(vals) == len(rows) else None

    full_wall, full_epochs = total("nasforge_full", 0), total("nasforge_full", 1)
    asha_wall, asha_epochs = total("nasforge_asha", 0), total("nasforge_asha", 1)
    assert full_wall and full_epochs and asha_wall is not None and asha_epochs is not None
    details["nasforge_wall_s"] = asha_wall
    details["nasforge_full_wall_s"] = full_wall
    details["epochs"] = {k: total(k, 1) for k in rows[0] if k != "seed"}
    details["wall_s"] = {k: total(k, 0) for k in rows[0] if k != "seed"}
    details["best_accuracy_mean"] = {  # of the trials each trained all MAX_EPOCHS epochs
        k: round(statistics.mean(r[k][2] for r in rows), 4)
        for k in rows[0]
        if k != "seed" and all(r[k] is not None for r in rows)
    }
    details["per_seed_ratios"] = {
        "asha_wall_over_full": ratios("nasforge_asha", "nasforge_full", 0),
        "asha_epochs_over_full": ratios("nasforge_asha", "nasforge_full", 1),
        "optuna_over_nasforge": ratios("optuna_sh", "nasforge_asha", 0),
        "ray_tune_over_nasforge": ratios("ray_tune_asha", "nasforge_asha", 0),
        "optuna_over_nasforge_per_epoch": None
        if any(r["optuna_sh"] is None for r in rows)
        else [round(per_epoch(r, "optuna_sh") / per_epoch(r, "nasforge_asha"), 4) for r in rows],
    }
    details["load_average_before_after"] = [round(load_before, 1), round(os.getloadavg()[0], 1)]
    details["cores"] = len(os.sched_getaffinity(0))
    details["python"] = sys.version.split()[0]
    print(json.dumps(details))
    tune_wall, optuna_wall = total("ray_tune_asha", 0), total("optuna_sh", 0)
    per_seed = details["per_seed_ratios"]
    optuna_per_epoch = median(per_seed["optuna_over_nasforge_per_epoch"])
    spread = None  # the seeds' quartiles: how far one seed's comparison moves on this machine
    if per_seed["optuna_over_nasforge_per_epoch"] is not None and len(rows) >= 2:
        q1, _, q3 = statistics.quantiles(per_seed["optuna_over_nasforge_per_epoch"], n=4)
        spread = [round(q1, 3), round(q3, 3)]
    result = {
        "startup_ms_per_trial": {
            ex: (details["startup"][ex]["quickstart"] or {}).get("startup_ms") for ex in executors
        },
        "training_share": (details["startup"].get("pool", {}).get("quickstart") or {}).get(
            "training_share"
        ),
        "asha_wall_over_full": median(per_seed["asha_wall_over_full"]),
        "asha_epochs_over_full": median(per_seed["asha_epochs_over_full"]),
        "ray_tune_wall_s": tune_wall,
        "optuna_wall_s": optuna_wall,
        "optuna_over_nasforge": median(per_seed["optuna_over_nasforge"]),
        "ray_tune_over_nasforge": median(per_seed["ray_tune_over_nasforge"]),
        "optuna_over_nasforge_per_epoch": optuna_per_epoch,
        "optuna_over_nasforge_per_epoch_quartiles": spread,
        "epochs_trained": {
            k: statistics.median(r[k][1] for r in rows)
            for k in rows[0]
            if k != "seed" and all(r[k] is not None for r in rows)
        },
        "seeds": n_seeds,
        "background_load": args.load,
        "load_average_before_after": details["load_average_before_after"],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
