"""benchmarks/budgeted_search.py (issue 51) on a miniature MNIST-1D table: stage 2 trains by
the table's recipe, and picks are placed among the table's rows."""

import pytest

from tests.benchmarks._scripts import load

pytest.importorskip("mnist1d")  # the MNIST-1D recipe's data

gt = load("ground_truth")
common = load("_ranking_common")
jobs = load("_budgeted")
bench = load("budgeted_search")
MINI = common.MINI_RECIPE_1D


class _Stop(BaseException):
    """What an engine's report raises to end a trial."""


@pytest.fixture(scope="module")
def table() -> dict:
    return gt.build_table(MINI, 1, [0], arch_seed=0, out=None)


@pytest.mark.slow  # the miniature table's data are generated first (seconds under load)
def test_stage_two_training_ends_where_the_table_row_did(table: dict) -> None:
    """The evaluator trains a row as the table did: one report per epoch, ending at the row's
    recorded validation accuracy; a report that raises ends the training at that epoch."""
    row = table["rows"][0]
    ev = jobs.RecipeEvaluator(MINI, 0)
    seen: list[float] = []
    out = ev.evaluate(common.space_of(MINI), row["arch"], seen.append)
    assert out == {"accuracy": row["val_accuracies"][0]}
    assert seen == row["val_curves"][0] and len(seen) == MINI["epochs"]

    def stop(value: float) -> None:
        seen.append(value)
        raise _Stop

    seen.clear()
    with pytest.raises(_Stop):
        ev.evaluate(common.space_of(MINI), row["arch"], stop)
    assert seen == row["val_curves"][0][:1]


@pytest.mark.slow  # builds a miniature table of one row on two seeds
def test_a_confirmation_trains_the_tables_next_seed() -> None:
    """A retraining (reseeded(1)) of a row trains with the table's other seed and ends at the
    row's recorded validation accuracy for it; past the table's seeds it takes a new one."""
    two = gt.build_table(MINI, 1, [0, 1], arch_seed=0, out=None)
    row = two["rows"][0]
    ev = jobs.RecipeEvaluator(MINI, 0, two["seeds"])
    again = ev.reseeded(1)
    out = again.evaluate(common.space_of(MINI), row["arch"], lambda v: None)
    assert out == {"accuracy": row["val_accuracies"][1]} and again.seed == 1
    assert (
        ev.reseeded(2).seed not in (0, 1)
        and jobs.RecipeEvaluator(MINI, 1, [0, 1]).reseeded(1).seed == 0
    )


def test_picks_are_placed_among_the_rows_within_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unconstrained: among every row; constrained: among the rows within the budget only;
    a search that refused (None) is left out of its mean."""
    rows = [{"function": f"f{i}", "mean": m, "params": p}
            for i, (m, p) in enumerate([(0.5, 10), (0.6, 20), (0.7, 10), (0.9, 30)])]  # fmt: skip
    accs = {f"f{i}": {"accuracies": [r["mean"]], "source": "table"} for i, r in enumerate(rows)}
    free, con = {"e": "f3"}, {"e": "f2"}
    monkeypatch.setattr(bench, "function_key", lambda a: a["e"])  # an arch names its row
    out = bench._figures([(free, con), (None, None)], accs, rows, budget=10)
    assert out["unconstrained"]["percentile"] == 75.0  # above 3 of 4
    assert out["constrained"]["percentile"] == 50.0  # above 1 of the 2 within 10
    assert [p["arch"] for p in out["constrained"]["picks"]] == [con]


@pytest.mark.slow
def test_a_two_stage_job_shortlists_within_the_budget_and_counts_its_epochs() -> None:
    """A two-stage run by parameter count: the pick is one of the shortlist, every shortlisted
    architecture is within the budget, and stage 2's epochs are its trials' reports."""
    res = jobs.two_stage_job(MINI, "params", 0, 800, 0, {"k": 2, "pool": 4}, {})
    assert res["pick"] in [c["arch"] for c in res["shortlist"]]
    base = common.param_count(MINI, dict.fromkeys(res["pick"], "none"))
    assert all(common.param_count(MINI, c["arch"], base) <= 800 for c in res["shortlist"])
    assert res["stage2_epochs"] == sum(t["epochs"] for t in res["trials"]) > 0
    assert res["stage1_epochs"] == 0


@pytest.mark.slow  # reads the v4 and v5 tables' rows (their parameter counts computed)
def test_merging_runs_of_other_seeds_counts_each_seed_once(tmp_path) -> None:
    """``--merge`` of the committed one-seed single-stage runs reproduces each run's figures,
    and a run given twice, or a second copy under another seed, is counted per seed."""
    import json
    from pathlib import Path

    data = Path(bench.DATA)
    files = [data / "budgeted_single_v4.json", data / "budgeted_single_v5.json"]
    runs = [json.loads(f.read_text()) for f in files]
    merged = bench.merge_single_stage(files + files[:1])  # the first again: counted once
    for run in runs:
        for a, by_table in run["single_stage_percentile"].items():
            for t, fig in by_table.items():
                assert merged["single_stage_percentile"][a][t] == pytest.approx(fig)
                assert merged["seeds"][a][t] == ["0"]
    # the v4 run as seed 9 too: two seeds, each pick counted once, the mean of the two
    copy = json.loads(files[0].read_text())
    detail = copy["tables_detail"]["v4"]
    detail["jobs"] = {k.replace("/0/", "/9/"): v for k, v in detail["jobs"].items()}
    (tmp_path / "seed9.json").write_text(json.dumps(copy))
    twice = bench.merge_single_stage([files[0], tmp_path / "seed9.json"])
    assert twice["seeds"]["spos"]["v4"] == ["0", "9"]
    assert twice["single_stage_percentile"]["spos"]["v4"] == pytest.approx(
        runs[0]["single_stage_percentile"]["spos"]["v4"]
    )
    p_once = merged["p_vs_random"]["spos"]["v4"]["constrained"]
    p_twice = twice["p_vs_random"]["spos"]["v4"]["constrained"]
    assert p_twice < p_once  # the same pick twice is more evidence against a random pick
