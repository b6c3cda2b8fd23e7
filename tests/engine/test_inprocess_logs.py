"""The in-process executor's trial logs (issue 52, item 3: the engine loop as light as
Optuna's): every trial is captured into one scratch file rewritten in place, a trial that
printed nothing and did not fail keeps no log file, ``nasforge logs`` says so, ``--follow``
shows a running in-process trial live, and the text of a trial its engine was killed in is
kept."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

from nasforge.cli import main
from nasforge.engine import Experiment
from nasforge.run.trial_logs import SCRATCH, ScratchLog, finish_log, shown_log, trial_log
from nasforge.space.search_space import Decision, SearchSpace
from tests.runwait import wait_until

ROOT = Path(__file__).resolve().parents[2]


def _evaluate(arch, report) -> float:
    """Prints for x = 1, raises (printing nothing) for x = 2, is silent otherwise."""
    if arch["x"] == 1:
        print("x is one")
        os.write(2, b"and C-level output too\n")
    if arch["x"] == 2:
        raise ValueError("two is broken on purpose")
    return float(arch["x"])


def test_a_silent_in_process_trial_keeps_no_log_file_and_logs_says_so(tmp_path, capsys):
    exp = Experiment(
        SearchSpace([Decision("x", "value", (0, 1, 2, 3))]), _evaluate, "grid",
        directory=tmp_path / "run", n_trials=4, executor="inprocess", progress="off",
    )  # fmt: skip
    exp.run()
    by_x = {t.arch["x"]: t for t in exp.trials()}
    logs = tmp_path / "run" / "logs"
    loud, broken = trial_log(exp.directory, by_x[1].id), trial_log(exp.directory, by_x[2].id)
    text = loud.read_text()
    assert text.startswith(f"--- trial {by_x[1].id}: pid {os.getpid()}")
    assert "x is one\n" in text and "and C-level output too\n" in text
    assert f"--- trial {by_x[1].id}: done after" in text  # the footer
    assert "ValueError: two is broken on purpose" in broken.read_text()  # a failure keeps one
    for x in (0, 3):
        assert not trial_log(exp.directory, by_x[x].id).exists()
    assert sorted(p.name for p in logs.iterdir()) == sorted(["run.log", loud.name, broken.name])
    capsys.readouterr()
    assert main(["logs", str(exp.directory), str(by_x[3].id)]) == 0
    assert capsys.readouterr().out.startswith(f"trial {by_x[3].id} printed nothing: done after")
    assert main(["logs", str(exp.directory), str(by_x[1].id)]) == 0
    assert "x is one" in capsys.readouterr().out


def test_the_scratch_log_is_rewritten_in_place_and_dropped_text_is_not_shown(tmp_path):
    scratch = ScratchLog(tmp_path / "logs")
    with scratch.captured(1):
        print("a long line of the first trial " * 10)
    assert "a long line" in scratch.output()
    with scratch.captured(2):
        pass
    assert scratch.output() == ""
    assert Path(scratch.path).read_text().startswith("--- trial 2: pid ")
    assert "a long line" not in Path(scratch.path).read_text()
    assert shown_log(tmp_path, 2) == Path(scratch.path)  # a running trial: the scratch file
    assert shown_log(tmp_path, 1) == trial_log(tmp_path, 1)  # another: its (missing) log
    scratch.close()
    assert not Path(scratch.path).exists()


def test_the_text_of_a_trial_its_engine_was_killed_in_is_kept(tmp_path):
    """The scratch file an engine killed during trial 7 left: its text goes to trial 7's log
    before the next run captures anything, and the rerun's text and footer follow it."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / SCRATCH).write_text("--- trial 7: pid 1 on host\nthe first attempt printed\n")
    scratch = ScratchLog(logs)
    with scratch.captured(7):
        print("the second attempt printed")
    result = SimpleNamespace(status="done", duration=0.5, placement=None, error=None)
    finish_log(trial_log(tmp_path, 7), 7, result, scratch.output())
    scratch.close()
    text = trial_log(tmp_path, 7).read_text()
    first, second = text.index("the first attempt"), text.index("the second attempt")
    assert first < second < text.index("--- trial 7: done after 0.50 s")


def test_a_planted_link_in_place_of_the_scratch_log_is_never_written_through(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    target = tmp_path / "theirs.txt"
    target.write_text("theirs\n")
    os.symlink(target, logs / SCRATCH)
    scratch = ScratchLog(logs)
    with scratch.captured(1):
        print("mine")
    assert target.read_text() == "theirs\n" and "mine" in scratch.output()
    scratch.close()


RUN_FILE = """
import time
from pathlib import Path
from nasforge.space.search_space import Decision, SearchSpace

space = SearchSpace([Decision("x", "value", (0,))])
strategy = "grid"
config = {{"n_trials": 1, "executor": "inprocess", "directory": "{run}", "progress": "off"}}


def evaluate(arch, report):
    print("the trial has started", flush=True)
    while not Path("{release}").exists():
        time.sleep(0.05)
    print("the trial ends")
    return 1.0
"""


def test_follow_shows_a_running_in_process_trial_as_it_prints(tmp_path):
    run, release = tmp_path / "run", tmp_path / "release"
    (tmp_path / "space.py").write_text(textwrap.dedent(RUN_FILE.format(run=run, release=release)))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    search = subprocess.Popen(
        [sys.executable, "-m", "nasforge.cli", "run", str(tmp_path / "space.py")],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    follow = None
    try:
        assert wait_until(lambda: shown_log(run, 1).name == SCRATCH, 60, poll=0.1), (
            "the trial never started in-process"
        )
        out = tmp_path / "follow.out"
        with open(out, "w") as sink:
            follow = subprocess.Popen(
                [sys.executable, "-m", "nasforge.cli", "logs", str(run), "1", "--follow"],
                env=env, stdout=sink, stderr=subprocess.STDOUT,
            )  # fmt: skip
        # shown while the trial still runs (it waits for the release file)
        assert wait_until(lambda: "the trial has started" in out.read_text(), 30, poll=0.1)
        release.touch()
        assert follow.wait(timeout=30) == 0
        text = out.read_text()
        assert text.count("the trial has started") == 1 and "the trial ends" in text
        assert search.wait(timeout=60) == 0, search.stderr.read() if search.stderr else ""
    finally:
        release.touch()
        for proc in (search, follow):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
