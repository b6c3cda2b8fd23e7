"""The test functions of ``benchmarks/hparams.py`` and one search of each sampler on them.

Five functions, minimised, each with its known minimum:

    branin        2-D, [-5, 10] x [0, 15], three global minima, 0.397887
    hartmann6     6-D, [0, 1]^6, 6 local minima, -3.32237
    styblinski4   Styblinski-Tang in 4-D, [-5, 5]^4, 2^4 local minima, -39.16617 * 4
    levy10        Levy in 10-D, [-10, 10]^10, many local minima, 0
    mixed         x1, x2 in [-2, 2] (floats), k in 0..8 (an integer) and c in {rosenbrock,
                  camel, sphere} (a categorical): g_c(x1, x2) + 0.25 (k - 3)^2, where
                  g_rosenbrock is Rosenbrock (min 0 at (1, 1)), g_camel the six-hump camel
                  shifted to min 0, g_sphere (x1 - 1)^2 + (x2 + 1)^2 + 0.5 (min 0.5, the
                  widest basin: a trap); min 0

Samplers: ``nasforge_auto`` and ``nasforge_tpe`` (the strategies, through the engine: an
``Experiment`` on a ``SearchSpace`` of ranges, in-process executor, its record), ``optuna_tpe``
and ``optuna_gp`` (Optuna's ``TPESampler`` and ``GPSampler`` with their defaults, through
``study.optimize`` and ``suggest_*``), ``random`` (nasforge's random strategy, through the
engine).
"""

from __future__ import annotations

import math
import statistics
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nasforge.engine import Experiment
from nasforge.space.search_space import SearchSpace
from nasforge.strategy import get_strategy

__all__ = ["FUNCTIONS", "SAMPLERS", "best_found", "ask_ms"]

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
_CAMEL_MIN = -1.0316284534898774


def branin(p: dict[str, Any]) -> float:
    """Returns the Branin function at ``p`` (x0 in [-5, 10], x1 in [0, 15])."""
    x1, x2 = p["x0"], p["x1"]
    b, c = 5.1 / (4 * math.pi**2), 5 / math.pi
    return (x2 - b * x1**2 + c * x1 - 6) ** 2 + 10 * (1 - 1 / (8 * math.pi)) * math.cos(x1) + 10


def hartmann6(p: dict[str, Any]) -> float:
    """Returns the Hartmann-6 function at ``p`` (x0..x5 in [0, 1])."""
    x = [p[f"x{i}"] for i in range(6)]
    total = 0.0
    for a, q, alpha in zip(_H6_A, _H6_P, _H6_ALPHA):
        inner = sum(ai * (xi - qi * 1e-4) ** 2 for ai, xi, qi in zip(a, x, q))
        total -= alpha * math.exp(-inner)
    return total


def styblinski4(p: dict[str, Any]) -> float:
    """Returns the Styblinski-Tang function at ``p`` (x0..x3 in [-5, 5])."""
    return 0.5 * sum(v**4 - 16 * v**2 + 5 * v for v in (p[f"x{i}"] for i in range(4)))


def levy10(p: dict[str, Any]) -> float:
    """Returns the Levy function at ``p`` (x0..x9 in [-10, 10])."""
    w = [1 + (p[f"x{i}"] - 1) / 4 for i in range(10)]
    total = math.sin(math.pi * w[0]) ** 2
    for wi in w[:-1]:
        total += (wi - 1) ** 2 * (1 + 10 * math.sin(math.pi * wi + 1) ** 2)
    return total + (w[-1] - 1) ** 2 * (1 + math.sin(2 * math.pi * w[-1]) ** 2)


def mixed(p: dict[str, Any]) -> float:
    """Returns the mixed function at ``p`` (x1, x2 floats, k an int, c a category)."""
    a, b = p["x1"], p["x2"]
    if p["c"] == "rosenbrock":
        g = 100 * (b - a * a) ** 2 + (1 - a) ** 2
    elif p["c"] == "camel":
        g = (4 - 2.1 * a * a + a**4 / 3) * a * a + a * b + (-4 + 4 * b * b) * b * b - _CAMEL_MIN
    else:
        g = (a - 1) ** 2 + (b + 1) ** 2 + 0.5
    return g + 0.25 * (p["k"] - 3) ** 2


def _floats(bounds: list[tuple[float, float]]) -> dict[str, Any]:
    return {f"x{i}": {"uniform": list(b)} for i, b in enumerate(bounds)}


#: name -> (function, run-file space spec, minimum)
FUNCTIONS: dict[str, tuple[Callable[[dict[str, Any]], float], dict[str, Any], float]] = {
    "branin": (branin, _floats([(-5.0, 10.0), (0.0, 15.0)]), 0.397887357729738),
    "hartmann6": (hartmann6, _floats([(0.0, 1.0)] * 6), -3.32236801141551),
    "styblinski4": (styblinski4, _floats([(-5.0, 5.0)] * 4), -39.16616570377142 * 4),
    "levy10": (levy10, _floats([(-10.0, 10.0)] * 10), 0.0),
    "mixed": (
        mixed,
        {
            "x1": {"uniform": [-2.0, 2.0]},
            "x2": {"uniform": [-2.0, 2.0]},
            "k": {"integer": [0, 8]},
            "c": ["rosenbrock", "camel", "sphere"],
        },
        0.0,
    ),
}

SAMPLERS = ("nasforge_auto", "nasforge_tpe", "optuna_tpe", "optuna_gp", "random")
_NASFORGE = {"nasforge_auto": "auto", "nasforge_tpe": "tpe", "random": "random"}


def _suggest(trial: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """Returns the parameters an Optuna trial suggests for a run-file space spec."""
    out: dict[str, Any] = {}
    for label, entry in spec.items():
        if isinstance(entry, list):
            out[label] = trial.suggest_categorical(label, entry)
        elif "integer" in entry:
            out[label] = trial.suggest_int(label, *entry["integer"])
        else:
            out[label] = trial.suggest_float(label, *entry["uniform"])
    return out


def _optuna_sampler(name: str, seed: int) -> Any:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name == "optuna_gp":
            return optuna.samplers.GPSampler(seed=seed)
        return optuna.samplers.TPESampler(seed=seed)


def best_found(function: str, sampler: str, seed: int, n: int, tmp: Path) -> float:
    """Returns the lowest value ``sampler`` found on ``function`` in ``n`` evaluations."""
    fn, spec, _ = FUNCTIONS[function]
    if sampler in _NASFORGE:
        exp = Experiment(
            SearchSpace.from_spec(spec),
            lambda arch, report: fn(arch),
            get_strategy(_NASFORGE[sampler], seed=seed),
            directory=tmp / f"{function}-{sampler}-{seed}",
            n_trials=n,
            mode="min",
            executor="inprocess",
            progress="off",
            save_weights=False,
        ).run()
        return min(t.metrics["default"] for t in exp.trials() if t.metrics)
    import optuna

    study = optuna.create_study(sampler=_optuna_sampler(sampler, seed))
    study.optimize(lambda t: fn(_suggest(t, spec)), n_trials=n)
    return float(study.best_value)


def ask_ms(sampler: str, n_told: int, n_asks: int = 5) -> float:
    """Returns the median milliseconds of one ask of ``sampler`` on Hartmann-6 after
    ``n_told`` trials (random points, the same for every sampler) were told; each timed ask
    is told its value before the next."""
    import random

    import optuna

    fn, spec, _ = FUNCTIONS["hartmann6"]
    space = SearchSpace.from_spec(spec)
    rng = random.Random(0)
    history = [space.sample(rng) for _ in range(n_told)]
    times = []
    if sampler in _NASFORGE:
        strategy = get_strategy(_NASFORGE[sampler], seed=0)
        strategy.setup(space)
        for arch in history:
            strategy.tell(arch, -fn(arch))  # nasforge maximises: the engine negates a min
        for _ in range(n_asks):
            start = time.perf_counter()
            arch = strategy.ask()
            times.append(time.perf_counter() - start)
            assert arch is not None
            strategy.tell(arch, -fn(arch))
        return round(1000 * statistics.median(times), 2)
    dists = {k: optuna.distributions.FloatDistribution(*v["uniform"]) for k, v in spec.items()}
    study = optuna.create_study(sampler=_optuna_sampler(sampler, 0))
    for arch in history:
        study.add_trial(optuna.trial.create_trial(params=arch, distributions=dists, value=fn(arch)))
    for _ in range(n_asks):
        start = time.perf_counter()
        trial = study.ask(dists)
        times.append(time.perf_counter() - start)
        study.tell(trial, fn(trial.params))
    return round(1000 * statistics.median(times), 2)
