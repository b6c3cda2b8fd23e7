"""Data-parallel one-shot search on 2 gloo ranks over loopback, for the tests: a space without
batch norm, the rank function (module level, so that spawned processes find it) and what it
returns for comparison."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any

import torch
from torch import nn

import nasforge as nf
from nasforge.oneshot import search
from nasforge.runtime.distributed import ONE, Ranks
from nasforge.runtime.procgroup import LocalGroup, file_rendezvous, join_group

#: the settings every run of the tests uses (global batch 32, a checkpoint every step)
SETTINGS: dict[str, Any] = {"epochs": 2, "batch_size": 32, "checkpoint_every": 1, "seed": 3}
#: per algorithm: its own settings kept small
OWN: dict[str, dict[str, Any]] = {
    "darts": {},
    "nasb": {"warmup_epochs": 1},
    "nasp": {"warmup_epochs": 1},
    "spos": {"population": 4, "cycles": 6, "sample_size": 2, "selection": "loss"},
    "fewshot": {"population": 4, "cycles": 6, "sample_size": 2, "selection": "loss"},
    "fairnas": {"population": 4, "cycles": 6, "sample_size": 2, "selection": "loss"},
    "enas": {"controller_steps": 3, "final_samples": 4, "warmup_epochs": 1, "selection": "loss"},
    "proxylessnas": {
        "latency_table": {"lin": 1.0, "tanh": 0.5, "ident": 0.1, "relu": 0.2, "sig": 0.3},
        "latency_target": 1.5,
    },
}


class MlpSpace(nf.ModelSpace):
    """Returns a small MLP space without batch norm: a layer choice, a node of two edges and
    a depth choice (every decision kind a supernet mixes)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(16, 24)
        self.op = nf.LayerChoice(
            {"lin": lambda: nn.Linear(24, 24), "tanh": nn.Tanh, "ident": nn.Identity}, label="op"
        )
        self.e0 = nf.LayerChoice({"lin": lambda: nn.Linear(24, 24), "relu": nn.ReLU}, label="e0")
        self.e1 = nf.LayerChoice({"lin": lambda: nn.Linear(24, 24), "sig": nn.Sigmoid}, label="e1")
        self.node = nf.InputChoice(2, n_chosen=1, label="node")
        self.blocks = nf.Repeat(lambda i: nn.Sequential(nn.Linear(24, 24), nn.ReLU()), (1, 2),
                                label="depth")  # fmt: skip
        self.fc = nn.Linear(24, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.op(self.stem(x)))
        return self.fc(self.blocks(self.node([self.e0(h), self.e1(h)])))


class BnSpace(MlpSpace):
    """Returns :class:`MlpSpace` with batch norm after its stem (and in train mode, by batch
    statistics)."""

    def __init__(self) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(24)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.op(self.bn(self.stem(x))))
        return self.fc(self.blocks(self.node([self.e0(h), self.e1(h)])))


def data() -> tuple[torch.Tensor, torch.Tensor]:
    """Returns 256 examples of 16 features and 4 classes a linear rule separates."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 16, generator=g)
    return x, (x[:, :4].argmax(1))


def _digest(state: Any) -> str:
    """Returns a hash of what decides the next step: the weights, the architecture
    parameters and both generators."""
    h = hashlib.sha256()
    for t in state.net.state_dict().values():
        h.update(t.detach().contiguous().numpy().tobytes())
    h.update(repr(state.rng.getstate()).encode())
    h.update(state.g.get_state().numpy().tobytes())
    return h.hexdigest()[:16]


def run(
    algorithm: str, ranks: Ranks = ONE, bn: str = "", extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Returns what a search of :class:`MlpSpace` on :func:`data` ends with: the pick, the
    supernet's state, the architecture after each epoch and a digest of every step; ``bn``
    ``shard`` or ``sync`` searches :class:`BnSpace` (``sync``: with ``sync_bn``); ``extra``:
    more settings of the search (a budget)."""
    torch.set_num_threads(1)
    steps: list[str] = []
    space = BnSpace() if bn else MlpSpace()
    result = search(space, algorithm, data(), threads=1, progress="off", ranks=ranks,
                    checkpoint=lambda row, state: steps.append(_digest(state)),
                    sync_bn=bn == "sync", **SETTINGS, **OWN[algorithm],
                    **(extra or {}))  # fmt: skip
    assert result.supernet is not None
    return {
        "arch": result.arch,
        "metrics": dict(result.metrics),
        "state": {k: v.detach().clone() for k, v in result.supernet.state_dict().items()},
        "archs": [row["arch"] for row in result.history],
        "steps": steps,
    }


def _rank(
    rank: int, folder: str, world: int, algorithm: str, bn: str, extra: dict[str, Any] | None
) -> dict[str, Any]:
    """Returns :func:`run` on rank ``rank`` of ``world``, its global generators first set
    apart from every other rank's (the search must not read them)."""
    ranks = join_group(rank, world, file_rendezvous(folder), timeout_s=120)
    torch.manual_seed(1000 + rank)
    random.seed(1000 + rank)
    return run(algorithm, ranks, bn, extra)


def on_ranks(
    algorithm: str,
    folder: Path,
    world: int = 2,
    bn: str = "",
    extra: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Returns :func:`run` on each of ``world`` ranks (processes on loopback), in rank order."""
    folder.mkdir(parents=True, exist_ok=True)
    with LocalGroup(world, _rank, (str(folder), world, algorithm, bn, extra), folder=folder,
                    what="rank", timeout_s=300) as group:  # fmt: skip
        return group.results(weights_only=False)
