"""A kill -9 of an in-process search loses at most the trial in flight: every trial finished
before it is in the record with its metrics, its tell event and its log's footer (the engine
writes each finished trial in one transaction, with the run's elapsed time)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nasforge.run.store import Store
from nasforge.run.trial_logs import read_log, trial_log

ROOT = Path(__file__).resolve().parent.parent.parent
#: the trial whose evaluator kills its own process (SIGKILL: nothing is flushed or closed)
KILLED_AT = 25

SCRIPT = textwrap.dedent(
    f"""
    import os, signal, sys
    from nasforge.engine import Experiment
    from nasforge.space.search_space import Decision, SearchSpace

    calls = []

    def evaluate(arch, report):
        calls.append(1)
        if len(calls) == {KILLED_AT}:
            os.kill(os.getpid(), signal.SIGKILL)
        print("trained", len(calls))
        return float(len(calls))

    space = SearchSpace([Decision(f"d{{i}}", "value", (0, 1, 2, 3)) for i in range(8)])
    Experiment(space, evaluate, "random", directory=sys.argv[1], n_trials=60,
               executor="inprocess", progress="off").run()
    """
)


@pytest.mark.slow
def test_kill_9_loses_only_the_trial_in_flight(tmp_path: Path) -> None:
    """Trials finished before a SIGKILL are all recorded, with tell events and log footers."""
    run = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(run)], env=env, timeout=120)
    assert proc.returncode == -signal.SIGKILL
    with Store.open(run) as store:
        trials = store.trials()
        events = store.events()
        elapsed = float(store.get_meta("elapsed", "0") or 0)
    done = [t for t in trials if t.status == "done"]
    assert [t.metrics["default"] for t in done] == [float(i) for i in range(1, KILLED_AT)]
    assert [t.id for t in trials if t.status != "done"] == [KILLED_AT]  # the one in flight
    assert trials[-1].status == "interrupted"
    assert [e for e in events if e[0] == "tell"] == [("tell", t.id) for t in done]
    assert elapsed > 0  # written with the last finished trial
    for t in done:
        text = read_log(trial_log(run, t.id))
        assert f"trained {t.id}\n" in text and f"--- trial {t.id}: done after" in text
