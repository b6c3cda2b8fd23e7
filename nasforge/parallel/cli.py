"""``nasforge train-supernet``: a thin alias that builds a ``pipeline`` run from flags.

The same run can start from a run file (``kind: pipeline``) with ``nasforge run FILE``; either
way it is recorded in a run directory that ``nasforge status|export|plot|resume`` read.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Returns None; adds the ``train-supernet`` subcommand."""
    p = subparsers.add_parser(
        "train-supernet",
        help="train a supernet of m choice blocks x n candidates (NASPipe pipeline with -p N)",
        description=(
            "Train a supernet of choice blocks on the digits, sequentially or in a pipeline of N "
            "stage processes, recorded as a run in --out (kind 'pipeline')."
        ),
    )
    p.add_argument("--blocks", type=int, default=4, help="choice blocks m")
    p.add_argument("--candidates", type=int, default=3, help="candidate layers per block n")
    p.add_argument("--hidden", type=int, default=32, help="hidden width")
    p.add_argument("--steps", type=int, default=32, help="subnets trained (one batch each)")
    p.add_argument("-p", "--pipeline", type=int, default=1, help="pipeline stages (processes)")
    p.add_argument("--policy", choices=["csp", "bsp", "asp"], default="csp")
    p.add_argument("--sampler", choices=["uniform", "evolution", "fair"], default="uniform")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache-subnets", type=float, default=3.0, help="device cache budget")
    p.add_argument(
        "--memory-budget-mb",
        type=float,
        default=None,
        help="device memory per stage (MiB): trains with the largest batch that fits it "
        "(replaces --batch-size)",
    )
    p.add_argument(
        "--mirror",
        action="store_true",
        help="layer mirroring (csp): each subnet split over the stages by its own balanced "
        "partition, updates pushed to the other stages' mirrors",
    )
    p.add_argument(
        "--checkpoint-every",
        type=int,
        default=None,
        help="steps per segment: a checkpoint (a stop and resume point) after every this "
        "many; 0: at the end only (default: the pipeline settings')",
    )
    p.add_argument("--out", required=True, help="run directory (must not hold a run)")
    p.add_argument("--overwrite", action="store_true", help="replace a run already in --out")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from nasforge.errors import ConfigError
    from nasforge.parallel.runner import PipelineSettings, PipelineTraining
    from nasforge.run.store import Store, is_run

    out = Path(args.out)
    if is_run(out):
        if not args.overwrite:
            raise ConfigError(
                f"{out} already holds a run; choose a new --out, or pass --overwrite to "
                "replace it (nothing was written)"
            )
        with Store.open(out, readonly=False):  # refuses while another process writes it
            pass
        shutil.rmtree(out)
    settings = PipelineSettings(
        steps=args.steps, pipeline=args.pipeline, policy=args.policy, sampler=args.sampler,
        batch_size=args.batch_size, lr=args.lr, seed=args.seed,
        cache_subnets=args.cache_subnets,
        memory_budget=None if args.memory_budget_mb is None else args.memory_budget_mb * 2**20,
        mirror=args.mirror,
    )  # fmt: skip
    if args.checkpoint_every is not None:
        settings.checkpoint_every = args.checkpoint_every
    runner = PipelineTraining(
        settings=settings,
        space_kwargs={"n_blocks": args.blocks, "n_candidates": args.candidates,
                      "hidden": args.hidden},
        directory=out,
    )  # fmt: skip
    runner.run()
    with Store.open(out) as store:
        rows = store.progress(last=1)
        stats = json.loads(store.get_meta("pipeline.stats") or "{}")
        best = runner.best(1)
    accuracy = None
    if best:
        assert best[0].metrics is not None, "a ranked trial finished, so it has metrics"
        accuracy = best[0].metrics["accuracy"]
    summary = {
        "run": str(out),
        "final_loss": rows[-1]["loss"] if rows else None,
        "best_subnet_accuracy": accuracy,
        **stats,
    }
    sys.stdout.write(json.dumps(summary) + "\n")  # the command's output
    return 0
