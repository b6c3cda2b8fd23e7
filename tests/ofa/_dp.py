"""Data-parallel OFA training on 2 gloo ranks over loopback, for the tests: the tiny CompOFA
network, the rank function (module level, so that spawned processes find it) and what a
training returns for comparison."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any

import torch

from nasforge.ofa.mobilenet import OFAMobileNetV3
from nasforge.ofa.spaces import Stage
from nasforge.ofa.train import TrainConfig, train, training_plan
from nasforge.runtime.distributed import ONE, Ranks
from nasforge.runtime.procgroup import LocalGroup, file_rendezvous, join_group
from tests.ofa.conftest import tiny_spec

#: global batch 24 of 48 images: 2 steps per epoch; 2 sub-networks per shrinking step
CONFIG = TrainConfig(batch_size=24, n_subnets=2, seed=5)


def data(n: int = 48) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns ``n`` 16x16 greyscale images and 3 classes a simple rule separates."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, 1, 16, 16, generator=g)
    return x, (x.mean(dim=(1, 2, 3)) > 0).long() + (x[:, 0, 0, 0] > 1).long()


def _digest(net: torch.nn.Module) -> str:
    """Returns a hash of every weight of ``net`` (not batch norm's running statistics, which
    each rank estimates on its shards until the epoch's end averages them)."""
    h = hashlib.sha256()
    for t in net.parameters():
        h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def run(ranks: Ranks = ONE, sync_bn: bool = False, coupling: str = "compofa") -> dict[str, Any]:
    """Returns what a training of the tiny network ends with (the full network for an epoch,
    then the shrinking phases for an epoch each): its weights, each epoch's loss and probe
    accuracies, and a digest of the weights after every step."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    net = OFAMobileNetV3(tiny_spec(coupling))
    if ranks.distributed:  # the training must not read the global generators
        torch.manual_seed(1000 + ranks.rank)
        random.seed(1000 + ranks.rank)
    plan = [Stage("full", None, 1), *training_plan(net, 0, 1 if coupling == "compofa" else 5)]
    steps: list[str] = []
    x, y = data()
    rows = train(net, (x, y), plan, CONFIG, probe_data=(x[:20], y[:20]), ranks=ranks,
                 sync_bn=sync_bn, progress=lambda *_: steps.append(_digest(net)))  # fmt: skip
    return {
        "state": {k: v.detach().clone() for k, v in net.state_dict().items()},
        "rows": [{k: v for k, v in r.items() if k not in ("seconds",)} for r in rows],
        "steps": steps,
    }


def _rank(rank: int, folder: str, world: int, sync_bn: bool, coupling: str) -> dict[str, Any]:
    """Returns :func:`run` on rank ``rank`` of ``world``."""
    ranks = join_group(rank, world, file_rendezvous(folder), timeout_s=120)
    return run(ranks, sync_bn, coupling)


def on_ranks(
    folder: Path, sync_bn: bool = False, coupling: str = "compofa", world: int = 2
) -> list[dict[str, Any]]:
    """Returns :func:`run` on each of ``world`` ranks (processes on loopback), in rank order."""
    folder.mkdir(parents=True, exist_ok=True)
    with LocalGroup(world, _rank, (str(folder), world, sync_bn, coupling), folder=folder,
                    what="rank", timeout_s=300) as group:  # fmt: skip
        return group.results(weights_only=False)
