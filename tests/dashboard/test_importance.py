"""Decision importance over a run's trials (Optuna's importance evaluator)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nasforge.dashboard.importance import decision_importance
from nasforge.errors import ConfigError
from nasforge.run.store import Store
from tests.dashboard.records import make_record


def test_the_decision_that_sets_the_metric_ranks_first(tmp_path: Path) -> None:
    """In the test record `op` sets accuracy (0.5 or 0.1, plus noise) and `width` does not:
    `op` is the most important, the importances sum to 1, and a seed repeats them."""
    make_record(tmp_path / "a", n=60)
    with Store.open(tmp_path / "a") as store:
        trials = store.trials()
    imp = decision_importance(trials, "accuracy", "max")
    assert list(imp)[0] == "op" and imp["op"] > 0.8
    assert sum(imp.values()) == pytest.approx(1.0)
    assert decision_importance(trials, "accuracy", "max") == imp


def test_too_few_trials_or_no_varying_decision_is_explained(tmp_path: Path) -> None:
    """One scored trial, or trials that all took the same values, give a ConfigError that
    says why."""
    make_record(tmp_path / "a", n=1)
    with Store.open(tmp_path / "a") as store:
        trials = store.trials()
    with pytest.raises(ConfigError, match="at least 2 trials"):
        decision_importance(trials, "accuracy", "max")
    with pytest.raises(ConfigError, match="no decision varies"):
        decision_importance(trials * 3, "accuracy", "max")


def test_a_continuous_range_is_a_numeric_parameter() -> None:
    """A log-range learning rate that sets the metric, beside a noise range and a category,
    ranks first: its sampled floats are one numeric parameter, not 60 categories."""
    import math
    import random

    from nasforge.run.records import TrialRecord

    rng = random.Random(0)
    trials = []
    for i in range(60):
        lr = 10 ** rng.uniform(-4, -1)
        arch = {"lr": lr, "noise": rng.random(), "op": rng.choice(["a", "b"])}
        acc = 1.0 - abs(math.log10(lr) + 2.5) / 2 + 0.01 * rng.random()
        trials.append(TrialRecord(i + 1, str(i), arch, "done", {"accuracy": acc}))
    imp = decision_importance(trials, "accuracy", "max")
    assert list(imp)[0] == "lr" and imp["lr"] > 0.6
