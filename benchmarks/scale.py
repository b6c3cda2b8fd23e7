"""How the engine and the strategies scale with the length of a run (issue 18).

Space: a plain SearchSpace of 12 decisions x 4 values (4**12 architectures); evaluator: a no-op
that returns 0.0 and stamps the time it was called, so the gap between two calls is the whole
per-trial cost of the engine and the strategy. Everything runs in-process.

    ms_per_trial          random and evolution over 10,000 trained trials, TPE over 2,000: mean
                          ms per trained trial over the first and the last tenth of the run.
                          Target: last <= 1.5 x first for random and evolution.
    tpe_ask_ms_vs_optuna  nasforge's TPE ask+tell time divided by Optuna's own TPESampler's on
                          the same space, fed the same history of 400 and 2,000 trials (seeded
                          random architectures with a structured, noisy metric), timed in
                          alternation; ratio of the median ask+tell times. Target: <= 2.
    tpe_repeat_ask_fraction  asks of the TPE engine run that repeated an architecture (trials
                          recorded ``cached``) over all its asks. Target (NAS-Bench-Macro, in
                          benchmarks/strategies.py): <= 5%.
    status_s_10k ...      wall seconds of ``nasforge status/export --top 1/plot/resume`` as
                          subprocesses on the 10,000-trial random run. Target: <= 1 s each,
                          resume <= 2 s.
    status_cpu_s_10k ...  CPU seconds (user + system) of the same subprocesses: what the wall
                          figures come to on an idle machine, readable on a loaded one.

Last line: one JSON object with those fields.
Run: PYTHONPATH=. python benchmarks/scale.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nasforge.engine import Experiment
from nasforge.errors import StoreError
from nasforge.space.search_space import Arch, Decision, SearchSpace
from nasforge.strategy import get_strategy

ROOT = Path(__file__).resolve().parent.parent

#: The experiment file that ``nasforge resume`` re-imports: the same space and strategy as the
#: in-process run (the resume check compares those), with a no-op evaluator.
EXPERIMENT_FILE = """\
from nasforge.space.search_space import Decision, SearchSpace

space = SearchSpace([Decision(f"d{{i}}", "value", (0, 1, 2, 3)) for i in range(12)])
strategy = "{strategy}"
config = {{"n_trials": {n}, "executor": "inprocess", "progress": "off"}}


def evaluate(arch, report):
    return 0.0
"""


def big_space() -> SearchSpace:
    """Returns the 12 x 4 space of the issue (4**12 architectures)."""
    return SearchSpace([Decision(f"d{i}", "value", (0, 1, 2, 3)) for i in range(12)])


def engine_run(strategy: str, n: int, directory: Path) -> tuple[dict[str, float], Experiment]:
    """Returns ({first, last} ms per trained trial, the experiment) of an in-process no-op run."""
    stamps: list[float] = []

    def noop(arch: Arch, report: object) -> float:
        stamps.append(time.perf_counter())
        return 0.0

    directory.mkdir(parents=True)
    source = directory / "experiment.py"
    source.write_text(EXPERIMENT_FILE.format(strategy=strategy, n=n))
    exp = Experiment(
        big_space(),
        noop,
        strategy,
        directory=directory / "run",
        n_trials=n,
        executor="inprocess",
        progress="off",
        source={"file": str(source)},
    )
    exp.run()
    assert len(stamps) == n, (len(stamps), n)
    k = n // 10
    first = (stamps[k] - stamps[0]) / k
    last = (stamps[-1] - stamps[-1 - k]) / k
    return {"first": round(1000 * first, 4), "last": round(1000 * last, 4)}, exp


def _history(space: SearchSpace, n: int, seed: int) -> list[tuple[Arch, float]]:
    """Returns n seeded random architectures with a structured, noisy metric."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        arch = space.sample(rng)
        out.append((arch, _metric(arch, rng)))
    return out


def _metric(arch: Arch, rng: random.Random) -> float:
    return sum(arch.values()) / (3 * len(arch)) + 0.05 * rng.random()


def ask_ratio(n_history: int, n_asks: int, multivariate: bool | None = None) -> dict[str, float]:
    """Returns ms per ask+tell of nasforge's TPE and of Optuna's TPESampler after the same
    history of ``n_history`` trials, and their ratio; ``multivariate`` None compares both
    defaults (multivariate, for nasforge and for Optuna 5), a bool sets it on both."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = big_space()
    history = _history(space, n_history, seed=n_history)
    options = {} if multivariate is None else {"multivariate": multivariate}
    ours = get_strategy("tpe", seed=0, **options)
    ours.setup(space)
    for arch, m in history:
        ours.tell(arch, m)
    dists = {label: optuna.distributions.CategoricalDistribution([0, 1, 2, 3]) for label in space}
    study = optuna.create_study(
        direction="maximize",
        sampler=optuna.samplers.TPESampler(seed=0, **options),
    )
    study.add_trials(
        [optuna.trial.create_trial(params=a, distributions=dists, value=m) for a, m in history]
    )
    rng_ours, rng_theirs = random.Random(1), random.Random(1)
    t_ours: list[float] = []
    t_theirs: list[float] = []
    for _ in range(n_asks):  # alternate, so machine load hits both alike
        start = time.perf_counter()
        arch = ours.ask()
        ours.tell(arch, _metric(arch, rng_ours))
        t_ours.append(time.perf_counter() - start)
        start = time.perf_counter()
        trial = study.ask(dists)
        study.tell(trial, _metric(trial.params, rng_theirs))
        t_theirs.append(time.perf_counter() - start)
    # medians: a load spike on the shared machine during one ask does not decide the ratio
    med_ours, med_theirs = statistics.median(t_ours), statistics.median(t_theirs)
    return {
        "nasforge_ms": round(1000 * med_ours, 3),
        "optuna_ms": round(1000 * med_theirs, 3),
        "ratio": round(med_ours / med_theirs, 3),
        "ratio_of_means": round(sum(t_ours) / sum(t_theirs), 3),
        "nasforge_repeat_proposals": ours.n_repeat_proposals,
    }


def optuna_run(n: int) -> dict[str, float]:
    """Returns {first, last} ms per ask+tell of Optuna's own TPESampler (its defaults) over n
    no-op trials."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dists = {
        label: optuna.distributions.CategoricalDistribution([0, 1, 2, 3]) for label in big_space()
    }
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=0))
    times = []
    for _ in range(n):
        start = time.perf_counter()
        study.tell(study.ask(dists), 0.0)
        times.append(time.perf_counter() - start)
    k = n // 10
    return {
        "first": round(1000 * sum(times[:k]) / k, 4),
        "last": round(1000 * sum(times[-k:]) / k, 4),
    }


def macro_repeats(n_seeds: int = 3, budget: int = 100) -> float | None:
    """Returns TPE's mean fraction of repeat asks on NAS-Bench-Macro (None without the data)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from strategies import DEFAULT_PATH

    from nasforge.engine.tabular import NasBenchMacro

    if not DEFAULT_PATH.exists():
        return None
    bench = NasBenchMacro(DEFAULT_PATH)
    fractions = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(n_seeds):
            exp = Experiment(
                bench.search_space(),
                bench.evaluator(),
                get_strategy("tpe", seed=seed),
                directory=Path(tmp) / str(seed),
                n_trials=budget,
                executor="inprocess",
                progress="off",
            ).run()
            trials = exp.trials()
            fractions.append(sum(t.status == "cached" for t in trials) / len(trials))
    return round(statistics.mean(fractions), 4)


#: command -> CPU seconds of its last :func:`cli_seconds` call
CLI_CPU: dict[str, float] = {}


def cli_seconds(*argv: str) -> float:
    """Returns the wall seconds of ``python -m nasforge.cli ARGV`` (output discarded); its CPU
    seconds (user + system) are recorded in :data:`CLI_CPU` under the command's name.

    Raises:
        StoreError: the command failed (its stderr tail is in the message).
    """
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "nasforge.cli", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    CLI_CPU[argv[0]] = round(cpu, 3)
    if out.returncode != 0:
        raise StoreError(f"nasforge {' '.join(argv)} failed: {out.stderr[-2000:]}")
    return round(wall, 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="2,000 trials instead of 10,000")
    parser.add_argument("--tpe-trials", type=int, default=None, help="TPE run length (2,000)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    n = 2000 if args.quick else 10_000
    n_tpe = args.tpe_trials or (400 if args.quick else 2000)
    result: dict[str, object] = {"n_trials": n, "tpe_n_trials": n_tpe}
    timings: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        engine_run("random", 200, root / "warm")  # imports, sqlite, first-call costs
        ms: dict[str, dict[str, float]] = {}
        repeats: dict[str, float] = {}
        for name, length in (("random", n), ("evolution", n), ("tpe", n_tpe)):
            start = time.perf_counter()
            ms[name], exp = engine_run(name, length, root / name)
            timings[f"{name}_run_s"] = round(time.perf_counter() - start, 2)
            trials = exp.trials()
            repeats[name] = round(sum(t.status == "cached" for t in trials) / len(trials), 4)
            if name == "tpe":
                result["tpe_asks"] = len(trials)
                result["tpe_repeat_proposals"] = getattr(exp.strategy, "n_repeat_proposals", None)
        result["ms_per_trial"] = ms
        result["repeat_ask_fraction"] = repeats
        result["tpe_repeat_ask_fraction"] = repeats["tpe"]
        result["tpe_repeat_ask_fraction_nas_bench_macro"] = macro_repeats()
        for name in ("random", "evolution"):
            result[f"{name}_last_over_first"] = round(ms[name]["last"] / ms[name]["first"], 3)
        result["optuna_tpe_ms_per_trial"] = optuna_run(n_tpe)
        result["tpe_engine_last_vs_optuna_last"] = round(
            ms["tpe"]["last"] / result["optuna_tpe_ms_per_trial"]["last"], 3
        )
        ratios = {str(h): ask_ratio(h, k) for h, k in ((400, 60), (2000, 20))}
        result["tpe_ask_ms_vs_optuna"] = {h: r["ratio"] for h, r in ratios.items()}
        result["tpe_ask_detail"] = ratios
        result["tpe_univariate_ask_detail"] = {"2000": ask_ratio(2000, 5, multivariate=False)}
        run_dir = str(root / "random" / "run")
        result["status_s_10k"] = cli_seconds("status", run_dir)
        result["export_s_10k"] = cli_seconds("export", run_dir, "--top", "1")
        result["plot_s_10k"] = cli_seconds("plot", run_dir)
        result["resume_s_10k"] = cli_seconds("resume", run_dir)
        result["cli_startup_s"] = cli_seconds("--help")
        for name in ("status", "export", "plot", "resume"):
            result[f"{name}_cpu_s_10k"] = CLI_CPU[name]
        result["cli_startup_cpu_s"] = CLI_CPU["--help"]
    result["timings"] = timings
    result["targets"] = {
        "last_over_first": 1.5,
        "tpe_ask_ms_vs_optuna": 2.0,
        "tpe_repeat_ask_fraction": 0.05,
        "status_s_10k": 1.0,
        "export_s_10k": 1.0,
        "plot_s_10k": 1.0,
        "resume_s_10k": 2.0,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
