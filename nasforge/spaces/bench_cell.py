"""A NAS-Bench-201-style cell space small enough to train every sampled architecture
stand-alone on MNIST: the ground truth of "does the supernet rank?" (issue 27).

A cell is a DAG of 4 nodes; node ``j`` sums one edge from every earlier node ``i`` (6 edges),
each edge one of ``none`` (zeros), ``skip_connect`` (identity; not named ``skip``, an attribute
of SPOS's mixed op), ``pool`` (3×3 average) or ``conv`` (ReLU → 3×3 conv → BN); the cell's
output is node 3. So 4^6 = 4,096 architectures, and, unlike the DARTS cells of
``digits_cell_space``, they differ a lot: a cell whose every path to node 3 holds a ``none``
passes nothing, one without a ``conv`` learns nothing but the stem and head.

Labels are ``e{j}_{i}`` (the edge from node i into node j), shared by every cell, so one
architecture fits a network of any depth and width.

Shape table (input ``1×H×W``; ``c`` = ``channels``):

    stem        3×3 conv 1 → c, BN                  H×W
    stage 1     ``n_cells`` cells (c → c)           H×W
    reduce      ReLU, 3×3 conv stride 2 c → 2c, BN  H/2×W/2
    stage 2     ``n_cells`` cells (2c → 2c)         H/2×W/2
    head        BN, ReLU, global average pool, Linear(2c → n_classes)
"""

from __future__ import annotations

import torch
from torch import nn

import nasforge as nf

__all__ = ["BenchCellSpace", "BENCH_OPS", "EDGES", "Zero"]

#: Candidate operations of an edge, in the order of the space's values.
BENCH_OPS: tuple[str, ...] = ("none", "skip_connect", "pool", "conv")
#: The edges of a cell as (into node j, from node i), in label order.
EDGES: tuple[tuple[int, int], ...] = tuple((j, i) for j in range(1, 4) for i in range(j))


class Zero(nn.Module):
    """Returns zeros shaped like the input (the ``none`` operation; keeps the graph)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mul(0.0)


def _reluconvbn(c_in: int, c_out: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.ReLU(inplace=False),
        nn.Conv2d(c_in, c_out, 3, stride, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
    )


def _op(name: str, c: int):  # -> a zero-argument factory, built only when chosen
    table = {
        "none": Zero,
        "skip_connect": nn.Identity,
        "pool": lambda: nn.AvgPool2d(3, 1, padding=1, count_include_pad=False),
        "conv": lambda: _reluconvbn(c, c),
    }
    return table[name]


class _Cell(nn.Module):
    """Returns node 3 of the cell DAG for input node 0."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.edges = nn.ModuleDict(
            {
                f"e{j}_{i}": nf.LayerChoice(
                    {name: _op(name, c) for name in BENCH_OPS}, label=f"e{j}_{i}"
                )
                for j, i in EDGES
            }
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        nodes = [x]
        for j in range(1, 4):
            nodes.append(sum(self.edges[f"e{j}_{i}"](nodes[i]) for i in range(j)))
        return nodes[3]


class BenchCellSpace(nf.ModelSpace):
    """Returns the benchmark cell network (see the module's shape table) as a model space.

    Invariants: the space has the 6 decisions ``e1_0 … e3_2``, each over ``BENCH_OPS``; every
    cell of a network shares them.
    """

    def __init__(self, channels: int = 8, n_cells: int = 1, n_classes: int = 10) -> None:
        super().__init__()
        c = channels
        self.stem = nn.Sequential(nn.Conv2d(1, c, 3, padding=1, bias=False), nn.BatchNorm2d(c))
        self.stage1 = nn.Sequential(*[_Cell(c) for _ in range(n_cells)])
        self.reduce = _reluconvbn(c, 2 * c, stride=2)
        self.stage2 = nn.Sequential(*[_Cell(2 * c) for _ in range(n_cells)])
        self.head = nn.Sequential(
            nn.BatchNorm2d(2 * c), nn.ReLU(inplace=False), nn.AdaptiveAvgPool2d(1), nn.Flatten()
        )
        self.fc = nn.Linear(2 * c, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.head(self.stage2(self.reduce(self.stage1(self.stem(x))))))
