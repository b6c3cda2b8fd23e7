"""NAS-Bench-101's cell space (Ying et al., ICML 2019): a cell is a DAG of 7 vertices.

Vertex 0 is the cell's input, vertex 6 its output, vertices 1..5 each apply one operation of
``NB101_OPS``; an edge ``i → j`` (``i < j``) exists or not. The decisions are the benchmark's
encoding, the upper triangle of the 7×7 adjacency matrix (``e{i}_{j}``, 0 or 1: 21 bits) and
the 5 vertex labels (``op1`` … ``op5``): 2^21 × 3^5 ≈ 510M encodings (:data:`N_ENCODINGS`, the
space's ``search_space().size``), of which the benchmark keeps the valid ones and merges those
that build the same network (isomorphic graphs, vertices pruned away): 423,624 distinct cells
(:data:`N_CELLS`, also ``hub.space_info("nasbench101").size_distinct``), each one row of its
table. A search samples encodings, so it can meet one cell under several. An encoding is
valid when the graph has at most 9 edges and a path from input to output; vertices on no such
path are pruned before building, as the benchmark does. Freezing an invalid encoding raises an
:class:`~nasforge.errors.ArchitectureError`; :func:`is_valid` tells beforehand, and a
multi-trial search records such a trial as failed and goes on.

How a cell computes (the benchmark's rules): every vertex's channel count follows from the
output's (the vertices that feed the output split its channels, the others take the largest of
their successors'); a vertex sums its inputs, each cut to its channel count, plus a 1×1
conv-BN-ReLU projection of the cell input if vertex 0 feeds it, then applies its operation;
the output concatenates the vertices that feed it, plus the projected input if vertex 0 feeds
it. The network:

    stem     3×3 conv 3 → 128, BN, ReLU                 R×R
    stack 1  3 cells (128)                              R×R
    stack 2  2×2 max pool, 3 cells (256)                R/2
    stack 3  2×2 max pool, 3 cells (512)                R/4
    head     global average pool, Linear(512 → classes)

:func:`to_spec` gives the ``(matrix, ops)`` pair that the benchmark's API looks results up by.
This space has no supernet: its edges are value choices that change every vertex's width.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

import nasforge as nf
from nasforge.errors import ArchitectureError
from nasforge.hub._registry import register_space
from nasforge.space.expr import is_choice

__all__ = [
    "NB101_OPS",
    "N_VERTICES",
    "MAX_EDGES",
    "N_ENCODINGS",
    "N_CELLS",
    "NasBench101Space",
    "is_valid",
    "to_spec",
]

#: The vertex operations, in the benchmark's spelling.
NB101_OPS: tuple[str, ...] = ("conv3x3-bn-relu", "conv1x1-bn-relu", "maxpool3x3")
N_VERTICES = 7
MAX_EDGES = 9
#: The encodings: 21 edge bits and 5 three-way labels, valid or not (the space's size).
N_ENCODINGS = 2**21 * 3**5
#: The distinct cells the benchmark trained: the valid encodings with isomorphic graphs merged
#: (Ying et al. 2019, Section 2.2: "423k unique graphs"; the dataset's 423,624 rows).
N_CELLS = 423_624
_PAIRS = [(i, j) for i in range(N_VERTICES) for j in range(i + 1, N_VERTICES)]


def _matrix(arch: Mapping[str, Any]) -> list[list[int]]:
    m = [[0] * N_VERTICES for _ in range(N_VERTICES)]
    for i, j in _PAIRS:
        m[i][j] = int(arch[f"e{i}_{j}"])
    return m


def _prune(m: list[list[int]], ops: list[str]) -> tuple[list[list[int]], list[str]] | None:
    """Returns the graph without the vertices on no input-output path, or None if none."""
    n = len(m)
    fwd, bwd = {0}, {n - 1}
    for j in range(1, n):
        if any(m[i][j] and i in fwd for i in range(j)):
            fwd.add(j)
    for i in range(n - 2, -1, -1):
        if any(m[i][j] and j in bwd for j in range(i + 1, n)):
            bwd.add(i)
    keep = sorted(fwd & bwd)
    if n - 1 not in fwd:
        return None
    return [[m[i][j] for j in keep] for i in keep], [ops[v] for v in keep]


def to_spec(arch: Mapping[str, Any]) -> tuple[list[list[int]], list[str]]:
    """Returns the pruned ``(matrix, ops)`` of an architecture, as the benchmark's API takes
    them (``ops`` starts with ``"input"`` and ends with ``"output"``).

    Raises:
        ArchitectureError: a label is missing, more than 9 edges, or no input-output path.
    """
    try:
        m = _matrix(arch)
        ops = ["input", *(arch[f"op{v}"] for v in range(1, N_VERTICES - 1)), "output"]
    except KeyError as exc:
        raise ArchitectureError(f"a NAS-Bench-101 architecture has no label {exc}") from None
    n_edges = sum(map(sum, m))
    if n_edges > MAX_EDGES:
        raise ArchitectureError(
            f"the cell has {n_edges} edges; NAS-Bench-101 allows at most {MAX_EDGES}: drop edges"
        )
    pruned = _prune(m, ops)
    if pruned is None:
        raise ArchitectureError("the cell has no path from its input to its output: add one")
    return pruned


def is_valid(arch: Mapping[str, Any]) -> bool:
    """Returns whether ``arch`` is one of the benchmark's cells (≤ 9 edges, input reaches
    output)."""
    try:
        to_spec(arch)
    except ArchitectureError:
        return False
    return True


def _channels(m: Sequence[Sequence[int]], c_in: int, c_out: int) -> list[int]:
    """Returns each vertex's channel count by the benchmark's rule (see the module)."""
    n = len(m)
    ch = [0] * n
    ch[0], ch[-1] = c_in, c_out
    if n == 2:
        return ch
    feeding = [v for v in range(1, n - 1) if m[v][n - 1]]
    share, extra = divmod(c_out, len(feeding))
    for k, v in enumerate(feeding):
        ch[v] = share + (1 if k < extra else 0)
    for v in range(n - 3, 0, -1):
        if not m[v][n - 1]:
            ch[v] = max(ch[d] for d in range(v + 1, n - 1) if m[v][d])
    return ch


def _conv_bn_relu(c_in: int, c_out: int, k: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, k, padding=k // 2, bias=False), nn.BatchNorm2d(c_out), nn.ReLU()
    )


def _vertex_op(name: str, c: int) -> nn.Module:
    if name == "maxpool3x3":
        return nn.MaxPool2d(3, 1, padding=1)
    return _conv_bn_relu(c, c, 3 if name == "conv3x3-bn-relu" else 1)


class _Cell(nn.Module):
    """Returns the output vertex of the (pruned) cell DAG for the cell's input."""

    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        ops = [nf.choice(NB101_OPS, label=f"op{v}") for v in range(1, N_VERTICES - 1)]
        edges = {f"e{i}_{j}": nf.choice((0, 1), label=f"e{i}_{j}") for i, j in _PAIRS}
        self.matrix: list[list[int]] = []
        if any(is_choice(v) for v in [*ops, *edges.values()]):
            return  # recording: the decisions are declared; only a frozen cell is built
        m, names = to_spec({**edges, **{f"op{v}": op for v, op in enumerate(ops, 1)}})
        self.matrix = m
        n = len(m)
        self.ch = _channels(m, c_in, c_out)
        self.ops = nn.ModuleList(
            [nn.Identity(), *(_vertex_op(names[v], self.ch[v]) for v in range(1, n - 1))]
        )
        self.proj = nn.ModuleDict(
            {str(v): _conv_bn_relu(c_in, self.ch[v], 1) for v in range(1, n) if m[0][v]}
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        m, n = self.matrix, len(self.matrix)
        states = [x]
        for v in range(1, n - 1):
            ins = [states[u][:, : self.ch[v]] for u in range(1, v) if m[u][v]]
            if m[0][v]:
                ins.append(self.proj[str(v)](x))
            states.append(self.ops[v](sum(ins)))
        feeding = [states[u] for u in range(1, n - 1) if m[u][n - 1]]
        out = torch.cat(feeding, 1) if feeding else None
        if m[0][n - 1]:
            projected = self.proj[str(n - 1)](x)
            out = projected if out is None else out + projected
        assert out is not None  # a valid cell reaches its output
        return out


class NasBench101Space(nf.ModelSpace):
    """Returns NAS-Bench-101's network (see the module's table) as a model space.

    Invariants: 26 decisions (21 edges, 5 operations) shared by every cell; size 2^21 × 3^5
    encodings (:data:`N_ENCODINGS`), which build :data:`N_CELLS` distinct cells.
    """

    def __init__(
        self,
        channels: int = 128,
        n_stacks: int = 3,
        n_cells: int = 3,
        n_classes: int = 10,
        in_channels: int = 3,
    ) -> None:
        super().__init__()
        c = channels
        self.stem = _conv_bn_relu(in_channels, c, 3)
        layers: list[nn.Module] = []
        c_in = c
        for s in range(n_stacks):
            if s:
                layers.append(nn.MaxPool2d(2, 2))
                c *= 2
            for _ in range(n_cells):
                layers.append(_Cell(c_in, c))
                c_in = c
        self.cells = nn.Sequential(*layers)
        self.classifier = nn.Linear(c_in, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.cells(self.stem(x)).mean(dim=(2, 3)))


register_space(
    "nasbench101",
    NasBench101Space,
    paper="Ying et al. 2019, NAS-Bench-101: Towards Reproducible NAS (ICML)",
    size_paper=N_ENCODINGS,
    family="nasbench101",
    note="the encodings, 2^21 x 3^5 = 510M (Section 2.2); 423,624 distinct valid cells",
    size_distinct=N_CELLS,
)
