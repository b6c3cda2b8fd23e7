"""The DARTS/NASP cell space, written in the space language, and its genotype (JSON) form.

A network of ``n_cells`` cells (reduction cells at 1/3 and 2/3 of the depth, channels doubled
there), each a DAG of 2 input nodes (the two previous cells' outputs) and ``n_nodes``
intermediate nodes; node ``j`` sums two of its ``j`` incoming edges (an ``InputChoice`` with
``n_chosen=2``), each edge a ``LayerChoice`` over the operations of
:mod:`nasforge.spaces.darts_ops`. The cell output concatenates the intermediate nodes. With 4
intermediate nodes a cell has 2 + 3 + 4 + 5 = 14 edges.

Labels are shared by every cell of a kind (``normal.n3.e1``, ``reduce.n2.in``), so all normal
cells have one structure and all reduction cells another, as in DARTS, and one architecture fits
a network of any depth and width: ``nf.freeze(DartsCellSpace(n_cells=20, channels=36), arch)``.
When frozen, a node builds only its two chosen edges, so the frozen network is plain and has no
unused parameters.

A genotype is the JSON form ``{"normal": [[[op, input], [op, input]], ...], "reduce": [...]}``
(one pair per intermediate node, inputs numbered 0, 1 for the cell inputs and 2.. for nodes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

import nasforge as nf
from nasforge.errors import ArchitectureError
from nasforge.space.modules import SelectInputs
from nasforge.space.search_space import Arch
from nasforge.spaces.darts_ops import NORMAL_OPS, REDUCE_OPS, FactorizedReduce, ReLUConvBN, make_op

__all__ = [
    "DartsCell",
    "DartsCellSpace",
    "digits_cell_space",
    "arch_to_genotype",
    "genotype_to_arch",
]


class _Node(nn.Module):
    """Returns one intermediate node: the sum of its two chosen edges."""

    def __init__(self, kind: str, j: int, c: int, reduction: bool, ops: Sequence[str]) -> None:
        super().__init__()
        n_in = j + 2
        self.inputs = nf.InputChoice(n_in, n_chosen=2, reduction="sum", label=f"{kind}.n{j + 2}.in")
        # frozen: build only the chosen edges (labels are explicit, so skipping is safe)
        chosen = self.inputs.chosen if isinstance(self.inputs, SelectInputs) else range(n_in)
        self.edges = nn.ModuleDict()
        for i in chosen:
            stride = 2 if reduction and i < 2 else 1
            self.edges[str(i)] = nf.LayerChoice(
                {name: make_op(name, c, stride) for name in ops}, label=f"{kind}.n{j + 2}.e{i}"
            )

    def forward(self, states: list[torch.Tensor]) -> torch.Tensor:
        outs = [
            self.edges[str(i)](s) if str(i) in self.edges else None for i, s in enumerate(states)
        ]
        return self.inputs(outs)


class _Cell(nn.Module):
    """Returns the concatenation of a cell's intermediate nodes."""

    def __init__(
        self,
        c_pp: int,
        c_p: int,
        c: int,
        reduction: bool,
        reduction_prev: bool,
        n_nodes: int,
        ops: Sequence[str],
    ) -> None:
        super().__init__()
        self.reduction = reduction
        self.pre0 = FactorizedReduce(c_pp, c) if reduction_prev else ReLUConvBN(c_pp, c, 1, 1, 0)
        self.pre1 = ReLUConvBN(c_p, c, 1, 1, 0)
        kind = "reduce" if reduction else "normal"
        self.nodes = nn.ModuleList(_Node(kind, j, c, reduction, ops) for j in range(n_nodes))

    def forward(self, s0: torch.Tensor, s1: torch.Tensor) -> torch.Tensor:
        states = [self.pre0(s0), self.pre1(s1)]
        for node in self.nodes:
            states.append(node(states))
        return torch.cat(states[2:], dim=1)


#: The DARTS cell, public for spaces that stack it in another skeleton (nasforge.hub's DARTS).
DartsCell = _Cell


class DartsCellSpace(nf.ModelSpace):
    """Returns the DARTS/NASP cell search space (search setting: 8 cells, 16 channels).

    Invariants: 2 * sum(2..n_nodes+1) edge decisions (28 with 4 nodes) and 2 * n_nodes input
    decisions; reduction cells at indices ``n_cells // 3`` and ``2 * n_cells // 3``.
    """

    def __init__(
        self,
        n_cells: int = 8,
        channels: int = 16,
        in_channels: int = 3,
        n_classes: int = 10,
        n_nodes: int = 4,
        stem_multiplier: int = 3,
        normal_ops: Sequence[str] = NORMAL_OPS,
        reduce_ops: Sequence[str] = REDUCE_OPS,
    ) -> None:
        super().__init__()
        c_curr = stem_multiplier * channels
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, c_curr, 3, padding=1, bias=False), nn.BatchNorm2d(c_curr)
        )
        c_pp, c_p, c = c_curr, c_curr, channels
        self.cells = nn.ModuleList()
        reduction_prev = False
        for i in range(n_cells):
            reduction = i in (n_cells // 3, 2 * n_cells // 3)
            if reduction:
                c *= 2
            ops = reduce_ops if reduction else normal_ops
            self.cells.append(_Cell(c_pp, c_p, c, reduction, reduction_prev, n_nodes, ops))
            reduction_prev = reduction
            c_pp, c_p = c_p, n_nodes * c
        self.classifier = nn.Linear(c_p, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s0 = s1 = self.stem(x)
        for cell in self.cells:
            s0, s1 = s1, cell(s0, s1)
        return self.classifier(s1.mean(dim=(2, 3)))


def digits_cell_space(n_cells: int = 5, channels: int = 8, n_nodes: int = 4) -> DartsCellSpace:
    """Returns the small-image variant for 8x8 one-channel digits (8 -> 4 -> 2 pixels)."""
    return DartsCellSpace(
        n_cells=n_cells,
        channels=channels,
        in_channels=1,
        n_classes=10,
        n_nodes=n_nodes,
        stem_multiplier=2,
    )


def arch_to_genotype(arch: Mapping[str, Any], n_nodes: int = 4) -> dict[str, Any]:
    """Returns the genotype (JSON-able dict) of an architecture of the cell space.

    Raises:
        ArchitectureError: ``arch`` lacks a label of the cell space.
    """
    out: dict[str, Any] = {"n_nodes": n_nodes}
    try:
        for kind in ("normal", "reduce"):
            out[kind] = [
                [[arch[f"{kind}.n{j}.e{i}"], i] for i in arch[f"{kind}.n{j}.in"]]
                for j in range(2, n_nodes + 2)
            ]
    except KeyError as exc:
        raise ArchitectureError(
            f"architecture has no label {exc.args[0]!r}; arch_to_genotype takes an architecture "
            "of DartsCellSpace"
        ) from exc
    return out


def genotype_to_arch(genotype: Mapping[str, Any], space: DartsCellSpace) -> Arch:
    """Returns the architecture of ``space`` that a genotype describes (unchosen edges take the
    first operation: they are not built when frozen).

    Raises:
        ArchitectureError: the genotype does not fit the space (wrong nodes, inputs, operations).
    """
    ss = space.search_space()
    arch = dict(ss.default())
    for kind in ("normal", "reduce"):
        nodes = genotype.get(kind)
        if not isinstance(nodes, Sequence) or any(
            f"{kind}.n{j + 2}.in" not in ss for j in range(len(nodes))
        ):
            raise ArchitectureError(
                f"genotype[{kind!r}] must list one [[op, input], [op, input]] pair per node of "
                f"the space; got {nodes!r}"
            )
        for j, pairs in enumerate(nodes, start=2):
            inputs = sorted(int(i) for _, i in pairs)
            arch[f"{kind}.n{j}.in"] = inputs
            for op, i in pairs:
                arch[f"{kind}.n{j}.e{int(i)}"] = op
    return ss.validate(arch)
