"""What `nasforge status` shows: repeats folded into their original, the run's state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from nasforge.run.records import TrialOutcome
from nasforge.run.status import summary, trial_table
from nasforge.run.store import Store
from nasforge.runtime.threads import default_threads, set_threads
from tests.runwait import kill_writer_midway

OBJECTIVE = {"metric": "acc", "mode": "max", "constraints": {}, "second": None}


def test_cached_repeats_are_folded_into_their_original(tmp_path: Path) -> None:
    """Two repeats of an evaluated architecture give no rows of their own: the original's
    row counts them, and ranks are distinct architectures."""
    with Store.create(tmp_path, {"kind": "x", "objective": OBJECTIVE}) as s:
        s.set_plan("trials", 3)
        a = s.add_trial("a" * 16, {"w": 1})
        s.finish_trial(a, TrialOutcome("done", {"acc": 0.5}))
        b = s.add_trial("b" * 16, {"w": 2})
        s.finish_trial(b, TrialOutcome("done", {"acc": 0.9}))
        for _ in range(2):
            c = s.add_trial("a" * 16, {"w": 1})
            s.finish_trial(c, TrialOutcome("cached", {"acc": 0.5}, cached_from=a))
        header, rows, more = trial_table(s)
        assert [r[1] for r in rows] == [str(b), str(a)] and more == 0
        assert rows[1][2] == "done (+2 repeats)" and [r[0] for r in rows] == ["1", "2"]
        s.finish()
        assert "finished: 2 of 3 trials done" in summary(s)


def test_threads_are_chosen_not_inherited(monkeypatch) -> None:
    """set_threads uses the given count, else NASFORGE_THREADS, else half the cores (1-8)."""
    before = torch.get_num_threads()
    try:
        assert set_threads(1) == 1 and torch.get_num_threads() == 1
        monkeypatch.setenv("NASFORGE_THREADS", "2")
        assert default_threads() == 2
        monkeypatch.delenv("NASFORGE_THREADS")
        assert 1 <= default_threads() <= 8
    finally:
        torch.set_num_threads(before)


def test_notes_are_recorded_in_order_and_shown_by_status(tmp_path: Path, capsys) -> None:
    """Notes of what a run did come back in order (and by source) and `status` prints them;
    notes that do not decode are a StoreError, not a crash."""
    from nasforge.errors import StoreError
    from nasforge.run.status import notes_table, print_status

    with Store.create(tmp_path, {"kind": "x", "objective": OBJECTIVE}) as s:
        s.add_note("crossmodel", "kept", "super-graph kept", speedup=2.5)
        s.add_note("other", "applied", "something else")
        assert [n["event"] for n in s.notes()] == ["kept", "applied"]
        assert [n["detail"] for n in s.notes("crossmodel")] == ["super-graph kept"]
        assert notes_table(s)[1][0] == ["crossmodel", "kept", "super-graph kept (speedup=2.5)"]
        s.finish()
    print_status(tmp_path)
    out = capsys.readouterr().out
    assert "notes" in out and "super-graph kept (speedup=2.5)" in out
    with Store.open(tmp_path, readonly=False) as s:
        s.set_meta("notes", "{not json")
        with pytest.raises(StoreError, match="notes"):
            s.notes()


def test_status_shows_where_each_trial_ran(tmp_path: Path) -> None:
    """A `where` column gives each trial's host and GPUs (and its share of a GPU); records
    without placements keep the table they had."""
    with Store.create(tmp_path / "a", {"kind": "x", "objective": OBJECTIVE}) as s:
        a = s.add_trial("a" * 16, {"w": 1})
        s.finish_trial(
            a,
            TrialOutcome(
                "done", {"acc": 0.9}, placement={"node": "n1", "devices": [1], "gpus": 0.5}
            ),
        )
        b = s.add_trial("b" * 16, {"w": 2})
        s.finish_trial(
            b, TrialOutcome("done", {"acc": 0.5}, placement={"node": "n2", "devices": []})
        )
        header, rows, _ = trial_table(s)
        col = header.index("where")
        assert [r[col] for r in rows] == ["n1 gpu 1 (x0.5)", "n2 cpu"]
    with Store.create(tmp_path / "b", {"kind": "x", "objective": OBJECTIVE}) as s:
        s.finish_trial(s.add_trial("a" * 16, {"w": 1}), TrialOutcome("done", {"acc": 0.9}))
        assert "where" not in trial_table(s)[0]


def test_trials_in_flight_of_a_killed_run_are_shown_interrupted(tmp_path: Path, capsys) -> None:
    """After kill -9, `nasforge status` shows the trials that were in flight as
    ``interrupted`` (as its header says of the run), not ``running``; they count as not done;
    while the writer lives they are ``running``."""
    from nasforge.run.status import print_status

    def alive() -> None:
        with Store.open(tmp_path) as s:
            assert [t.status for t in s.trials()] == ["done", "running", "running"]

    kill_writer_midway(tmp_path, alive)
    print_status(tmp_path)
    out = capsys.readouterr().out
    assert "interrupted: 1 of 4 trials done; resume with" in out
    assert out.count("interrupted") == 3 and "running" not in out
    with Store.open(tmp_path) as s:
        assert [t.status for t in s.trials()] == ["done", "interrupted", "interrupted"]
        assert s.counts() == {"done": 1, "interrupted": 2}
        assert [t.id for t in s.trials("interrupted")] == [2, 3] and not s.trials("running")
        assert s.trial(2).status == "interrupted"
    with Store.open(tmp_path, readonly=False) as w:  # a resuming writer sees what to restart
        assert [t.id for t in w.trials("running")] == [2, 3]


def test_status_names_the_record_format_and_the_nasforge_that_wrote_it(tmp_path: Path, capsys):
    """The line under the summary gives the format version and the writer's nasforge; a record
    created by another version names both."""
    import nasforge
    from nasforge.run.status import print_status

    with Store.create(tmp_path, {"kind": "x", "objective": OBJECTIVE}) as s:
        s.finish()
    print_status(tmp_path)
    second = capsys.readouterr().out.splitlines()[1]
    assert second == f"record format 2, written by nasforge {nasforge.__version__}"
    with Store.open(tmp_path, readonly=False) as s:
        s.set_meta("created_by", "0.1.9")
    print_status(tmp_path)
    second = capsys.readouterr().out.splitlines()[1]
    assert second == f"record format 2, written by nasforge 0.1.9, last by {nasforge.__version__}"


def test_status_at_100_columns_shows_the_whole_architecture_and_names_steps(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    """At 100 columns the architecture folds over lines instead of ending in `{"dep…`; the
    resource line says steps when the reports are steps (it always said epochs)."""
    from nasforge.run.status import print_status

    arch = {"depth": 3, "width_of_the_first_block": 64, "kernel_size_everywhere": 5, "op": "x"}
    with Store.create(tmp_path, {"kind": "x", "objective": OBJECTIVE}) as s:
        t = s.add_trial("a" * 16, arch)
        s.finish_trial(
            t, TrialOutcome("done", {"acc": 0.5}, [{"acc": 0.4, "step": 100}, {"step": 200}])
        )
        s.finish()
    monkeypatch.setenv("COLUMNS", "100")
    print_status(tmp_path)
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines() if "│" in line) <= 100
    flat = "".join(c for line in out.splitlines() for c in line if c not in "│┃ ")
    assert json.dumps(arch, separators=(",", ":"), sort_keys=True) in flat
    assert "2 reports (steps)" in out and "epochs" not in out


def test_cancelled_trials_do_not_count_and_failures_are_named(tmp_path):
    """`status` counts the trials that count toward n_trials: cancelled ones are listed apart
    (not counted) and a run whose counted trials all failed says so."""
    with Store.create(tmp_path / "a", {"kind": "multitrial", "objective": OBJECTIVE}) as s:
        s.set_plan("trials", 4)
        for i, status in enumerate(["done", "done", "cancelled", "cancelled"]):
            s.finish_trial(s.add_trial(f"{i:016x}", {"w": i}), TrialOutcome(status, {"acc": 0.5}))
        assert "2 of 4 trials done; 2 cancelled (not counted)" in summary(s)
        s.finish()
    with Store.create(tmp_path / "b", {"kind": "multitrial", "objective": OBJECTIVE}) as s:
        s.set_plan("trials", 3)
        for i in range(3):
            s.finish_trial(s.add_trial(f"{i:016x}", {"w": i}), TrialOutcome("failed", error="x"))
        assert "3 of 3 trials done (all 3 failed)" in summary(s)
        s.finish()


def test_a_nan_metric_of_a_damaged_record_is_shown_as_nan_and_not_ranked(
    tmp_path: Path, capsys
) -> None:
    """A metric stored as the JSON token NaN (a damaged or hand-edited record: nasforge
    writes null): `nasforge status` exits 0, shows it as nan, leaves that trial unranked,
    and ranks the others best first (a NaN made any order a valid sort)."""
    import sqlite3

    from nasforge.cli import main

    with Store.create(tmp_path, {"kind": "x", "objective": OBJECTIVE}) as s:
        for i, acc in enumerate((0.1, 0.2, 0.9, 0.5), 1):
            tid = s.add_trial(f"{i:016x}", {"w": i})
            s.finish_trial(tid, TrialOutcome("done", {"acc": acc}))
        s.finish()
    with sqlite3.connect(tmp_path / "run.db") as conn:
        conn.execute("""UPDATE trials SET metrics='{"acc": NaN}' WHERE id=1""")
    conn.close()
    assert main(["status", str(tmp_path)]) == 0
    rows = [line.split("│")[1:6] for line in capsys.readouterr().out.splitlines() if "│" in line]
    ranked = [(r[0].strip(), r[1].strip(), r[4].strip()) for r in rows]
    assert ranked == [("1", "3", "0.9"), ("2", "4", "0.5"), ("3", "2", "0.2"), ("-", "1", "nan")]
