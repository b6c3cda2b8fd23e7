"""Optuna's suggest_* names (nf.suggest_float, suggest_int, suggest_categorical): the same
decisions as nf.uniform, nf.integer and nf.choice, frozen to plain values, searched by every
multi-trial strategy and kept by a resume."""

from __future__ import annotations

import pytest
from torch import nn

import nasforge as nf
from nasforge.engine import Experiment
from nasforge.errors import SpaceError
from nasforge.run.store import Store


class Suggested(nf.ModelSpace):
    """Width, dropout, learning rate and warm-up declared where they are used, Optuna's way."""

    def __init__(self):
        super().__init__()
        width = nf.suggest_categorical("width", [4, 8])
        self.body = nn.Sequential(nn.Linear(3, width), nn.Dropout(nf.suggest_float("p", 0.0, 0.5)))
        self.lr = nf.suggest_float("lr", 1e-4, 1e-1, log=True)
        self.warmup = nf.suggest_int("warmup", 0, 100, step=10)


class Spelled(nf.ModelSpace):
    """The same decisions written with nf.choice, nf.uniform and nf.integer."""

    def __init__(self):
        super().__init__()
        width = nf.choice([4, 8], label="width")
        self.body = nn.Sequential(nn.Linear(3, width), nn.Dropout(nf.uniform(0.0, 0.5, label="p")))
        self.lr = nf.uniform(1e-4, 1e-1, log=True, label="lr")
        self.warmup = nf.integer(0, 100, step=10, label="warmup")


def test_suggest_declares_the_same_decisions_as_the_space_language() -> None:
    """Each suggest_* is the range or choice it names: the spaces are equal, and a frozen
    model holds the plain values where they were used."""
    space = Suggested().search_space()
    assert space.to_dict() == Spelled().search_space().to_dict()
    arch = {"width": 8, "p": 0.25, "lr": 0.01, "warmup": 30}
    model = nf.freeze(Suggested(), arch)
    assert (model.lr, model.warmup, model.body[1].p, model.body[0].out_features) == (
        0.01, 30, 0.25, 8,
    )  # fmt: skip
    assert nf.hparams(model) == {"p": 0.25, "lr": 0.01, "warmup": 30}


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: nf.suggest_float("lr", 0.1, 0.5, step=0.1), r"suggest_float\('lr', step=0.1\)"),
        (lambda: nf.suggest_int(3, 1, 4), r"suggest_int\(name, \.\.\.\) takes the decision's name"),
        (lambda: nf.suggest_float("lr", 0.0, 1.0, log=True), "log"),
        (lambda: nf.suggest_categorical("act", []), "at least one candidate"),
    ],
)  # fmt: skip
def test_bad_suggestions_are_one_space_error(call, match) -> None:
    """A float step, a name that is not a string, bad bounds or no choices: one SpaceError
    naming the problem, raised while the space is built."""

    class Bad(nf.ModelSpace):
        def __init__(self):
            super().__init__()
            self.x = call()

    with pytest.raises(SpaceError, match=match):
        Bad()


def _evaluate(model, report):
    """Returns a score that peaks at lr 1e-2 and the wider layer, read from the model."""
    import math

    return -abs(math.log10(model.lr) + 2) + model.body[0].out_features / 8 - model.warmup / 1e3


@pytest.mark.parametrize("strategy", ["random", "tpe", "evolution"])
def test_every_strategy_searches_suggested_decisions_and_a_resume_keeps_them(
    tmp_path, strategy
) -> None:
    """random, TPE and evolution search the suggested decisions (values inside their
    domains, more than one learning rate tried), and a resume continues the same record."""
    d = tmp_path / strategy
    Experiment(Suggested(), _evaluate, strategy, directory=d, n_trials=4, executor="inprocess",
               progress="off", metric="default").run()  # fmt: skip
    Experiment(Suggested(), _evaluate, strategy, directory=d, n_trials=6, executor="inprocess",
               progress="off", metric="default").resume()  # fmt: skip
    with Store.open(d) as store:
        trials = store.trials()
    assert len(trials) >= 6 and all(t.status in ("done", "cached") for t in trials)
    lrs = {t.arch["lr"] for t in trials}
    assert len(lrs) > 1 and all(1e-4 <= lr <= 1e-1 for lr in lrs)
    assert all(t.arch["warmup"] % 10 == 0 and t.arch["width"] in (4, 8) for t in trials)
