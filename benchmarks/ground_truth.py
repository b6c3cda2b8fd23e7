"""Ground truth for "does the supernet rank?" (issue 27 part 1): stand-alone accuracies of
uniformly sampled architectures of the benchmark cell space on MNIST.

Each of ``--n-archs`` distinct architectures, drawn uniformly with ``--arch-seed`` from
``nasforge.spaces.bench_cell.BenchCellSpace`` (4^6 = 4,096), is trained from scratch once per
seed of ``--seeds`` by the recipe in ``benchmarks/_ranking_common.py`` (recorded in the table)
and scored on 1,000 held-out digits. The table is written after every row, so an interrupted
run continues where it stopped when started again with the same settings.

    python benchmarks/ground_truth.py --n-archs 64 --seeds 0 1     # ~45 min on one core
    python benchmarks/ground_truth.py --check 17                   # recompute row 17, compare

The table (``benchmarks/data/ground_truth_mnist.json``, format ``nasforge-ground-truth`` v1):
``recipe``, ``seeds``, ``arch_seed``, ``rows`` (``row``, ``arch``, ``arch_id``,
``accuracies`` one per seed, ``mean``, ``seconds``), and ``summary``: ``seed_ceiling_tau``
(Kendall tau between the seeds' accuracies, averaged over seed pairs: the best any estimator
can reach), ``spread_10_90`` (90th minus 10th percentile of the mean accuracies; the issue
asks for >= 0.10), ``n_rows``. Last line printed: the summary as JSON.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _ranking_common import (  # noqa: E402 - after the path fix, as a script
    MINI_RECIPE,
    RECIPE,
    kendall,
    load_data,
    sample_archs,
    space_of,
    spread,
    train_standalone,
)

from nasforge.space.search_space import arch_id  # noqa: E402

__all__ = ["FORMAT", "VERSION", "build_table", "check_row", "summarise", "main"]

log = logging.getLogger("nasforge.benchmarks.ground_truth")

FORMAT, VERSION = "nasforge-ground-truth", 1
DEFAULT_OUT = Path(__file__).resolve().parent / "data" / "ground_truth_mnist.json"


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


def build_table(
    recipe: dict[str, Any],
    n_archs: int,
    seeds: list[int],
    arch_seed: int = 0,
    out: Path | None = None,
) -> dict[str, Any]:
    """Returns the ground-truth table of ``n_archs`` architectures x ``seeds``; with ``out``,
    writes it after every row and continues a table there made with the same settings.

    Raises:
        SystemExit: ``out`` holds a table of other settings (the message says which).
    """
    settings = {"recipe": recipe, "seeds": list(seeds), "arch_seed": arch_seed}
    table = {"format": FORMAT, "version": VERSION, **settings, "rows": []}
    if out is not None and out.exists():
        old = json.loads(out.read_text())
        if {k: old.get(k) for k in settings} != settings:
            raise SystemExit(
                f"{out} holds a table of other settings (recipe, seeds or arch seed); "
                "pass another --out or delete it"
            )
        table["rows"] = old["rows"]
    data = load_data(recipe)
    space = space_of(recipe)
    archs = sample_archs(space, n_archs, arch_seed)
    for i, arch in enumerate(archs[len(table["rows"]) :], start=len(table["rows"])):
        t0 = time.perf_counter()
        accs = [train_standalone(recipe, arch, s, data) for s in seeds]
        table["rows"].append(
            {
                "row": i,
                "arch": arch,
                "arch_id": arch_id(arch),
                "accuracies": accs,
                "mean": sum(accs) / len(accs),
                "seconds": round(time.perf_counter() - t0, 1),
            }
        )
        log.info("row %d/%d %s: %s", i + 1, n_archs, arch, accs)
        table["summary"] = summarise(table)
        table["torch"] = torch.__version__
        if out is not None:
            _write(table, out)
    table["summary"] = summarise(table)
    return table


def check_row(table: dict[str, Any], row: int) -> tuple[list[float], list[float]]:
    """Returns (recorded, recomputed) accuracies of one row, recomputed from the table alone."""
    rec = table["rows"][row]
    recipe = table["recipe"]
    data = load_data(recipe)
    return rec["accuracies"], [
        train_standalone(recipe, rec["arch"], s, data) for s in table["seeds"]
    ]


def main(argv: list[str] | None = None) -> int:
    """Returns the exit status: 0, or 1 when ``--check`` finds a row that does not repeat."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--n-archs", type=int, default=64)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--arch-seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--check", type=int, metavar="ROW", help="recompute ROW of --out and compare")
    p.add_argument("--mini", action="store_true", help="the tests' miniature recipe (seconds)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.check is not None:
        table = json.loads(args.out.read_text())
        recorded, again = check_row(table, args.check)
        same = recorded == again
        print(
            json.dumps({"row": args.check, "recorded": recorded, "recomputed": again, "same": same})
        )
        return 0 if same else 1
    recipe = MINI_RECIPE if args.mini else RECIPE
    table = build_table(recipe, args.n_archs, args.seeds, args.arch_seed, args.out)
    print(json.dumps(table["summary"], sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
