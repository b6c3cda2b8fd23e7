"""Tests of the auto strategy: the model it picks for representative spaces, why it says so,
the GP's hand-over to TPE, and auto as the engine's default for spaces with ranges."""

from __future__ import annotations

import math
from pathlib import Path

import optuna
import pytest

from nasforge.engine import Experiment
from nasforge.errors import ConfigError
from nasforge.run.store import Store
from nasforge.space.ranges import Range
from nasforge.space.search_space import Decision, SearchSpace
from nasforge.strategy import AutoStrategy, get_strategy
from nasforge.strategy.auto import MAX_GP_DIMS, choose


def _floats(n: int) -> list[Decision]:
    return [Decision(f"x{i}", "float", (), Range(0.0, 1.0)) for i in range(n)]


SPACES = {
    "architecture only": (
        SearchSpace([Decision("op", "layer", ("a", "b")), Decision("w", "value", (8, 16))]),
        "tpe",
        "no range",
    ),
    "six floats": (SearchSpace(_floats(6)), "gp", "6 numeric range"),
    "floats and an integer": (
        SearchSpace([*_floats(2), Decision("k", "int", (), Range(0, 8, integer=True))]),
        "gp",
        "3 numeric range",
    ),
    "mixed": (
        SearchSpace([Decision("op", "layer", ("a", "b")), *_floats(3)]),
        "tpe",
        "mixed space",
    ),
    "conditional": (
        SearchSpace([Decision("depth", "depth", (1, 2, 3)), *_floats(2)]),
        "tpe",
        "conditional structure",
    ),
    "many floats": (SearchSpace(_floats(MAX_GP_DIMS + 4)), "cmaes", "20 numeric ranges"),
}


@pytest.mark.parametrize("name", list(SPACES))
def test_auto_picks_a_model_by_the_space_and_says_why(name: str) -> None:
    """Each representative space gets the rule's model, and explain() names it and the reason."""
    space, model, reason = SPACES[name]
    assert choose(space).model == model
    s = get_strategy("auto", seed=0)
    s.setup(space)
    assert s.model == model
    plan = s.explain()
    assert plan is not None and reason in plan
    assert {"gp": "Gaussian process", "tpe": "TPE", "cmaes": "CMA-ES"}[model] in plan
    arch = s.ask()
    assert space.validate(arch) == arch


def test_the_gp_hands_over_to_tpe_after_gp_trials() -> None:
    """With gp_trials=11 the GP proposes the 11th ask and TPE every one after; a replay of the
    history hands over at the same trial and asks the same next architecture."""
    space = SearchSpace(_floats(2))

    def f(arch: dict) -> float:
        return -((arch["x0"] - 0.3) ** 2) - (arch["x1"] - 0.7) ** 2

    s = AutoStrategy(seed=1, gp_trials=11)
    s.setup(space)
    models, history = [], []
    for _ in range(13):
        models.append(s.model)
        arch = s.ask()
        s.tell(arch, f(arch))
        history.append((arch, f(arch)))
    assert models == ["gp"] * 11 + ["tpe"] * 2
    assert isinstance(s._study.sampler, optuna.samplers.TPESampler)
    again = AutoStrategy(seed=1, gp_trials=11)
    again.setup(space)
    again.replay(history)
    assert again.model == "tpe" and again.ask() == s.ask()


def test_the_gp_phase_gives_every_fifth_ask_to_tpe() -> None:
    """After the GP's 10 start-up trials, every 5th ask goes to TPE (asks 15 and 20 of 20), the
    others to the GP; a replay of the history asks the same next architecture, and
    tpe_every=0 leaves every ask to the GP."""
    space = SearchSpace(_floats(3))

    def f(arch: dict) -> float:
        return -sum((arch[f"x{i}"] - 0.3) ** 2 for i in range(3))

    def run(every: int) -> tuple[int, list, AutoStrategy]:
        s = AutoStrategy(seed=2, tpe_every=every)
        s.setup(space)
        gp, calls = s._study.sampler, []
        original = gp.sample_relative
        gp.sample_relative = lambda *a: calls.append(1) or original(*a)
        history = []
        for _ in range(20):
            arch = s.ask()
            s.tell(arch, f(arch))
            history.append((arch, f(arch)))
        assert s._study.sampler is gp and s.model == "gp"
        return len(calls), history, s

    n_gp, history, s = run(5)
    assert n_gp == 18
    assert run(0)[0] == 20
    again = AutoStrategy(seed=2, tpe_every=5)
    again.setup(space)
    again.replay(history)
    assert again.ask() == s.ask()


def test_bad_gp_trials_is_refused() -> None:
    """gp_trials must be an int >= 0; the message names it."""
    with pytest.raises(ConfigError, match="gp_trials"):
        AutoStrategy(gp_trials=-1)


def _score(arch: dict, report) -> float:
    return -abs(math.log10(arch["lr"]) + 2)


def test_auto_is_the_default_for_spaces_with_ranges(tmp_path: Path) -> None:
    """No strategy named: a space with ranges gets auto, which writes its plan into the run's
    log and a note; a space of listed decisions keeps random."""
    space = SearchSpace.from_spec({"op": ["a", "b"], "lr": {"uniform": [1e-4, 1e-1], "log": True}})
    exp = Experiment(space, _score, directory=tmp_path / "r", n_trials=3, executor="inprocess",
                     progress="off").run()  # fmt: skip
    assert exp.strategy.name == "auto"
    with Store.open(tmp_path / "r") as store:
        assert store.config()["multitrial"]["strategy"]["name"] == "auto"
        plan = [n["detail"] for n in store.notes("strategy")]
    assert len(plan) == 1 and "TPE" in plan[0] and "mixed space" in plan[0]
    assert plan[0] in (tmp_path / "r" / "logs" / "run.log").read_text()
    listed = SearchSpace.from_spec({"op": ["a", "b", "c"]})
    plain = Experiment(listed, lambda a, r: 1.0, directory=tmp_path / "p", n_trials=2,
                       executor="inprocess", progress="off")  # fmt: skip
    assert plain.strategy.name == "random"
