"""The best architecture within a budget (issue 51): the shipped two-stage search (a shortlist
of half the supernet's best and half the largest, then real training of all of it, its best
two trained again from another seed, the pick by their mean validation accuracy) against the
table's truth, beside the same two stages shortlisted by the supernet alone, FLOPs, parameters
and random draws, and beside every one-shot algorithm's own pick, on one or more ground-truth
tables of ``ground_truth.py`` (default: MNIST-1D v4 and v5, another data seed and draw of
architectures; a table missing is left out and said so).

Each search runs with ``--seeds`` (default 5) seeds, unconstrained and constrained (parameters
<= the median of the table's competent rows, as in ``ranking.py``), on ``--workers``
processes of one thread (``benchmarks/_budgeted.py``):

    two-stage   ``TwoStageSearch`` with the shipped defaults (stage 1 FairNAS for 2,560 weight
                steps, ``k`` 6 of a ``pool`` of 64, ``by_size`` 3 of them the largest, stage 2
                with no stopper and its best 2 confirmed; ``--supernet``, ``--k``, ``--pool``,
                ``--by-size``, ``--confirm``, ``--oneshot`` change them), its pool drawn from
                the whole space with the seed; stage 2 trains the shortlist by the table's
                recipe (seed: the table's seeds in turn; a confirmation: the table's other
                seed), one trial at a time
    rules       the same with the shortlist by the supernet alone (``supernet_alone``:
                ``by_size`` 0), ``flops``, ``params`` (bigger first) or ``random`` draws
    single      ``nasforge.oneshot.search`` of every registered one-shot algorithm at its
                defaults (``--oneshot`` for all) with the hard budget; its pick

A pick is placed by its truth: the mean test accuracy over the table's seeds, looked up when
its function is a row, else retrained by the recipe on those seeds (``ranking.Retrainer``).

Last line, JSON: ``two_stage_percentile`` {table: {unconstrained, constrained}} (mean over
seeds of the share of the table's competent rows, within the budget when constrained, whose
mean test accuracy is strictly below the pick's), ``p_vs_random`` (same shape: one-sided
Mann-Whitney U, the picks' accuracies above those rows', a uniform pick among them being
random), ``cost_over_train_all`` {table: {unconstrained, constrained,
stage1_unconstrained, stage1_constrained, stage1_network_unconstrained,
stage1_network_constrained}} (stage 2's training epochs, mean per seed, over the epochs of
training every competent row within the budget once; stage 1's supernet epochs over the same,
and its epochs of one network: a FairNAS epoch trains several paths on every batch),
``shortlist_rule`` {rule: {table: {unconstrained, constrained}}} (``supernet``
is the two-stage figure), ``single_stage_percentile`` {algorithm: {table: {...}}} (None where
the algorithm refused: ``extra.errors`` says why), ``n_seeds``, ``tables``, ``seconds``,
``load_average``; ``--out`` also writes every pick, shortlist and trial.

    python benchmarks/budgeted_search.py                       # both tables, 5 seeds
    python benchmarks/budgeted_search.py --seeds 0 1 --tables v4
    python benchmarks/budgeted_search.py --quick               # smoke run: a miniature table
    python benchmarks/budgeted_search.py --merge a.json b.json  # single-stage seeds of 2 runs
    python benchmarks/budgeted_search.py --supernet fairnas --rules supernet --algorithms

``--merge`` reads the ``--out`` files of runs of other seeds (for instance ``--seeds 1 2
--rules --out b.json``: the single-stage searches alone) and prints the single-stage figures
over all their seeds, with the seeds each covers.

``--quick`` builds the tests' miniature table (4 rows, 2 seeds) in memory and runs one seed
with one-epoch supernets, a pool of 6 and a shortlist of 2: a check that it runs, not a result.
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

from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _budgeted import single_stage_job, two_stage_job  # noqa: E402
from _ranking_common import param_count, table_path  # noqa: E402
from ranking import Retrainer, competent_rows, percentile  # noqa: E402

from nasforge.oneshot.algorithms import algorithm_names  # noqa: E402
from nasforge.spaces.cell_canon import function_key  # noqa: E402
from nasforge.twostage import ShortlistSettings  # noqa: E402

__all__ = ["RULES", "run_table", "merge_single_stage", "main"]

log = logging.getLogger("nasforge.benchmarks.budgeted_search")
#: the committed tables and runs of this benchmark
DATA = Path(__file__).resolve().parent / "data"
#: the one-shot algorithm of the two-stage default's stage 1 (``--supernet`` measures another)
SUPERNET = ShortlistSettings().algorithm
#: stage 1's rules: the supernet (the two-stage default) and the trivial ones
RULES = {"supernet": SUPERNET, "supernet_alone": SUPERNET, "flops": "flops", "params": "params",
         "random": "random"}  # fmt: skip
#: per rule, shortlist settings over the shipped ones: ``supernet`` is the shipped default
#: (half the shortlist by the supernet's ranking, half the largest), ``supernet_alone`` the
#: supernet's ranking for all k; a trivial rule never hedges
RULE_SETTINGS: dict[str, dict[str, Any]] = {
    "supernet_alone": {"by_size": 0},
    "flops": {"by_size": 0},
    "params": {"by_size": 0},
    "random": {"by_size": 0},
}
BOUNDS = ("unconstrained", "constrained")


def _figures(picks: list[Any], accs: dict, rows: list[dict], budget: int) -> dict[str, Any]:
    """Returns {bound: {"percentile", "p_vs_random", "picks"}} of one search's picks per seed
    (``picks[i]``: (unconstrained, constrained) of seed i; None: the search refused)."""
    out: dict[str, Any] = {}
    for j, bound in enumerate(BOUNDS):
        means = _row_means(rows, budget, bound)
        found = [p[j] for p in picks if p[j] is not None]
        if not found:
            out[bound] = {"percentile": None, "p_vs_random": None, "picks": []}
            continue
        pm = [statistics.mean(accs[function_key(a)]["accuracies"]) for a in found]
        pct, p_value = _placement(pm, means)
        out[bound] = {
            "percentile": pct,
            "p_vs_random": p_value,
            "picks": [{"arch": a, "mean": m, "percentile": percentile(m, means),
                       "source": accs[function_key(a)]["source"]} for a, m in zip(found, pm)],
        }  # fmt: skip
    return out


def _row_means(rows: list[dict], budget: int, bound: str) -> list[float]:
    """Returns the mean test accuracies of the rows a pick is placed among under ``bound``:
    every competent row, or those within ``budget`` parameters."""
    return [r["mean"] for r in rows if bound == BOUNDS[0] or r["params"] <= budget]


def _placement(pick_means: list[float], means: list[float]) -> tuple[float, float]:
    """Returns (the picks' mean percentile among ``means``, the one-sided Mann-Whitney p of
    the picks above them: a uniform pick among the rows being random)."""
    pct = statistics.mean(percentile(m, means) for m in pick_means)
    return pct, float(stats.mannwhitneyu(pick_means, means, alternative="greater").pvalue)


def _consistency(results: dict, rows: list[dict], seeds: list[int], epochs: int) -> dict:
    """Returns how many stage-2 trials of a table row trained to the end, and how many of
    them ended at the row's recorded validation accuracy for the seed they trained with."""
    by_fn = {r["function"]: r for r in rows}
    checked = equal = 0
    for (kind, _, s, _), res in results.items():
        if kind != "two":
            continue
        for t in res["trials"]:
            row = by_fn.get(t["function"])
            if row is None or t["epochs"] != epochs or t["val"] is None:
                continue
            checked += 1
            equal += t["val"] == row["val_accuracies"][(s + t.get("repeat", 0)) % len(seeds)]
    return {"full_trials_of_table_rows": checked, "equal_to_table": equal}


def run_table(
    table: dict[str, Any],
    seeds: list[int],
    rules: dict[str, str],
    algorithms: list[str],
    shortlist: dict[str, Any],
    oneshot: dict[str, Any],
    workers: int,
) -> dict[str, Any]:
    """Returns the figures of one table (see the module docstring), with every pick."""
    recipe = table["recipe"]
    rows, _ = competent_rows(table)
    budget = int(statistics.median(r["params"] for r in rows))
    tseeds = list(table["seeds"])
    jobs: dict[tuple, Any] = {}
    ctx = multiprocessing.get_context("spawn")  # no fork of a process torch has run in
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        for s in seeds:
            for b in (None, budget):
                for name, rule in rules.items():
                    jobs[("two", name, s, b)] = pool.submit(
                        two_stage_job, recipe, rule, s, b, tseeds[s % len(tseeds)],
                        {**shortlist, **RULE_SETTINGS.get(name, {})}, oneshot,
                        tseeds)  # fmt: skip
                for a in algorithms:
                    jobs[("one", a, s, b)] = pool.submit(single_stage_job, recipe, a, s, b,
                                                         oneshot)  # fmt: skip
        retrain = Retrainer(pool, recipe, table, rows)
        results = {}
        for key, fut in jobs.items():
            results[key] = fut.result()
            log.info("%s %s seed %d budget %s: %s s", *key, results[key].get("seconds"))
            if results[key]["pick"] is not None:
                retrain.add([results[key]["pick"]])
        accs = retrain.results()

    def picks(kind: str, name: str) -> list[Any]:
        return [(results[(kind, name, s, None)]["pick"], results[(kind, name, s, budget)]["pick"])
                for s in seeds]  # fmt: skip

    two = {n: _figures(picks("two", n), accs, rows, budget) for n in rules}
    one = {a: _figures(picks("one", a), accs, rows, budget) for a in algorithms}
    under = sum(r["params"] <= budget for r in rows)
    full = {"unconstrained": len(rows) * recipe["epochs"], "constrained": under * recipe["epochs"]}
    sn = rules.get("supernet") and "supernet"
    cost: dict[str, Any] = {}
    if sn:
        for b, bound in zip((None, budget), BOUNDS):
            e2 = statistics.mean(results[("two", sn, s, b)]["stage2_epochs"] for s in seeds)
            e1 = statistics.mean(results[("two", sn, s, b)]["stage1_epochs"] for s in seeds)
            n1 = statistics.mean(results[("two", sn, s, b)]["stage1_network_epochs"]
                                 for s in seeds)  # fmt: skip
            cost[bound] = e2 / full[bound]
            cost[f"stage1_{bound}"] = e1 / full[bound]
            cost[f"stage1_network_{bound}"] = n1 / full[bound]
    base = param_count(recipe, dict.fromkeys(rows[0]["arch"], "none"))
    over = [
        (k, p) for k, r in results.items() for p in [r["pick"]]
        if k[3] is not None and p is not None and param_count(recipe, p, base) > budget
    ]  # fmt: skip
    return {
        "two_stage": two,
        "single_stage": one,
        "cost_over_train_all": cost,
        "consistency": _consistency(results, rows, tseeds, recipe["epochs"]),
        "param_budget": budget,
        "rows": len(rows),
        "rows_within_budget": under,
        "train_all_epochs": full,
        "picks_over_budget": [list(map(str, k)) for k, _ in over],
        "errors": {
            f"{k[1]}/{k[2]}/{k[3]}": r["error"] for k, r in results.items() if "error" in r
        },  # fmt: skip
        "jobs": {"/".join(map(str, k)): r for k, r in results.items()},
    }


def _summary(per_table: dict[str, dict], rules: dict, algorithms: list[str]) -> dict[str, Any]:
    """Returns the last line's figures from each table's report."""
    fig = lambda f, key: {b: f[b][key] for b in BOUNDS}  # noqa: E731
    out: dict[str, Any] = {
        "two_stage_percentile": {}, "p_vs_random": {}, "cost_over_train_all": {},
        "shortlist_rule": {n: {} for n in rules},
        "single_stage_percentile": {a: {} for a in algorithms},
    }  # fmt: skip
    for t, rep in per_table.items():
        if "supernet" in rep["two_stage"]:
            out["two_stage_percentile"][t] = fig(rep["two_stage"]["supernet"], "percentile")
            out["p_vs_random"][t] = fig(rep["two_stage"]["supernet"], "p_vs_random")
        out["cost_over_train_all"][t] = rep["cost_over_train_all"]
        for n in rules:
            out["shortlist_rule"][n][t] = fig(rep["two_stage"][n], "percentile")
        for a in algorithms:
            out["single_stage_percentile"][a][t] = fig(rep["single_stage"][a], "percentile")
    return out


def merge_single_stage(files: list[Path]) -> dict[str, Any]:
    """Returns ``single_stage_percentile`` and ``p_vs_random`` {algorithm: {table: {bound:
    ...}}} and ``seeds`` {algorithm: {table: [...]}} over the single-stage picks of several
    ``--out`` files (runs of other seeds: a 5-seed figure of every algorithm is hours of CPU,
    so it may be made in parts). A (table, algorithm, seed, bound) found in two files is
    taken from the first; each file's ``tables_detail`` must hold its jobs and picks."""
    picks: dict[tuple[str, str, str], dict[str, float]] = {}  # (table, algorithm, bound)
    budgets: dict[str, int] = {}  # the parameter budget each table's runs recorded
    for f in files:
        detail = json.loads(Path(f).read_text())["tables_detail"]
        for t, rep in detail.items():
            budget = budgets.setdefault(t, rep["param_budget"])
            assert rep["param_budget"] == budget, (f, t, "another budget")
            for key, job in rep["jobs"].items():
                kind, a, seed, b = key.split("/")
                if kind != "one" or job.get("pick") is None:
                    continue
                bound = BOUNDS[0] if b == "None" else BOUNDS[1]
                assert b == "None" or int(b) == budget, (f, key)
                want = function_key(job["pick"])
                mean = next(p["mean"] for p in rep["single_stage"][a][bound]["picks"]
                            if function_key(p["arch"]) == want)  # fmt: skip
                picks.setdefault((t, a, bound), {}).setdefault(seed, mean)
    out: dict[str, Any] = {"single_stage_percentile": {}, "p_vs_random": {}, "seeds": {}}
    rows: dict[str, list[dict]] = {}
    for (t, a, bound), by_seed in sorted(picks.items()):
        if t not in rows:
            path = table_path(t)
            rows[t] = competent_rows(json.loads(path.read_text()))[0]
        pct, p_value = _placement(list(by_seed.values()), _row_means(rows[t], budgets[t], bound))
        out["single_stage_percentile"].setdefault(a, {}).setdefault(t, {})[bound] = pct
        out["p_vs_random"].setdefault(a, {}).setdefault(t, {})[bound] = p_value
        out["seeds"].setdefault(a, {})[t] = sorted(by_seed, key=int)
    return out


def main(argv: list[str] | None = None) -> int:
    """Returns 0 after printing the figures' JSON as the last line."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--tables", nargs="+", default=["v4", "v5"],
                   help="MNIST-1D table versions in data/, or table files")  # fmt: skip
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--rules", nargs="*", default=list(RULES), choices=list(RULES))
    p.add_argument("--algorithms", nargs="*", help="single-stage searches (default: every one)")
    p.add_argument("--k", type=int, help="shortlist size (default: the shipped 8)")
    p.add_argument("--by-size", type=int, help="of k, slots for the largest (the supernet's)")
    p.add_argument("--pool", type=int, help="architectures stage 1 scores (shipped: 64)")
    p.add_argument(
        "--confirm",
        type=int,
        help="stage 2's best trained again, the table's other seed (shipped: 2)",
    )
    p.add_argument(
        "--oneshot",
        type=json.loads,
        default={},
        help="one-shot settings for every supernet, JSON (e.g. '{\"epochs\": 40}')",
    )
    p.add_argument(
        "--supernet",
        default=SUPERNET,
        help=f"the one-shot algorithm of the supernet rules (shipped: {SUPERNET})",
    )
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", type=Path, help="also write every pick, shortlist and trial here")
    p.add_argument("--quick", action="store_true", help="a miniature table, one seed")
    p.add_argument("--merge", type=Path, nargs="+",
                   help="only merge the single-stage picks of these --out files")  # fmt: skip
    args = p.parse_args(argv)
    if args.merge:
        print(json.dumps(merge_single_stage(args.merge), sort_keys=True))
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    t0 = time.perf_counter()
    load_before = os.getloadavg()[0]
    shortlist = {k: v for k, v in (("k", args.k), ("pool", args.pool),
                                   ("by_size", args.by_size), ("confirm", args.confirm))
                 if v is not None}  # fmt: skip
    algorithms = algorithm_names() if args.algorithms is None else args.algorithms
    tables: dict[str, dict] = {}
    if args.quick:
        from _ranking_common import MINI_RECIPE_1D
        from ground_truth import build_table

        tables["mini"] = build_table(MINI_RECIPE_1D, 4, [0, 1], arch_seed=0, out=None, workers=1)
        args.seeds, args.workers = [0], 1
        shortlist, args.oneshot = {"k": 2, "pool": 6}, {"epochs": 1, **args.oneshot}
    missing = []
    for name in [] if args.quick else args.tables:
        path = table_path(name)
        if path.exists():
            tables[name] = json.loads(path.read_text())
        else:
            missing.append(str(path))
            log.warning("no table at %s: left out", path)
    rules = {n: args.supernet if RULES[n] == SUPERNET else RULES[n] for n in args.rules}
    per_table: dict[str, dict] = {}

    def figures() -> dict[str, Any]:
        out = _summary(per_table, rules, algorithms)
        out.update(n_seeds=len(args.seeds), tables=list(per_table), missing_tables=missing,
                   seconds=round(time.perf_counter() - t0, 1),
                   load_average=[round(load_before, 2), round(os.getloadavg()[0], 2)])  # fmt: skip
        return out

    for t, tab in tables.items():  # each table's figures are logged and written as it ends
        per_table[t] = run_table(tab, args.seeds, rules, algorithms, shortlist, args.oneshot,
                                 args.workers)  # fmt: skip
        out = figures()
        log.info("figures so far: %s", json.dumps(out, sort_keys=True))
        if args.out is not None:
            args.out.write_text(json.dumps({**out, "tables_detail": per_table}, indent=1,
                                           sort_keys=True, default=str) + "\n")  # fmt: skip
    print(json.dumps(figures(), sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
