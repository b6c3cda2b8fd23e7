"""Does weight sharing rank? (issue 27 parts 2-3): every estimator's scores of the ground-truth
architectures against their stand-alone accuracies.

Reads the table of ``benchmarks/ground_truth.py`` and its recipe (same data, same space), then
scores every row's architecture by each estimator:

    spos_uniform   a supernet trained by SPOS's rule (one uniform path per step)
    fairnas        the same with strict fairness (``nasforge.parallel.fair_sampler.FairSampler``:
                   every candidate of every edge once per round; one path per step, FairNAS's
                   summing of a round's gradients is not done, as in the pipeline)
    sandwich       OFA's sandwich rule: per step the largest path (all ``conv``), the smallest
                   that passes signal (all ``skip_connect``) and two uniform ones, gradients summed
    darts, nasb    the supernets of those searches (``nasforge.oneshot.search``), trained on
                   half of the training set (the other half chooses the architecture)

Each supernet's score of an architecture is its inherited-weight accuracy on the test digits:
``supernet.extract(arch)`` (the weight-sharing protocol), batch norm recalibrated on
``--bn-batches`` training batches (``nasforge.weightsharing.recalibrate_bn``). Each zero-cost
proxy of ``nasforge.proxies`` scores the architecture at initialisation on one training batch.

Last line: JSON with ``tau``, ``spearman`` and ``top10_precision`` per supernet estimator,
``proxy_tau``, ``proxy_spearman`` and ``proxy_top10_precision`` per proxy,
``seed_ceiling_tau`` (from the table), ``search_percentile`` and ``p_vs_random`` per search
(``benchmarks/_searches.py``, issue 27 part 4; ``--search-seeds`` with no value skips them),
the seconds each estimator took, and the errors of those that could not run.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _ranking_common import (  # noqa: E402 - after the path fix, as a script
    kendall,
    load_data,
    space_of,
    spearman,
    top_precision,
)
from _searches import ALGORITHMS as SEARCHES  # noqa: E402
from _searches import run_searches  # noqa: E402

from nasforge.oneshot import activate, supernet  # noqa: E402
from nasforge.oneshot.search import search  # noqa: E402
from nasforge.parallel.fair_sampler import FairSampler  # noqa: E402
from nasforge.proxies import list_proxies, score_arch  # noqa: E402
from nasforge.space.search_space import Arch, SearchSpace  # noqa: E402
from nasforge.weightsharing import accuracy, recalibrate_bn  # noqa: E402

__all__ = ["RULES", "train_supernet", "inherited_scores", "proxy_scores", "rank_report", "main"]

log = logging.getLogger("nasforge.benchmarks.ranking")
DEFAULT_TABLE = Path(__file__).resolve().parent / "data" / "ground_truth_mnist.json"


def _uniform(search: SearchSpace, seed: int) -> Iterator[list[Arch]]:
    rng = random.Random(seed)
    while True:
        yield [search.sample(rng)]


def _fair(search: SearchSpace, seed: int) -> Iterator[list[Arch]]:
    decisions = search.decisions
    for subnet in FairSampler([len(d) for d in decisions], seed):
        yield [{d.label: d.values[i] for d, i in zip(decisions, subnet)}]


def _sandwich(search: SearchSpace, seed: int) -> Iterator[list[Arch]]:
    rng = random.Random(seed)
    largest = {d.label: "conv" for d in search.decisions}
    smallest = {d.label: "skip_connect" for d in search.decisions}
    while True:
        yield [largest, smallest, search.sample(rng), search.sample(rng)]


#: sampling rule -> (search space, seed) -> endless paths to train, one list per step
RULES: dict[str, Callable[[SearchSpace, int], Iterator[list[Arch]]]] = {
    "spos_uniform": _uniform,
    "fairnas": _fair,
    "sandwich": _sandwich,
}


def train_supernet(
    recipe: dict[str, Any], rule: str, epochs: int, seed: int, data: tuple
) -> torch.nn.Module:
    """Returns the single-path supernet of the recipe's space trained ``epochs`` epochs with
    the sampling ``rule`` (one of :data:`RULES`) and the recipe's optimiser and schedule."""
    (x, y), _ = data
    torch.manual_seed(seed)
    net = supernet(space_of(recipe), "spos", example=x[:2])
    paths = RULES[rule](net.space.search_space(), seed)
    bs = recipe["batch_size"]
    opt = torch.optim.SGD(net.weights(), **recipe["optimizer"])
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs * math.ceil(len(x) / bs))
    g = torch.Generator().manual_seed(seed)
    net.train()
    for _ in range(epochs):
        perm = torch.randperm(len(x), generator=g)
        for i in range(0, len(x), bs):
            idx = perm[i : i + bs]
            archs = next(paths)
            opt.zero_grad(set_to_none=True)
            for arch in archs:  # a sandwich sums its paths' gradients into one step
                activate(net, arch)
                (F.cross_entropy(net(x[idx]), y[idx]) / len(archs)).backward()
            torch.nn.utils.clip_grad_norm_(net.weights(), 5.0)
            opt.step()
            sched.step()
    return net


def train_search_supernet(
    recipe: dict[str, Any], algorithm: str, epochs: int, seed: int, data: tuple
) -> tuple[torch.nn.Module, Arch]:
    """Returns the supernet of a ``darts`` or ``nasb`` search on the recipe's training set
    (first half weights, second half architecture) and the architecture the search picks."""
    (x, y), _ = data
    half = len(x) // 2
    split = {"train": (x[:half], y[:half]), "val": (x[half:], y[half:])}
    result = search(
        space_of(recipe),
        algorithm,
        split,
        epochs=epochs,
        batch_size=recipe["batch_size"],
        seed=seed,
        threads=recipe["threads"],
        progress="off",
    )
    assert result.supernet is not None
    return result.supernet, dict(result.arch)


def inherited_scores(
    net: Any, archs: list[Arch], data: tuple, bn_batches: int, batch_size: int
) -> list[float]:
    """Returns each architecture's test accuracy with weights inherited from ``net``
    (``net.extract``), batch norm recalibrated on the first ``bn_batches`` training batches."""
    (x, _), test = data
    calib = [x[i * batch_size : (i + 1) * batch_size] for i in range(bn_batches)]
    out = []
    for arch in archs:
        model = net.extract(arch)
        recalibrate_bn(model, calib)
        out.append(accuracy(model, test))
    return out


def proxy_scores(
    recipe: dict[str, Any], archs: list[Arch], data: tuple, batch: int, seed: int
) -> dict[str, list[float]]:
    """Returns proxy name -> each architecture's score at initialisation (weights from
    ``seed``) on the first ``batch`` training images."""
    (x, y), _ = data
    space = space_of(recipe)
    return {
        name: [score_arch(space, a, name, x[:batch], y[:batch], seed) for a in archs]
        for name in list_proxies()
    }


def rank_report(truth: list[float], scores: dict[str, list[float]]) -> dict[str, dict]:
    """Returns ``tau``, ``spearman`` and ``top10_precision``, each estimator -> value."""
    return {
        "tau": {k: kendall(truth, s) for k, s in scores.items()},
        "spearman": {k: spearman(truth, s) for k, s in scores.items()},
        "top10_precision": {k: top_precision(truth, s) for k, s in scores.items()},
    }


def run(
    table: dict[str, Any],
    estimators: list[str],
    epochs: int,
    seed: int = 0,
    bn_batches: int = 10,
    proxy_batch: int = 64,
    search_seeds: tuple[int, ...] = (),
    search_epochs: int | None = None,
    proxy_samples: int = 100,
    workers: int = 2,
) -> dict[str, Any]:
    """Returns the report: every estimator's rank statistics against the table's means, and
    with ``search_seeds`` each search's percentile and p-value (``search_epochs`` defaults to
    ``epochs``; then the ranking step's ``darts``/``nasb`` search of ``seed`` is reused)."""
    recipe = table["recipe"]
    torch.set_num_threads(recipe["threads"])
    data = load_data(recipe)
    archs = [r["arch"] for r in table["rows"]]
    truth = [r["mean"] for r in table["rows"]]
    scores: dict[str, list[float]] = {}
    seconds: dict[str, float] = {}
    errors: dict[str, str] = {}
    found: dict[tuple[str, int], Arch] = {}
    for name in estimators:
        t0 = time.perf_counter()
        try:
            if name in RULES:
                net = train_supernet(recipe, name, epochs, seed, data)
            else:
                net, found[(name, seed)] = train_search_supernet(recipe, name, epochs, seed, data)
            scores[name] = inherited_scores(net, archs, data, bn_batches, recipe["batch_size"])
        except Exception as exc:  # reported, so one estimator's failure keeps the others
            log.exception("estimator %s failed", name)
            errors[name] = f"{type(exc).__name__}: {exc}"
        seconds[name] = round(time.perf_counter() - t0, 1)
        log.info("%s: %.1f s", name, seconds[name])
    t0 = time.perf_counter()
    proxies = proxy_scores(recipe, archs, data, proxy_batch, seed)
    seconds["proxies"] = round(time.perf_counter() - t0, 1)
    by_proxy = rank_report(truth, proxies)
    searches: dict[str, Any] = {"search_percentile": None, "p_vs_random": None}
    if search_seeds:
        s_epochs = epochs if search_epochs is None else search_epochs
        reuse = found if s_epochs == epochs else {}
        t0 = time.perf_counter()
        searches = run_searches(
            table, list(SEARCHES), list(search_seeds), s_epochs, proxy_samples, workers, reuse
        )
        seconds["searches"] = round(time.perf_counter() - t0, 1)
    return {
        **rank_report(truth, scores),
        "proxy_tau": by_proxy["tau"],
        "proxy_spearman": by_proxy["spearman"],
        "proxy_top10_precision": by_proxy["top10_precision"],
        "seed_ceiling_tau": table.get("summary", {}).get("seed_ceiling_tau"),
        **searches,
        "n_archs": len(archs),
        "supernet_epochs": epochs,
        "seconds": seconds,
        "errors": errors,
        "scores": {**scores, **{f"proxy_{k}": v for k, v in proxies.items()}},
    }


def main(argv: list[str] | None = None) -> int:
    """Returns 0 after printing the report's JSON as the last line."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--table", type=Path, default=DEFAULT_TABLE)
    p.add_argument(
        "--estimators",
        nargs="+",
        default=[*RULES, "darts", "nasb"],
        help="supernet estimators to run (default: all)",
    )
    p.add_argument("--epochs", type=int, default=10, help="supernet training epochs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--bn-batches", type=int, default=10)
    p.add_argument("--proxy-batch", type=int, default=64)
    p.add_argument("--search-seeds", type=int, nargs="*", default=[0, 1, 2],
                   help="seeds of each search (none: skip the searches)")  # fmt: skip
    p.add_argument("--search-epochs", type=int, help="search epochs (default: --epochs)")
    p.add_argument("--proxy-samples", type=int, default=100, help="K of the proxy filter")
    p.add_argument("--workers", type=int, default=2, help="processes for the searches")
    p.add_argument("--out", type=Path, help="also write the report here")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    table = json.loads(args.table.read_text())
    report = run(table, args.estimators, args.epochs, args.seed, args.bn_batches,
                 args.proxy_batch, tuple(args.search_seeds), args.search_epochs,
                 args.proxy_samples, args.workers)  # fmt: skip
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "scores"}, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
