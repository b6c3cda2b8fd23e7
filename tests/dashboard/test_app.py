"""The dashboard in a real browser: `nasforge serve` over real runs of every kind, driven by
headless Chromium (one session for the module)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from nasforge.run.results import pareto_front, rank_trials
from nasforge.run.store import Store
from tests.dashboard.conftest import Server, _env, screenshot, wait_for

pytest.importorskip("dash", reason="needs the dashboard extra: pip install 'nasforge[dashboard]'")
pytest.importorskip("selenium", reason="needs selenium (in the test extra)")
from selenium.webdriver.common.by import By  # noqa: E402


def _get(browser: Any, server: Server, path: str) -> None:
    browser.get(server.url + path)


def _all(browser: Any, css: str) -> list[Any]:
    return browser.find_elements(By.CSS_SELECTOR, css)


def _text(browser: Any, css: str) -> str:
    found = _all(browser, css)
    return found[0].text if found else ""


def _texts(browser: Any, css: str) -> list[str]:
    """Returns the texts of the elements (read at once: a live update may replace them, and
    then they are read again)."""
    from selenium.common.exceptions import StaleElementReferenceException

    for _ in range(20):
        try:
            return [e.text for e in _all(browser, css)]
        except StaleElementReferenceException:  # re-rendered between finding and reading
            time.sleep(0.1)
    return [e.text for e in _all(browser, css)]


def _digest(directory: Path) -> str:
    """Returns a digest of the run's files; SQLite's shared-memory index and an empty WAL,
    which any reader may create beside run.db, are left out."""
    h = hashlib.sha256()
    for p in sorted(directory.rglob("*")):
        side = p.name.endswith("-shm") or (p.name.endswith("-wal") and not p.stat().st_size)
        if p.is_file() and not side:
            h.update(p.name.encode() + p.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def before(runs: Path) -> dict[str, str]:
    """Returns a digest of each finished run's files, taken before the server starts."""
    return {d.name: _digest(d) for d in runs.iterdir() if d.is_dir()}


@pytest.fixture(scope="module")
def served(before: dict[str, str], server: Server) -> Server:
    """Returns the server, started after the digests were taken."""
    return server


def test_overview_lists_every_run_and_explains_bad_directories(
    browser: Any, served: Server, runs: Path
) -> None:
    """The overview lists the four runs with kind, state and best value, and shows a clear
    message for a corrupt store and for a directory that is not a run."""
    _get(browser, served, "/")
    rows = wait_for(
        browser,
        lambda b: len(_all(b, "tr.nf-run")) == 4 and _texts(b, "tr.nf-run"),
        "four run rows",
    )
    text = {r.split()[0]: r for r in rows}
    assert set(text) == {f"runs/{k}" for k in ("darts", "multitrial", "ofa", "pipeline")}
    for name, kind in [
        ("darts", "oneshot"),
        ("multitrial", "multitrial"),
        ("ofa", "ofa"),
        ("pipeline", "pipeline"),
    ]:
        assert f" {kind} " in text[f"runs/{name}"] and "finished" in text[f"runs/{name}"]
    with Store.open(runs / "multitrial") as store:
        best = rank_trials(store.trials(), "accuracy", "max")[0]
    assert f"accuracy {best.metrics['accuracy']:.5g} (trial {best.id})" in text["runs/multitrial"]
    problems = " ".join(_texts(browser, ".nf-problem"))
    assert "corrupt/run.db is not a readable run record" in problems
    assert "not_a_run is not a nasforge run directory" in problems
    screenshot(browser, "overview")


def test_trial_table_shows_every_trial_best_first(browser: Any, served: Server, runs: Path) -> None:
    """The trial table counts every trial, shows a page of 20 rows and then the rest, and its
    first row (sorted by the objective) holds the best value."""
    with Store.open(runs / "multitrial") as store:
        trials = store.trials()
    assert len(trials) > 20  # cached repeats are trials too: two pages
    best = rank_trials(trials, "accuracy", "max")[0]
    _get(browser, served, "/run/0/runs/multitrial")
    wait_for(browser, lambda b: _text(b, "#trial-count") == f"{len(trials)} trials", "the count")
    css = '#trial-table td[data-dash-column="m:accuracy"]'
    cells = wait_for(browser, lambda b: len(_all(b, css)) == 20 and _texts(b, css), "20 rows")
    assert cells[0] == f"{best.metrics['accuracy']:.4g}"  # shown to 4 significant digits
    first = [float(c) for c in cells]
    assert first == sorted(first, reverse=True)
    screenshot(browser, "trials")
    wait_for(browser, lambda b: _all(b, "#trial-table button.next-page")[0].click() or 1, "next")
    rest = wait_for(
        browser,
        lambda b: len(_all(b, css)) == len(trials) - 20 and _texts(b, css),
        "the second page",
    )
    assert max(float(c) for c in rest) <= first[-1]


def test_clicking_a_row_shows_its_architecture_and_the_difference(
    browser: Any, served: Server, runs: Path
) -> None:
    """A click on a trial's row opens the architecture tab with that trial's decisions, and
    the difference from the trial picked before."""
    _get(browser, served, "/run/0/runs/multitrial")

    def click_last_row(b: Any) -> int:
        cells = _all(b, '#trial-table td[data-dash-column="id"]')
        picked = int(cells[-1].text)
        cells[-1].click()
        return picked

    picked = wait_for(browser, click_last_row, "a row to click")
    head = wait_for(browser, lambda b: _text(b, "#arch-view h4"), "the architecture view")
    assert head.startswith(f"Trial {picked}:")
    with Store.open(runs / "multitrial") as store:
        arch = store.trial(picked).arch
        best = rank_trials(store.trials(), "accuracy", "max")[0]
        other = store.trial(best.id).arch
    rows = wait_for(browser, lambda b: _texts(b, "#decision-view tbody tr"), "decision rows")
    shown = dict(r.split(" ", 1) for r in rows)
    assert shown == {k: str(v) for k, v in arch.items()}
    diff = wait_for(browser, lambda b: _texts(b, "#diff-table tbody tr"), "the difference")
    n_diff = sum(arch[k] != other[k] for k in arch)
    assert sum("differs" in r for r in diff) == n_diff
    screenshot(browser, "architecture")


def test_best_so_far_chart_draws_a_point_per_scored_trial(
    browser: Any, served: Server, runs: Path
) -> None:
    """The charts tab draws one point per scored trial and the best-so-far line."""
    with Store.open(runs / "multitrial") as store:
        n = sum(1 for t in store.trials() if t.metrics and t.status != "failed")
    _get(browser, served, "/run/0/runs/multitrial?tab=charts")
    css = "#best-graph .scatterlayer .trace:first-child path.point"
    wait_for(browser, lambda b: len(_all(b, css)) == n, f"{n} points")
    assert _all(browser, "#best-graph .scatterlayer .trace path.js-line")
    wait_for(browser, lambda b: _all(b, "#curve-graph .scatterlayer .trace"), "metric curves")
    screenshot(browser, "charts")


def test_pareto_page_shows_the_front(browser: Any, served: Server, runs: Path) -> None:
    """The Pareto tab lists exactly the non-dominated trials (accuracy up, params down) and
    draws every trial."""
    with Store.open(runs / "multitrial") as store:
        trials = store.trials()
    front = pareto_front(trials, ("accuracy", "max"), ("params", "min"))
    _get(browser, served, "/run/0/runs/multitrial?tab=pareto")
    rows = wait_for(browser, lambda b: _texts(b, "#front-table tbody tr"), "the front table")
    assert sorted(int(r.split()[0]) for r in rows) == sorted(t.id for t in front)
    wait_for(browser, lambda b: _all(b, "#pareto-graph path.point"), "points")
    screenshot(browser, "pareto")
    _get(browser, served, "/run/0/runs/ofa?tab=pareto")  # accuracy against cost, per target
    rows = wait_for(browser, lambda b: _texts(b, "#front-table tbody tr"), "the OFA front")
    with Store.open(runs / "ofa") as store:
        ofa = store.trials()
    targets = {t.metrics["target"] for t in ofa}
    assert len(targets) == 2
    per_target = [
        f.id
        for g in targets
        for f in pareto_front([t for t in ofa if t.metrics["target"] == g],
                              ("accuracy", "max"), ("cost", "min"))
    ]  # fmt: skip
    assert sorted(int(r.split()[0]) for r in rows) == sorted(per_target)
    assert _texts(browser, "#front-table th")[-1] == "target"  # coloured by target
    screenshot(browser, "pareto_ofa")


def test_importance_ranks_the_decisions(browser: Any, served: Server) -> None:
    """The importance tab draws one bar per decision that varies among the trials."""
    _get(browser, served, "/run/0/runs/multitrial?tab=importance")
    wait_for(browser, lambda b: len(_all(b, "#importance-graph .barlayer .point")) == 3, "3 bars")
    screenshot(browser, "importance")


def test_kind_views_come_from_the_record(browser: Any, served: Server, runs: Path) -> None:
    """The one-shot run shows its losses and its architecture per epoch, the pipeline run its
    loss per step and its cache hit rate per stage, from the same generic views; a click on a
    tab shows the once-for-all run's config."""
    _get(browser, served, "/run/0/runs/darts?tab=progress")
    wait_for(browser, lambda b: len(_all(b, "#progress-train_loss path.point")) == 2, "losses")
    rows = wait_for(browser, lambda b: _texts(b, "#decision-table tbody tr"), "the decisions")
    assert len(rows) == 2
    screenshot(browser, "oneshot_progress")
    _get(browser, served, "/run/0/runs/pipeline?tab=progress")
    wait_for(browser, lambda b: len(_all(b, "#progress-loss path.point")) == 8, "8 steps")
    with Store.open(runs / "pipeline") as store:
        rates = store.artifacts()["supernet"]["meta"]["cache_hit_rate"]
    wait_for(browser, lambda b: "supernet: cache_hit_rate" in b.page_source, "the hit rate")
    wait_for(browser, lambda b: len(_all(b, ".barlayer .point")) == len(rates), "a bar per stage")
    screenshot(browser, "pipeline_progress")
    _get(browser, served, "/run/0/runs/ofa")  # then a click on the Config tab
    wait_for(browser, lambda b: _all(b, "#tab-config")[0].click() or 1, "the Config tab")
    assert '"kind": "ofa"' in wait_for(browser, lambda b: _text(b, "#config-json"), "config")


def test_paths_outside_the_served_directories_are_refused(browser: Any, served: Server) -> None:
    """A run key that climbs out of the roots, names no root, or points at a corrupt store
    shows a message instead of a page or a stack trace."""
    cases = {
        "/run/0/runs%2F..%2F..%2F..%2Fetc": "refused",
        "/run/7/runs/multitrial": "names no served run",
        "/run/0/runs/corrupt": "not a readable run record",
    }
    for path, expected in cases.items():
        _get(browser, served, path)
        text = wait_for(browser, lambda b: _text(b, ".nf-message"), f"a message for {path}")
        assert expected in text, (path, text)
        assert "Traceback" not in browser.page_source


def test_a_page_updates_while_a_run_adds_trials(browser: Any, served: Server, runs: Path) -> None:
    """A run started while the page is open: its trial count grows in the page without a
    reload, and its state turns from running to finished."""
    live = runs / "live"
    proc = subprocess.Popen(
        [sys.executable, "-m", "nasforge.cli", "run", "slow.py", "--dir", str(live)],
        cwd=runs.parent,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not (live / "run.db").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        _get(browser, served, "/run/0/runs/live")
        assert wait_for(browser, lambda b: _text(b, "#run-state"), "the state") == "running"
        browser.execute_script("window.nfMarker = 1")  # gone if the page reloads
        seen: set[str] = set()

        def finished(b: Any) -> bool:
            seen.add(_text(b, "#trial-count"))
            state = _text(b, "#run-state")
            if state == "running" and len(seen) == 3:
                screenshot(b, "live")  # mid-run
            return state == "finished"

        wait_for(browser, finished, "the run to finish", timeout=60)
        assert browser.execute_script("return window.nfMarker") == 1
        with Store.open(live) as store:
            n = len(store.trials())
        wait_for(browser, lambda b: _text(b, "#trial-count") == f"{n} trials", "the final count")
        counts = {int(s.split()[0]) for s in seen if s}
        assert len(counts) >= 3 and max(counts) <= n, counts
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == 0, proc.stderr.read().decode()[-2000:] if proc.stderr else ""


def test_browsing_changed_no_byte_of_any_run(
    browser: Any, served: Server, runs: Path, before: dict[str, str]
) -> None:
    """After every page of the module was viewed, each run's files are byte-identical to
    what they were before the server started."""
    for name, digest in before.items():
        if name not in ("live",):
            assert _digest(runs / name) == digest, name


def test_every_tab_of_a_run_page_has_one_registrar() -> None:
    """Each tab of ``layout.TABS`` has its own registrar of callbacks, in the tabs' order."""
    from nasforge.dashboard import callbacks, layout

    assert list(callbacks.PAGES) == list(layout.TABS)
