"""ENAS's pick placed among the ranking ground truth (issue 39, ``benchmarks/solutions.py``'s
``enas`` part): one ENAS search per seed with the supernet recipe of ``benchmarks/ranking.py``
(:data:`_searches.SUPERNET`: the same weight steps as SPOS's supernet; ENAS's controller
settings, warm-up and reward included, are the shipped defaults of
:class:`~nasforge.oneshot.enas.EnasSettings`), its pick
retrained by the truth's recipe on the truth's seeds (or read from the table when its function
is a row), and the percentile of its mean test accuracy among the competent rows
(:func:`ranking.percentile`, as ``search_percentile`` is computed).
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import torch
from _ranking_common import load_splits, space_of
from _searches import SUPERNET, config, single_path_epochs
from ranking import DEFAULT_TABLE, _retrain, _rows, percentile

from nasforge.oneshot import search
from nasforge.spaces.cell_canon import canonical_arch, competent, function_key

__all__ = ["enas_search", "enas_percentile"]

log = logging.getLogger("nasforge.benchmarks.enas")
DATA = Path(__file__).resolve().parent / "data"
#: ENAS's settings (EnasSettings), reported beside the figure
CONTROLLER_FIELDS = ("warmup_epochs", "controller_reward", "controller_batch", "controller_steps",
                     "controller_lr", "entropy_weight", "final_samples", "selection",
                     "selection_proxy", "selection_reference")  # fmt: skip
#: ground-truth table -> the ranking benchmark's search results on it (SPOS+evolution's figure)
SEARCH_RESULTS = {
    "ground_truth_mnist1d_v3.json": DATA / "ranking_mnist1d_search.json",
    "ground_truth_mnist1d_v4.json": DATA / "ranking_mnist1d_v4.json",
}


def enas_search(recipe: dict[str, Any], sn: dict[str, Any], seed: int) -> dict[str, Any]:
    """Returns ENAS's canonical pick, the controller's last reward and entropy and the seconds
    of one search with ``seed`` on the recipe's training (weights) and validation (controller,
    pick) splits."""
    torch.set_num_threads(recipe["threads"])
    train, val, _ = load_splits(recipe)
    cfg = config({**sn, "epochs": single_path_epochs(sn, len(train[0]))}, seed, "enas")
    t0 = time.perf_counter()
    res = search(space_of(recipe), "enas", {"train": train, "val": val}, config=cfg,
                 threads=recipe["threads"], progress="off")  # fmt: skip
    last = res.history[-1]
    return {
        "pick": canonical_arch(res.arch),
        "reward": round(last["reward"], 4),
        "entropy": round(last["entropy"], 3),
        "seconds": round(time.perf_counter() - t0, 1),
    }


def enas_percentile(
    quick: bool,
    seeds: tuple[int, ...] = (0, 1, 2),
    workers: int = 3,
    table_path: Path = DEFAULT_TABLE,
    **settings: Any,
) -> dict[str, Any]:
    """Returns ``enas_percentile`` (mean over ``seeds``), the per-seed picks and percentiles,
    and the baselines (SPOS+evolution's recorded figure on the same table, random's 50);
    ``quick`` trains the supernet 8 epochs instead of the recipe's steps; ``settings``
    override search settings (the loop's and ENAS's); ``table_path`` is the ground truth
    (default: the ranking benchmark's)."""
    table = json.loads(Path(table_path).read_text())
    recipe = table["recipe"]
    rows, _ = _rows(table)
    means = [r["mean"] for r in rows]
    sn = {k: v for k, v in SUPERNET.items() if k != "fewshot_edges"}
    sn.update(settings)
    if quick:
        sn["epochs"] = 8
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        done = {s: pool.submit(enas_search, recipe, sn, s) for s in seeds}
        found = {s: f.result() for s, f in done.items()}
        picks = {s: f["pick"] for s, f in found.items()}
        accs = _retrain(pool, recipe, table, rows, picks)
    per_seed = []
    for s, f in found.items():
        acc = accs[function_key(f["pick"])]
        mean = statistics.mean(acc["accuracies"])
        pct = percentile(mean, means)
        per_seed.append({"seed": s, **f, "competent": competent(f["pick"]), "mean": mean,
                         "percentile": pct, "source": acc["source"]})  # fmt: skip
    results = SEARCH_RESULTS.get(Path(table_path).name)
    recorded = (
        json.loads(results.read_text())["search_percentile"]["spos"]
        if results is not None and results.exists()
        else None
    )
    return {
        "enas_percentile": statistics.mean(p["percentile"] for p in per_seed),
        "per_seed": [round(p["percentile"], 2) for p in per_seed],
        "target": 75,
        "table": Path(table_path).name,
        "spos_evolution_percentile": None if recorded is None else round(recorded, 2),
        "random_percentile": 50,
        "supernet": sn,
        # the ENAS settings every search ran with (EnasSettings's shipped defaults unless
        # ``settings`` overrode them); warmup_epochs None is 3/4 of the epochs
        "controller": {k: getattr(config(sn, 0, "enas").algo, k) for k in CONTROLLER_FIELDS},
        "detail": per_seed,
    }
