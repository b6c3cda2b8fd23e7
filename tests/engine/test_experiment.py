"""Tests of the experiment loop: resume after SIGKILL, failures, dedup, budget, bad config."""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch.nn as nn

import nasforge as nf
from nasforge.engine import Experiment, Store
from nasforge.engine.evaluator import BaseEvaluator
from nasforge.errors import ConfigError, StoreError, TrialError
from nasforge.run.store import FINISHED
from nasforge.space.search_space import Decision, SearchSpace
from nasforge.strategy import MedianStopper

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
_spec = importlib.util.spec_from_file_location("kill_experiment", HERE / "kill_experiment.py")
kx = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kx)


def _summary(trials):
    return [(t.id, t.arch, t.status, t.metrics, t.cached_from) for t in trials]


def test_sigkill_then_resume_equals_uninterrupted_run(tmp_path):
    """A real SIGKILL mid-run, then resume, gives the trial list of an uninterrupted run."""
    reference = kx.make(tmp_path / "ref").run()
    before = kx.kill_after(tmp_path / "killed", n_done=5)
    assert 5 <= sum(t.status in FINISHED for t in before) < 14
    resumed = kx.make(tmp_path / "killed").resume()
    after = resumed.trials()
    # nothing finished before the kill was lost or changed
    done_before = {t.id: t for t in before if t.status in FINISHED}
    assert all(_summary([after[i - 1]]) == _summary([t]) for i, t in done_before.items())
    assert _summary(after) == _summary(reference.trials())


def test_sigkill_of_pool_run_then_resume_finishes_budget(tmp_path):
    """Killing a process-pool run leaves no worker behind; resume completes the budget."""
    before = kx.kill_after(tmp_path / "pool", n_done=4, executor="pool")
    resumed = kx.make(tmp_path / "pool", executor="pool").resume()
    after = resumed.trials()
    trained = [t for t in after if t.status not in ("cached",)]
    assert len(trained) == 14
    assert all(t.status != "running" for t in after)
    kept = {t.id: _summary([t]) for t in before if t.status in FINISHED}
    assert all(_summary([after[i - 1]]) == s for i, s in kept.items())


def test_resume_of_the_same_object_replays_from_a_clean_state(tmp_path):
    """run() then resume() on one object continues exactly like a fresh object would."""
    exp = kx.make(tmp_path / "a", n_trials=6)
    exp.run()
    exp.n_trials = 10
    exp.resume()
    reference = kx.make(tmp_path / "b", n_trials=10).run()
    assert _summary(exp.trials()) == _summary(reference.trials())


def test_same_seed_same_trials_in_process(tmp_path):
    """Two in-process runs with the same seed record identical trial lists."""
    a = kx.make(tmp_path / "a", n_trials=8).run()
    b = kx.make(tmp_path / "b", n_trials=8).run()
    assert _summary(a.trials()) == _summary(b.trials())


def _flaky(model, report):
    n = sum(p.numel() for p in model.parameters())
    width = model.inp.out_features
    if width == 4:
        raise RuntimeError("width 4 is broken on purpose")
    if width == 8:
        return float("nan")
    return float(n)


@pytest.mark.parametrize("executor", ["inprocess", "pool"])
def test_failing_trials_do_not_stop_the_experiment(tmp_path, executor):
    """Raising and NaN trials are recorded as failed with their error; the run goes on."""
    exp = Experiment(
        kx.TinyNet(),
        _flaky,
        "grid",
        directory=tmp_path / "x",
        n_trials=18,
        executor=executor,
        progress="off",
    ).run()
    trials = exp.trials()
    assert len(trials) == 18
    failed = [t for t in trials if t.status == "failed"]
    assert len(failed) == 12
    assert any("broken on purpose" in t.error for t in failed)
    assert any("non-finite" in t.error for t in failed)
    assert exp.best(1)[0].arch["width"] == 16


def _dies_or_hangs(model, report):
    """Returns 1.0, except that width 4 kills its process and width 8 at depth 1 hangs."""
    width = model.inp.out_features
    if width == 4:
        os._exit(3)
    if width == 8 and len(model.blocks) == 1:
        time.sleep(60)
    return 1.0


def test_dead_and_timed_out_workers_are_failed_trials(tmp_path):
    """A worker that exits or runs past trial_timeout is a failed trial, not a crash."""
    exp = Experiment(
        kx.TinyNet(),
        _dies_or_hangs,
        "grid",
        directory=tmp_path / "x",
        n_trials=18,
        executor="pool",
        concurrency=2,
        trial_timeout=1.0,
        progress="off",
    ).run()
    trials = exp.trials()
    assert len(trials) == 18
    for t in trials:
        if t.arch["width"] == 4:
            assert t.status == "failed" and "died" in t.error and "exit code 3" in t.error
        elif t.arch["width"] == 8 and t.arch["depth"] == 1:
            assert t.status == "failed" and "timed out" in t.error
        else:
            assert t.status == "done" and t.error is None, t.error


def test_in_process_timeout(tmp_path):
    """The in-process executor enforces trial_timeout too (SIGALRM)."""
    exp = Experiment(
        kx.TinyNet(),
        _sleepy,
        "grid",
        directory=tmp_path / "x",
        executor="inprocess",
        trial_timeout=0.3,
        progress="off",
    ).run()
    for t in exp.trials():
        if t.arch["width"] == 16:
            assert t.status == "failed" and "timed out after 0.3" in t.error
        else:
            assert t.status == "done"


def _sleepy(model, report):
    if model.inp.out_features == 16:
        time.sleep(30)
    return 1.0


def test_same_architecture_is_not_trained_twice(tmp_path):
    """Duplicates are recorded as cached copies of the first evaluation."""
    calls = []

    def counting(arch, report):
        calls.append(dict(arch))
        return float(arch["a"])

    space = SearchSpace([Decision("a", "value", (1, 2))])
    exp = Experiment(
        space,
        counting,
        "random",
        directory=tmp_path / "x",
        n_trials=2,
        executor="inprocess",
        progress="off",
    ).run()
    trials = exp.trials()
    assert len(calls) == 2 and len(trials) > 2
    assert {t.status for t in trials} == {"done", "cached"}
    cached = [t for t in trials if t.status == "cached"]
    assert all(trials[t.cached_from - 1].arch == t.arch for t in cached)


def test_retrain_duplicates_when_asked(tmp_path):
    """retrain_duplicates=True trains repeated architectures again."""
    space = SearchSpace([Decision("a", "value", (1, 2))])
    exp = Experiment(
        space,
        lambda arch, report: float(arch["a"]),
        "random",
        directory=tmp_path / "x",
        n_trials=6,
        executor="inprocess",
        retrain_duplicates=True,
        progress="off",
    ).run()
    assert [t.status for t in exp.trials()] == ["done"] * 6


class _Seeded(BaseEvaluator):
    """Returns the seed it trains with: ``seed``, or its retraining's (:meth:`reseeded`)."""

    needs_model = False

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def evaluate(self, space, arch, report):
        return float(self.seed)

    def reseeded(self, repeat):
        return _Seeded(100 * repeat)


def test_a_retrained_duplicate_trains_with_the_evaluators_next_seed(tmp_path):
    """With retrain_duplicates, the n-th retraining of an architecture runs with the
    evaluator's reseeded(n): each architecture's trainings go 0, 100, 200, ... in the order
    of its trials, whatever came between (a space of two architectures, 6 trials)."""
    space = SearchSpace([Decision("a", "value", (1, 2))])
    exp = Experiment(space, _Seeded(), "random", directory=tmp_path / "x", n_trials=6,
                     executor="inprocess", retrain_duplicates=True,
                     progress="off").run()  # fmt: skip
    seen: dict[str, int] = {}
    for t in exp.trials():
        assert t.metrics["default"] == 100 * seen.get(t.arch_id, 0), t
        seen[t.arch_id] = seen.get(t.arch_id, 0) + 1
    assert max(seen.values()) >= 2


def test_constraints_and_pareto_front(tmp_path):
    """Infeasible trials never rank; the Pareto front of (default, params) is non-dominated."""
    exp = Experiment(
        kx.TinyNet(),
        _params_metric,
        "grid",
        directory=tmp_path / "x",
        constraints=["params <= 300"],
        second_objective=("params", "min"),
        executor="inprocess",
        progress="off",
    ).run()
    best = exp.best(3)
    assert all(t.metrics["params"] <= 300 for t in best)
    front = exp.pareto_front()
    pts = [(t.metrics["default"], t.metrics["params"]) for t in exp.trials() if t.metrics]
    for t in front:
        a, p = t.metrics["default"], t.metrics["params"]
        assert p <= 300
        assert not any(a2 >= a and p2 <= p and (a2, p2) != (a, p) and p2 <= 300 for a2, p2 in pts)


def _params_metric(model, report):
    n = float(sum(p.numel() for p in model.parameters()))
    return {"default": math.log(n), "params": n}


def test_time_budget_stops(tmp_path, monkeypatch):
    """A time budget ends the experiment after about that long: no trial starts once the
    budget is spent, and the run ends with the grid unfinished because of it."""
    monkeypatch.setenv("NF_TEST_SLEEP", "0.15")
    exp = Experiment(
        kx.TinyNet(),
        kx.evaluate,  # each trial sleeps 0.15 s: 18 would need 2.7 s
        "grid",  # no duplicates and no end before 18 trials: only the budget stops it
        directory=tmp_path / "x",
        time_budget=0.5,
        executor="inprocess",
        progress="off",
    ).run()
    trials = exp.trials()
    assert 1 <= len(trials) < 18 and {t.status for t in trials} == {"done"}
    first = trials[0].started
    assert all(t.started - first < 0.5 for t in trials)  # asked while the budget lasted
    with Store.open(tmp_path / "x") as store:
        assert float(store.get_meta("elapsed")) >= 0.5  # it stopped because the budget ran out


def _curve(model, report):
    width = model.inp.out_features
    for epoch in range(5):  # grid order trains width 4, then 8, then the poor 16
        report((20 - width) * (epoch + 1))
    return float((20 - width) * 5)


def test_median_stopper_stops_poor_trials(tmp_path):
    """With the median stopping rule a poor trial is recorded early_stopped at its last report."""
    exp = Experiment(
        kx.TinyNet(),
        _curve,
        "grid",
        directory=tmp_path / "x",
        executor="inprocess",
        stopper=MedianStopper(warmup_steps=1, min_trials=2),
        progress="off",
    ).run()
    stopped = [t for t in exp.trials() if t.status == "early_stopped"]
    assert len(stopped) == 6 and all(t.arch["width"] == 16 for t in stopped)
    assert all(t.metrics["default"] == t.intermediates[-1]["default"] for t in stopped)
    assert all(len(t.intermediates) < 5 for t in stopped)


class Empty(nf.ModelSpace):
    """A model space with no decision at all."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)


def _returns_nothing(model, report):
    report(1.0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"strategy": "annealing"}, "unknown strategy 'annealing'"),
        ({"space": Empty()}, "no decisions"),
        ({"evaluator": _returns_nothing}, "never returns a value"),
        ({"evaluator": lambda model: 1.0}, "two arguments"),
        ({"n_trials": None}, "budget"),
        ({"executor": "cluster"}, "unknown executor"),
    ],
)
def test_bad_configuration_fails_before_any_trial(tmp_path, kwargs, match):
    """Each misconfiguration is one ConfigError before anything is written or run."""
    args = {"space": kx.TinyNet(), "evaluator": kx.evaluate, "strategy": "random", "n_trials": 3}
    args.update(kwargs)
    with pytest.raises(ConfigError, match=match):
        Experiment(
            args.pop("space"),
            args.pop("evaluator"),
            args.pop("strategy"),
            directory=tmp_path / "x",
            **args,
        ).run()
    assert not (tmp_path / "x").exists()


def test_evaluator_returning_none_at_runtime_is_a_failed_trial(tmp_path):
    """An evaluator whose source can't be checked and returns None fails its trial clearly."""
    fn = eval("lambda model, report: None")  # no source: the static check cannot see it
    exp = Experiment(
        kx.TinyNet(),
        fn,
        "random",
        directory=tmp_path / "x",
        n_trials=1,
        executor="inprocess",
        progress="off",
    )
    with pytest.raises(TrialError, match="all 1 trials failed: 1 x ValueError: the evaluator"):
        exp.run()  # every trial failed: the run fails too, with the errors summarised
    assert "returned None" in exp.trials()[0].error
    with Store.open(tmp_path / "x") as store:
        assert store.state() == "failed"


def test_run_refuses_an_existing_experiment_and_resume_checks_the_space(tmp_path):
    """run() never overwrites a store; resume with another strategy is a StoreError."""
    kx.make(tmp_path / "x", n_trials=2).run()
    with pytest.raises(StoreError, match="already holds a run"):
        kx.make(tmp_path / "x", n_trials=2).run()
    other = Experiment(
        kx.TinyNet(),
        kx.evaluate,
        "random",
        directory=tmp_path / "x",
        n_trials=2,
        executor="inprocess",
        progress="off",
    )
    with pytest.raises(StoreError, match="different strategy"):
        other.resume()


@pytest.mark.parametrize("executor", ["pool", pytest.param("ray", marks=pytest.mark.slow)])
def test_main_module_space_and_evaluator_work_unwrapped(tmp_path, executor):
    """A space and evaluator defined in a script's __main__ run in pool and Ray unwrapped."""
    if executor == "ray":
        pytest.importorskip("ray", reason="the Ray executor needs the extra nasforge[ray]")
    script = tmp_path / "user.py"
    script.write_text(
        "import torch.nn as nn, nasforge as nf, sys\n"
        "from nasforge.engine import Experiment\n"
        "class S(nf.ModelSpace):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(2, nf.choice([3, 5], label='w'))\n"
        "def ev(model, report):\n"
        "    return float(model.fc.out_features)\n"
        "if __name__ == '__main__':\n"
        "    ex = sys.argv[2]\n"
        "    if ex == 'ray':\n"
        "        from nasforge.engine.ray_executor import RayExecutor\n"
        "        ex = RayExecutor(2, init_kwargs={'num_cpus': 2, 'include_dashboard': False})\n"
        "    e = Experiment(S(), ev, 'grid', directory=sys.argv[1], executor=ex,\n"
        "                   progress='off').run()\n"
        "    print(sorted(t.metrics['default'] for t in e.trials()))\n"
    )
    out = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "d"), executor],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.stdout.strip().splitlines()[-1] == "[3.0, 5.0]", out.stderr
