"""The rung rules (ASHA, Hyperband, successive halving) in the engine: pruned trials, their
resource, budget accounting in status and export, replay on resume, every local executor."""

from __future__ import annotations

import json
import time

import pytest

from nasforge.engine import Experiment, Store
from nasforge.engine.executor import ProcessPoolExecutor
from nasforge.run.export import export_top
from nasforge.run.status import print_status, resource_spent
from nasforge.space.search_space import Decision, SearchSpace
from nasforge.strategy import ASHAStopper, HyperbandStopper, MedianStopper
from tests.engine.local_ray import loopback_ray
from tests.runwait import wait_until

#: grid order of the levels; with ASHA(1, 3, 9) the trials reach 9,1,9,1,1,9,1,1,1 reports
#: (a trial goes on at rung 1 and 3 only while in the top max(1, n // 3) there)
LEVELS = (5, 1, 7, 0, 3, 8, 2, 6, 4)
ASHA_REACHED = [9, 1, 9, 1, 1, 9, 1, 1, 1]
SPACE = SearchSpace([Decision("level", "value", LEVELS)])


def staircase(arch, report):
    """Reports level + 0.01 * epoch for 9 epochs, the last as final."""
    for epoch in range(1, 10):
        value = arch["level"] + 0.01 * epoch
        report(value)
    return value


def _make(where, stopper, executor="inprocess", n_trials=9):
    return Experiment(
        SPACE,
        staircase,
        "grid",
        directory=where,
        n_trials=n_trials,
        executor=executor,
        concurrency=1,
        stopper=stopper,
        progress="off",
    )


@pytest.mark.parametrize("executor", ["inprocess", "pool"])
def test_asha_prunes_at_rungs_on_local_executors(tmp_path, executor):
    """In-process and in pool workers, ASHA prunes where the rule says, records `pruned` with
    the last report as the metrics, and the reports are the resource reached."""
    exp = _make(tmp_path / "r", ASHAStopper(1, 3, 9), executor).run()
    trials = exp.trials()
    assert [len(t.intermediates) for t in trials] == ASHA_REACHED
    assert [t.status for t in trials] == ["done" if r == 9 else "pruned" for r in ASHA_REACHED]
    pruned = [t for t in trials if t.status == "pruned"]
    assert all(t.metrics["default"] == t.intermediates[-1]["default"] for t in pruned)


def test_stopper_by_name_or_mapping_and_stored_config(tmp_path):
    """`stopper="asha"` or a mapping builds the rule; the run stores its config with `rule`,
    and a stored section builds it back."""
    exp = _make(tmp_path / "a", {"rule": "asha", "max_resource": 9})
    assert isinstance(exp.stopper, ASHAStopper)
    section = exp.section()["stopper"]
    assert section["rule"] == "asha" and section["max_resource"] == 9
    built = Experiment.from_section({"space": SPACE, "evaluate": staircase, "strategy": "grid",
                                     "n_trials": 9, "stopper": section})  # fmt: skip
    assert built.stopper.config() == section
    old = Experiment.from_section({"space": SPACE, "evaluate": staircase, "strategy": "grid",
                                   "n_trials": 9, "stopper": {"warmup_steps": 1,
                                                              "min_trials": 2}})  # fmt: skip
    assert isinstance(old.stopper, MedianStopper)


class _AnnouncingPool(ProcessPoolExecutor):
    """A pool that touches ``pushed`` once it has sent running trials fresh stopper snapshots
    (it does so after counting a running trial's rung value): the event a racing trial waits
    for, instead of sleeping while hoping the engine got there."""

    def __init__(self, pushed):
        super().__init__(2)
        self.pushed = pushed

    def push_snapshots(self):
        super().push_snapshots()  # written into the trials' pipes when this returns
        self.pushed.touch()


def _race(where, executor, stopper):
    """Returns {level: (status, reports)} of two trials at once, neither finished when the
    second (level 1) reaches rung 1 below the first's value there."""
    high_reported, low_done = where / "high_reported", where / "low_done"
    where.mkdir(exist_ok=True)
    # on the pool the engine pushes the first's rung value to the second: wait for that;
    # on Ray the first's report reached the run's rung board before high_reported exists
    pushed = where / "pushed" if executor == "pool" else high_reported
    if executor == "pool":
        executor = _AnnouncingPool(pushed)

    def racing(arch, report):
        if arch["level"] == 9:
            report(9.0)
            high_reported.touch()
            wait_until(low_done.exists)  # still running while the other decides
        else:
            wait_until(high_reported.exists)
            wait_until(pushed.exists)
        try:
            for epoch in range(2 if arch["level"] == 9 else 1, 10):
                report(arch["level"] + 0.01 * epoch)
        finally:
            low_done.touch()
        return arch["level"] + 0.09

    exp = Experiment(
        SearchSpace([Decision("level", "value", (9, 1))]),
        racing,
        "grid",
        directory=where / "race",
        n_trials=2,
        executor=executor,
        concurrency=2,
        stopper=stopper,
        progress="off",
    ).run()
    return {t.arch["level"]: (t.status, len(t.intermediates)) for t in exp.trials()}


#: a cohort of 2 trials, one rung (1 report): the one beaten there by the other is pruned
SH_RACE = {"rule": "sh", "min_resource": 1, "eta": 2, "max_resource": 2, "n_trials": 2}


@pytest.mark.parametrize("stopper", [ASHAStopper(1, 3, 9), SH_RACE], ids=["asha", "sh"])
def test_rung_rules_on_the_pool_count_rung_values_of_running_trials(tmp_path, stopper):
    """Two trials at once on the pool, neither finished: the one that reaches rung 1 second,
    below the other's value there, is pruned at once (ASHA compares with every trial that
    reached the rung, as Optuna's and Ray Tune's do, and SH with every member of the cohort;
    a snapshot of finished trials alone would have let it train all 9 epochs)."""
    assert _race(tmp_path, "pool", stopper) == {9: ("done", 9), 1: ("pruned", 1)}


@pytest.mark.slow
def test_rung_rules_on_ray_count_rung_values_of_running_trials(tmp_path):
    """The same race on a local Ray (loopback): each report asks the run's rung board, so
    ASHA and SH prune the trial beaten at rung 1 by a trial still running."""
    with loopback_ray(num_cpus=2):
        for name, stopper in (("asha", ASHAStopper(1, 3, 9)), ("sh", SH_RACE)):
            got = _race(tmp_path / name, "ray", stopper)
            assert got == {9: ("done", 9), 1: ("pruned", 1)}, name


def test_resume_replays_the_same_decisions(tmp_path):
    """Running 5 trials then resuming to 9 prunes exactly as one uninterrupted run."""
    exp = _make(tmp_path / "a", ASHAStopper(1, 3, 9), n_trials=5)
    exp.run()
    exp.n_trials = 9
    exp.resume()
    ref = _make(tmp_path / "b", ASHAStopper(1, 3, 9)).run()
    got = [(t.arch, t.status, len(t.intermediates)) for t in exp.trials()]
    assert got == [(t.arch, t.status, len(t.intermediates)) for t in ref.trials()]


def test_hyperband_brackets_in_the_engine(tmp_path):
    """Hyperband's last bracket (minimum resource 9) never prunes; the others may."""
    stopper = HyperbandStopper(1, 3, 9)
    exp = _make(tmp_path / "h", stopper).run()
    for t in exp.trials():
        if stopper.bracket(t.id) == 2:
            assert t.status == "done" and len(t.intermediates) == 9
    assert any(t.status == "pruned" for t in exp.trials())


def test_status_and_export_show_resource(tmp_path, capsys):
    """`nasforge status` prints the resource spent (pruned trials included) and marks pruned
    trials with the reports they reached; export records status and resource."""
    where = tmp_path / "r"
    _make(where, ASHAStopper(1, 3, 9)).run()
    with Store.open(where) as store:
        spent = resource_spent(store.trials())
    assert spent == {"total": 33, "done": 27, "pruned": 6}
    print_status(where)
    out = capsys.readouterr().out
    assert "resource spent: 33 reports" in out and "pruned 6" in out
    assert "pruned @1" in out
    folders = export_top(where, k=9)
    metas = [json.loads((f / "arch.json").read_text()) for f in folders]
    assert {(m["status"], m["resource"]) for m in metas} == {("done", 9), ("pruned", 1)}


def test_cross_model_merging_steps_aside_for_a_rung_rule(tmp_path):
    """With a rung rule, the cross-model plan merges nothing and says why in the notes."""
    exp = _make(tmp_path / "c", ASHAStopper(1, 3, 9)).run()
    with Store.open(exp.directory) as store:
        notes = store.notes()
    assert any("early stopping keeps trials apart" in n["detail"] for n in notes)


@pytest.mark.slow
def test_asha_prunes_in_ray_workers(tmp_path):
    """On Ray, workers decide from the snapshot as in-process ones do: same pruning."""
    from nasforge.engine.ray_executor import RayExecutor

    with loopback_ray(num_cpus=1):
        exp = _make(tmp_path / "ray", ASHAStopper(1, 3, 9), RayExecutor(1)).run()
    assert [len(t.intermediates) for t in exp.trials()] == ASHA_REACHED
    assert {t.status for t in exp.trials()} == {"done", "pruned"}


def _blocks_first(arch, report):
    """Trial d=0 reports until it is cancelled; the others return at once."""
    while arch["d"] == 0:
        report(0.0)
        time.sleep(0.02)
    return float(arch["d"])


def test_a_cancelled_trial_does_not_use_up_n_trials(tmp_path):
    """A trial cancelled while it runs (`nasforge stop --trial`) is recorded ``cancelled`` and
    does not count toward ``n_trials``: a 3-trial search still trains 3 trials."""
    import threading

    from nasforge.run import control
    from tests.runwait import wait_for_run

    space = SearchSpace([Decision("d", "value", tuple(range(10)))])
    exp = Experiment(space, _blocks_first, "grid", directory=tmp_path / "run", n_trials=3,
                     executor="pool", concurrency=2, progress="off")  # fmt: skip
    thread = threading.Thread(target=exp.run)
    thread.start()
    try:
        running = lambda s: any(t.id == 1 and t.status == "running" for t in s.trials())  # noqa: E731
        assert wait_for_run(tmp_path / "run", running, timeout=60)
        control.cancel(tmp_path / "run", 1)
    finally:
        thread.join(120)
    with Store.open(tmp_path / "run") as store:
        statuses = sorted(t.status for t in store.trials())
    assert statuses == ["cancelled", "done", "done", "done"]


def test_resuming_a_finished_search_says_nothing_to_do_in_one_line(tmp_path, caplog):
    """`resume` of a search that spent its budget starts no executor and logs one line that
    says how to give it more, instead of a session of progress lines."""
    import logging

    exp = _make(tmp_path / "run", None, n_trials=3)
    exp.run()
    caplog.clear()
    caplog.set_level(logging.INFO, logger="nasforge")
    exp.resume()
    said = [r.getMessage() for r in caplog.records if r.name == "nasforge.engine"]
    assert len(said) == 1 and "nothing to do" in said[0] and "--n-trials" in said[0], said
    assert len(exp.trials()) == 3
