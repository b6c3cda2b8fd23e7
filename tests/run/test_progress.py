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
