"""Mixed parallelism for weight-sharing training (Retiarii §5.2, §7.4), and the baseline it is
measured against: data parallelism with synchronised batch norm.

    mixed   W worker processes each hold the super-graph (``weightsharing.SinglePath``);
            at every step each samples its own architecture and trains it on its own batch;
            the shared weights' gradients are then averaged over the workers that used them
            (one coalesced ``all_reduce`` of gradients and one of use counts), so every worker
            takes the same optimizer step and the replicas stay identical
    dp      the same super-graph trained data parallel: one architecture per step for all
            workers, the global batch split across them, gradients averaged, and batch norm
            normalising by the statistics of the *global* batch (the data-parallel
            one-shot search's :mod:`nasforge.runtime.sync_bn`, which runs on gloo too:
            torch's ``SyncBatchNorm`` runs on NCCL only)

Batch norm running statistics of the mixed workers are averaged at the end of training (their
batch counters summed); the
weight-sharing quality measure is the mean validation accuracy of K random sub-networks with
inherited weights, each after recalibrating its batch norm (``nasforge.weightsharing``).

Invariants: after every step all workers hold the same weights (both modes).
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from nasforge.runtime import sync_bn
from nasforge.runtime.distributed import Ranks
from nasforge.runtime.procgroup import LocalGroup, file_rendezvous, join_group
from nasforge.space.model_space import ModelSpace
from nasforge.weightsharing import SinglePath

__all__ = ["train_worker", "subnet_accuracy", "run_gloo"]


def _average_grads(params: Sequence[nn.Parameter], by_users: bool) -> None:
    """Averages gradients across workers: over the workers that produced one (``by_users``,
    mixed) or over all (data parallel)."""
    flat = torch.cat([p.grad.reshape(-1) if p.grad is not None else p.new_zeros(p.numel())
                      for p in params])  # fmt: skip
    dist.all_reduce(flat)
    if by_users:
        used = torch.tensor([float(p.grad is not None) for p in params])
        dist.all_reduce(used)
    else:
        used = torch.full((len(params),), float(dist.get_world_size()))
    i = 0
    for p, u in zip(params, used.tolist()):
        n = p.numel()
        if u > 0:
            p.grad = (flat[i : i + n] / u).view_as(p)
        i += n


def train_worker(
    rank: int,
    world: int,
    space: ModelSpace,
    x: torch.Tensor,
    y: torch.Tensor,
    mode: str,
    batch_size: int,
    lr: float,
    seed: int,
    epochs: int = 1,
) -> tuple[dict[str, torch.Tensor], float]:
    """Returns (the super-graph's state, seconds of training) after ``epochs`` of weight-
    sharing training in a process group already initialised (``rank`` of ``world``).

    ``mode`` ``mixed``: each step each worker trains its own sampled architecture on its own
    ``batch_size`` examples; ``dp``: each step one architecture, the global ``batch_size``
    split across the workers, with synchronised batch norm.
    """
    import time

    torch.manual_seed(seed)
    net = SinglePath(space)
    for m in net.modules():
        reset = getattr(m, "reset_parameters", None)
        if reset is not None:
            reset()
    if mode == "dp":
        sync_bn.convert(net)
    ranks = Ranks(rank, world, rank, dist.get_backend())
    params = [p for p in net.parameters()]
    opt = torch.optim.SGD(params, lr=lr, momentum=0.9)
    per_step = batch_size * world if mode == "mixed" else batch_size
    steps = len(x) // per_step
    sp = space.search_space()
    start = time.perf_counter()
    for epoch in range(epochs):
        order = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed + epoch))
        for s in range(steps):
            chunk = order[s * per_step : (s + 1) * per_step]
            if mode == "mixed":
                idx = chunk[rank * batch_size : (rank + 1) * batch_size]
                arch = sp.sample(random.Random(hash((seed, epoch, s, rank))))
            else:
                part = batch_size // world
                idx = chunk[rank * part : (rank + 1) * part]
                arch = sp.sample(random.Random(hash((seed, epoch, s))))
            net.activate(arch)
            with sync_bn.synced(net, ranks):  # dp: batch norm over the global batch
                loss = nn.functional.cross_entropy(net(x[idx]), y[idx])
                opt.zero_grad(set_to_none=True)
                loss.backward()
            _average_grads(params, by_users=mode == "mixed")
            opt.step()
    if mode == "mixed":  # replicas' batch-norm statistics differ: average them
        for buf in net.buffers():
            dist.all_reduce(buf)  # counters (num_batches_tracked) add up
            if buf.is_floating_point():
                buf /= world
    seconds = time.perf_counter() - start
    state = {k: v.detach().clone() for k, v in net.model.state_dict().items()}
    return state, seconds


def subnet_accuracy(
    space: ModelSpace,
    state: dict[str, torch.Tensor],
    train_x: torch.Tensor,
    val: tuple[torch.Tensor, torch.Tensor],
    k: int = 20,
    seed: int = 0,
    bn_batches: int = 4,
    batch_size: int = 128,
) -> float:
    """Returns the mean validation accuracy of ``k`` random architectures with weights
    inherited from the super-graph ``state``, each after recalibrating its batch norm on
    ``bn_batches`` training batches (the weight-sharing quality measure of SPOS/Retiarii)."""
    from nasforge.weightsharing import accuracy, recalibrate_bn

    net = SinglePath(space)
    net.model.load_state_dict(state)
    rng = random.Random(seed)
    accs = []
    for _ in range(k):
        net.activate(space.search_space().sample(rng))
        net.model.load_state_dict(state)  # undo the previous recalibration
        recalibrate_bn(net, train_x[: bn_batches * batch_size], batch_size)
        accs.append(accuracy(net, val, batch_size=len(val[0])))
    return sum(accs) / len(accs)


def _gloo_rank(rank: int, world: int, folder: str, fn: Callable[[int], Any]) -> Any:
    torch.set_num_threads(1)
    join_group(rank, world, file_rendezvous(folder))
    return fn(rank)


def run_gloo(world: int, fn: Callable[[int], Any], timeout: float = 600.0) -> list[Any]:
    """Returns ``[fn(0), ..., fn(world - 1)]``, each run in a forked process of a gloo process
    group that stays on loopback (:class:`~nasforge.runtime.procgroup.LocalGroup`; results
    travel as ``torch.save`` files: tensors and plain data).

    Invariants: no worker process outlives the call.

    Raises:
        WorkerError: a worker raised (its traceback is in the message) or not all answered
            within ``timeout`` seconds.
    """
    with tempfile.TemporaryDirectory(prefix="nasforge-gloo-") as out:
        group = LocalGroup(
            world, _gloo_rank, (world, out, fn), folder=out, what="gloo worker",
            timeout_s=timeout, start_method="fork",
        )  # fmt: skip
        with group:
            return group.results()
