"""Searches that should beat random (issue 27 part 4): each algorithm's pick per search seed,
retrained stand-alone by the ground truth's recipe and placed among the table's architectures.

    darts, nasb   ``nasforge.oneshot.search``'s argmax genotype after its search (weights on
                  the first half of the training set, architecture on the second)
    spos_evo      ``search(..., "spos")``: a SPOS supernet on the first half, then its
                  regularized evolution over inherited-weight accuracy on the second half
    proxy_snip    ``nasforge.proxies.top_by_proxy``: the SNIP-best of ``k`` uniform samples
                  (the multi-trial search would train its top few; here its top 1 is retrained)

A pick's accuracy is its mean stand-alone test accuracy over the table's seeds; its percentile
is the share of the table's means strictly below it (x100). Random picks are the table's rows
(uniform samples), so ``p_vs_random`` is Welch's t-test, one-sided (picks greater), between the
picks' accuracies (one per search seed) and the table's means.
"""

from __future__ import annotations

import logging
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import torch
from _ranking_common import load_data, space_of, train_standalone
from scipy import stats

from nasforge.oneshot.search import search
from nasforge.proxies import top_by_proxy
from nasforge.space.search_space import Arch

__all__ = ["ALGORITHMS", "pick", "percentile", "collapsed", "run_searches"]

log = logging.getLogger("nasforge.benchmarks.searches")

#: the searches of issue 27 part 4
ALGORITHMS = ("darts", "nasb", "spos_evo", "proxy_snip")


def pick(recipe: dict[str, Any], algorithm: str, seed: int, epochs: int, k: int) -> Arch:
    """Returns the architecture ``algorithm`` (one of :data:`ALGORITHMS`) picks with ``seed``."""
    torch.set_num_threads(recipe["threads"])
    (x, y), _ = load_data(recipe)
    space = space_of(recipe)
    if algorithm == "proxy_snip":
        batch = min(64, len(x))
        return top_by_proxy(space, "snip", x[:batch], y[:batch], k, keep=1, seed=seed)[0]
    half = len(x) // 2
    split = {"train": (x[:half], y[:half]), "val": (x[half:], y[half:])}
    name = "spos" if algorithm == "spos_evo" else algorithm
    result = search(space, name, split, epochs=epochs, batch_size=recipe["batch_size"],
                    seed=seed, threads=recipe["threads"], progress="off")  # fmt: skip
    return dict(result.arch)


def _standalone(recipe: dict[str, Any], arch: Arch, seeds: list[int]) -> list[float]:
    data = load_data(recipe)
    return [train_standalone(recipe, arch, s, data) for s in seeds]


def percentile(value: float, table_means: list[float]) -> float:
    """Returns the share (x100) of ``table_means`` strictly below ``value``."""
    return 100.0 * sum(m < value for m in table_means) / len(table_means)


def collapsed(arch: Arch) -> bool:
    """Returns whether ``arch`` is parameter-free (every edge ``none``/``skip_connect``/``pool``
    but no ``conv``): the signature of a DARTS collapse."""
    return all(op != "conv" for op in arch.values())


def _welch(picks: list[float], table_means: list[float]) -> tuple[float | None, str]:
    if len(picks) < 2:
        return None, "fewer than 2 picks"
    try:
        res = stats.ttest_ind(picks, table_means, equal_var=False, alternative="greater")
        kind = "welch one-sided (picks > random)"
    except TypeError:  # an old scipy: two-sided only
        res = stats.ttest_ind(picks, table_means, equal_var=False)
        kind = "welch two-sided"
    p = float(res.pvalue)
    return (None if p != p else p), kind


def run_searches(
    table: dict[str, Any],
    algorithms: list[str],
    seeds: list[int],
    epochs: int,
    k: int = 100,
    workers: int = 2,
    known: dict[tuple[str, int], Arch] | None = None,
) -> dict[str, Any]:
    """Returns ``search_percentile`` (mean over seeds) and ``p_vs_random`` per algorithm, and
    ``search_detail`` (each seed's pick, its accuracies and percentile, collapse flags).

    ``known`` maps (algorithm, seed) to a pick already made (e.g. by the ranking step's search
    supernet): it is retrained, not searched again. Picks and retrainings run on ``workers``
    processes of one thread each."""
    recipe = table["recipe"]
    means = [r["mean"] for r in table["rows"]]
    train_seeds = list(table["seeds"])
    known = dict(known or {})
    t0 = time.perf_counter()
    jobs = [(a, s) for a in algorithms for s in seeds if (a, s) not in known]
    ctx = multiprocessing.get_context("spawn")  # no fork of a process torch has run in
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futures = {j: pool.submit(pick, recipe, j[0], j[1], epochs, k) for j in jobs}
        picks = {**known, **{j: f.result() for j, f in futures.items()}}
        t_pick = time.perf_counter() - t0
        accs = {
            j: pool.submit(_standalone, recipe, picks[j], train_seeds)
            for j in ((a, s) for a in algorithms for s in seeds)
        }
        accs = {j: f.result() for j, f in accs.items()}
    detail: dict[str, Any] = {}
    pct: dict[str, float] = {}
    pval: dict[str, float | None] = {}
    test_kind = ""
    for a in algorithms:
        rows = []
        for s in seeds:
            mean = sum(accs[(a, s)]) / len(accs[(a, s)])
            rows.append({"seed": s, "arch": picks[(a, s)], "accuracies": accs[(a, s)],
                         "mean": mean, "percentile": percentile(mean, means),
                         "collapsed": collapsed(picks[(a, s)])})  # fmt: skip
        pct[a] = sum(r["percentile"] for r in rows) / len(rows)
        pval[a], test_kind = _welch([r["mean"] for r in rows], means)
        detail[a] = {"per_seed": rows, "percentiles": [r["percentile"] for r in rows],
                     "collapsed_seeds": [r["seed"] for r in rows if r["collapsed"]]}  # fmt: skip
    seconds = {"picks": round(t_pick, 1), "retrain": round(time.perf_counter() - t0 - t_pick, 1)}
    log.info("searches: %s", seconds)
    return {
        "search_percentile": pct,
        "p_vs_random": pval,
        "search_detail": {
            "algorithms": detail,
            "test": test_kind,
            "random_mean": sum(means) / len(means),
            "search_seeds": seeds,
            "search_epochs": epochs,
            "proxy_samples": k,
            "retrain_seeds": train_seeds,
            "seconds": seconds,
        },
    }
