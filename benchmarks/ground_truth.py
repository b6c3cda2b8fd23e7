"""Ground truth for "does the supernet rank?": stand-alone accuracies of distinct architectures
of the benchmark cell space, each trained from scratch once per seed.

Two tables (``--dataset``):

``mnist1d`` (issue 35, the default; ``benchmarks/data/ground_truth_mnist1d_v4.json``, or
``_v3.json`` with ``--recipe v3``, the earlier table whose cells spread only 3.5 points): the 1-D
twin of ``BenchCellSpace`` with NAS-Bench-201's five operations (5^6 = 15,625 architectures),
canonicalised by ``nasforge.spaces.cell_canon`` into distinct functions; the table holds
``--n-archs`` of the *competent* ones (a parametric op on a live path) drawn uniformly with
``--arch-seed``, and records how many degenerate ones were left out. MNIST-1D is generated
offline (``--num-samples``, ``--data-seed``: the generator's arguments) and split into train
(truth training), validation (supernet scoring, searches) and test (the truth only).

Table v5 (issue 51, ``ground_truth_mnist1d_v5.json``) is a second draw with v4's recipe: other
data and other architectures, 64 rows x 2 seeds (14 min on one worker under load)::

    python benchmarks/ground_truth.py --n-archs 64 --seeds 0 1 --data-seed 2026 \
        --arch-seed 51 --workers 1 --out benchmarks/data/ground_truth_mnist1d_v5.json

``mnist`` (issue 27's table, kept as a smoke test; ``ground_truth_mnist.json``): uniform
architecture ids of the 4-op 2-D space on 5,000 MNIST digits.

Every (row, seed) training is one job on ``--workers`` processes of one thread; the table is
rewritten after every finished job, so an interrupted build continues where it stopped when
started again with the same settings (finished trainings are skipped).

    python benchmarks/ground_truth.py --n-archs 128 --seeds 0 1 2 --workers 2   # ~45 min
    python benchmarks/ground_truth.py --check 17        # retrain row 17, compare (and torch)
    python benchmarks/ground_truth.py --quick           # smoke run: --mini, 4 rows, 2 seeds,
                                                        # a temporary table unless --out

Table (format ``nasforge-ground-truth`` v2): ``recipe``, ``seeds``, ``arch_seed``,
``space_counts``, ``rows`` (``row``, ``arch`` (canonical), ``function`` key, ``arch_id``,
``params``, ``macs``, ``live_ops``, ``accuracies`` (test, one per seed), ``val_accuracies``,
``val_curves``, ``mean``, ``val_mean``, ``seconds``, ``torch``), ``runs`` (finished (row, seed)
jobs), ``torch`` and ``summary``: ``seed_ceiling_tau`` (Kendall tau between seeds' test
accuracies, averaged over seed pairs), ``spread_10_90`` (90th minus 10th percentile of the means),
``n_rows``. Last line printed: the summary as JSON.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import multiprocessing
import random
import sys
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _ranking_common import (  # noqa: E402 - after the path fix, as a script
    MINI_RECIPE,
    MINI_RECIPE_1D,
    RECIPE,
    RECIPES_1D,
    costs,
    kendall,
    load_splits,
    sample_archs,
    space_of,
    spread,
    train_arch,
)

from nasforge.space.search_space import arch_id  # noqa: E402
from nasforge.spaces.cell_canon import (  # noqa: E402
    competent,
    distinct_functions,
    function_key,
    live_param_ops,
)

__all__ = [
    "FORMAT",
    "VERSION",
    "choose_archs",
    "build_table",
    "check_row",
    "summarise",
    "main",
]

log = logging.getLogger("nasforge.benchmarks.ground_truth")

FORMAT, VERSION = "nasforge-ground-truth", 2
DATA = Path(__file__).resolve().parent / "data"
DEFAULT_OUT = {
    "mnist1d": DATA / "ground_truth_mnist1d_{recipe}.json",
    "mnist": DATA / "ground_truth_mnist.json",
}


def summarise(table: dict[str, Any]) -> dict[str, Any]:
    """Returns the table's summary: the seed-to-seed tau (the ceiling), the 10-90 spread."""
    rows = table["rows"]
    per_seed = list(zip(*(r["accuracies"] for r in rows))) if rows else []
    taus = [kendall(a, b) for a, b in itertools.combinations(per_seed, 2)]
    taus = [t for t in taus if t is not None]
    return {
        "n_rows": len(rows),
        "seed_ceiling_tau": sum(taus) / len(taus) if taus else None,
        "spread_10_90": spread([r["mean"] for r in rows]) if len(rows) >= 2 else None,
    }


def _write(table: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    tmp.replace(out)  # a crash never leaves half a table


def choose_archs(recipe: dict[str, Any], n_archs: int, arch_seed: int) -> tuple[list, dict]:
    """Returns (architectures, space counts): for an ``mnist1d`` recipe ``n_archs`` distinct
    competent functions (canonical architectures) drawn uniformly with ``arch_seed`` among all
    of them; else ``n_archs`` uniform architecture ids (issue 27's table).

    Raises:
        SystemExit: fewer competent functions than ``n_archs``.
    """
    if recipe.get("dataset") != "mnist1d":
        return sample_archs(space_of(recipe), n_archs, arch_seed), {}
    funcs, counts = distinct_functions(recipe["space"]["ops"])
    pool = [a for a in funcs if competent(a)]
    if n_archs > len(pool):
        raise SystemExit(f"--n-archs {n_archs} exceeds the {len(pool)} competent functions")
    return random.Random(arch_seed).sample(pool, n_archs), counts


def _job(recipe: dict[str, Any], arch: dict, seed: int) -> dict[str, Any]:
    train, val, test = load_splits(recipe)
    t0 = time.perf_counter()
    if recipe.get("dataset") != "mnist1d":  # issue 27's table: all training digits, no curve
        train = (torch.cat([train[0], val[0]]), torch.cat([train[1], val[1]]))
        val = None  # type: ignore[assignment]
    out = train_arch(recipe, arch, seed, train, test, val)
    return {**out, "seconds": round(time.perf_counter() - t0, 2), "torch": torch.__version__}


def _row(i: int, arch: dict, runs: dict, seeds: list[int], recipe: dict, example) -> dict:
    res = [runs[(i, s)] for s in seeds]
    accs = [r["test"] for r in res]
    row = {"row": i, "arch": arch, "arch_id": arch_id(arch), "accuracies": accs,
           "mean": sum(accs) / len(accs), "seconds": round(sum(r["seconds"] for r in res), 1),
           "torch": res[0]["torch"]}  # fmt: skip
    if recipe.get("dataset") == "mnist1d":
        params, macs = costs(recipe, arch, example)
        vals = [r["val"] for r in res]
        row.update(function=function_key(arch), params=params, macs=macs,
                   live_ops=live_param_ops(arch), val_accuracies=vals,
                   val_mean=sum(vals) / len(vals),
                   val_curves=[r["val_curve"] for r in res])  # fmt: skip
    return row


def build_table(
    recipe: dict[str, Any],
    n_archs: int,
    seeds: list[int],
    arch_seed: int = 0,
    out: Path | None = None,
    workers: int = 1,
) -> dict[str, Any]:
    """Returns the ground-truth table of ``n_archs`` architectures x ``seeds``, trained on
    ``workers`` processes; with ``out``, writes it after every finished training and continues
    a table there made with the same settings.

    Raises:
        SystemExit: ``out`` holds a table of other settings (the message says which).
    """
    settings = {"recipe": recipe, "seeds": list(seeds), "arch_seed": arch_seed}
    archs, counts = choose_archs(recipe, n_archs, arch_seed)
    table: dict[str, Any] = {"format": FORMAT, "version": VERSION, **settings,
                             "space_counts": counts, "rows": [], "runs": []}  # fmt: skip
    if out is not None and out.exists():
        old = json.loads(out.read_text())
        if {k: old.get(k) for k in settings} != settings:
            raise SystemExit(
                f"{out} holds a table of other settings (recipe, seeds or arch seed); "
                "pass another --out or delete it"
            )
        table["runs"] = old.get("runs", [])
    runs = {(r["row"], r["seed"]): r for r in table["runs"]}
    example = load_splits(recipe)[0][0][:1]
    table["rows"] = [
        _row(i, archs[i], runs, seeds, recipe, example)
        for i in range(n_archs)
        if all((i, s) in runs for s in seeds)
    ]
    todo = [(i, s) for i in range(n_archs) for s in seeds if (i, s) not in runs]
    log.info("%d trainings to run (%d done) on %d workers", len(todo), len(runs), workers)
    t0, done = time.perf_counter(), 0

    def record(i: int, s: int, res: dict) -> None:
        nonlocal done
        runs[(i, s)] = {"row": i, "seed": s, **res}
        table["runs"].append(runs[(i, s)])
        done += 1
        if all((i, s2) in runs for s2 in seeds):  # the row is complete: add it, in row order
            rows = [r for r in table["rows"] if r["row"] != i]
            rows.append(_row(i, archs[i], runs, seeds, recipe, example))
            table["rows"] = sorted(rows, key=lambda r: r["row"])
        table["summary"] = summarise(table)
        table["torch"] = torch.__version__
        rate = (time.perf_counter() - t0) / done
        log.info("row %d seed %d: test %.4f | %d/%d, ~%.0f min left", i, s, res["test"],
                 done, len(todo), rate * (len(todo) - done) / 60)  # fmt: skip
        if out is not None:
            _write(table, out)

    if workers <= 1:
        for i, s in todo:
            record(i, s, _job(recipe, archs[i], s))
    else:
        ctx = multiprocessing.get_context("spawn")  # no fork of a process torch has run in
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            futs = {pool.submit(_job, recipe, archs[i], s): (i, s) for i, s in todo}
            pending = set(futs)
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in finished:
                    record(*futs[f], f.result())
    table["rows"] = [
        _row(i, archs[i], runs, seeds, recipe, example)
        for i in range(n_archs)
        if all((i, s) in runs for s in seeds)
    ]
    table["summary"] = summarise(table)
    if out is not None:
        _write(table, out)
    return table


def check_row(table: dict[str, Any], row: int) -> dict[str, Any]:
    """Returns the recorded and recomputed test accuracies of one row (retrained from the
    table alone), whether they match, and the recorded and current torch versions."""
    rec = next(r for r in table["rows"] if r["row"] == row)
    again = [_job(table["recipe"], rec["arch"], s)["test"] for s in table["seeds"]]
    recorded_torch = rec.get("torch", table.get("torch"))
    return {
        "row": row,
        "recorded": rec["accuracies"],
        "recomputed": again,
        "same": again == rec["accuracies"],
        "recorded_torch": recorded_torch,
        "torch": torch.__version__,
        "same_torch": recorded_torch == torch.__version__,
    }


def main(argv: list[str] | None = None) -> int:
    """Returns the exit status: 0, or 1 when ``--check`` finds a row that does not repeat."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--dataset", choices=["mnist1d", "mnist"], default="mnist1d")
    p.add_argument("--recipe", choices=sorted(RECIPES_1D), default="v4",
                   help="MNIST-1D recipe by table version (v3: the earlier table)")  # fmt: skip
    p.add_argument("--n-archs", type=int, default=128)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--arch-seed", type=int, default=0)
    p.add_argument("--num-samples", type=int, help="MNIST-1D signals generated (default 8000)")
    p.add_argument("--data-seed", type=int, help="MNIST-1D generator seed (default 42)")
    p.add_argument("--epochs", type=int, help="override the recipe's epochs")
    p.add_argument("--workers", type=int, default=2, help="training processes, one thread each")
    p.add_argument("--out", type=Path, help="table file (default: per data set, in data/)")
    p.add_argument("--check", type=int, metavar="ROW", help="retrain ROW of --out and compare")
    p.add_argument("--mini", action="store_true", help="the tests' miniature recipe (seconds)")
    p.add_argument("--quick", action="store_true", help="--mini, 4 rows, 2 seeds, a temp table")
    args = p.parse_args(argv)
    if args.quick:
        args.mini, args.n_archs, args.seeds, args.workers = True, 4, [0, 1], 1
        if args.out is None:
            with tempfile.TemporaryDirectory() as tmp:
                return main([*(argv or sys.argv[1:]), "--out", str(Path(tmp) / "table.json")])
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    out = args.out or Path(str(DEFAULT_OUT[args.dataset]).format(recipe=args.recipe))
    if args.check is not None:
        res = check_row(json.loads(out.read_text()), args.check)
        print(json.dumps(res))
        return 0 if res["same"] else 1
    if args.dataset == "mnist1d":
        recipe = dict(MINI_RECIPE_1D if args.mini else RECIPES_1D[args.recipe])
        data_args = dict(recipe["data_args"])
        if args.num_samples is not None:
            data_args["num_samples"] = args.num_samples
        if args.data_seed is not None:
            data_args["seed"] = args.data_seed
        recipe["data_args"] = data_args
    else:
        recipe = dict(MINI_RECIPE if args.mini else RECIPE)
    if args.epochs is not None:
        recipe["epochs"] = args.epochs
    table = build_table(recipe, args.n_archs, args.seeds, args.arch_seed, out, args.workers)
    print(json.dumps(table["summary"], sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
