"""Real pipeline runs on this machine: sequential vs CSP vs BSP vs ASP vs torch's GPipe.

Each scheduler trains the same supernet (m choice blocks x n candidates of wide Linear
layers, sklearn digits) for the same subnet sequence; throughput is samples per second of
training-loop time (process start-up excluded), bubble ratio is 1 - busy / (stages x wall).

``gpipe`` is the peer users actually run: :mod:`torch.distributed.pipelining` with its
``ScheduleGPipe`` (the maintained successor of torchgpipe) on the same number of gloo processes
on 127.0.0.1. It pipelines *inside* a subnet: every step builds the subnet's stage module from
the shared layers, splits the batch into ``--microbatches`` micro-batches, runs all forwards
then all backwards, and applies the same per-layer SGD with momentum. Subnets therefore run
one after another (no inter-subnet overlap), in sequence order.

``--sampler fair`` gives every run the same strict-fairness (FairNAS) sequence as an explicit
``RunConfig.subnets`` list; the pipeline stages honour it only once ``StageWorker`` builds its
feed from ``cfg.subnets`` (see docs/naspipe.md), until then ``equals_sequential`` is false.

``--mirror`` adds a ``csp_mirror`` run: CSP with layer mirroring (``RunConfig.mirror``, §4.2),
each subnet split by its own balanced partition from a per-layer cost table measured once here
(forward + backward seconds, :func:`nasforge.parallel.mirror.measure_layer_costs`) and passed
to every stage as ``RunConfig.layer_costs``; ``mirror`` reports how often a subnet's partition
left the static one. Every candidate of a built-in block has the same width, so it also
trains ``MixedSupernet`` (the same chain, middle candidates residual MLPs of 1x, 2x, 4x or 8x
the width: costs differ per candidate, as the paper's operators do) with CSP and CSP-mirror,
reported under ``mixed``.

``equals_sequential`` checks Definition 1 for every run: every loss and every tensor of the
supernet (``torch.equal``) against the one-process reference.

Last line: one JSON object {"samples_per_s": {...}, "equals_sequential": {...}, ...}.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import nn

import nasforge as nf
from nasforge.parallel.budget import fit_batch
from nasforge.parallel.config import RunConfig, _Data, set_determinism
from nasforge.parallel.context import sgd_momentum_step
from nasforge.parallel.csp import static_partition, subnet_partition
from nasforge.parallel.fair_sampler import fair_subnets
from nasforge.parallel.mirror import measure_layer_costs
from nasforge.parallel.sampler import get_sampler
from nasforge.parallel.supernet import ChoiceSupernet, layer_table, n_candidates
from nasforge.parallel.train import train_supernet


class _ResidualMLP(nn.Module):
    """Returns ``x + alpha * W2 relu(W1 x)`` with hidden width ``expand x d``; alpha starts 0."""

    def __init__(self, d: int, expand: int) -> None:
        super().__init__()
        self.up, self.down = nn.Linear(d, expand * d), nn.Linear(expand * d, d)
        self.alpha = nn.Parameter(torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.alpha * self.down(F.relu(self.up(x)))


class MixedSupernet(nf.ModelSpace):
    """Returns a chain of ``n_blocks`` choice blocks whose middle candidates differ in cost:
    candidate c is a residual MLP of ``(1, 2, 4, 8)[c % 4]`` times the width."""

    def __init__(self, n_blocks: int = 8, n_candidates: int = 8, hidden: int = 256) -> None:
        super().__init__()
        blocks = [nf.LayerChoice([nn.Sequential(nn.Linear(64, hidden), nn.ReLU())
                                  for _ in range(n_candidates)], label="block0")]  # fmt: skip
        for b in range(1, n_blocks - 1):
            cands = [_ResidualMLP(hidden, (1, 2, 4, 8)[c % 4]) for c in range(n_candidates)]
            blocks.append(nf.LayerChoice(cands, label=f"block{b}"))
        last = [nn.Linear(hidden, 10) for _ in range(n_candidates)]
        blocks.append(nf.LayerChoice(last, label=f"block{n_blocks - 1}"))
        self.blocks = nn.ModuleList(blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Returns the logits of the chain."""
        x = x.flatten(1)
        for block in self.blocks:
            x = block(x)
        return x


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _gpipe_worker(rank: int, world: int, port: int, cfg: RunConfig, mb: int, out: str) -> None:
    """Trains cfg.steps subnets as stage ``rank`` of a torch.distributed.pipelining GPipe."""
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        set_determinism(cfg.seed)
        torch.manual_seed(cfg.seed)  # the same initial weights as every nasforge run
        space = ChoiceSupernet(**cfg.space_kwargs)
        table = layer_table(space)
        ncand = n_candidates(space)
        blocks = list(static_partition(len(ncand), world)[rank])
        if cfg.subnets is not None:  # an explicit sequence, as RunConfig allows
            subnets = [tuple(s) for s in cfg.subnets[: cfg.steps]]
        else:
            sampler = iter(get_sampler(cfg.sampler, ncand, cfg.seed))  # an iterable of subnets
            subnets = [next(sampler) for _ in range(cfg.steps)]
        data = _Data(cfg)
        bufs = {
            (b, c): [torch.zeros_like(p) for p in table[(b, c)].parameters()]
            for b in blocks
            for c in range(ncand[b])
        }
        losses: list[float] = []
        dist.barrier()
        t0 = time.perf_counter()
        for seq, sn in enumerate(subnets):
            layers = [table[(b, sn[b])] for b in blocks]
            stage_mod = nn.Sequential(*layers)
            # A fresh stage per subnet: its layers differ; shapes are inferred each step.
            stage = PipelineStage(stage_mod, rank, world, torch.device("cpu"))
            sched = ScheduleGPipe(stage, mb, loss_fn=F.cross_entropy)
            x, y = data.batch(seq)
            if rank == 0:
                sched.step(x)
            elif rank == world - 1:
                mlosses: list[torch.Tensor] = []
                sched.step(target=y, losses=mlosses)
                losses.append(torch.stack([m.detach() for m in mlosses]).mean().item())
            else:
                sched.step()
            for b in blocks:
                params = list(table[(b, sn[b])].parameters())
                grads = [p.grad for p in params]
                sgd_momentum_step(params, grads, bufs[(b, sn[b])], cfg.lr, cfg.momentum)
                for p in params:
                    p.grad = None
        wall = time.perf_counter() - t0
        state = {
            f"{b}.{c}.{name}": p.detach().clone()
            for b in blocks
            for c in range(ncand[b])
            for name, p in table[(b, c)].named_parameters()
        }
        torch.save({"state": state, "losses": losses, "wall": wall}, Path(out) / f"{rank}.pt")
    finally:
        dist.destroy_process_group()


def train_gpipe(cfg: RunConfig, stages: int, microbatches: int) -> dict:
    """Returns ``{"state", "losses", "wall"}`` of a torch.distributed.pipelining GPipe run."""
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_gpipe_worker, args=(stages, _free_port(), cfg, microbatches, tmp), nprocs=stages)
        parts = [torch.load(Path(tmp) / f"{r}.pt") for r in range(stages)]
    state: dict[str, torch.Tensor] = {}
    for p in parts:
        state.update(p["state"])
    return {"state": state, "losses": parts[-1]["losses"], "wall": max(p["wall"] for p in parts)}


def _mirror_costs(cfg: RunConfig, stages: int, steps: int, batch: int) -> tuple[list, dict]:
    """Returns the layer cost table of a mirrored run (measured once, here) and how the run's
    subnets are then partitioned: distinct partitions, share of subnets off the static one."""
    torch.manual_seed(cfg.seed)
    space = cfg.space_cls(**cfg.space_kwargs)
    ncand = n_candidates(space)
    x = _Data(replace(cfg, batch_size=batch)).batch(0)[0]
    costs = measure_layer_costs(layer_table(space), ncand, x)
    if cfg.subnets is not None:
        subnets = [tuple(s) for s in cfg.subnets[:steps]]
    else:
        sampler = iter(get_sampler(cfg.sampler, ncand, cfg.seed))
        subnets = [tuple(next(sampler)) for _ in range(steps)]
    static = static_partition(len(ncand), stages)
    parts = [subnet_partition(sn, lambda la: costs[la[0]][la[1]], stages) for sn in subnets]
    info = {
        "distinct_partitions": len(set(parts)),
        "share_off_static": round(sum(p != static for p in parts) / len(parts), 3),
        "block_cost_ms": [round(1e3 * sum(row) / len(row), 3) for row in costs],
    }
    return costs, info


def _equal(run, ref) -> bool:
    return run.losses == ref.losses and all(
        torch.equal(run.state[n], v) for n, v in ref.state.items()
    )


def _mixed(space: dict, stages: int, steps: int, common: dict) -> dict:
    """Returns sequential, CSP and CSP-mirror samples/s on MixedSupernet, their bitwise
    equality with sequential training and how the subnets were partitioned."""
    base = RunConfig(MixedSupernet, space)
    costs, info = _mirror_costs(base, stages, steps, common["batch_size"])
    runs = {
        "sequential": train_supernet(base, pipeline=1, **common),
        "csp": train_supernet(base, pipeline=stages, **common),
        "csp_mirror": train_supernet(
            replace(base, mirror=True, layer_costs=costs), pipeline=stages, **common
        ),
    }
    sps = {k: round(r.samples_per_s, 2) for k, r in runs.items()}
    for name, v in sps.items():
        print(f"mixed {name:12s} {v:9.1f} samples/s", file=sys.stderr)
    return {
        "samples_per_s": sps,
        "csp_mirror_vs_csp": round(sps["csp_mirror"] / sps["csp"], 3),
        "bubble_ratio": {k: round(r.bubble_ratio, 4) for k, r in runs.items() if k != "sequential"},
        "equals_sequential": {
            k: _equal(runs[k], runs["sequential"]) for k in ("csp", "csp_mirror")
        },
        "cache_hit_rate": {
            k: [round(c["hit_rate"], 4) for c in runs[k].cache] for k in ("csp", "csp_mirror")
        },
        "mirror": info,
    }


def main(argv: list[str] | None = None) -> int:
    """Runs the five trainings; prints the JSON line last."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--stages", type=int, default=2)
    ap.add_argument("--blocks", type=int, default=8)
    ap.add_argument("--candidates", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=48)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--microbatches", type=int, default=4, help="GPipe micro-batches per batch")
    ap.add_argument(
        "--sampler",
        choices=["uniform", "fair"],
        default="uniform",
        help="uniform SPOS subnets, or a strict-fairness (FairNAS) sequence given to every run "
        "as RunConfig.subnets (needs the runtime to honour it, see docs/naspipe.md)",
    )
    ap.add_argument("--quick", action="store_true", help="24 steps, hidden 256")
    ap.add_argument(
        "--memory-budget-mb",
        type=float,
        default=None,
        help="equal device memory per stage instead of an equal batch: each policy trains "
        "with the largest batch it fits (nasforge.parallel.budget); GPipe gets BSP's batch. "
        "Bitwise equality is then checked only where the batch equals the reference's.",
    )
    ap.add_argument(
        "--mirror",
        action="store_true",
        help="also train CSP with layer mirroring (per-subnet balanced partitions) as csp_mirror",
    )
    args = ap.parse_args(argv)
    if args.quick:
        args.steps, args.hidden = 24, 256
    torch.set_num_threads(1)
    space = {"n_blocks": args.blocks, "n_candidates": args.candidates, "hidden": args.hidden}
    common = {"steps": args.steps, "batch_size": args.batch_size, "lr": 0.01}
    base = RunConfig(ChoiceSupernet, space)
    if args.sampler == "fair":
        seq = fair_subnets([args.candidates] * args.blocks, args.steps, seed=0)
        base.subnets = [list(s) for s in seq]
    budget = None if args.memory_budget_mb is None else args.memory_budget_mb * 2**20
    batch = {}
    if budget is not None:  # the reference trains at CSP's batch, so CSP can be compared
        for policy in ("csp", "bsp", "asp"):
            cfg = replace(base, n_stages=args.stages, policy=policy)
            batch[policy] = fit_batch(cfg, budget)[0]
        common["batch_size"] = batch["csp"]
    runs = {"sequential": train_supernet(base, pipeline=1, **common)}
    for policy in ("csp", "bsp", "asp"):
        kw = {**common, "batch_size": batch.get(policy, common["batch_size"])}
        runs[policy] = train_supernet(base, pipeline=args.stages, policy=policy, **kw)
    mirror_info = None
    if args.mirror:
        costs, mirror_info = _mirror_costs(base, args.stages, args.steps, common["batch_size"])
        runs["csp_mirror"] = train_supernet(
            replace(base, mirror=True, layer_costs=costs), pipeline=args.stages, **common
        )
    mixed = _mixed(space, args.stages, args.steps, common) if args.mirror else None
    ref = runs["sequential"]
    sps = {k: round(r.samples_per_s, 2) for k, r in runs.items()}
    same = ref.config.batch_size
    equal = {
        k: None
        if r.config.batch_size != same
        else r.losses == ref.losses
        and all(torch.equal(r.state[n], v) for n, v in ref.state.items())
        for k, r in runs.items()
        if k != "sequential"
    }
    g_batch = batch.get("bsp", same)
    g = train_gpipe(replace(ref.config, batch_size=g_batch), args.stages, args.microbatches)
    sps["gpipe_torch"] = round(args.steps * g_batch / g["wall"], 2)
    equal["gpipe_torch"] = (
        None
        if g_batch != same
        else g["losses"] == ref.losses
        and all(torch.equal(g["state"][n], v) for n, v in ref.state.items())
    )
    gap = max(abs(a - b) for a, b in zip(g["losses"], ref.losses)) if g_batch == same else None
    for name, v in sps.items():
        print(f"{name:12s} {v:9.1f} samples/s  equal {equal.get(name, '-')}", file=sys.stderr)
    csp = runs["csp"]
    out = {
        "samples_per_s": sps,
        "bubble_ratio": {k: round(r.bubble_ratio, 4) for k, r in runs.items() if k != "sequential"},
        "equals_sequential": equal,
        "gpipe_torch_max_loss_gap": gap,
        "csp_vs_sequential": round(sps["csp"] / sps["sequential"], 3),
        "csp_vs_bsp": round(sps["csp"] / sps["bsp"], 3),
        "csp_vs_gpipe_torch": round(sps["csp"] / sps["gpipe_torch"], 3),
        "csp_equals_sequential": equal["csp"],
        "bsp_equals_sequential": equal["bsp"],
        "asp_equals_sequential": equal["asp"],
        "cache_hit_rate_csp": [round(s["hit_rate"], 4) for s in csp.cache],
        "csp_mirror_vs_csp": round(sps["csp_mirror"] / sps["csp"], 3) if args.mirror else None,
        "csp_mirror_equals_sequential": equal.get("csp_mirror"),
        "cache_hit_rate_csp_mirror": [round(s["hit_rate"], 4) for s in runs["csp_mirror"].cache]
        if args.mirror
        else None,
        "mirror": mirror_info,
        "mixed": mixed,
        "config": {
            **space,
            **common,
            "stages": args.stages,
            "microbatches": args.microbatches,
            "sampler": args.sampler,
            "memory_budget_mb": args.memory_budget_mb,
        },
        "batch": {k: r.config.batch_size for k, r in runs.items()} | {"gpipe_torch": g_batch},
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
