"""Tests of the progress line."""

import logging

from nasforge.run.progress import Progress


def test_line_shows_counts_best_and_eta():
    """The line names done/total, running, failed, skipped duplicates, best and the ETA."""
    p = Progress(total=10, time_budget=None, mode="log")
    line = p.line(done=4, running=2, failed=1, best=0.875, elapsed=40.0, cached=3)
    assert "trials 4/10 done, 2 running, 1 failed, 3 duplicates skipped" in line
    assert "best 0.875" in line and "ETA 1m00s" in line


def test_time_budget_caps_the_eta():
    """With a time budget the ETA never exceeds the time left."""
    p = Progress(total=100, time_budget=30.0, mode="log")
    assert "ETA 0m20s" in p.line(1, 0, 0, None, 10.0)


def test_log_mode_logs(caplog):
    """In log mode an update goes to the nasforge.engine logger."""
    p = Progress(total=None, time_budget=None, mode="log")
    with caplog.at_level(logging.INFO, logger="nasforge.engine"):
        p.update(1, 0, 0, None, 1.0, force=True)
    assert "trials 1 done" in caplog.text


def test_numbers_in_tables_read_as_numbers() -> None:
    """A parameter count shows as an integer, never ``1.5703e+05`` or ``43570.0``; a fraction
    keeps 5 significant digits; NaN, infinity and None are readable."""
    from nasforge.run.progress import fmt_number

    assert [fmt_number(v) for v in (157030.0, 43570.0, 157030, 0.123456, 123456.7)] == [
        "157030", "43570", "157030", "0.12346", "123457",
    ]  # fmt: skip
    assert [fmt_number(v) for v in (float("nan"), float("inf"), None, -2.5)] == [
        "nan", "inf", "", "-2.5",
    ]  # fmt: skip


def test_a_script_that_configured_no_logging_still_shows_progress(tmp_path) -> None:
    """`python my_search.py > out` (no logging configured, no terminal) shows the search's
    progress lines and warnings on standard error, as `nasforge run` does; a program that
    configured logging at WARNING sees its warnings once and no progress lines."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "my_search.py"
    script.write_text(
        "import sys, logging\n"
        "from nasforge.engine import Experiment\n"
        "from nasforge.space.search_space import Decision, SearchSpace\n"
        "if sys.argv[1] == 'quiet':\n"
        "    logging.basicConfig(level=logging.WARNING)\n"
        "space = SearchSpace([Decision('d', 'value', (1, 2, 3))])\n"
        "def evaluate(arch, report):\n"
        "    if arch['d'] == 2:\n"
        "        raise RuntimeError('boom at d=2')\n"
        "    return float(arch['d'])\n"
        "Experiment(space, evaluate, 'grid', n_trials=3,\n"
        "           executor='inprocess', directory=sys.argv[2]).run()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    for mode, shown in (("plain", True), ("quiet", False)):
        run = subprocess.run([sys.executable, str(script), mode, str(tmp_path / mode)],
                             capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
        assert run.returncode == 0, run.stderr[-2000:]
        assert ("trials 3/3 done" in run.stderr) is shown, run.stderr[-2000:]
        # the failed trial's warning shows once either way: through nasforge's own handler
        # (the run's log handler kept Python's last resort from printing it) or the program's
        assert run.stderr.count("trial 2 failed:") == 1, run.stderr[-2000:]
        assert "boom at d=2" in run.stderr
