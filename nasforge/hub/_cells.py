"""The NASNet cell family's shared skeleton (the unified form of NDS, Radosavovic et al. 2019).

A network is a stem, then ``n_cells`` cells with reduction cells at ``n_cells // 3`` and
``2 * n_cells // 3`` (``n_cells = 3N + 2`` gives the papers' "N normal cells per stage"), a
global average pool and a classifier. Every cell takes the outputs of the two previous cells,
brings them to ``c`` channels (``pre0``: a factorized reduction when the cell before last was
at twice the resolution, else ReLU-1×1 conv-BN; ``pre1``: ReLU-1×1 conv-BN), and computes
``n_nodes`` nodes; channels double at each reduction cell.

    stem "cifar"     3×3 conv → 3c, BN                                    R×R
    stem "imagenet"  3×3 conv s2 → c/2, BN, ReLU, 3×3 conv s2 → c, BN;    R/4
                     ReLU, 3×3 conv s2 → c, BN                            R/8
    cells            normal ... reduce (2c) ... reduce (4c) ...
    head             global average pool, Linear(cell output → classes)

Two kinds of node:

``slots`` (NASNet, ENAS, AmoebaNet, PNAS): a node sums two *slots*; slot ``k`` of node ``j``
    picks one of the ``j`` states before it (``{kind}.n{j}.in{k}``, an ``InputChoice``; the two
    slots may pick the same state) and applies one operation to it (``{kind}.n{j}.op{k}``, a
    ``LayerChoice`` whose label is tied across the inputs it could be applied to). In a
    reduction cell an operation on a cell input has stride 2. The cell output concatenates the
    nodes no other node uses (``merge="loose_end"``) or all nodes (``merge="all"``); a space
    being searched (a supernet) always concatenates all nodes, as NNI's NDS does.
``darts`` (DARTS): :class:`nasforge.spaces.darts_cell.DartsCell`, a node sums two distinct
    inputs, each edge with its own operation; the output concatenates all nodes.

``concat`` ({kind: states}) replaces the rule by a fixed list of output states, as a published
implementation lists them (0, 1: the two preprocessed cell inputs; 2..: the nodes): the released
NASNet-A and AmoebaNet-A code concatenates states the loose-end rule would not (see
:mod:`nasforge.hub.nasnet`).

``shared_cell=True`` (PNAS) gives reduction cells the labels of normal cells (``cell.*``): one
cell structure, used at stride 1 and 2.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Literal

import torch
from torch import nn

import nasforge as nf
from nasforge.errors import SpaceError
from nasforge.space.modules import SelectInputs
from nasforge.spaces.darts_cell import DartsCell
from nasforge.spaces.darts_ops import OPS, DilConv, FactorizedReduce, ReLUConvBN

__all__ = ["CELL_OPS", "NDSSpace", "SlotCell"]


class _ConvKx1(nn.Sequential):
    """Returns BN(conv k×1(conv 1×k(relu(x)))): a factorized k×k convolution."""

    def __init__(self, c: int, k: int, stride: int) -> None:
        p = k // 2
        super().__init__(
            nn.ReLU(inplace=False),
            nn.Conv2d(c, c, (1, k), stride=(1, stride), padding=(0, p), bias=False),
            nn.Conv2d(c, c, (k, 1), stride=(stride, 1), padding=(p, 0), bias=False),
            nn.BatchNorm2d(c),
        )


class _DilSepConv(nn.Sequential):
    """Returns two stacked dilated depthwise-separable convolutions (AmoebaNet's 3×3 dilated
    separable convolution; the first carries the stride)."""

    def __init__(self, c: int, k: int, stride: int, dil: int) -> None:
        pad = dil * (k - 1) // 2
        super().__init__(DilConv(c, c, k, stride, pad, dil), DilConv(c, c, k, 1, pad, dil))


#: Operation name -> factory (channels, stride) -> module: DARTS's operations
#: (:data:`nasforge.spaces.darts_ops.OPS`) plus the two that NASNet, AmoebaNet and PNAS add.
CELL_OPS: dict[str, Callable[[int, int], nn.Module]] = {
    **OPS,
    "conv_7x1_1x7": lambda c, s: _ConvKx1(c, 7, s),
    "dil_sep_conv_3x3": lambda c, s: _DilSepConv(c, 3, s, 2),
}


def _factory(name: str, c: int, stride: int) -> Callable[[], nn.Module]:
    return lambda: CELL_OPS[name](c, stride)


class _Slot(nn.Module):
    """Returns one operation applied to one chosen earlier state of the cell."""

    def __init__(self, kind: str, j: int, k: int, c: int, reduction: bool, ops: Sequence[str]):
        super().__init__()
        self.input = nf.InputChoice(j, n_chosen=1, label=f"{kind}.n{j}.in{k}")
        # frozen: only the chosen input's operation is built
        chosen = self.input.chosen if isinstance(self.input, SelectInputs) else range(j)
        self.ops = nn.ModuleDict(
            {
                str(i): nf.LayerChoice(
                    {op: _factory(op, c, 2 if reduction and i < 2 else 1) for op in ops},
                    label=f"{kind}.n{j}.op{k}",
                )
                for i in chosen
            }
        )

    def forward(self, states: list[torch.Tensor]) -> torch.Tensor:
        outs = [self.ops[str(i)](s) if str(i) in self.ops else None for i, s in enumerate(states)]
        return self.input(outs)


class _SlotNode(nn.Module):
    """Returns the sum of a node's two slots."""

    def __init__(self, kind: str, j: int, c: int, reduction: bool, ops: Sequence[str]) -> None:
        super().__init__()
        self.slots = nn.ModuleList(_Slot(kind, j, k, c, reduction, ops) for k in range(2))

    def used(self) -> set[int] | None:
        """Returns the states this node reads (None while the space is being recorded)."""
        picked: set[int] = set()
        for slot in self.slots:
            if not isinstance(slot.input, SelectInputs):
                return None
            picked.update(slot.input.chosen)
        return picked

    def forward(self, states: list[torch.Tensor]) -> torch.Tensor:
        return self.slots[0](states) + self.slots[1](states)


class SlotCell(nn.Module):
    """Returns the concatenation of a NASNet-style cell's output nodes (see the module)."""

    def __init__(
        self,
        c_pp: int,
        c_p: int,
        c: int,
        reduction: bool,
        reduction_prev: bool,
        n_nodes: int,
        ops: Sequence[str],
        kind: str,
        merge: Literal["all", "loose_end"],
        concat: Sequence[int] | None = None,
    ) -> None:
        super().__init__()
        self.pre0 = FactorizedReduce(c_pp, c) if reduction_prev else ReLUConvBN(c_pp, c, 1, 1, 0)
        self.pre1 = ReLUConvBN(c_p, c, 1, 1, 0)
        nodes = [_SlotNode(kind, j, c, reduction, ops) for j in range(2, n_nodes + 2)]
        self.nodes = nn.ModuleList(nodes)
        self.concat = list(range(2, n_nodes + 2))
        used = [node.used() for node in nodes]
        if concat is not None:
            self.concat = list(concat)
        elif merge == "loose_end" and all(u is not None for u in used):
            read = set().union(*(u for u in used if u is not None))
            self.concat = [i for i in self.concat if i not in read]
        self.out_channels = c * len(self.concat)

    def forward(self, s0: torch.Tensor, s1: torch.Tensor) -> torch.Tensor:
        states = [self.pre0(s0), self.pre1(s1)]
        for node in self.nodes:
            states.append(node(states))
        return torch.cat([states[i] for i in self.concat], dim=1)


class NDSSpace(nf.ModelSpace):
    """Returns a NASNet-family cell network (see the module's table) as a model space.

    Invariants: the labels are shared by every cell of a kind, so one architecture fits any
    width, depth and stem; reduction cells sit at ``n_cells // 3`` and ``2 * n_cells // 3``.

    Raises:
        SpaceError: an unknown operation, node kind, merge or dataset, or ``n_cells`` < 3.
    """

    def __init__(
        self,
        ops: Sequence[str],
        node: Literal["slots", "darts"] = "slots",
        n_nodes: int = 5,
        merge: Literal["all", "loose_end"] = "loose_end",
        shared_cell: bool = False,
        n_cells: int = 8,
        channels: int = 16,
        dataset: Literal["cifar", "imagenet"] = "cifar",
        n_classes: int = 10,
        in_channels: int = 3,
        concat: Mapping[str, Sequence[int]] | None = None,
    ) -> None:
        super().__init__()
        _check(ops, node, merge, dataset, n_cells)
        _check_concat(concat, node, n_nodes)
        c = channels
        if dataset == "imagenet":
            self.stem0: nn.Module = nn.Sequential(
                nn.Conv2d(in_channels, c // 2, 3, stride=2, padding=1, bias=False),
                nn.BatchNorm2d(c // 2),
                nn.ReLU(inplace=False),
                nn.Conv2d(c // 2, c, 3, stride=2, padding=1, bias=False),
                nn.BatchNorm2d(c),
            )
            self.stem1: nn.Module = nn.Sequential(
                nn.ReLU(inplace=False),
                nn.Conv2d(c, c, 3, stride=2, padding=1, bias=False),
                nn.BatchNorm2d(c),
            )
            c_pp = c_p = c
            reduction_prev = True
        else:
            self.stem0 = nn.Sequential(
                nn.Conv2d(in_channels, 3 * c, 3, padding=1, bias=False), nn.BatchNorm2d(3 * c)
            )
            self.stem1 = nn.Identity()
            c_pp = c_p = 3 * c
            reduction_prev = False
        self.cells = nn.ModuleList()
        for i in range(n_cells):
            reduction = i in (n_cells // 3, 2 * n_cells // 3)
            if reduction:
                c *= 2
            kind = "cell" if shared_cell else ("reduce" if reduction else "normal")
            cell: nn.Module
            if node == "darts":
                cell = DartsCell(c_pp, c_p, c, reduction, reduction_prev, n_nodes, ops)
                c_out = n_nodes * c
            else:
                fixed = None if concat is None else concat.get(kind)
                cell = SlotCell(
                    c_pp, c_p, c, reduction, reduction_prev, n_nodes, ops, kind, merge, fixed
                )
                c_out = cell.out_channels
            self.cells.append(cell)
            reduction_prev = reduction
            c_pp, c_p = c_p, c_out
        self.classifier = nn.Linear(c_p, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s0 = self.stem0(x)
        s1 = self.stem1(s0)
        for cell in self.cells:
            s0, s1 = s1, cell(s0, s1)
        return self.classifier(s1.mean(dim=(2, 3)))


def _check(ops: Sequence[str], node: str, merge: str, dataset: str, n_cells: int) -> None:
    unknown = [op for op in ops if op not in CELL_OPS]
    if unknown or not ops:
        raise SpaceError(f"unknown cell operation(s) {unknown}; known: {sorted(CELL_OPS)}")
    for name, value, allowed in (
        ("node", node, ("slots", "darts")),
        ("merge", merge, ("all", "loose_end")),
        ("dataset", dataset, ("cifar", "imagenet")),
    ):
        if value not in allowed:
            raise SpaceError(f"{name}={value!r} is not one of {allowed}")
    if not isinstance(n_cells, int) or n_cells < 3:
        raise SpaceError(f"n_cells={n_cells!r}: a cell network has at least 3 cells (3N + 2)")


def _check_concat(concat: Mapping[str, Sequence[int]] | None, node: str, n_nodes: int) -> None:
    if concat is None:
        return
    states = range(n_nodes + 2)
    if node != "slots" or not isinstance(concat, Mapping):
        raise SpaceError(f"concat={concat!r}: a {{kind: [states]}} mapping for slot cells only")
    for kind, picked in concat.items():
        if not picked or any(i not in states for i in picked):
            raise SpaceError(
                f"concat[{kind!r}]={list(picked)}: expected states among {list(states)}"
            )
