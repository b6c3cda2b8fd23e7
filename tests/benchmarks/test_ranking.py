"""benchmarks/ground_truth.py and benchmarks/ranking.py (issue 35) on a miniature MNIST-1D table."""

import json
from pathlib import Path

import pytest
import torch

from tests.benchmarks._scripts import load

pytest.importorskip("mnist1d")  # the MNIST-1D recipe's data

gt = load("ground_truth")
ranking = load("ranking")
common = load("_ranking_common")
searches = load("_searches")
MINI = common.MINI_RECIPE_1D
#: a supernet job cut to one epoch and a 3-cycle evolution whose hybrid selection compares
#: against 4 reference architectures (200 by default: most of a job's time)
SMALL = {"epochs": 1, "cycles": 3, "population": 2, "bn_batches": 2, "selection_reference": 4}


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("gt") / "table.json"
    return gt.build_table(MINI, 4, [0, 1], arch_seed=0, out=out), out


def test_rank_statistics_subsets_and_ceilings_on_known_orders() -> None:
    """Same order gives 1 on both subsets; bands split by parameters; the ceiling of two
    identical seeds is 1; mean rank aggregates; percentile counts strictly lower means."""
    truth = [0.1, 0.5, 0.3, 0.9, 0.7, 0.2, 0.4, 0.6]
    params = [8, 7, 6, 5, 4, 3, 2, 1]
    bands = ranking.quartile_bands(params)
    assert bands == [[7, 6], [5, 4], [3, 2], [1, 0]]
    same = ranking.subset_tau(truth, truth, bands)
    assert same == {"competent": pytest.approx(1.0), "quartiles": pytest.approx(1.0)}
    flipped = ranking.subset_tau(truth, [-t for t in truth], bands)
    assert flipped["competent"] == pytest.approx(-1.0)
    assert ranking.ceilings([truth, truth], bands)["competent"] == pytest.approx(1.0)
    assert ranking.mean_rank([1.0, 2.0, 3.0], [3.0, 2.0, 1.0]) == [2.0, 2.0, 2.0]
    assert ranking.percentile(0.5, [0.4, 0.5, 0.6, 0.3]) == 50.0


def test_the_table_holds_distinct_competent_functions_and_any_row_repeats(
    table: tuple[dict, Path],
) -> None:
    """Four distinct competent functions, two seeds each, costs and validation curves recorded;
    row 2 retrains exactly and the check names the torch version."""
    _, out = table
    on_disk = json.loads(out.read_text())
    assert on_disk["format"] == "nasforge-ground-truth" and on_disk["version"] == 2
    assert on_disk["recipe"] == MINI and on_disk["seeds"] == [0, 1]
    counts = on_disk["space_counts"]
    assert counts["architectures"] == 5**6 and counts["degenerate"] > 0
    rows = on_disk["rows"]
    assert len({r["function"] for r in rows}) == 4 and all(r["live_ops"] >= 1 for r in rows)
    assert all(len(c) == MINI["epochs"] for r in rows for c in r["val_curves"])
    x = common.load_splits(MINI)[0][0]
    assert all(r["params"] == common.costs(MINI, r["arch"], x)[0] for r in rows)
    assert all(r["params"] == common.param_count(MINI, r["arch"]) for r in rows)
    check = gt.check_row(on_disk, 2)
    assert check["same"] and check["recorded_torch"] == torch.__version__ == check["torch"]
    assert gt.main(["--out", str(out), "--check", "2"]) == 0


def test_a_table_continues_and_refuses_other_settings(table: tuple[dict, Path]) -> None:
    """Asking for 5 rows trains only the fifth; another seed list is refused."""
    _, out = table
    first = json.loads(out.read_text())["rows"]
    longer = gt.build_table(MINI, 5, [0, 1], arch_seed=0, out=out)
    assert longer["rows"][:4] == first and len(longer["rows"]) == 5
    assert len(longer["runs"]) == 10
    with pytest.raises(SystemExit, match="other settings"):
        gt.build_table(MINI, 5, [0, 2], arch_seed=0, out=out)


@pytest.mark.slow
def test_ranking_reports_every_field_and_places_every_pick(table: tuple[dict, Path]) -> None:
    """One-epoch supernets, two search seeds: every estimator on both subsets beside the
    ceiling and the baselines; each pick placed among the table (retrained or looked up)."""
    data = json.loads(table[1].read_text())
    sn = {"epochs": 1, "cycles": 3, "population": 2, "bn_batches": 2, "paper_selection": True}
    report = ranking.run(data, sn, search_seeds=(0, 1), proxy_samples=3, workers=2)
    assert set(report["tau"]) >= {"spos", "fewshot", "darts", "nasb", "fairnas", "sandwich",
                                  "hybrid_spos", "hybrid_fewshot"}  # fmt: skip
    for block in (report["tau"], report["baseline_tau"], report["proxy_tau"]):
        assert all(set(v) == {"competent", "quartiles"} for v in block.values())
    assert set(report["baseline_tau"]) == {"params", "flops", "live_ops"}
    assert set(report["ceiling"]) == {"competent", "quartiles"}
    remedies = {"spos_accuracy", "fewshot_accuracy"}  # the SPOS paper's selection, beside
    assert set(report["search_percentile"]) == set(searches.ALGORITHMS) | remedies
    means = [r["mean"] for r in data["rows"]]
    for algo, rows in report["search_detail"].items():
        assert [r["seed"] for r in rows] == [0, 1]
        for r in rows:
            assert r["percentile"] == ranking.percentile(r["mean"], means)
            assert r["constrained_params"] <= report["extra"]["param_budget"]
        assert 0 <= report["p_vs_random"][algo] <= 1
    assert report["n_search_seeds"] == 2


@pytest.mark.parametrize("algorithm", ["spos", "fewshot"])
def test_a_supernet_job_repeats_whatever_the_global_generator_holds(algorithm: str) -> None:
    """Two identical jobs score the same, though the global generator differs before each
    (a worker's state once seeded the supernet's initial weights)."""
    archs = [dict.fromkeys(("e1_0", "e2_0", "e2_1", "e3_0", "e3_1", "e3_2"), op)
             for op in ("conv", "conv1x1", "skip_connect")]  # fmt: skip
    sn = {**searches.SUPERNET, **SMALL}
    runs = []
    for draws in (1, 7):
        torch.rand(draws)  # a worker that ran another job before
        out = searches.supernet_job(MINI, sn, algorithm, 0, archs, 10**9, 0)
        runs.append((out["scores"], out["scores_loss"], out["pick"]))
    assert runs[0] == runs[1]


def test_the_fair_sampler_trains_the_search_supernet_on_fairnas_paths() -> None:
    """``sampler: "fair"`` (``--sampler fair``) trains SPOS's search supernet on FairNAS's
    paths: it scores as the FairNAS ranking job of the same seed does, not as uniform paths."""
    archs = [dict.fromkeys(("e1_0", "e2_0", "e2_1", "e3_0", "e3_1", "e3_2"), op)
             for op in ("conv", "conv1x1", "pool")]  # fmt: skip
    sn = {**searches.SUPERNET, **SMALL}
    fair = searches.supernet_job(MINI, {**sn, "sampler": "fair"}, "spos", 0, archs, 10**9, 0)
    ref = searches.supernet_job(MINI, sn, "fairnas", 0, archs, 10**9, 0)
    uniform = searches.supernet_job(MINI, sn, "spos", 0, archs, 10**9, 0)
    assert fair["scores_loss"] == ref["scores_loss"]
    assert fair["scores_loss"] != uniform["scores_loss"]
    assert fair["pick"] is not None and fair["pick_constrained"] is not None
