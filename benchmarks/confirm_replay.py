"""What confirming stage 2's finalists is worth, replayed on the ground-truth tables' own seeds
(issue 51): no training, only the validation accuracies each table recorded per row and seed.

A draw takes ``--pool`` competent rows of a table (within the parameter budget when
constrained: the median of the rows, as in ``budgeted_search.py``), scores them by a stage-1
rule, shortlists ``k`` (``by_size`` of them the largest by FLOPs, the rest the best scores),
"trains" each with one of the table's seeds (its recorded validation accuracy for that seed),
trains the best ``confirm`` again with the table's next seed, and picks the best mean over a
finalist's trainings (without confirmation: the best single validation accuracy). The pick is
placed by its truth (the mean test accuracy over the table's seeds) among the rows, as the
benchmark places it. Stage-1 rules: ``flops`` (bigger first), ``noisy_truth_S`` (the truth
plus Gaussian noise of standard deviation S: a supernet that ranks, imperfectly) and
``random``.

Configurations, named ``k<k>c<confirm>b<by_size>``: ``k8c0b4`` (the two-stage default before
the confirmation), ``k6c2b3`` (the default since: the same 8 trainings), and others of 8 or
10 trainings beside them.

Last line, JSON: ``replay_percentile`` {table: {bound: {rule: {config: mean percentile}}}},
``gain_of_default`` {table: {bound: {rule: k6c2b3 minus k8c0b4}}}, ``min_gain`` (the smallest
of those), ``draws``, ``pool``, ``tables``, ``seconds``.

    python benchmarks/confirm_replay.py              # v4 and v5, 3,000 draws a cell
    python benchmarks/confirm_replay.py --quick      # smoke run: 30 draws
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _ranking_common import table_path  # noqa: E402
from ranking import competent_rows, percentile  # noqa: E402

__all__ = ["CONFIGS", "replay_pick", "run_table", "main"]

log = logging.getLogger("nasforge.benchmarks.confirm_replay")

#: (k, confirm, by_size) by name; the first is the default before the confirmation, the
#: second the default since
CONFIGS = {"k8c0b4": (8, 0, 4), "k6c2b3": (6, 2, 3), "k4c4b2": (4, 4, 2), "k7c1b3": (7, 1, 3),
           "k8c2b4": (8, 2, 4)}  # fmt: skip
BOUNDS = ("unconstrained", "constrained")


def replay_pick(short: list[dict], seed: int, n_seeds: int, confirm: int) -> dict:
    """Returns the row stage 2 picks from the shortlist ``short``: each row's recorded
    validation accuracy for table seed ``seed``; the best ``confirm`` (2 or more) also for
    the next seed, and the best mean of those; else the best single accuracy."""
    order = sorted(short, key=lambda r: -r["val_accuracies"][seed])
    if confirm < 2:
        return order[0]
    again = (seed + 1) % n_seeds
    return max(
        order[:confirm], key=lambda r: r["val_accuracies"][seed] + r["val_accuracies"][again]
    )


def _score(rule: str, row: dict, rng: random.Random) -> float:
    """Returns stage 1's score of ``row`` by ``rule`` (higher is better)."""
    if rule == "flops":
        return float(row["macs"])
    if rule == "random":
        return rng.random()
    return row["mean"] + rng.gauss(0.0, float(rule.rsplit("_", 1)[1]))


def _shortlist(pool: list[dict], scores: dict[int, float], k: int, by_size: int) -> list[dict]:
    """Returns the ``k - by_size`` best scored rows of ``pool``, then the largest of the rest."""
    out = sorted(pool, key=lambda r: -scores[id(r)])[: k - by_size]
    rest = [r for r in sorted(pool, key=lambda r: (-r["macs"], -r["params"])) if r not in out]
    return out + rest[:by_size]


def run_table(table: dict, rules: list[str], draws: int, pool: int, seed: int) -> dict[str, Any]:
    """Returns {bound: {rule: {config: mean percentile}}} of one table."""
    rows, _ = competent_rows(table)
    n_seeds = len(table["seeds"])
    budget = statistics.median(r["params"] for r in rows)
    out: dict[str, Any] = {}
    for bound in BOUNDS:
        within = [r for r in rows if bound == BOUNDS[0] or r["params"] <= budget]
        means = [r["mean"] for r in within]
        out[bound] = {}
        for rule in rules:
            rng = random.Random(seed)  # every rule and configuration sees the same draws
            got: dict[str, list[float]] = {c: [] for c in CONFIGS}
            for _ in range(draws):
                drawn = [r for r in rng.sample(rows, min(pool, len(rows))) if r in within]
                s = rng.randrange(n_seeds)
                scores = {id(r): _score(rule, r, rng) for r in drawn}
                for name, (k, confirm, by_size) in CONFIGS.items():
                    pick = replay_pick(_shortlist(drawn, scores, k, by_size), s, n_seeds, confirm)
                    got[name].append(percentile(pick["mean"], means))
            out[bound][rule] = {c: statistics.mean(v) for c, v in got.items()}
    return out


def main(argv: list[str] | None = None) -> int:
    """Returns 0 after printing the figures' JSON as the last line."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--tables", nargs="+", default=["v4", "v5"], help="MNIST-1D table versions")
    p.add_argument("--rules", nargs="+", default=["flops", "noisy_truth_0.03",
                                                  "noisy_truth_0.08", "random"])  # fmt: skip
    p.add_argument("--draws", type=int, default=3000)
    p.add_argument("--pool", type=int, default=40, help="rows a draw takes (before the budget)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="30 draws: a check that it runs")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    t0 = time.perf_counter()
    draws = 30 if args.quick else args.draws
    figures = {t: run_table(json.loads(table_path(t).read_text()), args.rules, draws, args.pool,
                            args.seed) for t in args.tables}  # fmt: skip
    gain = {t: {b: {r: f[b][r]["k6c2b3"] - f[b][r]["k8c0b4"] for r in args.rules} for b in BOUNDS}
            for t, f in figures.items()}  # fmt: skip
    for t, f in figures.items():
        log.info("%s: %s", t, json.dumps(f, sort_keys=True))
    print(json.dumps({
        "replay_percentile": figures, "gain_of_default": gain,
        "min_gain": min(v for g in gain.values() for b in g.values() for v in b.values()),
        "draws": draws, "pool": args.pool, "tables": args.tables,
        "seconds": round(time.perf_counter() - t0, 1),
    }, sort_keys=True))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
