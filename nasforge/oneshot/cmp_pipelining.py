"""The micro-batched pipeline baseline of model-parallel search: the same partitions run as
``torch.distributed.pipelining`` stages (GPipe schedule, the maintained successor of
torchgpipe, which the NASB-CMP paper compared with, §3.1 and Appendix B).

One step follows Algorithm 1's update order: the architecture pass (validation batch, weights
held out of the graph) and the weight pass (training batch, architecture held out) each run as
one GPipe step of ``n_microbatches`` micro-batches; the partial architecture gradients of the
stages are summed, the weight gradients clipped by the global norm, and both updates applied
after both passes. Batch norm sees micro-batches, so the numbers are those of a different
(micro-batched) computation: this is a timing baseline, not a bitwise reference.

Invariants: on return or raise, no worker process is left running.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

import torch
from torch import nn

from nasforge.errors import ConfigError
from nasforge.oneshot import nasb
from nasforge.oneshot._cmp_worker import Job, PartitionWorker
from nasforge.oneshot.cmp_partition import run
from nasforge.oneshot.common import apply_arch, batches
from nasforge.runtime.procgroup import file_rendezvous, join_group

__all__ = ["profile_pipelining"]


class _Stage(nn.Module):
    """Returns a partition's output (one tensor, or a tuple) for a pipelining stage."""

    def __init__(self, mods: list[nn.Module]) -> None:
        super().__init__()
        self.mods = nn.ModuleList(mods)

    def forward(self, *xs: torch.Tensor) -> Any:
        out = run(list(self.mods), xs)
        used = [x for x in xs if x.requires_grad]
        if used:  # pipelining sends a gradient for every input: give unused ones zeros
            anchor = sum(x.sum() for x in used) * 0.0
            out = (out[0] + anchor, *out[1:])
        return out[0] if len(out) == 1 else out


def _main(rank: int, job: Job, n_micro: int, warmup: int, steps: int) -> None:
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

    torch.set_num_threads(job.threads)
    join_group(rank, job.m, file_rendezvous(job.out))
    w = PartitionWorker(job, rank, None)
    module = _Stage(w.mods)
    # one stage per pass: each infers which of its inputs carry gradients on its first step
    scheds = [
        ScheduleGPipe(
            PipelineStage(module, rank, job.m, torch.device("cpu")),
            n_micro,
            loss_fn=nn.functional.cross_entropy,
        )
        for _ in range(2)
    ]
    times = _steps(w, scheds, warmup, steps)
    torch.save({"times": times}, Path(job.out) / f"prof{rank}.pt")


def _pass(w: PartitionWorker, sched: Any, batch: Any, arch: bool) -> None:
    """Runs one GPipe step of the architecture pass (``arch``) or of the weight pass."""
    for a in w.alphas:
        a.requires_grad_(arch)
    for p in w.params:
        p.requires_grad_(not arch)
    try:
        x, y = batch
        if w.k == 0:
            sched.step(x)
        elif w.k == w.m - 1:
            sched.step(target=y, losses=[])
        else:
            sched.step()
    finally:
        for t in (*w.alphas, *w.params):
            t.requires_grad_(True)


def _steps(w: PartitionWorker, scheds: list[Any], warmup: int, steps: int) -> list[float]:
    import time

    import torch.distributed as dist

    cfg, split = w.job.cfg, w.job.split
    out: list[float] = []
    pairs = list(
        zip(batches(split.train, cfg.batch_size, w.g), batches(split.val, cfg.batch_size, w.g))
    )
    pairs = [p for p in pairs if len(p[0][1]) == cfg.batch_size == len(p[1][1])]  # equal chunks
    for i in range(warmup + steps):
        train, val = pairs[i % len(pairs)]
        dist.barrier()
        t0 = time.perf_counter()
        if w.binary:
            nasb.binarize(w.net)
        _pass(w, scheds[0], val, arch=True)
        grads = [torch.zeros_like(a) if a.grad is None else a.grad for a in w.alphas]
        for a in w.alphas:
            a.grad = None
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)  # the stages' partial architecture gradients
        _pass(w, scheds[1], train, arch=False)
        sizes = [g.numel() for g in grads]
        apply_arch(w.net, w.opt_a, [t.view_as(g) for t, g in zip(flat.split(sizes), grads)])
        present = [p for p in w.params if p.grad is not None]
        sq = torch.stack([torch.linalg.vector_norm(p.grad) ** 2 for p in present]).sum()
        dist.all_reduce(sq)
        nn.utils.clip_grads_with_norm_(present, cfg.grad_clip, sq.sqrt())
        w.opt_w.step()
        w.opt_w.zero_grad(set_to_none=True)
        if i >= warmup:
            out.append(time.perf_counter() - t0)
    return out


def profile_pipelining(
    space: Any,
    algorithm: str,
    data: Any,
    *,
    model_parallel: int = 2,
    n_microbatches: int = 4,
    warmup: int = 2,
    steps: int = 5,
    bounds: list[tuple[int, int]] | None = None,
    timeout_s: float = 600.0,
    **settings: Any,
) -> dict[str, Any]:
    """Returns ``step_s`` (median step time of stage 0) and the raw times of the GPipe baseline
    on ``model_parallel`` processes (CPU, gloo), each micro-batch ``batch_size / n_microbatches``.

    Raises:
        ConfigError: ``batch_size`` not divisible by ``n_microbatches``; see ``cmp_search``.
        WorkerError: a stage process raised or died (every process is ended first).
    """
    from nasforge.oneshot.cmp import _prepare, _Workers

    algo, cfg, split, state, bounds = _prepare(
        space, algorithm, data, model_parallel, "mp", 1, "process", None, None, None, bounds,
        settings,
    )  # fmt: skip
    if cfg.batch_size % n_microbatches:
        raise ConfigError(
            f"batch_size={cfg.batch_size} does not split into n_microbatches={n_microbatches} "
            "equal micro-batches; choose a divisor"
        )
    with tempfile.TemporaryDirectory(prefix="nasforge-pipe-") as out:
        init = str(Path(out) / "init.pt")
        torch.save(state.state_dict(), init)
        job = Job(space, algo.name, split, cfg, bounds, "mp", 1, init, out, torch.get_num_threads())
        with _Workers(job, "process", timeout_s, (_main, (n_microbatches, warmup, steps))) as pool:
            profs = pool.wait_files([f"prof{r}.pt" for r in range(job.m)])
    return {"step_s": statistics.median(profs[0]["times"]), "times": [p["times"] for p in profs]}
