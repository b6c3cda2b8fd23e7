"""Tests of the TPE strategy: no repeated asks, no repeated observations, replayable."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nasforge.engine import Experiment
from nasforge.errors import ConfigError
from nasforge.space.ranges import Range, canonical_float
from nasforge.space.search_space import Decision, SearchSpace, arch_id
from nasforge.strategy import TPEStrategy, get_strategy


def _small() -> SearchSpace:
    """Returns a space of 3 * 3 * 2 = 18 architectures."""
    return SearchSpace(
        [
            Decision("a", "value", (0, 1, 2)),
            Decision("b", "value", (0, 1, 2)),
            Decision("c", "value", (0, 1)),
        ]
    )


def _peaked(arch: dict) -> float:
    """A landscape with one clear optimum, which makes TPE propose it again and again."""
    return float(sum(arch.values()))


def _drive(s: TPEStrategy, n: int) -> list[dict]:
    asked = []
    for _ in range(n):
        arch = s.ask()
        if arch is None:
            break
        asked.append(arch)
        s.tell(arch, _peaked(arch))
    return asked


@pytest.mark.parametrize("multivariate", [True, False])
def test_every_architecture_is_asked_once_then_none(multivariate):
    """On a small peaked space, TPE asks all 18 architectures exactly once, then None."""
    s = get_strategy("tpe", seed=0, n_startup_trials=3, multivariate=multivariate)
    s.setup(_small())
    asked = _drive(s, 40)
    assert len(asked) == 18
    assert len({arch_id(a) for a in asked}) == 18
    assert s.n_repeat_proposals > 0  # TPE did propose repeats; none reached the caller
    assert s.ask() is None


def test_concurrent_asks_do_not_repeat_each_other():
    """Asks outstanding at the same time (concurrent trials) are distinct too."""
    s = get_strategy("tpe", seed=1, n_startup_trials=2)
    s.setup(_small())
    for _ in range(3):
        batch = [s.ask() for _ in range(5)]
        assert len({arch_id(a) for a in batch}) == 5
        for arch in batch:
            s.tell(arch, _peaked(arch))


def test_repeated_tell_adds_no_observation():
    """Telling an observed architecture again (a cached trial) leaves the study unchanged."""
    a, b = (
        get_strategy("tpe", seed=4, n_startup_trials=3),
        get_strategy("tpe", seed=4, n_startup_trials=3),
    )
    a.setup(_small())
    b.setup(_small())
    history = _drive(a, 8)
    assert _drive(b, 8) == history
    for arch in history[:4]:
        a.tell(arch, 100.0)  # the engine's cached copy, here with an inflated metric
        a.tell(arch, None)
    assert a.n_observations == b.n_observations == 8
    assert _drive(a, 6) == _drive(b, 6)


def test_foreign_history_counts_once():
    """An imported history with duplicates yields one observation per architecture."""
    s = get_strategy("tpe", seed=0)
    s.setup(_small())
    archs = list(_small().grid())[:5]
    for arch in archs + archs:
        s.tell(arch, _peaked(arch))
    assert s.n_observations == 5
    assert arch_id(s.ask()) not in {arch_id(a) for a in archs}


def test_failed_then_measured_counts_once():
    """A failed architecture told later with a metric becomes one observation, not two."""
    s = get_strategy("tpe", seed=0)
    s.setup(_small())
    arch = s.ask()
    s.tell(arch, None)
    assert s.n_observations == 0
    s.tell(arch, 1.0)
    s.tell(arch, 2.0)
    assert s.n_observations == 1


@pytest.mark.parametrize("multivariate", [True, False])
def test_replay_rebuilds_state_through_fallbacks(multivariate):
    """Replaying a history that went through repeat fallbacks gives the same next asks."""
    space = SearchSpace([Decision(f"d{i}", "value", (0, 1, 2)) for i in range(4)])
    original = get_strategy("tpe", seed=7, n_startup_trials=3, multivariate=multivariate)
    original.setup(space)
    history = [(a, _peaked(a)) for a in _drive(original, 40)]
    assert original.n_repeat_proposals > 0
    rebuilt = get_strategy("tpe", seed=7, n_startup_trials=3, multivariate=multivariate)
    rebuilt.setup(space)
    rebuilt.replay(history)
    assert rebuilt.n_repeat_proposals == original.n_repeat_proposals
    for _ in range(10):
        nxt = original.ask()
        assert rebuilt.ask() == nxt
        original.tell(nxt, _peaked(nxt))
        rebuilt.tell(nxt, _peaked(nxt))


def test_engine_records_no_cached_trial(tmp_path):
    """Through the engine, a TPE search of a small space trains only distinct architectures."""
    space = SearchSpace([Decision(f"d{i}", "value", (0, 1, 2)) for i in range(3)])
    exp = Experiment(
        space,
        lambda arch, report: _peaked(arch),
        get_strategy("tpe", seed=0, n_startup_trials=3),
        directory=tmp_path / "run",
        n_trials=20,
        executor="inprocess",
        progress="off",
    ).run()
    statuses = [t.status for t in exp.trials()]
    assert statuses.count("done") == 20
    assert "cached" not in statuses


def test_bad_options_are_refused():
    """group without multivariate, and negative counts, are ConfigErrors naming the fix."""
    with pytest.raises(ConfigError, match="multivariate=True"):
        TPEStrategy(multivariate=False, group=True)
    with pytest.raises(ConfigError, match="n_resamples"):
        TPEStrategy(n_resamples=-1)
    with pytest.raises(ConfigError, match="n_ei_candidates"):
        TPEStrategy(n_ei_candidates=0)


def test_grouped_tpe_runs_and_is_seeded():
    """Grouped multivariate TPE asks distinct architectures, the same for the same seed."""
    runs = []
    for _ in range(2):
        s = get_strategy("tpe", seed=3, n_startup_trials=3, group=True)
        s.setup(_small())
        runs.append(_drive(s, 12))
    assert runs[0] == runs[1]
    assert len({arch_id(a) for a in runs[0]}) == 12


def test_docs_example_runs():
    """The TPE example in docs/engine.md runs as printed."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "engine.md").read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", doc, flags=re.S) if '"tpe"' in b]
    assert len(blocks) == 1
    exec(compile(blocks[0], "docs/engine.md", "exec"), {})


def test_config_round_trips_and_matches_older_runs():
    """config() rebuilds the same strategy, and omits options left at their defaults."""
    old = {"seed": 0, "n_startup_trials": 10, "n_ei_candidates": 24, "multivariate": False}
    assert TPEStrategy(multivariate=False).config() == old  # as recorded before issue 18
    s = TPEStrategy(seed=2, group=True, n_resamples=2)
    assert get_strategy("tpe", **s.config()).config() == s.config()


@settings(max_examples=12, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 3), min_size=1, max_size=4),
    seed=st.integers(0, 2**16),
    multivariate=st.booleans(),
)
def test_asks_are_distinct_until_the_space_is_exhausted(sizes, seed, multivariate):
    """For any small space and seed: asks never repeat, and stop exactly at the space size."""
    space = SearchSpace([Decision(f"d{i}", "value", tuple(range(n))) for i, n in enumerate(sizes)])
    s = get_strategy("tpe", seed=seed, n_startup_trials=2, multivariate=multivariate)
    s.setup(space)
    asked = _drive(s, space.size + 3)
    assert len(asked) == space.size
    assert len({arch_id(a) for a in asked}) == space.size


def test_engine_resume_continues_the_same_sequence(tmp_path):
    """Stopping a TPE run at 12 trials and resuming to 24 gives the trials of one 24-trial run."""
    space = SearchSpace([Decision(f"d{i}", "value", (0, 1, 2)) for i in range(3)])

    def run(directory, n, resume=False):
        exp = Experiment(
            space,
            lambda arch, report: _peaked(arch),
            get_strategy("tpe", seed=5, n_startup_trials=3),
            directory=directory,
            n_trials=n,
            executor="inprocess",
            progress="off",
        )
        return exp.resume() if resume else exp.run()

    straight = [t.arch for t in run(tmp_path / "a", 24).trials()]
    run(tmp_path / "b", 12)
    resumed = [t.arch for t in run(tmp_path / "b", 24, resume=True).trials()]
    assert resumed == straight
    assert len({arch_id(a) for a in straight}) == 24


def _mixed() -> SearchSpace:
    """Returns a space with a listed decision, a log float, a float and a stepped integer."""
    return SearchSpace(
        [
            Decision("op", "value", ("conv", "pool", "skip")),
            Decision("lr", "float", (), Range(1e-4, 1e-1, log=True)),
            Decision("x", "float", (), Range(-2.0, 2.0)),
            Decision("k", "int", (), Range(1, 9, integer=True, step=2)),
        ]
    )


def _score(op: int, lr: float, x: float, k: int) -> float:
    """A smooth landscape over the mixed space (op as its candidate position)."""
    return -((x - 0.5) ** 2) - (math.log10(lr) + 2.5) ** 2 - abs(k - 5) / 4 + 0.3 * (op == 1)


@pytest.mark.parametrize("multivariate", [True, False])
def test_proposals_equal_optunas_own_loop(multivariate: bool) -> None:
    """nasforge's TPE asks, for a seed, exactly the points Optuna's study.optimize with
    TPESampler asks on the same space and objective (the cached sampler changes no proposal)."""
    import optuna

    n, seed = 30, 3
    s = get_strategy("tpe", seed=seed, n_startup_trials=5, multivariate=multivariate)
    s.setup(_mixed())
    ours = []
    for _ in range(n):
        arch = s.ask()
        assert arch is not None
        op = ("conv", "pool", "skip").index(arch["op"])
        ours.append((op, arch["lr"], arch["x"], arch["k"]))
        s.tell(arch, _score(*ours[-1]))

    def objective(trial: optuna.Trial) -> float:
        params = (
            trial.suggest_categorical("op", [0, 1, 2]),
            trial.suggest_float("lr", 1e-4, 1e-1, log=True),
            trial.suggest_float("x", -2.0, 2.0),
            trial.suggest_int("k", 1, 9, step=2),
        )
        op, lr, x, k = params  # nasforge keeps a float to 12 significant digits
        theirs.append((op, canonical_float(lr), canonical_float(x), k))
        return _score(*theirs[-1])

    theirs: list[tuple] = []
    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=5, multivariate=multivariate)
    optuna.create_study(direction="maximize", sampler=sampler).optimize(objective, n_trials=n)
    assert ours == theirs


def test_cached_sampler_equals_optunas_with_failed_pruned_and_partial_trials() -> None:
    """The cached TPE sampler proposes what Optuna's TPESampler does when the history holds
    failed, pruned and infeasible trials and foreign trials lacking a parameter (which TPE
    skips)."""
    import optuna

    from nasforge.strategy._tpe_cache import tpe_sampler

    dists = {
        "op": optuna.distributions.CategoricalDistribution([0, 1, 2]),
        "lr": optuna.distributions.FloatDistribution(1e-4, 1e-1, log=True),
        "x": optuna.distributions.FloatDistribution(-2.0, 2.0),
        "k": optuna.distributions.IntDistribution(1, 9, step=2),
    }
    proposals: list[list[tuple]] = []
    for sampler in (
        optuna.samplers.TPESampler(seed=7, n_startup_trials=4),
        tpe_sampler(optuna, seed=7, n_startup_trials=4),
    ):
        study = optuna.create_study(direction="maximize", sampler=sampler)
        asked = []
        for i in range(30):
            if i % 7 == 3:  # a foreign trial without "k": TPE's history skips it
                study.add_trial(
                    optuna.trial.create_trial(
                        params={"op": 0, "lr": 0.01, "x": 0.0},
                        distributions={name: dists[name] for name in ("op", "lr", "x")},
                        value=-1.0,
                    )
                )
            trial = study.ask(dists)
            params = (trial.params["op"], trial.params["lr"], trial.params["x"], trial.params["k"])
            asked.append(params)
            trial.set_constraint("budget", 1.0 if i % 4 == 2 else -1.0)  # > 0: infeasible
            if i % 5 == 4:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            elif i % 6 == 5:
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            else:
                study.tell(trial, _score(*params))
        proposals.append(asked)
    assert proposals[0] == proposals[1]
