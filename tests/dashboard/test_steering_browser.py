"""The trial log and the control panel in headless Chromium: a read-only `nasforge serve`
shows a failed trial's log beside its architecture and no control; one started with
--allow-control cancels one trial of a search running on the pool, then stops it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nasforge.run.store import Store
from tests.dashboard.conftest import ROOT, Server, wait_for
from tests.dashboard.test_steering import _log_record

pytest.importorskip("dash", reason="needs the dashboard extra: pip install 'nasforge[dashboard]'")
pytest.importorskip("selenium", reason="needs selenium (in the test extra)")
from selenium.webdriver.common.by import By  # noqa: E402


def _text(browser: Any, css: str) -> str:
    found = browser.find_elements(By.CSS_SELECTOR, css)
    return found[0].text if found else ""


def test_a_failed_trial_s_log_shows_beside_its_architecture(browser: Any, tmp_path: Path) -> None:
    """Opening a failed trial in the architecture tab shows its decisions and, beside them,
    its log with the traceback; a read-only dashboard shows no control panel."""
    ids = _log_record(tmp_path / "runs" / "logs")
    server = Server([tmp_path / "runs"], tmp_path)
    try:
        browser.get(server.url + "/run/runs/logs?tab=architecture")
        box = wait_for(browser, lambda b: b.find_element(By.ID, "arch-a"), "the trial box")
        box.clear()
        box.send_keys(str(ids["broken"]) + "\n")
        log = wait_for(
            browser,
            lambda b: "ValueError: broken on purpose" in _text(b, "#trial-log") and b,
            "the failed trial's log",
        )
        assert "trial of case broken says hello" in _text(log, "#trial-log")
        assert "case" in _text(browser, "#decision-view")  # the architecture beside it
        assert not browser.find_elements(By.ID, "nf-control-panel")
    finally:
        server.stop()


RUN_FILE = """
import time
from nasforge.space.search_space import Decision, SearchSpace

space = SearchSpace([Decision("d", "value", tuple(range(40)))])
strategy = "grid"
config = {{"n_trials": 40, "executor": "pool", "concurrency": 2, "directory": "{directory}",
          "progress": "off"}}


def evaluate(arch, report):
    print("trial", arch["d"], "starts")
    for epoch in range(600):
        time.sleep(0.05)
        report(float(arch["d"] + epoch))
    return float(arch["d"])
"""


def _statuses(directory: Path) -> dict[int, str]:
    try:
        with Store.open(directory, readonly=True) as store:
            return {t.id: t.status for t in store.trials(light=True)}
    except Exception:  # noqa: BLE001 - not created yet
        return {}


@pytest.mark.slow
def test_the_control_panel_cancels_a_trial_and_stops_a_running_search(
    browser: Any, tmp_path: Path
) -> None:
    """With --allow-control, typing a running trial's id and pressing "Cancel trial" cancels
    it (recorded cancelled, the search goes on); "Stop: cancel running trials" ends the search,
    recorded stopped, and `nasforge run` exits 0."""
    directory = tmp_path / "runs" / "live"
    run_file = tmp_path / "search.py"
    run_file.write_text(RUN_FILE.format(directory=directory))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NASFORGE_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "nasforge.cli", "run", str(run_file)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    server = None
    try:
        (tmp_path / "runs").mkdir()
        server = Server([tmp_path / "runs"], tmp_path, args=["--allow-control"])
        wait_for(
            browser,
            lambda b: list(_statuses(directory).values()).count("running") == 2,
            "two running trials",
            timeout=240,  # a pool search starts in seconds, minutes on a loaded machine
        )
        browser.get(server.url + "/run/runs/live")
        wait_for(browser, lambda b: b.find_element(By.ID, "nf-control-panel"), "the panel")
        box = browser.find_element(By.ID, "nf-control-trial")
        box.send_keys("1")
        browser.find_element(By.ID, "nf-control-cancel").click()
        wait_for(
            browser,
            lambda b: "cancel trial 1" in _text(b, "#nf-control-result"),
            "the panel's answer",
        )
        wait_for(browser, lambda b: _statuses(directory).get(1) == "cancelled", "trial 1 cancelled")
        assert _statuses(directory).get(2) == "running"  # the search goes on
        browser.find_element(By.ID, "nf-control-stop-cancel").click()
        out, _ = proc.communicate(timeout=90)
        assert proc.returncode == 0, out[-3000:]
    finally:
        if server is not None:
            server.stop()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with Store.open(directory, readonly=True) as store:
        assert store.state() == "stopped"
        notes = store.notes("control")
        assert "running" not in {t.status for t in store.trials(light=True)}
    cancel = next(n for n in notes if n["event"] == "cancel" and n["trial"] == 1)
    assert cancel["via"] == "dashboard"
    assert any(n["event"] == "stop" and n["via"] == "dashboard" for n in notes)
