"""Per-trial overhead of the engine (store, scheduling, process hand-off) with a no-op
evaluator, against Optuna's own loop on the same space (issues 3 and 52).

Measured in one run, on a space of twelve 4-way decisions (4**12 architectures):

1. ``inprocess_ms_per_trial``: nasforge in-process with its defaults (the SQLite record, its
   ask/tell events, trial logs) and the random strategy, over three runs of 1,000 no-op
   trials; ``optuna_inmemory_ms_per_trial``: Optuna's in-memory study with
   ``RandomSampler``, one ``suggest_categorical`` per decision, 1,000 trials beside each run
   of nasforge's, in lock-step (:func:`lockstep`: each of nasforge's trials runs one of
   Optuna's, ``study.optimize(objective, n_trials=1)``, timed apart);
   ``optuna_sqlite_ms_per_trial``: ``study.optimize`` in a SQLite study (``sqlite:///``, 100
   trials: Optuna commits each change, and its SQLite storage waits on the disk for each
   commit). Why lock-step: back-to-back runs of the same loop on this shared machine
   differed by up to half, CPU time included, so loops timed one after the other compared
   the machine's moments more than the loops.
2. ``tpe``: the time per trial of runs of 2,000 no-op trials (wall / trials) for nasforge's
   ``tpe`` and ``auto`` strategies (``auto`` is multivariate TPE on this architecture space)
   through the engine with its defaults, each in lock-step with a study of Optuna's
   ``TPESampler`` (its defaults, multivariate since Optuna 5) in memory:
   ``optuna_tpe_ms_per_trial`` beside ``tpe``, ``optuna_tpe_beside_auto_ms_per_trial``
   beside ``auto``; ``tpe_ratio`` and ``auto_ratio`` are nasforge over the Optuna loop it
   ran beside, by wall time.
3. ``pool_ms_per_trial``: the process pool (2 workers), and one at a time.

Targets: in-process <= 5 ms/trial (issue 3) and <= Optuna in-memory (issue 52); process pool
<= 100 ms/trial; ``tpe_ratio`` and ``auto_ratio`` <= 1.0 (issue 52); ``targets_met`` says
for each whether it was met, by wall time and by CPU time.
Last line: one JSON object with those fields, the trial counts and the load average.
Run: PYTHONPATH=. python benchmarks/engine_overhead.py [--quick]
(--quick: 300 trials per in-process and Optuna run, 30 with Optuna's SQLite, 300 TPE trials,
100 in the pool).
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from nasforge.engine import Experiment
from nasforge.space.search_space import Decision, SearchSpace

#: the decisions of the space: twelve of four candidates each
N_DECISIONS, N_CANDIDATES = 12, 4
#: lock-step runs of nasforge in-process and Optuna in memory, summed
IN_RUNS = 3


def noop(arch: Any, report: Any) -> float:
    """The no-op evaluator: returns a constant."""
    return 0.0


def big_space() -> SearchSpace:
    """Returns a space of 4**12 archs, so random search almost never repeats one."""
    return SearchSpace(
        [Decision(f"d{i}", "value", tuple(range(N_CANDIDATES))) for i in range(N_DECISIONS)]
    )


#: CPU seconds of this process per timed run, by name: on a loaded machine the wall time
#: mostly measures the other processes; the CPU time of a one-thread loop does not
CPU: dict[str, float] = {}
#: numbers the folders of nasforge's runs
_RUNS = itertools.count()


def timed(
    n: int,
    executor: str,
    concurrency: int,
    root: Path,
    strategy: str = "random",
    evaluate: Any = noop,
) -> float:
    """Returns the wall seconds of an experiment of n trials of ``evaluate`` (no-op by
    default; its CPU seconds go in ``CPU``)."""
    exp = Experiment(
        big_space(),
        evaluate,
        strategy,
        directory=root / f"{executor}-{strategy}-{n}-{next(_RUNS)}",
        n_trials=n,
        executor=executor,
        concurrency=concurrency,
        progress="off",
    )
    start, cpu = time.perf_counter(), time.process_time()
    exp.run()
    wall = time.perf_counter() - start
    CPU[f"nasforge_{strategy}_{executor}"] = time.process_time() - cpu
    trained = [t for t in exp.trials() if t.status == "done"]
    assert len(trained) == n, (len(trained), n)
    return wall


def _optuna_study(sampler: str, storage: str | None) -> tuple[Any, Any]:
    """Returns (an Optuna study with ``sampler``, the no-op objective on the same space: one
    ``suggest_categorical`` per decision), after 20 trials of warm-up but for TPE, whose
    first trials are random ones (timed, as nasforge's)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    candidates = list(range(N_CANDIDATES))

    def objective(trial: Any) -> float:
        for i in range(N_DECISIONS):
            trial.suggest_categorical(f"d{i}", candidates)
        return 0.0

    if sampler == "tpe":
        chosen: Any = optuna.samplers.TPESampler(seed=0)
    else:
        chosen = optuna.samplers.RandomSampler(seed=0)
    study = optuna.create_study(storage=storage, sampler=chosen)
    if sampler != "tpe":
        study.optimize(objective, n_trials=20)
    return study, objective


def optuna_timed(n: int, sampler: str, storage: str | None) -> float:
    """Returns the wall seconds of Optuna's ``study.optimize`` over n no-op trials (its CPU
    seconds go in ``CPU``)."""
    study, objective = _optuna_study(sampler, storage)
    start, cpu = time.perf_counter(), time.process_time()
    study.optimize(objective, n_trials=n)
    CPU[f"optuna_{sampler}_{'memory' if storage is None else 'sqlite'}"] = time.process_time() - cpu
    return time.perf_counter() - start


def lockstep(n: int, strategy: str, sampler: str, root: Path) -> dict[str, float]:
    """Returns the wall and CPU seconds of n no-op trials of nasforge in-process with
    ``strategy`` and of n no-op trials of Optuna's in-memory study with ``sampler``, run in
    lock-step: each of nasforge's trials runs one of Optuna's (``study.optimize(objective,
    n_trials=1)``: blocks of 50 one-trial calls took 0.97-0.98x the time of 50-trial calls,
    taking turns, while ``study.ask``/``tell`` took 1.2x), timed apart and taken out of
    nasforge's time. Both loops see the same machine, trial by trial: on this shared machine
    back-to-back runs of the same loop differed by up to half, CPU time included, so runs
    one after the other compared the machine's moments more than the loops. Keys:
    ``nasforge_wall``, ``nasforge_cpu``, ``optuna_wall``, ``optuna_cpu``."""
    study, objective = _optuna_study(sampler, None)
    inner = {"wall": 0.0, "cpu": 0.0}

    def evaluate(arch: Any, report: Any) -> float:
        wall, cpu = time.perf_counter(), time.process_time()
        study.optimize(objective, n_trials=1)
        inner["cpu"] += time.process_time() - cpu
        inner["wall"] += time.perf_counter() - wall
        return 0.0

    gc.collect()  # the garbage of the run before is not collected during this one
    wall = timed(n, "inprocess", 1, root, strategy, evaluate)
    cpu = CPU[f"nasforge_{strategy}_inprocess"]
    return {"nasforge_wall": wall - inner["wall"], "nasforge_cpu": cpu - inner["cpu"],
            "optuna_wall": inner["wall"], "optuna_cpu": inner["cpu"]}  # fmt: skip


def summed(runs: list[dict[str, float]]) -> dict[str, float]:
    """Returns the figures of ``runs`` (:func:`lockstep`'s) summed key by key."""
    return {key: sum(run[key] for run in runs) for key in runs[0]}


def ms(wall: float, n: int) -> float:
    """Returns milliseconds per trial."""
    return round(1000 * wall / n, 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer trials")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("nasforge").setLevel(logging.WARNING)
    quick = args.quick
    n_in, n_sql, n_tpe, n_pool = (300, 30, 300, 100) if quick else (1000, 100, 2000, 1000)
    load_before = round(os.getloadavg()[0], 1)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        timed(20, "inprocess", 1, root / "warm")  # imports, sqlite
        lockstep(20, "random", "random", root)
        plain = summed([lockstep(n_in, "random", "random", root) for _ in range(IN_RUNS)])
        t_in, t_mem = plain["nasforge_wall"], plain["optuna_wall"]
        t_sql = optuna_timed(n_sql, "random", f"sqlite:///{root / 'optuna.db'}")
        runs = {name: lockstep(n_tpe, name, "tpe", root) for name in ("tpe", "auto")}
        tpe = {
            "nasforge_tpe_ms_per_trial": ms(runs["tpe"]["nasforge_wall"], n_tpe),
            "optuna_tpe_ms_per_trial": ms(runs["tpe"]["optuna_wall"], n_tpe),
            "nasforge_auto_ms_per_trial": ms(runs["auto"]["nasforge_wall"], n_tpe),
            "optuna_tpe_beside_auto_ms_per_trial": ms(runs["auto"]["optuna_wall"], n_tpe),
        }
        t_pool = timed(n_pool, "pool", 2, root)
        t_pool1 = timed(50, "pool", 1, root)
    n_in_all = IN_RUNS * n_in  # the trials timed per side
    cpu_ratios = {
        "inprocess_vs_optuna_inmemory": round(plain["nasforge_cpu"] / plain["optuna_cpu"], 3),
        "tpe": round(runs["tpe"]["nasforge_cpu"] / runs["tpe"]["optuna_cpu"], 3),
        "auto": round(runs["auto"]["nasforge_cpu"] / runs["auto"]["optuna_cpu"], 3),
    }
    ratios = {
        name: round(run["nasforge_wall"] / run["optuna_wall"], 3) for name, run in runs.items()
    }
    result = {
        "inprocess_ms_per_trial": ms(t_in, n_in_all),
        "optuna_inmemory_ms_per_trial": ms(t_mem, n_in_all),
        "optuna_sqlite_ms_per_trial": ms(t_sql, n_sql),
        "inprocess_vs_optuna_inmemory": round(t_in / t_mem, 3),
        "tpe": tpe,
        "tpe_ratio": ratios["tpe"],
        "auto_ratio": ratios["auto"],
        "pool_ms_per_trial": ms(t_pool, n_pool),
        "pool_concurrency": 2,
        "pool_serial_ms_per_trial": ms(t_pool1, 50),
        "cpu_ms_per_trial": {
            "nasforge_inprocess": ms(plain["nasforge_cpu"], n_in_all),
            "optuna_inmemory": ms(plain["optuna_cpu"], n_in_all),
            "optuna_sqlite": ms(CPU["optuna_random_sqlite"], n_sql),
            "nasforge_tpe": ms(runs["tpe"]["nasforge_cpu"], n_tpe),
            "nasforge_auto": ms(runs["auto"]["nasforge_cpu"], n_tpe),
            "optuna_tpe": ms(runs["tpe"]["optuna_cpu"], n_tpe),
            "optuna_tpe_beside_auto": ms(runs["auto"]["optuna_cpu"], n_tpe),
        },
        "cpu_ratios": cpu_ratios,
        "inprocess_trials_per_s": round(n_in_all / t_in, 1),
        "pool_trials_per_s": round(n_pool / t_pool, 1),
        "n_trials": {"inprocess": n_in, "optuna_sqlite": n_sql, "tpe": n_tpe, "pool": n_pool},
        "repeats": {"inprocess": IN_RUNS, "tpe": 1},
        "timing": "lock-step: each nasforge trial runs one Optuna trial (optimize, n_trials=1)",
        "inprocess_wall_s": round(t_in, 2),
        "pool_wall_s": round(t_pool, 2),
        "targets": {
            "inprocess_ms_per_trial": "<= 5 and <= optuna_inmemory_ms_per_trial",
            "pool_ms_per_trial": 100,
            "tpe_ratio": 1.0,
            "auto_ratio": 1.0,
        },
        "targets_met": {
            "inprocess_vs_optuna_inmemory": {
                "wall": t_in <= t_mem,
                "cpu": cpu_ratios["inprocess_vs_optuna_inmemory"] <= 1.0,
            },
            "tpe_ratio": {
                "wall": ratios["tpe"] <= 1.0,
                "cpu": cpu_ratios["tpe"] <= 1.0,
            },
            "auto_ratio": {
                "wall": ratios["auto"] <= 1.0,
                "cpu": cpu_ratios["auto"] <= 1.0,
            },
        },
        "load_average_before": load_before,
        "load_average_after": round(os.getloadavg()[0], 1),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
