"""NAS-Bench-201's cell space (Dong & Yang, ICLR 2020): exactly its 15,625 cells.

A cell is a DAG of 4 nodes; node ``j`` (1..3) sums one edge from every earlier node ``i``, each
edge one of the five operations in the benchmark's order (``NB201_OPS``):

    none            zeros (the edge is absent)
    skip_connect    identity
    nor_conv_1x1    ReLU → 1×1 conv → BN
    nor_conv_3x3    ReLU → 3×3 conv → BN
    avg_pool_3x3    3×3 average pooling, stride 1 (padding not counted)

The cell's output is node 3; 5^6 = 15,625 cells. Labels are ``e{j}_{i}`` (the edge into node
``j`` from node ``i``), shared by every cell. The network, as the benchmark trains it:

    stem      3×3 conv 3 → C, BN                                  R×R
    stage 1   N cells (C)                                         R×R
    reduce    residual block C → 2C, stride 2 (3×3 convs; 2×2 avg pool + 1×1 conv shortcut)
    stage 2   N cells (2C)                                        R/2×R/2
    reduce    residual block 2C → 4C, stride 2
    stage 3   N cells (4C)                                        R/4×R/4
    head      BN, ReLU, global average pool, Linear(4C → classes)

with C = 16, N = 5 for CIFAR-10/100 and ImageNet16-120. The benchmark's tables are keyed by the
architecture string ``|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|...~0|...~1|...~2|``
(node by node, ``op~input``): :func:`to_arch_string` and :func:`from_arch_string` convert, and
such a string is a name of the hub: ``hub.arch(text)`` is its arch dict, ``hub.model(text)`` the
cell frozen at the benchmark's setting (C = 16, N = 5, 10 classes, 32×32). The one cell the
paper names, ResNet's (its Figure 1: two 3×3 convolutions and a skip), is ``"nasbench201-resnet"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

import nasforge as nf
from nasforge.errors import ArchitectureError
from nasforge.hub._registry import register_arch, register_arch_form, register_space
from nasforge.spaces.darts_ops import ReLUConvBN, Zero

__all__ = [
    "NB201_OPS",
    "NB201_EDGES",
    "NasBench201Space",
    "to_arch_string",
    "from_arch_string",
    "RESNET",
]

#: The benchmark's operations, in its order (an edge's values, in this order).
NB201_OPS: tuple[str, ...] = (
    "none",
    "skip_connect",
    "nor_conv_1x1",
    "nor_conv_3x3",
    "avg_pool_3x3",
)
#: The edges of a cell as (into node j, from node i), in label order.
NB201_EDGES: tuple[tuple[int, int], ...] = tuple((j, i) for j in range(1, 4) for i in range(j))


def _op(name: str, c: int) -> Any:  # -> a zero-argument factory, built only when chosen
    table = {
        "none": lambda: Zero(1),
        "skip_connect": nn.Identity,
        "nor_conv_1x1": lambda: ReLUConvBN(c, c, 1, 1, 0),
        "nor_conv_3x3": lambda: ReLUConvBN(c, c, 3, 1, 1),
        "avg_pool_3x3": lambda: nn.AvgPool2d(3, 1, padding=1, count_include_pad=False),
    }
    return table[name]


class _Cell(nn.Module):
    """Returns node 3 of the cell DAG for input node 0."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.edges = nn.ModuleDict(
            {
                f"e{j}_{i}": nf.LayerChoice(
                    {name: _op(name, c) for name in NB201_OPS}, label=f"e{j}_{i}"
                )
                for j, i in NB201_EDGES
            }
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        nodes = [x]
        for j in range(1, 4):
            nodes.append(sum(self.edges[f"e{j}_{i}"](nodes[i]) for i in range(j)))
        return nodes[3]


class _ResidualReduce(nn.Module):
    """Returns the benchmark's reduction block: two 3×3 convs (the first at stride 2) plus a
    2×2 average pool and 1×1 conv shortcut."""

    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.conv_a = ReLUConvBN(c_in, c_out, 3, 2, 1)
        self.conv_b = ReLUConvBN(c_out, c_out, 3, 1, 1)
        self.shortcut = nn.Sequential(nn.AvgPool2d(2, 2), nn.Conv2d(c_in, c_out, 1, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.shortcut(x) + self.conv_b(self.conv_a(x))


class NasBench201Space(nf.ModelSpace):
    """Returns NAS-Bench-201's network (see the module's table) as a model space.

    Invariants: 6 decisions ``e1_0 … e3_2``, each over ``NB201_OPS`` in the benchmark's order,
    shared by all ``3 * n_cells`` cells; size 15,625.
    """

    def __init__(
        self, channels: int = 16, n_cells: int = 5, n_classes: int = 10, in_channels: int = 3
    ) -> None:
        super().__init__()
        c = channels
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        )
        layers: list[nn.Module] = []
        for stage in range(3):
            if stage:
                layers.append(_ResidualReduce(c, 2 * c))
                c *= 2
            layers += [_Cell(c) for _ in range(n_cells)]
        self.cells = nn.Sequential(*layers)
        self.head = nn.Sequential(
            nn.BatchNorm2d(c), nn.ReLU(inplace=False), nn.AdaptiveAvgPool2d(1), nn.Flatten()
        )
        self.classifier = nn.Linear(c, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.head(self.cells(self.stem(x))))


def to_arch_string(arch: Mapping[str, Any]) -> str:
    """Returns the benchmark's string of an architecture, ``|op~0|+|op~0|op~1|+|op~0|op~1|op~2|``.

    Raises:
        ArchitectureError: ``arch`` lacks an edge label or gives an operation not in
            ``NB201_OPS``.
    """
    nodes = []
    for j in range(1, 4):
        parts = []
        for i in range(j):
            op = arch.get(f"e{j}_{i}")
            if op not in NB201_OPS:
                raise ArchitectureError(
                    f"label 'e{j}_{i}' is {op!r}; a NAS-Bench-201 edge is one of {list(NB201_OPS)}"
                )
            parts.append(f"{op}~{i}")
        nodes.append("|" + "|".join(parts) + "|")
    return "+".join(nodes)


def from_arch_string(text: str) -> dict[str, str]:
    """Returns the architecture of :class:`NasBench201Space` that a benchmark string names.

    Raises:
        ArchitectureError: the string is not 3 nodes of ``|op~input|`` entries with node ``j``
            taking inputs ``0..j-1`` in order and operations from ``NB201_OPS``.
    """
    expect = "|op~0|+|op~0|op~1|+|op~0|op~1|op~2| with op one of " + ", ".join(NB201_OPS)
    nodes = str(text).split("+") if isinstance(text, str) else []
    if len(nodes) != 3:
        raise ArchitectureError(f"{text!r} is not a NAS-Bench-201 string; expected {expect}")
    arch: dict[str, str] = {}
    for j, node in enumerate(nodes, start=1):
        parts = node.strip("|").split("|")
        if not (node.startswith("|") and node.endswith("|")) or len(parts) != j:
            raise ArchitectureError(
                f"{text!r}: node {j} is {node!r}, expected {j} edge(s); expected {expect}"
            )
        for i, part in enumerate(parts):
            op, _, src = part.partition("~")
            if op not in NB201_OPS or src != str(i):
                raise ArchitectureError(
                    f"{text!r}: edge {part!r} of node {j} should be op~{i}; expected {expect}"
                )
            arch[f"e{j}_{i}"] = op
    return arch


#: The ResNet cell of the paper's Figure 1 (a residual block: two 3×3 convolutions, a skip), as
#: the benchmark's own scripts query it (AutoDL-Projects, ``exps/NATS-Bench``).
RESNET = "|nor_conv_3x3~0|+|none~0|nor_conv_3x3~1|+|skip_connect~0|none~1|skip_connect~2|"

_DONG = "Dong & Yang 2020, NAS-Bench-201: Extending the Scope of Reproducible NAS (ICLR)"

register_space(
    "nasbench201",
    NasBench201Space,
    paper=_DONG,
    size_paper=15_625,
    family="nasbench201",
    note="5 operations on each of 6 edges: 5^6 cells (the paper's Section 2.1)",
)
register_arch_form(
    "nasbench201",
    # a name with an "op~input" entry is meant as a benchmark string: a malformed one gets
    # from_arch_string's error (the expected form), not "no architecture is called"
    matches=lambda name: "~" in name,
    parse=from_arch_string,
    resolution=32,
    num_classes=10,
    source=_DONG + ", an architecture string (C=16, N=5, CIFAR-10)",
)
register_arch(
    "nasbench201-resnet",
    space="nasbench201",
    arch=from_arch_string(RESNET),
    resolution=32,
    num_classes=10,
    params_paper=None,
    madds_paper=None,
    source=_DONG + ", Figure 1: the ResNet cell",
)
