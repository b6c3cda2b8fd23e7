"""`nasforge plot` keeps pruned trials apart: their value is that of the rung they were
stopped at, not a result (issue 37)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nasforge.run.records import TrialOutcome
from nasforge.run.store import Store


def test_pruned_trials_are_drawn_apart_and_never_the_running_best(tmp_path: Path) -> None:
    """A trial pruned after one report at 0.99 (above every finished trial) is a separate
    grey point, not a trial point nor the running best; the PNG is still written."""
    pytest.importorskip("matplotlib")
    from nasforge.run.plot import plot_run, trial_points

    config = {
        "kind": "multitrial",
        "objective": {"metric": "acc", "mode": "max", "constraints": {}, "second": None},
    }
    store = Store.create(tmp_path / "r", config)
    for i in range(5):
        tid = store.add_trial(f"{i:016x}", {"w": i})
        pruned = i == 2
        acc = 0.99 if pruned else 0.2 + 0.1 * i
        store.finish_trial(
            tid, TrialOutcome("pruned" if pruned else "done", {"acc": acc}, [{"acc": acc}])
        )
    trials = store.trials(light=True)
    store.finish()
    store.close()
    pts = trial_points(trials, "acc", "max", {})
    assert pts["pruned_x"] == [3] and pts["pruned_y"] == [0.99]
    assert 3 not in pts["x"] and max(pts["best_y"]) == pytest.approx(0.6)
    assert plot_run(tmp_path / "r").stat().st_size > 0


def test_a_run_without_a_finished_trial_is_one_line_and_failed_ones_still_plot(
    tmp_path: Path, caplog
) -> None:
    """`nasforge plot` of a run whose trials are all in flight is one line (exit 2), not a
    traceback; a run whose only finished trials failed draws them."""
    pytest.importorskip("matplotlib")
    from nasforge.cli import main

    config = {"kind": "multitrial", "objective": {"metric": "acc", "mode": "max"}}
    with Store.create(tmp_path / "r", config) as store:
        store.add_trial("a" * 16, {"w": 1})
        store.add_trial("b" * 16, {"w": 2})
    assert main(["plot", str(tmp_path / "r")]) == 2
    assert "no finished trial to plot yet" in caplog.text
    with Store.create(tmp_path / "f", config) as store:
        for i in range(2):
            store.finish_trial(store.add_trial(f"{i:016x}", {"w": i}), TrialOutcome("failed"))
        store.finish()
    assert main(["plot", str(tmp_path / "f")]) == 0
    assert (tmp_path / "f" / "plot.png").stat().st_size > 0
