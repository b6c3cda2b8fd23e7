"""Property and unit tests of ranking, constraints and the Pareto front."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nasforge.errors import ConfigError
from nasforge.run.results import feasible, pareto_front, parse_constraints, rank_trials
from nasforge.run.store import TrialRecord


def _rec(i: int, acc: float, params: float, status: str = "done") -> TrialRecord:
    return TrialRecord(i, f"{i:016x}", {"x": i}, status, {"acc": acc, "params": params})


points = st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20)), min_size=1, max_size=30)


@settings(max_examples=50, deadline=None)
@given(points)
def test_pareto_front_is_exactly_the_non_dominated_set(pts):
    """The front holds every non-dominated point and no dominated one (max acc, min params)."""
    trials = [_rec(i, float(a), float(p)) for i, (a, p) in enumerate(pts, 1)]
    front = {t.id for t in pareto_front(trials, ("acc", "max"), ("params", "min"))}

    def dominated(t):
        a, p = t.metrics["acc"], t.metrics["params"]
        return any(
            (o.metrics["acc"] >= a and o.metrics["params"] <= p)
            and (o.metrics["acc"], o.metrics["params"]) != (a, p)
            for o in trials
        )

    non_dominated = [t for t in trials if not dominated(t)]
    assert all(not dominated(t) for t in trials if t.id in front)
    # equal points share one front entry (the earliest trial)
    assert {(t.metrics["acc"], t.metrics["params"]) for t in non_dominated} == {
        (t.metrics["acc"], t.metrics["params"]) for t in trials if t.id in front
    }


def test_rank_skips_failed_and_infeasible():
    """Ranking keeps feasible finished trials only, best first."""
    trials = [_rec(1, 0.9, 500), _rec(2, 0.8, 50), _rec(3, 0.95, 10, "failed")]
    cons = parse_constraints("params <= 100")
    assert [t.id for t in rank_trials(trials, "acc", "max", cons)] == [2]
    assert [t.id for t in rank_trials(trials, "acc", "max")] == [1, 2]
    assert [t.id for t in rank_trials(trials, "params", "min")] == [2, 1]


def test_constraint_forms():
    """Strings, lists and mappings give the same constraints; bad ones are ConfigErrors."""
    want = {"params": ["<=", 100.0]}
    assert parse_constraints("params <= 100") == want
    assert parse_constraints(["params<=1e2"]) == want
    assert parse_constraints({"params": ("<=", 100)}) == want
    assert feasible({"params": 100.0}, want) and not feasible({"params": 101.0}, want)
    assert not feasible({}, want)
    with pytest.raises(ConfigError, match="no operator"):
        parse_constraints("params about 100")
    with pytest.raises(ConfigError, match="not a number"):
        parse_constraints({"params": ("<=", "lots")})
