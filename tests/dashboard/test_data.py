"""The dashboard's data access layer over real records: summaries, the trial table's pages,
best so far, the Pareto front, architectures; read-only throughout."""

from __future__ import annotations

from pathlib import Path

from nasforge.dashboard import data, overview
from nasforge.run.records import TrialOutcome
from nasforge.run.results import pareto_front, rank_trials
from nasforge.run.store import Store
from tests.dashboard.records import make_record
from tests.runwait import kill_writer_midway


def test_summary_names_kind_state_progress_and_best(tmp_path: Path) -> None:
    """The overview row of a finished run carries its kind, state, plan and best trial; a
    corrupt store gives a row with the store's message instead of raising."""
    make_record(tmp_path / "a", n=30)
    r = overview.summarize("0/a", "a", tmp_path / "a", data.TrialCache())
    with Store.open(tmp_path / "a") as store:
        best = rank_trials(store.trials(), "accuracy", "max")[0]
    assert (r.kind, r.state, r.progress, r.strategy) == (
        "multitrial",
        "finished",
        "26 / 30 trials",
        "random",
    )  # cached repeats do not count, as in `nasforge status`
    assert (r.best, r.best_trial, r.n_trials) == (best.metrics["accuracy"], best.id, 30)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "run.db").write_bytes(b"garbage")
    bad = overview.summarize("0/bad", "bad", tmp_path / "bad", data.TrialCache())
    assert bad.problem and "not a readable run record" in bad.problem


def test_trial_pages_filter_sort_and_cover_every_trial_once(tmp_path: Path) -> None:
    """Pages of the filtered, sorted table hold every matching trial exactly once, in order,
    with missing values last whatever the direction."""
    make_record(tmp_path / "a", n=47)
    cache = data.TrialCache()
    with data.open_run(tmp_path / "a") as store:
        trials = store.trials()
        for direction in ("asc", "desc"):
            sort = [{"column_id": "m:accuracy", "direction": direction}]
            pages = [data.trial_page(store, cache, p, 10, sort) for p in range(5)]
            rows = [r for p in pages for r in p["rows"]]
            assert pages[0]["n_pages"] == 5 and sorted(r["id"] for r in rows) == list(range(1, 48))
            values = [r["m:accuracy"] for r in rows if "m:accuracy" in r]
            assert values == sorted(values, reverse=direction == "desc")
            assert all("m:accuracy" not in r for r in rows[len(values) :])  # failed ones last
        failed = data.trial_page(store, cache, 0, 100, [], ["failed"])
        assert failed["n_rows"] == sum(t.status == "failed" for t in trials)
        assert all(r["error"] == "ValueError: boom" for r in failed["rows"])
        assert data.trial_page(store, cache, 99, 10)["page"] == 4  # clamped to the last page


def test_best_so_far_is_monotone_and_ends_at_the_best(tmp_path: Path) -> None:
    """The running best never gets worse and ends at the best trial's value."""
    make_record(tmp_path / "a", n=30)
    with data.open_run(tmp_path / "a") as store:
        b = data.best_so_far(store, data.TrialCache())
        best = rank_trials(store.trials(), "accuracy", "max")[0]
    assert all(x <= y for x, y in zip(b["best"], b["best"][1:]))
    assert b["best"][-1] == best.metrics["accuracy"] and len(b["id"]) == len(b["seconds"])


def test_pareto_matches_the_records_front_and_groups_split_it(tmp_path: Path) -> None:
    """The front is the run record's Pareto front; grouped by a metric, each group gets its
    own front."""
    make_record(tmp_path / "a", n=40)
    cache = data.TrialCache()
    with data.open_run(tmp_path / "a") as store:
        p = data.pareto(store, cache, ("params", "min"), ("accuracy", "max"))
        front = pareto_front(store.trials(), ("accuracy", "max"), ("params", "min"))
        g = data.pareto(store, cache, ("params", "min"), ("accuracy", "max"), group="params")
    assert sorted(p["front"]) == sorted(t.id for t in front)
    assert len(g["front"]) == len({q["group"] for q in g["points"]})  # one best per width


def test_diff_lists_differing_decisions_first(tmp_path: Path) -> None:
    """The difference of two trials has a row per decision, the differing ones first."""
    make_record(tmp_path / "a", n=10)
    with data.open_run(tmp_path / "a") as store:
        a, b = store.trial(1).arch, store.trial(2).arch
        rows = data.diff(store, 1, 2)
        detail = data.trial_detail(store, 1)
    assert [r["label"] for r in rows if not r["same"]] == sorted(k for k in a if a[k] != b[k])
    assert {r["label"] for r in rows} == set(a) and detail["arch"] == a


def test_reading_a_live_run_never_blocks_or_changes_it(tmp_path: Path) -> None:
    """While a writer holds the run open, the dashboard reads it (state running) and the
    writer commits afterwards; the cache sees the new trial; once the writer is gone without
    finishing, the run shows as interrupted."""
    writer = make_record(tmp_path / "a", n=5, finish=False)
    assert writer is not None
    cache = data.TrialCache()
    try:
        r = overview.summarize("0/a", "a", tmp_path / "a", cache)
        assert (r.state, r.n_trials) == ("running", 5)
        writer.record_trial(
            "f" * 16,
            {"op": "conv", "width": 8},
            TrialOutcome("done", {"accuracy": 0.99}, evaluation="trained"),
        )
        r = overview.summarize("0/a", "a", tmp_path / "a", cache)
        assert (r.n_trials, r.best) == (6, 0.99)
    finally:
        writer.close()  # the writer is gone without finishing: an interrupted run
    assert overview.summarize("0/a", "a", tmp_path / "a", cache).state == "interrupted"


def test_summary_cache_reuses_a_finished_run_and_rereads_a_changed_one(tmp_path: Path) -> None:
    """A finished run's row is reused while its record is unchanged; once the record
    changes (a resumed writer adds a trial) the row is read again."""
    make_record(tmp_path / "a", n=5)
    cache = overview.SummaryCache(data.TrialCache())
    first = cache.get("0/a", "a", tmp_path / "a")
    assert cache.get("0/a", "a", tmp_path / "a") is first
    with Store.open(tmp_path / "a", readonly=False) as store:
        store.record_trial(
            "e" * 16,
            {"op": "conv", "width": 8},
            TrialOutcome("done", {"accuracy": 0.99}, evaluation="trained"),
        )
        store.finish()
    again = cache.get("0/a", "a", tmp_path / "a")
    assert again is not first and (again.n_trials, again.best) == (6, 0.99)


def test_trial_table_shows_where_each_trial_ran(tmp_path: Path) -> None:
    """The dashboard's trial rows carry the host and GPUs each trial ran on, sortable."""
    obj = {"metric": "accuracy", "mode": "max", "constraints": {}, "second": None}
    with Store.create(tmp_path / "r", {"kind": "multitrial", "objective": obj}) as s:
        for i, gpu in enumerate([1, 0], 1):
            t = s.add_trial(f"{i:016x}", {"w": i})
            where = {"node": "box", "devices": [gpu], "gpus": 1.0}
            s.finish_trial(t, TrialOutcome("done", {"accuracy": i / 10}, placement=where))
    with Store.open(tmp_path / "r") as store:
        sort = [{"column_id": "where", "direction": "asc"}]
        page = data.trial_page(store, data.TrialCache(), 0, 10, sort)
    assert [(r["id"], r["where"]) for r in page["rows"]] == [(2, "box gpu 0"), (1, "box gpu 1")]


def test_trials_in_flight_of_a_killed_run_are_shown_interrupted(tmp_path: Path) -> None:
    """After kill -9 the trial table and the overview show the in-flight trials as
    ``interrupted``, as the run's state, even when the table was read while it ran."""
    cache = data.TrialCache()

    def alive() -> None:
        with data.open_run(tmp_path) as store:
            rows = data.trial_page(store, cache)["rows"]
            assert [r["status"] for r in rows] == ["done", "running", "running"]

    kill_writer_midway(tmp_path, alive)
    with data.open_run(tmp_path) as store:
        page = data.trial_page(store, cache)
        assert [r["status"] for r in page["rows"]] == ["done", "interrupted", "interrupted"]
        assert data.trial_page(store, cache, statuses=["interrupted"])["n_rows"] == 2
        assert data.trial_detail(store, 2)["status"] == "interrupted"
    row = overview.summarize("k", "run", tmp_path, cache)
    assert (row.state, row.counts, row.progress) == (
        "interrupted",
        {"done": 1, "interrupted": 2},
        "1 / 4 trials",
    )


def test_rungs_place_each_trial_at_the_resource_it_reached(tmp_path: Path) -> None:
    """The rung chart's data counts trials per reports reached, pruned ones at their rung."""
    from nasforge.dashboard import charts

    config = {"kind": "multitrial", "space": None, "source": None,
              "objective": {"metric": "accuracy", "mode": "max", "constraints": {},
                            "second": None}, "multitrial": {}}  # fmt: skip
    with Store.create(tmp_path / "r", config) as store:
        for i, (n, status) in enumerate([(9, "done"), (1, "pruned"), (3, "pruned"), (1, "pruned")]):
            tid = store.add_trial(f"{i:016x}", {"i": i})
            curve = [{"accuracy": 0.1 * (i + 1) + 0.01 * e} for e in range(n)]
            store.finish_trial(tid, TrialOutcome(status, curve[-1], curve))
        got = data.rungs(store)
    assert got["counts"] == {1: 2, 3: 1, 9: 1}
    assert [(p["resource"], p["status"]) for p in got["points"]] == [
        (9, "done"),
        (1, "pruned"),
        (3, "pruned"),
        (1, "pruned"),
    ]
    assert abs(got["points"][2]["value"] - 0.32) < 1e-9  # its last report
    fig = charts.rungs(got)
    assert {t.name for t in fig.data} == {"done", "pruned"}
    assert "1: 2, 3: 1, 9: 1" in fig.layout.title.text


def test_duration_is_the_recorded_working_time_not_file_times(tmp_path: Path) -> None:
    """A run's duration is the working time its runner recorded: a copied run (new file
    times), a run read by another tool, or one resumed after idling shows what it worked."""
    import os
    import shutil
    import time

    from tests.run._kinds import MinimalRun

    class _Quick(MinimalRun):
        kind = "test-quick"

        def _execute(self, store: Store, resume: bool) -> None:
            store.record_trial("a" * 16, {"w": 1}, TrialOutcome("done", {"accuracy": 1.0}))

    _Quick(tmp_path / "run").run()
    shutil.copytree(tmp_path / "run", tmp_path / "copy")
    later = time.time() + 900  # as if the copy were made, or the file read, 15 minutes later
    os.utime(tmp_path / "copy" / "run.db", (later, later))
    for name in ("run", "copy"):
        summary = overview.summarize(name, name, tmp_path / name, data.TrialCache())
        assert summary.duration is not None and summary.duration < 60, summary.duration
