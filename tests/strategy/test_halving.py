"""Property tests of the rung rules (successive halving, ASHA, Hyperband) against references."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nasforge.errors import ConfigError
from nasforge.strategy import (
    ASHAStopper,
    HyperbandStopper,
    MedianStopper,
    SuccessiveHalvingStopper,
    get_stopper,
    should_stop,
)
from nasforge.strategy.halving import hyperband_brackets

MAX = 9  # resources 1..9; with eta 3 the rungs are 1 and 3

curves_st = st.lists(
    st.lists(st.integers(0, 20).map(float), min_size=MAX, max_size=MAX), min_size=1, max_size=30
)


def _run(stopper, curves, first_id=1):
    """Returns the resource each trial reached, trials run one after another (in-process)."""
    stopper.reset()
    reached = []
    for i, curve in enumerate(curves, first_id):
        snap = stopper.snapshot(i)
        r = 0
        while r < len(curve):
            r += 1
            if should_stop(snap, curve[:r]):
                break
        stopped = r < len(curve) or should_stop(snap, curve[:r])
        stopper.add_finished(curve[:r], i, "pruned" if stopped else "done")
        reached.append(r)
    return reached


def _asha_reference(curves, rung_list, eta, min_trials=1):
    """ASHA written out: at each rung, go on only if in the top max(1, n // eta) of the values
    that the earlier trials reached there, itself included."""
    seen = {r: [] for r in rung_list}
    reached = []
    for curve in curves:
        r_end = len(curve)
        for r in rung_list:
            pool = seen[r] + [curve[r - 1]]
            keep = max(1, len(pool) // eta)
            top = sorted(pool, reverse=True)[:keep]
            if len(pool) >= min_trials and curve[r - 1] < min(top):
                r_end = r
                break
        for r in rung_list:
            if r <= r_end:
                seen[r].append(curve[r - 1])
        reached.append(r_end)
    return reached


@settings(max_examples=150, deadline=None)
@given(curves_st, st.integers(1, 4))
def test_asha_matches_reference(curves, min_trials):
    """ASHA through snapshots and should_stop stops each trial where the reference does."""
    got = _run(ASHAStopper(1, 3, MAX, min_trials), curves)
    assert got == _asha_reference(curves, [1, 3], 3, min_trials)


@settings(max_examples=100, deadline=None)
@given(curves_st)
def test_asha_stops_only_at_rungs_and_never_the_best(curves):
    """A trial ends at a rung or at max_resource; the best value seen at a rung goes on."""
    got = _run(ASHAStopper(1, 3, MAX), curves)
    assert all(r in (1, 3, MAX) for r in got)
    best1 = max(range(len(curves)), key=lambda i: (curves[i][0], -i))
    if all(curves[j][0] < curves[best1][0] for j in range(best1)):  # best so far when it ran
        assert got[best1] > 1


def _sync_sh(levels, eta, cohort):
    """Synchronous successive halving written out: all of a cohort run to a rung, the top
    n // eta go on (ties: earlier trial first). Returns the resource each trial reached."""
    alive = list(range(len(cohort)))
    reached = [None] * len(cohort)
    for r in levels:
        alive.sort(key=lambda i: (-cohort[i][r - 1], i))
        keep = len(alive) // eta
        for i in alive[keep:]:
            reached[i] = r
        alive = alive[:keep]
    for i in alive:
        reached[i] = MAX
    return reached


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(0, 50), min_size=9, max_size=9, unique=True),
    st.lists(st.integers(0, 5), min_size=MAX, max_size=MAX),
    st.permutations(range(9)),
)
def test_sh_never_stops_what_synchronous_sh_keeps(levels_, shape, order):
    """For curves that do not cross, a trial synchronous SH keeps to a rung is never stopped
    before it, in any arrival order; arriving best first, both stop the same trials."""
    shared = [sum(shape[: r + 1]) for r in range(MAX)]  # same shape, different levels
    cohort = [[float(lv + s) for s in shared] for lv in levels_]
    sync = _sync_sh([1, 3], 3, cohort)
    arrived = [cohort[i] for i in order]
    got = _run(SuccessiveHalvingStopper(1, 3, MAX, n_trials=9), arrived)
    for pos, i in enumerate(order):
        assert got[pos] >= sync[i]
    best_first = sorted(range(9), key=lambda i: -levels_[i])
    got = _run(SuccessiveHalvingStopper(1, 3, MAX, n_trials=9), [cohort[i] for i in best_first])
    assert got == [sync[i] for i in best_first]


def test_sh_cohorts_do_not_mix():
    """A second cohort is judged only against its own members."""
    good, poor = [5.0] * MAX, [1.0] * MAX
    got = _run(SuccessiveHalvingStopper(1, 3, MAX, n_trials=9), [good] * 9 + [poor] * 9)
    assert got[9:].count(MAX) == 9  # nobody of cohort 2 is beaten by a cohort-2 member


def test_hyperband_bracket_cycle_follows_hyperband_counts():
    """eta 3, resources 1..9: brackets get 9, 5 and 3 trials per cycle, interleaved."""
    cycle = hyperband_brackets(1, 3, 9)
    assert [cycle.count(b) for b in range(3)] == [9, 5, 3]
    assert cycle[:3] == [0, 1, 2]


@settings(max_examples=100, deadline=None)
@given(curves_st)
def test_hyperband_is_asha_per_bracket(curves):
    """Each bracket decides like ASHA run on that bracket's trials alone, with minimum
    resource 1, 3 or 9 (the last never stops)."""
    hb = HyperbandStopper(1, 3, MAX)
    got = _run(hb, curves)
    ids = range(1, len(curves) + 1)
    for b, low in enumerate([1, 3, 9]):
        mine = [k for k, i in enumerate(ids) if hb.bracket(i) == b]
        sub = [curves[k] for k in mine]
        want = _asha_reference(sub, [r for r in (1, 3) if r >= low], 3)
        assert [got[k] for k in mine] == want


@settings(max_examples=60, deadline=None)
@given(curves_st, st.sampled_from(["asha", "sh", "hyperband", "median"]))
def test_replay_gives_the_same_decisions(curves, rule):
    """Resetting and feeding the same finished trials again reproduces every decision."""
    stopper = get_stopper({"rule": rule, "max_resource": MAX} if rule != "median" else rule)
    assert _run(stopper, curves) == _run(stopper, curves)


def test_get_stopper_names_mappings_and_old_records():
    """A name, a mapping with `rule`, and a mapping without it (the median rule, as records
    written before the rung rules hold) all build a stopper whose config round-trips."""
    assert isinstance(get_stopper("asha"), ASHAStopper)
    old = get_stopper({"warmup_steps": 2, "min_trials": 4})
    assert isinstance(old, MedianStopper) and old.min_trials == 4
    for s in (ASHAStopper(2, 2, 16), HyperbandStopper(1, 2, 8), SuccessiveHalvingStopper()):
        assert get_stopper(s.config()).config() == s.config()


@pytest.mark.parametrize(
    "spec, match",
    [
        ("nope", "unknown stopping rule 'nope'"),
        ({"rule": "asha", "eta": 1}, "eta must be an int >= 2, got 1"),
        ({"rule": "asha", "bogus": 1}, "bogus"),
        ({"rule": "sh", "max_resource": 9, "n_trials": 4}, "n_trials must be an int >= 9"),
        ({"rule": "hyperband", "max_resource": 1}, "max_resource must be an int >= 2"),
    ],
)
def test_bad_stoppers_are_config_errors(spec, match):
    """Unknown rules and bad arguments are ConfigErrors naming the value."""
    with pytest.raises(ConfigError, match=match):
        get_stopper(spec)


def test_snapshots_say_how_a_stop_is_recorded():
    """The rung rules record stops as `pruned`; the median rule keeps `early_stopped`."""
    assert ASHAStopper().snapshot(1)["status"] == "pruned"
    assert "status" not in MedianStopper().snapshot(1)


@settings(max_examples=40, deadline=None)
@given(curves_st)
def test_asha_agrees_with_optunas_successive_halving_pruner(curves):
    """Run one trial after another, ASHA without max_resource prunes where Optuna's
    SuccessiveHalvingPruner (min_resource 1, reduction factor 3, no bootstrap) prunes."""
    optuna = pytest.importorskip("optuna")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    pruner = optuna.pruners.SuccessiveHalvingPruner(1, 3, 0, 0)
    study = optuna.create_study(direction="maximize", pruner=pruner)
    want = []
    for curve in curves:
        trial = study.ask()
        reached = len(curve)
        for step, value in enumerate(curve, 1):
            trial.report(value, step)
            if trial.should_prune():
                reached = step
                break
        state = optuna.trial.TrialState.PRUNED if reached < len(curve) else None
        study.tell(trial, None if state else curve[-1], state=state)
        want.append(reached)
    assert _run(ASHAStopper(1, 3, None), curves) == want
