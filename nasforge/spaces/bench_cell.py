"""A NAS-Bench-201-style cell space small enough to train every sampled architecture
stand-alone on MNIST: the ground truth of "does the supernet rank?" (issue 27).

A cell is a DAG of 4 nodes; node ``j`` sums one edge from every earlier node ``i`` (6 edges),
each edge one of ``none`` (zeros), ``skip_connect`` (identity; not named ``skip``, an attribute
of SPOS's mixed op), ``pool`` (3×3 average) or ``conv`` (ReLU → 3×3 conv → BN); the cell's
output is node 3. So 4^6 = 4,096 architectures, and, unlike the DARTS cells of
``digits_cell_space``, they differ a lot: a cell whose every path to node 3 holds a ``none``
passes nothing, one without a ``conv`` learns nothing but the stem and head.

``dims=1`` builds the 1-D twin for sequences ``1×L`` (MNIST-1D): the same cell with 1-D
convolutions, pools and batch norms (kernel 3 becomes 3, 3×3 becomes 3). ``ops`` picks the
candidates: :data:`BENCH_OPS` (default) or :data:`NB201_OPS`, NAS-Bench-201's five (adds
``conv1x1``: ReLU → 1×1 conv → BN), so 5^6 = 15,625 architectures.
``nasforge.spaces.cell_canon`` maps an architecture to its function (dead ends dropped,
identical functions collapsed).

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
from nasforge.errors import ConfigError

__all__ = ["BenchCellSpace", "BENCH_OPS", "NB201_OPS", "EDGES", "Zero"]

#: Candidate operations of an edge, in the order of the space's values.
BENCH_OPS: tuple[str, ...] = ("none", "skip_connect", "pool", "conv")
#: NAS-Bench-201's five candidates (``conv`` is the 3-wide one).
NB201_OPS: tuple[str, ...] = ("none", "skip_connect", "conv1x1", "conv", "pool")
#: The edges of a cell as (into node j, from node i), in label order.
EDGES: tuple[tuple[int, int], ...] = tuple((j, i) for j in range(1, 4) for i in range(j))


class Zero(nn.Module):
    """Returns zeros shaped like the input (the ``none`` operation; keeps the graph)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mul(0.0)


_CONV = {1: nn.Conv1d, 2: nn.Conv2d}
_BN = {1: nn.BatchNorm1d, 2: nn.BatchNorm2d}
_POOL = {1: nn.AvgPool1d, 2: nn.AvgPool2d}


def _reluconvbn(
    c_in: int, c_out: int, stride: int = 1, dims: int = 2, kernel: int = 3
) -> nn.Sequential:
    return nn.Sequential(
        nn.ReLU(inplace=False),
        _CONV[dims](c_in, c_out, kernel, stride, padding=kernel // 2, bias=False),
        _BN[dims](c_out),
    )


def _op(name: str, c: int, dims: int):  # -> a zero-argument factory, built only when chosen
    table = {
        "none": Zero,
        "skip_connect": nn.Identity,
        "pool": lambda: _POOL[dims](3, 1, padding=1, count_include_pad=False),
        "conv": lambda: _reluconvbn(c, c, dims=dims),
        "conv1x1": lambda: _reluconvbn(c, c, dims=dims, kernel=1),
    }
    return table[name]


class _Cell(nn.Module):
    """Returns node 3 of the cell DAG for input node 0."""

    def __init__(self, c: int, dims: int, ops: tuple[str, ...]) -> None:
        super().__init__()
        self.edges = nn.ModuleDict(
            {
                f"e{j}_{i}": nf.LayerChoice(
                    {name: _op(name, c, dims) for name in ops}, label=f"e{j}_{i}"
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

    Invariants: the space has the 6 decisions ``e1_0 … e3_2``, each over ``ops``; every
    cell of a network shares them.

    Raises:
        ConfigError: ``dims`` is not 1 or 2, or ``ops`` names an unknown operation.
    """

    def __init__(
        self,
        channels: int = 8,
        n_cells: int = 1,
        n_classes: int = 10,
        dims: int = 2,
        ops: tuple[str, ...] | list[str] = BENCH_OPS,
    ) -> None:
        super().__init__()
        if dims not in _CONV:
            raise ConfigError(f"dims must be 1 (sequences) or 2 (images), got {dims!r}")
        unknown = [o for o in ops if o not in NB201_OPS]
        if unknown or not ops:
            raise ConfigError(f"ops must be a non-empty subset of {NB201_OPS}, got {tuple(ops)}")
        ops, c = tuple(ops), channels
        self.stem = nn.Sequential(_CONV[dims](1, c, 3, padding=1, bias=False), _BN[dims](c))
        self.stage1 = nn.Sequential(*[_Cell(c, dims, ops) for _ in range(n_cells)])
        self.reduce = _reluconvbn(c, 2 * c, stride=2, dims=dims)
        self.stage2 = nn.Sequential(*[_Cell(2 * c, dims, ops) for _ in range(n_cells)])
        pool = nn.AdaptiveAvgPool1d(1) if dims == 1 else nn.AdaptiveAvgPool2d(1)
        self.head = nn.Sequential(_BN[dims](2 * c), nn.ReLU(inplace=False), pool, nn.Flatten())
        self.fc = nn.Linear(2 * c, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.head(self.stage2(self.reduce(self.stage1(self.stem(x))))))

    def function_key(self, arch: dict[str, str]) -> str:
        """Returns the key of the function ``arch`` computes (dead ends dropped, identical
        functions collapsed: :func:`nasforge.spaces.cell_canon.function_key`): two
        architectures with one key freeze to the same function, so a shortlist keeps one."""
        from nasforge.spaces.cell_canon import function_key

        return function_key(arch)

    def canonical_arch(self, arch: dict[str, str]) -> dict[str, str]:
        """Returns ``arch`` with every op off the cell's live paths set to ``none``: the same
        function without the weights of ops whose input is always zero
        (:func:`nasforge.spaces.cell_canon.canonical_arch`); a budget's projection measures
        this (:meth:`nasforge.oneshot.budgeted.Budgeted.project`)."""
        from nasforge.spaces.cell_canon import canonical_arch

        return canonical_arch(arch)
