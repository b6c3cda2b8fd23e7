"""The trial log and the control panel in headless Chromium: a read-only `nasforge serve`
shows a failed trial's log beside its architecture and no control; one started with
--allow-control steers only from a page opened at the address it printed (its control key),
asks the browser to confirm a stop (dismissed: nothing is asked of the run), cancels one
trial of a search running on the pool, then stops it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from nasforge.engine import Experiment
from nasforge.run.control import CONTROL
from nasforge.run.store import Store
from nasforge.space.search_space import Decision, SearchSpace
from tests.dashboard.conftest import ROOT, Server, wait_for
from tests.dashboard.records import SECRET, add_wide_trial, hostile_run, make_record
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
        # the architecture beside it (read through wait_for: the view may still re-render,
        # which makes an element read a moment earlier stale)
        wait_for(browser, lambda b: "case" in _text(b, "#decision-view"), "the decisions")
        assert not browser.find_elements(By.ID, "nf-control-panel")
    finally:
        server.stop()


def _confirm(browser: Any, accept: bool, says: str) -> None:
    """Answers the browser's confirm() dialog (it must ask something containing ``says``)."""
    alert = wait_for(browser, lambda b: b.switch_to.alert, "the confirmation dialog")
    assert says in alert.text, alert.text
    if accept:
        alert.accept()
    else:
        alert.dismiss()


def _open_with_key(browser: Any, server: Server, path: str) -> None:
    """Opens the address `nasforge serve` printed (its control key in it), waits until the
    page keeps the key in the browser's storage, then opens ``path`` of the dashboard."""
    assert server.control and f"control={server.control}" in server.printed, server.output
    browser.get(server.printed)
    wait_for(
        browser,
        lambda b: server.control in (b.execute_script(
            "return window.localStorage.getItem('control-key')") or ""),
        "the control key in the page's storage",
    )  # fmt: skip
    browser.get(server.url + path)


def _sleepy(arch: dict[str, Any], report: Any) -> float:
    time.sleep(0.5)
    return float(arch["d"])


def test_a_stop_asks_for_confirmation_and_a_dismissed_one_sends_nothing(
    browser: Any, tmp_path: Path
) -> None:
    """A page opened without the printed address holds no control key: it says so, and a
    confirmed stop reaches nothing. Opened from the printed address, "Stop: cancel running
    trials" opens a confirm() naming the loss; dismissed, no request reaches the run (no
    request file, no note, the search goes on). "Stop: let running trials finish", confirmed,
    stops the search, recorded stopped with a note via the dashboard."""
    directory = tmp_path / "runs" / "live"
    space = SearchSpace([Decision("d", "value", tuple(range(400)))])
    exp = Experiment(space, _sleepy, "grid", directory=directory, executor="inprocess",
                     progress="off")  # fmt: skip
    thread = threading.Thread(target=exp.run, daemon=True)
    thread.start()
    server = None
    try:
        wait_for(browser, lambda b: _statuses(directory), "the first trial", timeout=120)
        server = Server([tmp_path / "runs"], tmp_path, args=["--allow-control"])
        # a page opened without the printed address has no control key: it says so, and a
        # confirmed stop reaches nothing
        browser.get(server.url + "/run/runs/live")
        wait_for(browser, lambda b: "no control key" in _text(b, "#control-key-note"), "the note")
        browser.find_element(By.ID, "nf-control-stop-finish-button").click()
        _confirm(browser, accept=True, says="running trials finish")
        time.sleep(2)  # a request, had one been sent, is a file within this time
        assert not list((directory / CONTROL).glob("*.json")) and thread.is_alive()
        _open_with_key(browser, server, "/run/runs/live")
        wait_for(browser, lambda b: b.find_element(By.ID, "nf-control-panel"), "the panel")
        wait_for(browser, lambda b: _text(b, "#control-key-note") == "" and b, "no note")
        browser.find_element(By.ID, "nf-control-stop-cancel-button").click()
        _confirm(browser, accept=False, says="cancelled")
        # a request, had one been sent, is taken by the run with the finish request sent
        # after it, oldest first, and recorded: the notes at the end hold the finish only
        assert not list((directory / CONTROL).glob("*.json"))
        assert thread.is_alive() and _text(browser, "#nf-control-result") == ""
        with Store.open(directory, readonly=True) as store:
            assert not store.notes("control")
        browser.find_element(By.ID, "nf-control-stop-finish-button").click()
        _confirm(browser, accept=True, says="running trials finish")
        wait_for(browser, lambda b: "to stop" in _text(b, "#nf-control-result"), "the answer")
        thread.join(60)
        assert not thread.is_alive()
    finally:
        if server is not None:
            server.stop()
        if thread.is_alive():
            from nasforge.run.control import stop

            stop(directory, "cancel")
            thread.join(60)
    with Store.open(directory, readonly=True) as store:
        assert store.state() == "stopped"
        notes = store.notes("control")
    assert [(n["event"], n["mode"], n["via"]) for n in notes] == [("stop", "finish", "dashboard")]


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
    """With --allow-control, typing a running trial's id and pressing "Cancel trial" (and
    confirming) cancels it (recorded cancelled, the search goes on); "Stop: cancel running
    trials", confirmed, ends the search, recorded stopped, and `nasforge run` exits 0."""
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
        _open_with_key(browser, server, "/run/runs/live")
        wait_for(browser, lambda b: b.find_element(By.ID, "nf-control-panel"), "the panel")
        box = browser.find_element(By.ID, "nf-control-trial")
        box.send_keys("1")
        browser.find_element(By.ID, "nf-control-cancel-button").click()
        _confirm(browser, accept=True, says="Cancel the trial")
        wait_for(
            browser,
            lambda b: "cancel trial 1" in _text(b, "#nf-control-result"),
            "the panel's answer",
        )
        wait_for(browser, lambda b: _statuses(directory).get(1) == "cancelled", "trial 1 cancelled")
        assert _statuses(directory).get(2) == "running"  # the search goes on
        browser.find_element(By.ID, "nf-control-stop-cancel-button").click()
        _confirm(browser, accept=True, says="cancelled")
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


def test_a_log_that_is_a_link_or_a_fifo_shows_a_refusal_and_the_page_goes_on(
    browser: Any, tmp_path: Path
) -> None:
    """In the architecture tab, a trial whose log is a link to a secret file of the server's
    user shows the refusal and not the secret; one whose log is a FIFO shows the refusal
    (the server does not hang); an honest log still shows after them."""
    hostile_run(tmp_path, ["secret", "fifo", "honest"])
    server = Server([tmp_path / "runs"], tmp_path)
    try:
        browser.get(server.url + "/run/runs/hostile?tab=architecture")
        for trial, says in ((1, "is a symbolic link"), (2, "is a FIFO"), (3, "an honest log")):
            box = wait_for(browser, lambda b: b.find_element(By.ID, "arch-a"), "the trial box")
            box.clear()
            box.send_keys(str(trial) + "\n")
            wait_for(browser, lambda b, says=says: says in _text(b, "#arch-log"), f"log {trial}")
            assert SECRET not in browser.page_source
    finally:
        server.stop()


def test_a_trial_of_20001_metrics_shows_100_metric_columns(browser: Any, tmp_path: Path) -> None:
    """The trial table of a run with a trial of 20,001 metrics shows 100 metric columns, the
    objective first, and says how many metrics there are."""
    make_record(tmp_path / "runs" / "wide", n=2)
    add_wide_trial(tmp_path / "runs" / "wide", 20_000)
    server = Server([tmp_path / "runs"], tmp_path)
    try:
        browser.get(server.url + "/run/runs/wide")
        count = wait_for(
            browser, lambda b: "metrics shown" in _text(b, "#trial-count") and b, "the count"
        )
        assert "the first 100 of 20002 metrics shown" in _text(count, "#trial-count")
        heads = browser.find_elements(By.CSS_SELECTOR, "#trial-table th[data-dash-column^='m:']")
        columns = list(dict.fromkeys(h.get_attribute("data-dash-column") for h in heads))
        assert len(columns) == 100 and columns[0] == "m:accuracy", columns[:3]
    finally:
        server.stop()


def test_the_overview_shows_recorded_working_time_in_chromium(browser: Any, tmp_path: Path) -> None:
    """The overview's durations, as Chromium shows them, are the time each run worked: not
    stretched by a copy made (or a read) 15 minutes later, nor by 15 idle minutes before a
    resume (issue 50, item 6)."""
    import shutil

    from nasforge.run.records import TrialOutcome
    from tests.run._kinds import MinimalRun

    class _Quick(MinimalRun):
        kind = "test-quick-browser"

        def _execute(self, store: Store, resume: bool) -> None:
            store.record_trial(f"{int(resume):016d}", {"w": int(resume)},
                               TrialOutcome("done", {"accuracy": 1.0}))  # fmt: skip

    runs = tmp_path / "runs"
    _Quick(runs / "worked").run()
    shutil.copytree(runs / "worked", runs / "copied")
    later = time.time() + 900  # as if copied, or read by another tool, 15 minutes later
    os.utime(runs / "copied" / "run.db", (later, later))
    _Quick(runs / "resumed").run()
    with Store.open(runs / "resumed", readonly=False) as store:  # created 15 idle min ago
        store.set_meta("created", repr(float(store.get_meta("created") or 0) - 900))
    _Quick(runs / "resumed").run(resume=True)
    server = Server([runs], tmp_path)
    try:
        browser.get(server.url + "/")
        rows = wait_for(
            browser,
            lambda b: (
                len(found := b.find_elements(By.CSS_SELECTOR, "#overview-table tr.nf-run")) == 3
                and found
            ),
            "the three runs",
        )
        durations = {r.find_elements(By.TAG_NAME, "td")[0].text: r.find_elements(
            By.TAG_NAME, "td")[-1].text for r in rows}  # fmt: skip
        assert set(durations) == {"runs/worked", "runs/copied", "runs/resumed"}, durations
        for name, shown in durations.items():  # seconds, as fmt_seconds writes them ("4.2s")
            assert shown.endswith("s") and "m" not in shown and "h" not in shown, (name, shown)
    finally:
        server.stop()
