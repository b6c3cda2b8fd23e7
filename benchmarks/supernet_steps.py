"""How long stage 1's supernet must train before its scores rank anything (issue 51): the
shipped search of a sampling algorithm (``nasforge.oneshot.search`` at its defaults but
``epochs``; SPOS unless ``--algorithms`` names others) trains a supernet on a ground-truth
table's data, then every competent row of the table is scored as the two-stage search scores
a candidate (its path extracted, batch norm recalibrated on
training batches, the accuracy on the validation split), and Kendall's tau between those
scores and the rows' truth (mean test accuracy over the table's seeds) is measured, over every
row and over the rows within the parameter budget (the median, as ``ranking.py`` and
``budgeted_search.py`` bound it). Beside it, the trivial baseline: tau of FLOPs (MACs), which
costs nothing.

On the tables' 1,000 training signals the one-shot default of 10 epochs is 160 weight steps;
docs/oneshot.md ("Finding the best architecture within a budget") gives the figures and what
they change (and do not change) in the two-stage search.

Last line, JSON: ``tau_vs_truth`` {table: {epochs: {unconstrained, constrained}}} (SPOS's,
the mean over seeds; None when ``--algorithms`` leaves SPOS out), ``tau_per_seed`` (same shape,
a list per cell), ``tau_by_algorithm`` {algorithm: {table: ...}} (every ``--algorithms``: a
sampling one-shot algorithm, ``spos``, ``fairnas`` or ``fewshot``, whose supernet is trained
and scored the same way), ``tau_flops`` {table: {...}}, ``steps_per_epoch``, ``n_seeds``,
``seconds``, ``load_average``.

    python benchmarks/supernet_steps.py                          # v4 and v5, 10/40/160 epochs
    python benchmarks/supernet_steps.py --tables v5 --epochs 10 160 --seeds 0 1
    python benchmarks/supernet_steps.py --algorithms fewshot fairnas --epochs 160
    python benchmarks/supernet_steps.py --quick                  # smoke run: a miniature table
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _ranking_common import kendall, load_splits, space_of, table_path  # noqa: E402
from ranking import competent_rows  # noqa: E402

__all__ = ["score_rows", "main"]

log = logging.getLogger("nasforge.benchmarks.supernet_steps")
BOUNDS = ("unconstrained", "constrained")


def score_rows(
    table: dict[str, Any], seed: int, epochs: int, algorithm: str = "spos"
) -> dict[str, Any]:
    """Returns the inherited validation accuracy of every competent row of ``table`` under a
    supernet of ``algorithm`` (a sampling one-shot algorithm: ``spos``, ``fairnas``,
    ``fewshot``) trained ``epochs`` with ``seed`` (the shipped search's other defaults),
    each scored as stage 1 scores a candidate (:func:`nasforge.oneshot.common.inherited`),
    the weight steps of one epoch, and the seconds the training and the scoring took."""
    import torch

    from nasforge.oneshot import config_for, search
    from nasforge.oneshot.common import Split, inherited, n_steps

    recipe = table["recipe"]
    torch.set_num_threads(recipe["threads"])
    rows, _ = competent_rows(table)
    train, val, _ = load_splits(recipe)
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    res = search(space_of(recipe), algorithm, {"train": train, "val": val}, seed=seed,
                 epochs=epochs, threads=recipe["threads"], progress="off")  # fmt: skip
    t1 = time.perf_counter()
    net, cfg = res.supernet.cpu(), config_for(algorithm, {"seed": seed, "epochs": epochs})
    split = Split(train, val)
    scores = [inherited(net, r["arch"], split, cfg)[1] for r in rows]
    return {"scores": scores, "steps_per_epoch": n_steps(split, cfg) // epochs,
            "train_s": t1 - t0, "score_s": time.perf_counter() - t1}  # fmt: skip


def _taus(rows: list[dict], scores: list[float]) -> dict[str, float | None]:
    """Returns {bound: Kendall tau of ``scores`` against the rows' truth} (None: constant)."""
    budget = statistics.median(r["params"] for r in rows)
    out = {}
    for bound in BOUNDS:
        idx = [i for i, r in enumerate(rows) if bound == BOUNDS[0] or r["params"] <= budget]
        out[bound] = kendall([scores[i] for i in idx], [rows[i]["mean"] for i in idx])
    return out


def main(argv: list[str] | None = None) -> int:
    """Returns 0 after printing the figures' JSON as the last line."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--tables", nargs="+", default=["v4", "v5"],
                   help="MNIST-1D table versions in data/, or table files")  # fmt: skip
    p.add_argument("--epochs", type=int, nargs="+", default=[10, 40, 160])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--algorithms", nargs="+", default=["spos"],
                   help="sampling one-shot algorithms whose supernets to measure (fairnas: "
                        "the two-stage default's stage 1)")  # fmt: skip
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="a miniature table, one seed")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    t0, load_before = time.perf_counter(), os.getloadavg()[0]
    tables: dict[str, dict] = {}
    if args.quick:
        from _ranking_common import MINI_RECIPE_1D
        from ground_truth import build_table

        tables["mini"] = build_table(MINI_RECIPE_1D, 4, [0, 1], arch_seed=0, out=None, workers=1)
        args.seeds, args.epochs, args.workers = [0], [1, 2], 1
    else:
        for name in args.tables:
            tables[name] = json.loads(table_path(name).read_text())
    ctx = multiprocessing.get_context("spawn")  # no fork of a process torch has run in
    with ProcessPoolExecutor(max_workers=args.workers, mp_context=ctx) as pool:
        jobs = {(a, t, e, s): pool.submit(score_rows, tab, s, e, a) for a in args.algorithms
                for t, tab in tables.items() for e in args.epochs for s in args.seeds}  # fmt: skip
        done = {}
        for key, fut in jobs.items():
            done[key] = fut.result()
            log.info("%s %s %d epochs seed %d: trained %.1f s, scored %.1f s", *key,
                     done[key]["train_s"], done[key]["score_s"])  # fmt: skip
    per_seed: dict[str, Any] = {}
    mean: dict[str, Any] = {}
    flops: dict[str, Any] = {}
    steps: dict[str, int] = {}
    for t, tab in tables.items():
        rows, _ = competent_rows(tab)
        flops[t] = _taus(rows, [float(r["macs"]) for r in rows])
        steps[t] = done[(args.algorithms[0], t, args.epochs[0], args.seeds[0])]["steps_per_epoch"]
        for a in args.algorithms:
            for e in args.epochs:
                taus = [_taus(rows, done[(a, t, e, s)]["scores"]) for s in args.seeds]
                cell = {b: [x[b] for x in taus] for b in BOUNDS}
                per_seed.setdefault(a, {}).setdefault(t, {})[str(e)] = cell
                found = {b: [x for x in v if x is not None] for b, v in cell.items()}
                mean.setdefault(a, {}).setdefault(t, {})[str(e)] = {
                    b: statistics.mean(v) if v else None for b, v in found.items()
                }
    print(json.dumps({
        "tau_vs_truth": mean.get("spos"), "tau_per_seed": per_seed.get("spos"),
        "tau_by_algorithm": mean, "tau_flops": flops,
        "steps_per_epoch": steps, "n_seeds": len(args.seeds),
        "seconds": round(time.perf_counter() - t0, 1),
        "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }, sort_keys=True))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
