"""The work of ``benchmarks/budgeted_search.py`` (issue 51), one job per search: a two-stage
run (the shipped ``TwoStageSearch``, stage 2 training by the ground truth's recipe) and a
single-stage one-shot search (the shipped ``nasforge.oneshot.search``), each with an optional
parameter budget, on a ground-truth table's data.

Stage 2's evaluator is :class:`RecipeEvaluator`: the table's training of one row
(``_ranking_common.train_arch``: the recipe's schedule, seed and single thread, on the canonical
architecture), reporting the validation accuracy after each epoch, so the engine's ASHA stops it
at a rung exactly where the table's own training of that row stood; it never sees the test
split. A shortlisted architecture that is a row of the table, trained to the end with one of the
table's seeds, ends at that row's recorded validation accuracy (the benchmark checks so).
"""

from __future__ import annotations

import logging
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from _ranking_common import load_splits, space_of, train_arch

from nasforge.engine.classification import training_seed
from nasforge.engine.evaluator import BaseEvaluator, Report
from nasforge.oneshot import search
from nasforge.oneshot.algorithms import algorithm_names
from nasforge.run.shortlist import read_shortlist
from nasforge.run.store import Store
from nasforge.space.search_space import Arch
from nasforge.spaces.cell_canon import canonical_arch, function_key
from nasforge.twostage import ShortlistSettings, TwoStageSearch
from nasforge.twostage.runner import DEFAULT_CONFIRM

__all__ = ["RecipeEvaluator", "two_stage_job", "single_stage_job"]

log = logging.getLogger("nasforge.benchmarks.budgeted")


class RecipeEvaluator(BaseEvaluator):
    """Returns ``{"accuracy": validation accuracy}`` of an architecture trained from scratch
    by a ground-truth table's ``recipe`` with ``seed`` (module docstring), reporting the
    validation accuracy after every epoch."""

    needs_model = False  # it builds the network itself, seeded as the table's training is
    default_metric = "accuracy"
    metric_names = ("accuracy",)

    def __init__(self, recipe: dict[str, Any], seed: int, seeds: list[int] | None = None) -> None:
        self.recipe, self.seed = recipe, seed
        self.seeds = list(seeds) if seeds is not None else [seed]  # the table's, in turn
        self._splits: Any = None

    def reseeded(self, repeat: int) -> RecipeEvaluator:
        """Returns the evaluator of the table's seed ``repeat`` places after this one's (so a
        retraining of a row ends at its recorded accuracy for that seed), or of a seed beyond
        the table's once they are all taken."""
        i = self.seeds.index(self.seed) if self.seed in self.seeds else 0
        seed = (self.seeds[(i + repeat) % len(self.seeds)] if repeat < len(self.seeds)
                else training_seed(self.seed, repeat))  # fmt: skip
        other = RecipeEvaluator(self.recipe, seed, self.seeds)
        other._splits = self._splits
        return other

    def evaluate(self, space: Any, arch: dict[str, Any], report: Report) -> dict[str, float]:
        """Returns the validation accuracy after the recipe's epochs (``report`` may end the
        training at a rung)."""
        if self._splits is None:
            self._splits = load_splits(self.recipe)
        train, val, _ = self._splits  # the test split is the ground truth's alone
        out = train_arch(self.recipe, canonical_arch(arch), self.seed, train, val, val, report)
        return {"accuracy": float(out["val"])}

    def config(self) -> dict[str, Any]:
        """Returns the recipe and the seed."""
        return {"type": "recipe", "recipe": self.recipe, "seed": self.seed}


def _budget(params: int | None) -> dict[str, float] | None:
    return None if params is None else {"params": params}


def two_stage_job(
    recipe: dict[str, Any],
    rule: str,
    seed: int,
    budget: int | None,
    train_seed: int,
    shortlist: dict[str, Any],
    oneshot: dict[str, Any],
    seeds: list[int] | None = None,
) -> dict[str, Any]:
    """Returns the pick (canonical), the shortlist (canonical, with stage 1's scores), each
    stage-2 trial's epochs and last validation accuracy, and stage 1's supernet epochs of one
    two-stage run: stage 1 by ``rule`` (``shortlist``: the shortlist's settings beside the
    shipped defaults; ``oneshot``: the one-shot algorithm's) drawing with ``seed``, within
    ``budget`` parameters when given; stage 2 by :class:`RecipeEvaluator` with ``train_seed``
    (its confirmation with the next of the table's ``seeds``)
    under the shipped stopper, one trial at a time in this process."""
    torch.set_num_threads(recipe["threads"])
    t0 = time.perf_counter()
    train, val, _ = load_splits(recipe)
    torch.manual_seed(seed)  # the space's initial weights are the supernet's
    space = space_of(recipe)
    confirm = shortlist.get("confirm", DEFAULT_CONFIRM)  # stage 2's, beside the shortlist's
    spec: dict[str, Any] = {**{k: v for k, v in shortlist.items() if k != "confirm"},
                            "algorithm": rule, "seed": seed, "budget": _budget(budget)}  # fmt: skip
    if rule in algorithm_names():
        spec["settings"] = {"seed": seed, **oneshot}
    settings = ShortlistSettings.from_mapping(spec)
    with tempfile.TemporaryDirectory() as tmp:
        run = TwoStageSearch(space, RecipeEvaluator(recipe, train_seed, seeds),
                             {"train": train, "val": val}, settings,
                             directory=Path(tmp) / "run", executor="inprocess", progress="off",
                             threads=recipe["threads"], confirm=confirm)  # fmt: skip
        run.run()
        supernet_epochs = run.proposer.epochs  # 0 for a rule that trains nothing
        network_epochs = run.proposer.network_epochs  # FairNAS: several paths a step
        trials = run.trials()
        best = run.best(1)
        store = Store.open(Path(tmp) / "run")
        try:
            short = read_shortlist(store) or {"candidates": [], "pool": 0}
        finally:
            store.close()
    curves = [
        {"function": function_key(t.arch), "status": t.status, "epochs": len(t.intermediates),
         "val": (t.metrics or {}).get("accuracy",
                                      t.intermediates[-1].get("accuracy") if t.intermediates
                                      else None),
         # its training's index (0; 1 for a finalist's confirmation, the table's next seed)
         "repeat": sum(u.arch_id == t.arch_id for u in trials if u.id < t.id)}
        for t in trials
    ]  # fmt: skip
    return {
        "pick": canonical_arch(best[0].arch) if best else None,
        "shortlist": [
            {"arch": canonical_arch(c["arch"]), "score": c["score"]} for c in short["candidates"]
        ],  # fmt: skip
        "pool": short["pool"],
        "trials": curves,
        "stage2_epochs": sum(c["epochs"] for c in curves),
        "stage1_epochs": supernet_epochs,
        "stage1_network_epochs": network_epochs,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def single_stage_job(
    recipe: dict[str, Any], algorithm: str, seed: int, budget: int | None, oneshot: dict
) -> dict[str, Any]:
    """Returns the pick (canonical) of one shipped one-shot search by ``algorithm`` (its
    defaults, then ``oneshot``) with ``seed``, within ``budget`` parameters when given; or
    ``{"error"}`` when the algorithm refuses the space or the data (the message)."""
    torch.set_num_threads(recipe["threads"])
    t0 = time.perf_counter()
    train, val, _ = load_splits(recipe)
    torch.manual_seed(seed)
    space = space_of(recipe)
    try:
        res = search(space, algorithm, {"train": train, "val": val}, seed=seed,
                     budget=_budget(budget), threads=recipe["threads"], progress="off",
                     **oneshot)  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - a refusal is a result of the benchmark, named
        log.warning("%s seed %d: %s", algorithm, seed, exc)
        return {"pick": None, "error": f"{type(exc).__name__}: {exc}"[:300]}
    pick: Arch = canonical_arch(res.arch)
    return {"pick": pick, "seconds": round(time.perf_counter() - t0, 1)}
