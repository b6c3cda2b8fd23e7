"""Does weight sharing rank the architectures that matter? (issue 35) Every estimator's scores
of the ground truth's architectures against their stand-alone test accuracies, beside trivial
baselines and the noise ceiling, and searches placed among the truth.

Reads a table of ``benchmarks/ground_truth.py`` (default: MNIST-1D, v4; ``--table`` picks
another, e.g. ``benchmarks/data/ground_truth_mnist1d_v3.json``) and its recipe, then
runs on ``--workers`` processes (``benchmarks/_searches.py``): the supernets of :data:`SUPERNET`
(one recipe for ranking and search) scored on the validation split after batch-norm
recalibration (scores averaged over ``--calibrations``), the five zero-cost proxies, hybrids
(mean rank of a supernet's ranking and the best proxy's, the proxy chosen by tau against the
table's *validation* accuracies; ``hybrid_<supernet>_params``: with the parameter count;
``hybrid_<supernet>_loss``: the supernet scored by minus the validation loss), and the
searches with ``--search-seeds`` (>= 5). Picks are retrained by the truth's recipe on its seeds,
or looked up in the table when their function is a row of it (``search_detail`` says which).

Subsets: ``competent`` (every row with a parametric op on a live path) and ``quartiles`` (the
mean tau within the four parameter-count quartiles). Each figure comes with the subset's noise
ceiling (tau between the truth's seeds, averaged over seed pairs). Trivial baselines: parameter
count, FLOPs (multiply-accumulates) and the number of parametric ops on live paths.

Searches: ``search_percentile`` (mean over seeds of the share of competent rows whose mean test
accuracy is strictly below the pick's), ``p_vs_random`` (one-sided Mann-Whitney U: picks'
accuracies above the table's, the table being uniform random competent picks) and
``constrained_percentile`` (parameters <= the competent median; the percentile within the
rows under that budget).

    python benchmarks/ranking.py                      # every search: ~20 min on 2 quiet cores
    python benchmarks/ranking.py --search-seeds       # the ranking only: ~6 min
    python benchmarks/ranking.py --quick              # smoke run: a 4-row miniature table
                                                      # (built here), one-epoch supernets

``--quick`` (the slow test set's smoke run) builds the tests' miniature MNIST-1D table (4 rows,
2 seeds) in memory instead of reading ``--table``, then ranks it with one-epoch supernets,
3-cycle evolutions of 2, and 2 search seeds, on one worker: a check that it runs, not a result.

Last line: JSON with ``tau``, ``ceiling``, ``baseline_tau``, ``proxy_tau``,
``search_percentile``, ``constrained_percentile``, ``p_vs_random``, ``n_search_seeds``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import multiprocessing
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import torch
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _ranking_common import costs, kendall, load_splits, param_count  # noqa: E402
from _searches import (  # noqa: E402
    ALGORITHMS,
    RANK_ONLY,
    SUPERNET,
    algorithm_epochs,
    proxy_job,
    retrain_job,
    supernet_job,
)

from nasforge.spaces.cell_canon import (  # noqa: E402
    canonical_arch,
    competent,
    function_key,
    live_param_ops,  # noqa: E402
)

__all__ = [
    "subset_tau",
    "ceilings",
    "mean_rank",
    "percentile",
    "competent_rows",
    "Retrainer",
    "run",
    "main",
]

log = logging.getLogger("nasforge.benchmarks.ranking")
DEFAULT_TABLE = Path(__file__).resolve().parent / "data" / "ground_truth_mnist1d_v4.json"


def quartile_bands(params: list[int]) -> list[list[int]]:
    """Returns the row indices of the four parameter-count quartiles (sorted, split evenly)."""
    order = sorted(range(len(params)), key=lambda i: (params[i], i))
    n = len(order)
    return [order[n * q // 4 : n * (q + 1) // 4] for q in range(4)]


def subset_tau(truth: list[float], score: list[float], bands: list[list[int]]) -> dict:
    """Returns ``{"competent": tau over all rows, "quartiles": mean tau within the bands}``
    (bands where tau is undefined left out of the mean; None when all are)."""
    within = [kendall([truth[i] for i in b], [score[i] for i in b]) for b in bands]
    within = [t for t in within if t is not None]
    return {
        "competent": kendall(truth, score),
        "quartiles": sum(within) / len(within) if within else None,
    }


def ceilings(per_seed: list[list[float]], bands: list[list[int]]) -> dict:
    """Returns the noise ceiling of both subsets: tau between two seeds' accuracies, averaged
    over seed pairs (``per_seed[s][row]``)."""
    pairs = [subset_tau(a, b, bands) for a, b in itertools.combinations(per_seed, 2)]
    out: dict[str, float | None] = {}
    for k in ("competent", "quartiles"):
        vals = [p[k] for p in pairs if p[k] is not None]
        out[k] = statistics.mean(vals) if vals else None  # None: undefined in every pair
    return out


def mean_rank(*scores: list[float]) -> list[float]:
    """Returns the rank aggregation (mean rank, higher is better) of several score lists."""
    ranks = [stats.rankdata(s) for s in scores]
    return [float(sum(r[i] for r in ranks) / len(ranks)) for i in range(len(scores[0]))]


def percentile(value: float, means: list[float]) -> float:
    """Returns the share (x100) of ``means`` strictly below ``value``."""
    return 100.0 * sum(m < value for m in means) / len(means)


def competent_rows(table: dict[str, Any]) -> tuple[list[dict], int]:
    """Returns the competent rows with params/macs/live_ops filled in, and how many rows of
    the table were left out as degenerate (issue 27's table has them)."""
    recipe = table["recipe"]
    example = load_splits(recipe)[0][0][:1]
    rows = [r for r in table["rows"] if competent(r["arch"])]
    for r in rows:
        if "params" not in r:
            r["params"], r["macs"] = costs(recipe, canonical_arch(r["arch"]), example)
            r["live_ops"] = live_param_ops(r["arch"])
            r["function"] = function_key(r["arch"])
    return rows, len(table["rows"]) - len(rows)


class Retrainer:
    """Retrains picks by the truth's recipe on the table's seeds as soon as a search returns
    them (in ``pool``, beside the searches still running); a pick whose function is a row of
    the table is looked up instead."""

    def __init__(self, pool: Any, recipe: dict, table: dict, rows: list) -> None:
        self.pool, self.recipe, self.seeds = pool, recipe, table["seeds"]
        self.known = {r["function"]: r["accuracies"] for r in rows}
        self.todo: dict[str, list[Any]] = {}

    def add(self, archs: Any) -> None:
        """Submits the retraining of each of ``archs`` not known or submitted yet."""
        for arch in archs:
            key = function_key(arch)
            if key not in self.known and key not in self.todo:
                self.todo[key] = [self.pool.submit(retrain_job, self.recipe, arch, s)
                                  for s in self.seeds]  # fmt: skip

    def results(self) -> dict[str, Any]:
        """Returns function -> {"accuracies", "source"} of every pick added."""
        out = {k: {"accuracies": v, "source": "table"} for k, v in self.known.items()}
        for key, futs in self.todo.items():
            out[key] = {"accuracies": [f.result() for f in futs], "source": "retrained"}
        return out


def _retrain(pool: Any, recipe: dict, table: dict, rows: list, picks: dict) -> dict:
    """Returns function -> {"accuracies", "source"} of ``picks``' values (see
    :class:`Retrainer`)."""
    r = Retrainer(pool, recipe, table, rows)
    r.add(picks.values())
    return r.results()


def _job_picks(key: tuple[str, int], d: dict, search_seeds: tuple[int, ...]) -> dict:
    """Returns (search, seed, constrained) -> pick of one supernet job's result."""
    algo, s = key
    if algo not in ALGORITHMS or s not in search_seeds:
        return {}
    out = {(algo, s, False): d["pick"], (algo, s, True): d["pick_constrained"]}
    for name, (free, con) in d.get("extra_picks", {}).items():  # other selections, same net
        out.update({(name, s, False): free, (name, s, True): con})
    return out


def _search_report(picks: dict, accs: dict, rows: list, budget: int, recipe: dict, base: int):
    means = [r["mean"] for r in rows]
    under = [r["mean"] for r in rows if r["params"] <= budget]
    pct, cpct, pval, detail = {}, {}, {}, {}
    for algo in sorted({a for a, _, _ in picks}):
        seeds = sorted(s for a, s, c in picks if a == algo and not c)
        free = [(s, picks[(algo, s, False)]) for s in seeds]
        con = [(s, picks[(algo, s, True)]) for s in seeds]
        mean = lambda a: statistics.mean(accs[function_key(a)]["accuracies"])  # noqa: E731
        pick_means = [mean(a) for _, a in free]
        pct[algo] = statistics.mean(percentile(m, means) for m in pick_means)
        cpct[algo] = statistics.mean(percentile(mean(a), under) for _, a in con)
        pval[algo] = float(stats.mannwhitneyu(pick_means, means, alternative="greater").pvalue)
        detail[algo] = [
            {"seed": s, "arch": a, "mean": mean(a), "percentile": percentile(mean(a), means),
             "source": accs[function_key(a)]["source"], "competent": competent(a),
             "constrained_arch": c, "constrained_params": param_count(recipe, c, base),
             "constrained_percentile": percentile(mean(c), under)}
            for (s, a), (_, c) in zip(free, con)
        ]  # fmt: skip
    return pct, cpct, pval, detail


def run(
    table: dict[str, Any],
    sn: dict[str, Any] | None = None,
    estimators: tuple[str, ...] = (*ALGORITHMS[:4], *RANK_ONLY),
    search_seeds: tuple[int, ...] = (0, 1, 2, 3, 4),
    proxy: str = "synflow",
    proxy_samples: int = 100,
    workers: int = 2,
) -> dict[str, Any]:
    """Returns the report (see the module docstring) of ``table``'s competent rows."""
    sn = {**SUPERNET, **(sn or {})}
    recipe = table["recipe"]
    torch.set_num_threads(recipe["threads"])
    t0 = time.perf_counter()
    rows, left_out = competent_rows(table)
    n_train = len(load_splits(recipe)[0][0])
    archs = [r["arch"] for r in rows]
    truth = [r["mean"] for r in rows]
    budget = int(statistics.median(r["params"] for r in rows))
    base = param_count(recipe, dict.fromkeys(archs[0], "none"))
    bands = quartile_bands([r["params"] for r in rows])
    ctx = multiprocessing.get_context("spawn")  # no fork of a process torch has run in
    # the longest jobs first (DARTS and NASB train every candidate), retraining each search's
    # picks as soon as it returns them: the two workers stay busy to the end
    keys = [(a, s) for a in estimators
            for s in (sorted({0, *search_seeds}) if a in ALGORITHMS else [0])]  # fmt: skip
    keys.sort(key=lambda k: k[0] not in ("darts", "nasb"))
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        jobs = {pool.submit(supernet_job, recipe, sn, a, s, archs if s == 0 else None, budget,
                            base): (a, s) for a, s in keys}  # fmt: skip
        pj = pool.submit(proxy_job, recipe, archs, list(search_seeds), proxy, proxy_samples,
                         budget, base)  # fmt: skip
        retrain = Retrainer(pool, recipe, table, rows)
        done, picks = {}, {}
        for fut in as_completed([*jobs, pj]):
            if fut is pj:
                prox = pj.result()
                for s in search_seeds:
                    picks[("proxy", s, False)] = prox["picks"][s]
                    picks[("proxy", s, True)] = prox["constrained"][s]
                new = {k: v for k, v in picks.items() if k[0] == "proxy"}
            else:
                done[jobs[fut]] = fut.result()
                log.info("%s seed %d: %.0f s (%.0f s since the start)", *jobs[fut],
                         done[jobs[fut]]["seconds"], time.perf_counter() - t0)  # fmt: skip
                new = _job_picks(jobs[fut], done[jobs[fut]], search_seeds)
                picks.update(new)
            if search_seeds:
                retrain.add(new.values())
        accs = retrain.results() if search_seeds else {}
    scores = {a: done[(a, 0)]["scores"] for a in estimators}
    val_truth = [r.get("val_mean", r["mean"]) for r in rows]
    best_proxy = max(prox["scores"], key=lambda n: kendall(val_truth, prox["scores"][n]) or -1)
    params = [float(r["params"]) for r in rows]
    for a in ("spos", "fewshot", "fairnas"):
        if a in scores:
            scores[f"hybrid_{a}"] = mean_rank(scores[a], prox["scores"][best_proxy])
            # the supernet's order beside size's: does it add anything that size does not know?
            scores[f"hybrid_{a}_params"] = mean_rank(scores[a], params)
            # scored by minus the validation loss, a finer score of the same weights
            scores[f"hybrid_{a}_loss"] = mean_rank(done[(a, 0)]["scores_loss"],
                                                   prox["scores"][best_proxy])  # fmt: skip
    per_seed = [list(x) for x in zip(*(r["accuracies"] for r in rows))]
    report: dict[str, Any] = {
        "tau": {k: subset_tau(truth, s, bands) for k, s in scores.items()},
        "ceiling": ceilings(per_seed, bands),
        "baseline_tau": {
            k: subset_tau(truth, [float(r[f]) for r in rows], bands)
            for k, f in (("params", "params"), ("flops", "macs"), ("live_ops", "live_ops"))
        },
        "proxy_tau": {k: subset_tau(truth, s, bands) for k, s in prox["scores"].items()},
        "search_percentile": None, "constrained_percentile": None, "p_vs_random": None,
        "n_search_seeds": len(search_seeds),
    }  # fmt: skip
    if search_seeds:
        pct, cpct, pval, detail = _search_report(picks, accs, rows, budget, recipe, base)
        report.update(search_percentile=pct, constrained_percentile=cpct, p_vs_random=pval)
        report["search_detail"] = detail
    report["extra"] = {
        "n_rows": len(rows), "degenerate_rows_left_out": left_out, "param_budget": budget,
        "hybrid_proxy": best_proxy, "filter_proxy": proxy, "supernet_recipe": sn,
        "supernet_epochs": {a: algorithm_epochs(sn, n_train, a) for a in estimators},
        "tau_one_calibration": {a: subset_tau(truth, done[(a, 0)]["scores_per_calibration"][0],
                                              bands) for a in estimators},
        # minus the validation loss instead of the accuracy: a finer score of the same weights
        "tau_val_loss": {a: subset_tau(truth, done[(a, 0)]["scores_loss"], bands)
                         for a in estimators},
        "supernet_seconds": {f"{a}/{s}": d["seconds"] for (a, s), d in done.items()},
        "seconds": round(time.perf_counter() - t0, 1),
        "spread_10_90": table.get("summary", {}).get("spread_10_90"),
    }  # fmt: skip
    report["scores"] = scores
    return report


def main(argv: list[str] | None = None) -> int:
    """Returns 0 after printing the report's JSON as the last line."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--table", type=Path, default=DEFAULT_TABLE)
    p.add_argument("--estimators", nargs="+", default=[*ALGORITHMS[:4], *RANK_ONLY])
    p.add_argument("--epochs", type=int, default=SUPERNET["epochs"],
                   help="single-path supernet epochs (default: 2,520 steps' worth)")  # fmt: skip
    p.add_argument("--calibrations", type=int, default=SUPERNET["calibrations"],
                   help="batch-norm recalibrations a supernet score averages over")  # fmt: skip
    p.add_argument("--search-seeds", type=int, nargs="*", default=[0, 1, 2, 3, 4],
                   help="seeds of each search (none: skip the searches)")  # fmt: skip
    p.add_argument("--fewshot-edges", nargs="+", default=SUPERNET["fewshot_edges"])
    p.add_argument("--cycles", type=int, default=SUPERNET["cycles"], help="evolution cycles")
    p.add_argument("--steps", type=int, default=SUPERNET["steps"],
                   help="single-path supernet steps (when --epochs is not given)")  # fmt: skip
    p.add_argument("--sampler", choices=("uniform", "fair"), default=SUPERNET["sampler"],
                   help="paths of the SPOS search supernet: uniform or FairNAS's")  # fmt: skip
    p.add_argument(
        "--paper-selection",
        action="store_true",
        help="also evolve SPOS and few-shot by validation accuracy (<algo>_accuracy)",
    )
    p.add_argument("--proxy", default="synflow", help="the proxy filter's proxy")
    p.add_argument("--proxy-samples", type=int, default=100, help="K of the proxy filter")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", type=Path, help="also write the report (with scores) here")
    p.add_argument("--quick", action="store_true", help="a miniature table, one-epoch supernets")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    sn = {"epochs": args.epochs, "fewshot_edges": args.fewshot_edges, "cycles": args.cycles,
          "calibrations": args.calibrations, "paper_selection": args.paper_selection,
          "steps": args.steps, "sampler": args.sampler}  # fmt: skip
    if args.quick:
        from _ranking_common import MINI_RECIPE_1D
        from ground_truth import build_table

        table = build_table(MINI_RECIPE_1D, 4, [0, 1], arch_seed=0, out=None, workers=1)
        sn.update(epochs=1, cycles=3, population=2, bn_batches=2, calibrations=1)
        args.search_seeds, args.proxy_samples, args.workers = [0, 1], 3, 1
    else:
        table = json.loads(args.table.read_text())
    report = run(table, sn, tuple(args.estimators), tuple(args.search_seeds), args.proxy,
                 args.proxy_samples, args.workers)  # fmt: skip
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    keys = ("tau", "ceiling", "baseline_tau", "proxy_tau", "search_percentile",
            "constrained_percentile", "p_vs_random", "n_search_seeds")  # fmt: skip
    print(json.dumps({k: report[k] for k in keys}, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
