"""How fast the dashboard opens a large run: a record of 10,000 trials, served by a real
``nasforge serve`` process and loaded by headless Chromium.

Measures, in a real browser, the time from navigation until the page shows its data:
``overview_s`` (the overview lists the run with its best value) and ``trial_table_s`` (the
run's page shows the first 20 rows of its trial table, sorted by the objective). The first
load after the server starts (nothing cached on the server) is reported; later loads are in
the ``*_again_s`` fields. The browser loads the dashboard's scripts once before timing, as a
user's browser has them cached after the first visit. Targets: under 1 s each.

Run:  python benchmarks/dashboard.py [--trials 10000] [--quick]
Needs Debian's chromium and chromium-driver, and the ``dashboard`` extra; without them the last
line is ``{"skipped": reason}``. ``--quick`` (the slow test set's smoke run): 500 trials, one
repeat.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nasforge.dashboard import data  # noqa: E402
from nasforge.dashboard.overview import summarize  # noqa: E402
from nasforge.run.records import TrialOutcome  # noqa: E402
from nasforge.run.store import Store  # noqa: E402
from tests.dashboard.conftest import Server, _chromium  # noqa: E402

log = logging.getLogger("benchmarks.dashboard")
TABLE_CELLS = '#trial-table td[data-dash-column="m:accuracy"]'


def shown(value: float) -> float:
    """Returns ``value`` as the trial table shows it: four significant digits (the metric
    columns' ``Format(precision=4, scheme=decimal_or_exponent)`` in ``nasforge.dashboard``)."""
    return float(f"{value:.4g}")


def make_run(directory: Path, n_trials: int, seed: int = 0) -> float:
    """Returns the best accuracy of a multi-trial-shaped record of ``n_trials`` trials (12
    decisions, 2 metrics, 5 intermediate reports each) written through the Store."""
    rng = random.Random(seed)
    config = {
        "kind": "multitrial",
        "space": None,
        "source": None,
        "objective": {
            "metric": "accuracy",
            "mode": "max",
            "constraints": {},
            "second": ["params", "min"],
        },
        "multitrial": {"strategy": {"name": "random"}, "n_trials": n_trials},
    }
    best = 0.0
    with Store.create(directory, config) as store:
        store.set_plan("trials", n_trials)
        for i in range(n_trials):
            arch = {f"layer{k}": rng.choice(["conv3", "conv5", "sep3", "skip"]) for k in range(10)}
            arch.update(width=rng.choice([16, 32, 64]), depth=rng.choice([1, 2, 3]))
            acc = rng.random()
            best = max(best, acc)
            inter = [{"accuracy": acc * (k + 1) / 5} for k in range(5)]
            tid = store.add_trial(f"{i:016x}", arch)
            store.finish_trial(
                tid,
                TrialOutcome(
                    "done",
                    {"accuracy": acc, "params": rng.uniform(1e3, 1e6)},
                    inter,
                    duration=rng.uniform(1, 60),
                ),
            )
        store.finish()
    return best


def _time_page(driver, url: str, ready) -> float:
    """Returns seconds from navigating to ``url`` until ``ready(driver)`` is true (an element
    the page replaced while it was read counts as not ready yet)."""
    from selenium.common.exceptions import StaleElementReferenceException

    def settled() -> bool:
        try:
            return ready(driver)
        except StaleElementReferenceException:
            return False

    t0 = time.perf_counter()
    driver.get(url)
    while not settled():
        if time.perf_counter() - t0 > 60:
            raise TimeoutError(f"{url} did not show its data within 60 s")
        time.sleep(0.01)
    return time.perf_counter() - t0


def main() -> None:
    """Prints the measured load times; the last line is one JSON object."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="500 trials, one repeat")
    args = parser.parse_args()
    if args.quick:
        args.trials, args.repeats = 500, 1
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    found = _chromium()
    if found is None:
        print(json.dumps({"skipped": "needs Debian's chromium and chromium-driver"}))
        return
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs"
        t0 = time.perf_counter()
        best = make_run(runs / "big", args.trials)
        log.info("wrote %d trials in %.1f s", args.trials, time.perf_counter() - t0)

        # the data layer alone, cold (a fresh cache), in this process
        cache = data.TrialCache()
        t0 = time.perf_counter()
        summarize("0/runs/big", "runs/big", runs / "big", cache)
        summary_s = time.perf_counter() - t0
        cache = data.TrialCache()
        t0 = time.perf_counter()
        with data.open_run(runs / "big") as store:
            data.trial_page(store, cache, 0, 20, [{"column_id": "m:accuracy", "direction": "desc"}])
        page_s = time.perf_counter() - t0

        options = webdriver.ChromeOptions()
        options.binary_location = found[0]
        for a in (
            "--headless=new",
            "--no-sandbox",
            "--disable-dev-shm-usage",
            "--window-size=1400,1000",
        ):
            options.add_argument(a)
        driver = webdriver.Chrome(options=options, service=Service(found[1]))
        empty = Path(tmp) / "empty" / "runs"
        (empty / "x").mkdir(parents=True)
        warm = Server([empty], Path(tmp))  # loads the scripts into the browser's cache
        server = None
        try:
            driver.get(warm.url + "/")
            driver.get(warm.url + "/run/0/runs/x?tab=charts")
            time.sleep(2)
            warm.stop()
            server = Server([runs], Path(tmp))
            best_text = f"accuracy {best:.5g}"

            def overview_ready(d) -> bool:
                return any(
                    best_text in r.text for r in d.find_elements(By.CSS_SELECTOR, "tr.nf-run")
                )

            def table_ready(d) -> bool:
                cells = d.find_elements(By.CSS_SELECTOR, TABLE_CELLS)
                # the page rounds (0.99987 shows as 0.9999): compare what it shows
                return len(cells) == 20 and float(cells[0].text) == shown(best)

            overview = [_time_page(driver, server.url + "/", overview_ready)]
            table = [_time_page(driver, server.url + "/run/0/runs/big", table_ready)]
            for _ in range(args.repeats):
                overview.append(_time_page(driver, server.url + "/", overview_ready))
                table.append(_time_page(driver, server.url + "/run/0/runs/big", table_ready))
        finally:
            driver.quit()
            warm.stop()
            if server is not None:
                server.stop()
    result = {
        "n_trials": args.trials,
        "overview_s": round(overview[0], 3),
        "trial_table_s": round(table[0], 3),
        "overview_again_s": round(statistics.median(overview[1:]), 3),
        "trial_table_again_s": round(statistics.median(table[1:]), 3),
        "summary_data_s": round(summary_s, 3),
        "trial_page_data_s": round(page_s, 3),
        "target_s": 1.0,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
