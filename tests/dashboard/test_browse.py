"""The dashboard's issue-37 views in headless Chromium, over small records written through
the Store (no training, so the module starts in seconds): run addresses that carry the shown
name, the formatted trial table with its rung, the summary's stopper and resource spent, the
progress tab of a multi-trial run, and an overview that survives one damaged trial row."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nasforge.run.results import rank_trials
from nasforge.run.store import Store
from tests.dashboard.conftest import Server, wait_for
from tests.dashboard.records import make_record
from tests.dashboard.test_hardening import _pruned_record

pytest.importorskip("dash", reason="needs the dashboard extra: pip install 'nasforge[dashboard]'")
pytest.importorskip("selenium", reason="needs selenium (in the test extra)")
from selenium.webdriver.common.by import By  # noqa: E402


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    """Returns a server over ``runs/``: a plain run, a run with a median stopper and pruned
    trials, and a run one of whose trial rows holds a text metric."""
    base = tmp_path_factory.mktemp("browse")
    runs = base / "runs"
    make_record(runs / "plain", n=24)
    _pruned_record(runs / "stopped")
    make_record(runs / "damaged", n=6)
    with sqlite3.connect(runs / "damaged" / "run.db") as conn:
        conn.execute("""UPDATE trials SET metrics='{"accuracy": "high"}' WHERE id=3""")
    conn.close()
    srv = Server([runs], base)
    try:
        yield srv, runs
    finally:
        srv.stop()


def _texts(browser: Any, css: str) -> list[str]:
    return [e.text for e in browser.find_elements(By.CSS_SELECTOR, css)]


def test_a_damaged_row_spares_the_overview_and_addresses_carry_the_shown_name(
    browser: Any, small: tuple[Server, Path]
) -> None:
    """The overview lists the two sound runs and names the damaged run's bad row; each run's
    link is /run/<the name shown>, typing that name opens the run, and the old
    /run/0/<name> address still does."""
    server, _ = small
    browser.get(server.url + "/")
    rows = wait_for(
        browser, lambda b: len(_texts(b, "tr.nf-run")) == 2 and _texts(b, "tr.nf-run"), "two runs"
    )
    assert {r.split()[0] for r in rows} == {"runs/plain", "runs/stopped"}
    problems = " ".join(_texts(browser, ".nf-problem"))
    # the store's reader names the row, the column and the metric (the dashboard shows it)
    assert "trials row 3" in problems and "metric 'accuracy'" in problems and "str" in problems
    links = wait_for(  # read at once: a live update may replace the rows meanwhile
        browser,
        lambda b: {
            e.text: e.get_attribute("href") for e in b.find_elements(By.CSS_SELECTOR, "tr.nf-run a")
        },
        "the run links",
    )

    assert links["runs/plain"] == server.url + "/run/runs/plain"
    for path in ("/run/runs/plain", "/run/0/runs/plain"):
        browser.get(server.url + path)
        wait_for(browser, lambda b: _texts(b, "#trial-count") == ["24 trials"], f"{path}'s table")
        assert _texts(browser, "h3")[0] == "runs/plain"


def test_the_trial_table_shows_formatted_values_and_the_rung(
    browser: Any, small: tuple[Server, Path]
) -> None:
    """Metric cells show 4 significant digits (the best first), and the rung column the
    reports each trained trial reached."""
    server, runs = small
    with Store.open(runs / "plain") as store:
        best = rank_trials(store.trials(), "accuracy", "max")[0]
    browser.get(server.url + "/run/runs/plain")
    css = '#trial-table td[data-dash-column="m:accuracy"]'
    cells = wait_for(browser, lambda b: len(_texts(b, css)) == 20 and _texts(b, css), "20 rows")
    assert cells[0] == f"{best.metrics['accuracy']:.4g}"
    assert all(len(c.replace("0.", "").lstrip("0")) <= 4 for c in cells if c)
    rungs = _texts(browser, '#trial-table td[data-dash-column="rung"]')
    assert "2" in rungs


def test_the_summary_names_the_stopper_and_spent_and_progress_is_drawn(
    browser: Any, small: tuple[Server, Path]
) -> None:
    """A run with a stopper shows it and the resource spent (pruned share included) in its
    summary line; its progress tab, with no progress rows, draws trials and reports over
    time; its best trial is a finished one, not the pruned one-epoch 0.99."""
    server, _ = small
    browser.get(server.url + "/run/runs/stopped")
    stopper = wait_for(browser, lambda b: _texts(b, "#run-stopper"), "the stopper")
    assert "median" in stopper[0] and "warmup_steps 1" in stopper[0]
    assert "14 reports (done 12, pruned 2)" in _texts(browser, "#run-spent")[0]
    assert "best accuracy 0.5 " in _texts(browser, "#run-summary")[0]
    browser.get(server.url + "/run/runs/stopped?tab=progress")
    wait_for(
        browser,
        lambda b: b.find_elements(By.CSS_SELECTOR, "#progress-reports .main-svg"),
        "the reports chart",
    )
    assert browser.find_elements(By.CSS_SELECTOR, "#progress-trials .main-svg")
