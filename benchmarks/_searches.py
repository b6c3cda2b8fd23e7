"""The work of ``benchmarks/ranking.py`` (issue 35), one job per supernet and search seed: one
supernet recipe for ranking and search, inherited-weight scores on validation data, each
algorithm's unconstrained and constrained pick, and the retraining of picks.

One recipe (:data:`SUPERNET`, settings of the search loop and of SPOS's evolution) trains every
supernet on the training split; every score and every search choice uses the validation split
(batch norm recalibrated on ``bn_batches`` training batches first); the test split is the
truth's alone. A job of seed 0 both scores the table's architectures (the ranking) and searches;
seeds 1.. only search. Algorithms:

    spos        single path, uniform (Guo et al.; ``sampler: "fair"``: FairNAS's strict
                fairness), then regularized evolution on validation,
                compared by the shipped ``selection`` (the hybrid of supernet loss and SynFlow,
                ``nasforge.oneshot.selection``); ``spos_accuracy``: the same supernet and
                evolution by validation accuracy (the SPOS paper's selection; with
                ``--paper-selection``)
    fewshot     the SPOS supernet trained half the steps, split on ``fewshot_edges`` into 5 (one
                edge) or 25 (two) sub-supernets, which share the other half of the steps
                (``nasforge.oneshot.fewshot``); evolution scores each architecture in its own
                (``fewshot_accuracy`` as ``spos_accuracy``)
    fairnas     strict fairness (``FairSampler``), ranking only
    sandwich    largest + smallest + two uniform paths per step, ranking only
    darts, nasb ``nasforge.oneshot.search`` on {train, val}; pick: the exported argmax
    proxy       the filter: best-``proxy`` of ``proxy_samples`` uniform architectures

Constrained picks (parameters <= ``budget``): evolution tells an architecture over budget -1e9;
DARTS and NASB take the within-budget function their architecture weights like most (sum of log
strengths); the proxy filter keeps the within-budget samples.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import random
import time
from typing import Any

import torch
from _ranking_common import load_splits, param_count, space_of, train_arch

from nasforge.oneshot import config_for, search, supernet
from nasforge.oneshot.algorithms import own_settings
from nasforge.oneshot.common import SearchConfig
from nasforge.oneshot.fewshot import (
    FewShot,
    split_supernet,
    train_fewshot,
    train_single_path,
    uniform_paths,
)
from nasforge.oneshot.selection import Selection, evolve
from nasforge.parallel.fair_sampler import FairSampler
from nasforge.proxies import list_proxies, score_arch
from nasforge.space.search_space import Arch
from nasforge.spaces.cell_canon import canonical_arch, distinct_functions
from nasforge.weightsharing import accuracy, recalibrate_bn

__all__ = [
    "SUPERNET",
    "EPOCH_COST",
    "single_path_epochs",
    "algorithm_epochs",
    "ALGORITHMS",
    "RANK_ONLY",
    "supernet_job",
    "proxy_job",
    "retrain_job",
]

log = logging.getLogger("nasforge.benchmarks.searches")

#: The one supernet recipe of ranking and search (search settings + few-shot edges).
SUPERNET: dict[str, Any] = {
    # single-path steps: 40 epochs of table v3's 4,000 signals (63 steps each); the supernets
    # ranked at tau -0.01 / 0.41 / 0.50 (SPOS, table v2) after 4 / 24 / 48 such epochs: four
    # were far from enough. A table of fewer training signals trains more epochs of them.
    "steps": 2520,
    "epochs": None,  # single-path epochs; None: ``steps`` worth of the table's training split
    "batch_size": 64,
    "w_lr": 0.05,
    "bn_batches": 10,
    # scores are the mean over this many recalibrations (the first on the first ``bn_batches``
    # training batches, the others on seeded draws), a guard against one unlucky calibration
    # set (on table v4 it moved no tau by more than 0.01)
    "calibrations": 2,
    "population": 20,
    "cycles": 100,
    "sample_size": 5,
    "fewshot_edges": ["e3_0"],
    # also evolve by validation accuracy (the SPOS paper's selection): ``<algo>_accuracy``
    "paper_selection": False,
    # the SPOS search supernet's paths: "uniform" (SPOS's) or "fair" (FairNAS's strict
    # fairness, the ranking's best plain supernet); "fair" was tried for the constrained pick
    "sampler": "uniform",
}
#: CPU seconds of one supernet epoch relative to a single-path one (measured on the 2-core
#: machine at one thread: SPOS 2.4 s, DARTS 5.7 s with both steps of its bilevel update, NASB
#: 3.1 s; sandwich trains four paths a step). Every supernet gets the compute of ``epochs``
#: single-path epochs: an algorithm trains ``epochs / cost`` of its own.
EPOCH_COST = {"darts": 2.4, "nasb": 1.3, "sandwich": 4.0}
#: searches (each with >= 5 seeds) and the estimators that only rank
ALGORITHMS = ("spos", "fewshot", "darts", "nasb", "proxy")
RANK_ONLY = ("fairnas", "sandwich")


def config(sn: dict[str, Any], seed: int, algorithm: str = "spos") -> SearchConfig:
    """Returns the recipe's SearchConfig of ``algorithm`` for ``seed`` (``sn["epochs"]``
    resolved; the recipe's settings of other algorithms, SPOS's evolution for DARTS, left
    out)."""
    skip = ("fewshot_edges", "steps", "calibrations", "paper_selection", "sampler")
    given = own_settings(algorithm, {k: v for k, v in sn.items() if k not in skip})
    return config_for(algorithm, given, seed=seed)


def single_path_epochs(sn: dict[str, Any], n_train: int) -> int:
    """Returns the single-path epochs of the recipe: ``sn["epochs"]`` when set, else
    ``sn["steps"]`` (default 2,520) in epochs of ``n_train`` examples, rounded."""
    if sn.get("epochs") is not None:
        return int(sn["epochs"])
    return max(1, round(sn.get("steps", SUPERNET["steps"]) / math.ceil(n_train / sn["batch_size"])))


def algorithm_epochs(sn: dict[str, Any], n_train: int, algorithm: str) -> int:
    """Returns the epochs ``algorithm`` trains: the single-path epochs over its ``EPOCH_COST``."""
    return max(1, round(single_path_epochs(sn, n_train) / EPOCH_COST.get(algorithm, 1.0)))


def _steps(sn: dict[str, Any], n_train: int) -> int:
    return sn["epochs"] * math.ceil(n_train / sn["batch_size"])


def _rank_paths(net: Any, rule: str, seed: int) -> Any:
    search_space = net.space.search_space()
    if rule == "fairnas":
        ds = search_space.decisions
        fair = iter(FairSampler([len(d) for d in ds], seed))
        return ({d.label: d.values[i] for d, i in zip(ds, next(fair))} for _ in iter(int, 1))
    rng = random.Random(seed)
    largest = {d.label: "conv" for d in search_space.decisions}
    smallest = {d.label: "skip_connect" for d in search_space.decisions}
    return lambda: [largest, smallest, search_space.sample(rng), search_space.sample(rng)]


@torch.no_grad()
def _val_loss(model: torch.nn.Module, val: tuple) -> float:
    was = model.training
    model.eval()
    loss = float(torch.nn.functional.cross_entropy(model(val[0]), val[1]))
    model.train(was)
    return loss


def _score(
    extract: Any, archs: list[Arch], train: tuple, val: tuple, cfg: SearchConfig, n_cal: int
) -> tuple[list[list[float]], list[list[float]]]:
    """Returns each calibration's validation accuracies of ``archs`` (``[calibration][arch]``)
    and minus the validation losses (same shape): calibration 0 on the first ``bn_batches``
    training batches, calibration c on the first batches of a permutation seeded with c."""
    n = cfg.batch_size * cfg.bn_batches
    sets = []
    for c in range(n_cal):
        g = torch.Generator().manual_seed(c)
        x = train[0] if c == 0 else train[0][torch.randperm(len(train[0]), generator=g)]
        sets.append([x[i : i + cfg.batch_size] for i in range(0, min(n, len(x)), cfg.batch_size)])
    out: list[list[float]] = [[] for _ in sets]
    neg_loss: list[list[float]] = [[] for _ in sets]
    for arch in archs:
        model = extract(arch)
        for c, calib in enumerate(sets):
            recalibrate_bn(model, calib)
            out[c].append(accuracy(model, val))
            neg_loss[c].append(-_val_loss(model, val))
    return out, neg_loss


def _strength_pick(net: Any, recipe: dict, budget: int, base: int) -> Arch:
    weights = net.arch_weights()
    names = {m.label: m.names for m in net.mixed()}
    funcs, _ = distinct_functions(recipe["space"]["ops"])

    def logp(a: Arch) -> float:
        return sum(math.log(max(weights[k][names[k].index(v)], 1e-12)) for k, v in a.items())

    ok = [a for a in funcs if param_count(recipe, a, base) <= budget]
    return max(ok, key=logp)


def _evolutions(
    few: FewShot, space: Any, data: tuple, cfg: SearchConfig, allowed: Any, algo: str, paper: bool
) -> dict[str, list[Arch]]:
    """Returns name -> [pick, constrained pick] of the evolution on the supernet(s): ``algo``
    with the shipped selection (``cfg.algo.selection``) and, when ``paper``,
    ``<algo>_accuracy`` with the SPOS paper's (validation accuracy); a selection scores an
    architecture once for both picks."""
    train, val = data
    out = {}
    ways = [(algo, cfg.algo.selection)] + ([(f"{algo}_accuracy", "accuracy")] if paper else [])
    for name, how in ways:
        c = dataclasses.replace(cfg, algo=dataclasses.replace(cfg.algo, selection=how))
        sel = Selection(space, few.net_for, train, val, c)
        out[name] = [canonical_arch(evolve(sel, c, ok)[0]) for ok in (None, allowed)]
    return out


def supernet_job(
    recipe: dict[str, Any],
    sn: dict[str, Any],
    algorithm: str,
    seed: int,
    archs: list[Arch] | None,
    budget: int,
    base: int,
) -> dict[str, Any]:
    """Returns ``{"scores"}`` (each of ``archs``' inherited validation accuracy, when given),
    ``"pick"`` and ``"pick_constrained"`` (canonical; none for ranking-only rules) and
    ``"seconds"`` of one supernet of ``algorithm`` trained with ``seed``."""
    torch.set_num_threads(recipe["threads"])
    train, val, _ = load_splits(recipe)
    sn = {**sn, "epochs": algorithm_epochs(sn, len(train[0]), algorithm)}
    cfg = config(sn, seed, algorithm if algorithm in ("darts", "nasb") else "spos")
    t0 = time.perf_counter()
    # the space module initialises the candidates' weights, which the supernet inherits: seed
    # first (seeded after it, the initial weights came from whatever state the worker's global
    # generator was left in, and SPOS's and few-shot's scores differed between identical runs)
    torch.manual_seed(seed)
    space = space_of(recipe)
    out: dict[str, Any] = {"pick": None, "pick_constrained": None}
    steps = _steps(sn, len(train[0]))
    allowed = lambda a: param_count(recipe, a, base) <= budget  # noqa: E731
    if algorithm in ("darts", "nasb"):
        res = search(space, algorithm, {"train": train, "val": val}, config=cfg,
                     threads=recipe["threads"], progress="off")  # fmt: skip
        net = res.supernet
        extract = net.extract
        out["pick"] = canonical_arch(res.arch)
        out["pick_constrained"] = _strength_pick(net, recipe, budget, base)
    else:
        net = supernet(space, "spos", example=train[0][:2])
        if algorithm in RANK_ONLY:
            train_single_path(net, _rank_paths(net, algorithm, seed), train, cfg, steps, seed)
            few = FewShot((), {(): net})
        elif algorithm == "spos":
            fair = sn.get("sampler", "uniform") == "fair"
            paths = _rank_paths(net, "fairnas", seed) if fair else uniform_paths(net, seed)
            train_single_path(net, paths, train, cfg, steps, seed)
            few = FewShot((), {(): net})
        else:  # few-shot: half the steps one-shot, the other half shared by the sub-supernets
            train_single_path(net, uniform_paths(net, seed), train, cfg, steps // 2, seed)
            few = split_supernet(net, sn["fewshot_edges"])
            per_sub = max(1, (steps - steps // 2) // len(few.subnets))
            train_fewshot(few, train, cfg, per_sub, seed)
        extract = few.extract
        if algorithm not in RANK_ONLY:
            picks = _evolutions(few, space, (train, val), cfg, allowed, algorithm,
                                sn.get("paper_selection", False))  # fmt: skip
            out["pick"], out["pick_constrained"] = picks.pop(algorithm)
            out["extra_picks"] = picks
    if archs is not None:
        per_cal, neg_loss = _score(extract, archs, train, val, cfg, sn.get("calibrations", 1))
        out["scores"] = [sum(v) / len(v) for v in zip(*per_cal)]
        out["scores_per_calibration"] = per_cal
        out["scores_loss"] = [sum(v) / len(v) for v in zip(*neg_loss)]
    out["seconds"] = round(time.perf_counter() - t0, 1)
    log.info("%s seed %d: %.0f s", algorithm, seed, out["seconds"])
    return out


def proxy_job(
    recipe: dict[str, Any],
    archs: list[Arch],
    seeds: list[int],
    proxy: str,
    k: int,
    budget: int,
    base: int,
    batch: int = 64,
) -> dict[str, Any]:
    """Returns ``{"scores"}`` (proxy -> each of ``archs``' score at initialisation, seed 0,
    on the first ``batch`` training examples) and the filter's picks per seed: the
    best-``proxy`` of ``k`` uniform samples, unconstrained and within ``budget``."""
    torch.set_num_threads(recipe["threads"])
    train, _, _ = load_splits(recipe)
    x, y = train[0][:batch], train[1][:batch]
    space = space_of(recipe)
    scores = {n: [score_arch(space, a, n, x, y, 0) for a in archs] for n in list_proxies()}
    picks, constrained = {}, {}
    for s in seeds:
        rng = random.Random(s)
        cands = [canonical_arch(space.search_space().sample(rng)) for _ in range(k)]
        sc = [score_arch(space, a, proxy, x, y, s) for a in cands]
        order = sorted(range(k), key=lambda i: -sc[i])
        picks[s] = cands[order[0]]
        ok = [i for i in order if param_count(recipe, cands[i], base) <= budget]
        constrained[s] = cands[ok[0]] if ok else cands[order[-1]]
    return {"scores": scores, "picks": picks, "constrained": constrained}


def retrain_job(recipe: dict[str, Any], arch: Arch, seed: int) -> float:
    """Returns the test accuracy of ``arch`` retrained by the truth's recipe with ``seed``."""
    train, val, test = load_splits(recipe)
    if recipe.get("dataset") != "mnist1d":  # issue 27's table trains on every training digit
        train = (torch.cat([train[0], val[0]]), torch.cat([train[1], val[1]]))
    return float(train_arch(recipe, arch, seed, train, test)["test"])
