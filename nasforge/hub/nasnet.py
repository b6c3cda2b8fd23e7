"""The NASNet cell family: NASNet, ENAS (micro), AmoebaNet, PNAS and DARTS, with their
published cells.

Each space is :class:`~nasforge.hub._cells.NDSSpace` with the paper's operations, node count
and output rule (see :mod:`nasforge.hub._cells` for the skeleton and the labels):

    space       operations  nodes  node kind  output         cells
    nasnet      13          5      slots      loose ends     normal + reduce
    enas        5           5      slots      loose ends     normal + reduce
    amoebanet   8           5      slots      loose ends     normal + reduce
    pnas        8           5      slots      all nodes      one cell, shared
    darts       7           4      darts      all nodes      normal + reduce

Every builder takes ``n_cells`` (3N + 2 for the papers' "N normal cells per stage"),
``channels`` (the first stage's channels per node), ``dataset`` (``"cifar"`` or
``"imagenet"``: the stem), ``n_classes`` and ``merge`` (slot spaces). The defaults are a
small CIFAR search setting: 8 cells of 16 channels.

The published networks come in the papers' two settings: ImageNet's mobile setting (224×224,
1000 classes, the stride-2 stem, the papers' mobile N and F; ``nasnet-a``, ``amoebanet-a``,
``pnas`` and ``darts-v2``, also called ``nasnet-a-mobile``, ``amoebanet-a-mobile``,
``pnasnet-5-mobile`` and ``darts-v2-mobile``) and CIFAR-10 (the ``-cifar`` names; ``enas`` and
``darts-v1`` were published on CIFAR-10 only).

The published cells are written as genotypes, a pair ``(operation, input)`` per slot for each
node (inputs 0 and 1 are the two previous cells, 2.. the nodes), and turned into arch dicts by
:func:`genotype_arch`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nasforge.errors import ArchitectureError
from nasforge.hub._cells import NDSSpace
from nasforge.hub._registry import register_arch, register_space

__all__ = [
    "NASNET_OPS",
    "ENAS_OPS",
    "AMOEBA_OPS",
    "PNAS_OPS",
    "DARTS_OPS",
    "nasnet",
    "enas",
    "amoebanet",
    "pnas",
    "darts",
    "genotype_arch",
]

#: NASNet's 13 operations (Zoph et al. 2018, Section 3).
NASNET_OPS: tuple[str, ...] = (
    "skip_connect",
    "conv_3x1_1x3",
    "conv_7x1_1x7",
    "dil_conv_3x3",
    "avg_pool_3x3",
    "max_pool_3x3",
    "max_pool_5x5",
    "max_pool_7x7",
    "conv_1x1",
    "conv_3x3",
    "sep_conv_3x3",
    "sep_conv_5x5",
    "sep_conv_7x7",
)
#: ENAS's 5 micro operations (Pham et al. 2018, Section 2.3).
ENAS_OPS: tuple[str, ...] = (
    "skip_connect",
    "sep_conv_3x3",
    "sep_conv_5x5",
    "avg_pool_3x3",
    "max_pool_3x3",
)
#: AmoebaNet's 8 operations (Real et al. 2019, Section 3).
AMOEBA_OPS: tuple[str, ...] = (
    "skip_connect",
    "sep_conv_3x3",
    "sep_conv_5x5",
    "sep_conv_7x7",
    "avg_pool_3x3",
    "max_pool_3x3",
    "dil_sep_conv_3x3",
    "conv_7x1_1x7",
)
#: PNAS's 8 operations (Liu et al. 2018, Section 3.1).
PNAS_OPS: tuple[str, ...] = (
    "sep_conv_3x3",
    "sep_conv_5x5",
    "sep_conv_7x7",
    "conv_7x1_1x7",
    "skip_connect",
    "avg_pool_3x3",
    "max_pool_3x3",
    "dil_conv_3x3",
)
#: DARTS's operations without ``none`` (Liu et al. 2019, Section 3.1; ``none`` only marks an
#: absent edge during the search and is never in a derived cell).
DARTS_OPS: tuple[str, ...] = (
    "max_pool_3x3",
    "avg_pool_3x3",
    "skip_connect",
    "sep_conv_3x3",
    "sep_conv_5x5",
    "dil_conv_3x3",
    "dil_conv_5x5",
)


def nasnet(**kwargs: Any) -> NDSSpace:
    """Returns NASNet's search space (see the module's table for the arguments)."""
    return NDSSpace(NASNET_OPS, **{"merge": "loose_end", **kwargs})


def enas(**kwargs: Any) -> NDSSpace:
    """Returns ENAS's micro (cell) search space."""
    return NDSSpace(ENAS_OPS, **{"merge": "loose_end", **kwargs})


def amoebanet(**kwargs: Any) -> NDSSpace:
    """Returns AmoebaNet's search space (NASNet's cells with AmoebaNet's operations)."""
    return NDSSpace(AMOEBA_OPS, **{"merge": "loose_end", **kwargs})


def pnas(**kwargs: Any) -> NDSSpace:
    """Returns PNAS's search space: one cell structure used by normal and reduction cells."""
    return NDSSpace(PNAS_OPS, **{"merge": "all", "shared_cell": True, **kwargs})


def darts(**kwargs: Any) -> NDSSpace:
    """Returns DARTS's search space: 4 nodes, each of two distinct inputs."""
    return NDSSpace(DARTS_OPS, **{"node": "darts", "n_nodes": 4, "merge": "all", **kwargs})


Genotype = dict[str, Sequence[tuple[tuple[str, int], tuple[str, int]]]]


def genotype_arch(genotype: Genotype, node: str = "slots", ops: Sequence[str] = ()) -> dict:
    """Returns the arch dict of a cell genotype ``{kind: [((op, input), (op, input)), ...]}``.

    For ``node="slots"`` the pairs fill ``{kind}.n{j}.op{k}`` / ``.in{k}``; for ``"darts"`` the
    two inputs must differ and fill ``{kind}.n{j}.in`` and ``.e{i}`` (the edges not chosen take
    ``ops[0]``: they are not built when frozen).

    Raises:
        ArchitectureError: a DARTS node whose two inputs are the same.
    """
    arch: dict[str, Any] = {}
    for kind, nodes in genotype.items():
        for j, pairs in enumerate(nodes, start=2):
            if node == "slots":
                for k, (op, i) in enumerate(pairs):
                    arch[f"{kind}.n{j}.op{k}"] = op
                    arch[f"{kind}.n{j}.in{k}"] = i
                continue
            inputs = sorted(i for _, i in pairs)
            if inputs[0] == inputs[1]:
                raise ArchitectureError(f"DARTS node {kind}.n{j} takes input {inputs[0]} twice")
            arch[f"{kind}.n{j}.in"] = inputs
            for i in range(j):
                arch[f"{kind}.n{j}.e{i}"] = ops[0]
            for op, i in pairs:
                arch[f"{kind}.n{j}.e{i}"] = op
    return arch


# -- the published cells ---------------------------------------------------------------------
# (operation, input) per slot; inputs 0, 1: the cells before last and last; 2..: the nodes.

NASNET_A: Genotype = {
    "normal": [
        (("sep_conv_5x5", 1), ("sep_conv_3x3", 0)),
        (("sep_conv_5x5", 0), ("sep_conv_3x3", 0)),
        (("avg_pool_3x3", 1), ("skip_connect", 0)),
        (("avg_pool_3x3", 0), ("avg_pool_3x3", 0)),
        (("sep_conv_3x3", 1), ("skip_connect", 1)),
    ],
    "reduce": [
        (("sep_conv_5x5", 1), ("sep_conv_7x7", 0)),
        (("max_pool_3x3", 1), ("sep_conv_7x7", 0)),
        (("avg_pool_3x3", 1), ("sep_conv_5x5", 0)),
        (("skip_connect", 3), ("avg_pool_3x3", 2)),
        (("sep_conv_3x3", 2), ("max_pool_3x3", 1)),
    ],
}
AMOEBANET_A: Genotype = {
    "normal": [
        (("avg_pool_3x3", 0), ("max_pool_3x3", 1)),
        (("sep_conv_3x3", 0), ("sep_conv_5x5", 2)),
        (("sep_conv_3x3", 0), ("avg_pool_3x3", 3)),
        (("sep_conv_3x3", 1), ("skip_connect", 1)),
        (("skip_connect", 0), ("avg_pool_3x3", 1)),
    ],
    "reduce": [
        (("avg_pool_3x3", 0), ("sep_conv_3x3", 1)),
        (("max_pool_3x3", 0), ("sep_conv_7x7", 2)),
        (("sep_conv_7x7", 0), ("avg_pool_3x3", 1)),
        (("max_pool_3x3", 0), ("max_pool_3x3", 1)),
        (("conv_7x1_1x7", 0), ("sep_conv_3x3", 5)),
    ],
}
ENAS_CELL: Genotype = {  # the released final cell (scripts/cifar10_micro_final.sh)
    "normal": [
        (("avg_pool_3x3", 0), ("sep_conv_3x3", 0)),
        (("skip_connect", 0), ("sep_conv_5x5", 0)),
        (("skip_connect", 0), ("sep_conv_5x5", 1)),
        (("sep_conv_3x3", 1), ("sep_conv_5x5", 0)),
        (("avg_pool_3x3", 0), ("sep_conv_5x5", 1)),
    ],
    "reduce": [
        (("sep_conv_3x3", 1), ("sep_conv_3x3", 1)),
        (("max_pool_3x3", 0), ("avg_pool_3x3", 0)),
        (("sep_conv_5x5", 1), ("sep_conv_5x5", 3)),
        (("sep_conv_3x3", 1), ("skip_connect", 0)),
        (("max_pool_3x3", 0), ("sep_conv_5x5", 1)),
    ],
}
PNASNET_5: Genotype = {
    "cell": [
        (("sep_conv_5x5", 0), ("max_pool_3x3", 0)),
        (("sep_conv_7x7", 1), ("max_pool_3x3", 1)),
        (("sep_conv_5x5", 1), ("sep_conv_3x3", 1)),
        (("sep_conv_3x3", 4), ("max_pool_3x3", 1)),
        (("sep_conv_3x3", 0), ("skip_connect", 1)),
    ],
}
DARTS_V1: Genotype = {
    "normal": [
        (("sep_conv_3x3", 1), ("sep_conv_3x3", 0)),
        (("skip_connect", 0), ("sep_conv_3x3", 1)),
        (("skip_connect", 0), ("sep_conv_3x3", 1)),
        (("sep_conv_3x3", 0), ("skip_connect", 2)),
    ],
    "reduce": [
        (("max_pool_3x3", 0), ("max_pool_3x3", 1)),
        (("skip_connect", 2), ("max_pool_3x3", 0)),
        (("max_pool_3x3", 0), ("skip_connect", 2)),
        (("skip_connect", 2), ("avg_pool_3x3", 0)),
    ],
}
DARTS_V2: Genotype = {
    "normal": [
        (("sep_conv_3x3", 0), ("sep_conv_3x3", 1)),
        (("sep_conv_3x3", 0), ("sep_conv_3x3", 1)),
        (("sep_conv_3x3", 1), ("skip_connect", 0)),
        (("skip_connect", 0), ("dil_conv_3x3", 2)),
    ],
    "reduce": [
        (("max_pool_3x3", 0), ("max_pool_3x3", 1)),
        (("skip_connect", 2), ("max_pool_3x3", 1)),
        (("max_pool_3x3", 0), ("skip_connect", 2)),
        (("skip_connect", 2), ("max_pool_3x3", 1)),
    ],
}

#: The states NASNet-A's released code concatenates (its ``used_hiddenstates``): the cell before
#: last in normal cells, and node 3 in reduction cells, which the loose-end rule would drop.
NASNET_A_CONCAT = {"normal": [0, 2, 3, 4, 5, 6], "reduce": [3, 4, 5, 6]}

_ZOPH = "Zoph et al. 2018, Learning Transferable Architectures for Scalable Image Recognition"
_REAL = "Real et al. 2019, Regularized Evolution for Image Classifier Architecture Search"
_PHAM = "Pham et al. 2018, Efficient Neural Architecture Search via Parameter Sharing"
_LIU_P = "Liu et al. 2018, Progressive Neural Architecture Search"
_LIU_D = "Liu et al. 2019, DARTS: Differentiable Architecture Search"
_IMAGENET = {"dataset": "imagenet"}

register_space(
    "nasnet",
    nasnet,
    paper=_ZOPH + " (CVPR)",
    size_paper=None,
    family="nasnet",
    note="the paper states no count; 13 operations, 5 nodes of 2 (input, operation) slots",
)
register_space(
    "enas",
    enas,
    paper=_PHAM + " (ICML), micro space",
    size_paper=(5 * 120) ** 4,
    family="nasnet",
    note="the paper's (5 x (B-2)!)^4 = 1.3e11 for B = 7 is not the number of its decisions: "
    "each of a node's 2 slots picks one of j inputs and one of 5 operations, (5j)^2 per node",
    exception="enas-size",
)
register_space(
    "amoebanet",
    amoebanet,
    paper=_REAL + " (AAAI)",
    size_paper=None,
    family="nasnet",
    note="the paper states no count; NASNet's cells with 8 operations",
)
register_space(
    "pnas",
    pnas,
    paper=_LIU_P + " (ECCV)",
    size_paper=(8**2) ** 5 * (2 * 3 * 4 * 5 * 6) ** 2,
    family="nasnet",
    note="Section 3.1: 2^2 8^2 3^2 8^2 ... 6^2 8^2 = 5.6e14 cells of 5 blocks (one cell type)",
)
register_space(
    "darts",
    darts,
    paper=_LIU_D + " (ICLR)",
    size_paper=None,
    family="nasnet",
    note="the paper states no count; the space keeps DARTS's operation per edge (its alphas), "
    "so the unchosen edges' operations are decisions too: unique cells number "
    "(prod C(j,2) 7^2)^2 = 1.1e18",
)

register_arch(
    "nasnet-a",
    space="nasnet",
    arch=genotype_arch(NASNET_A),
    resolution=224,
    num_classes=1000,
    space_kwargs={**_IMAGENET, "n_cells": 14, "channels": 44, "concat": NASNET_A_CONCAT},
    params_paper=5.3e6,
    madds_paper=564e6,
    source=_ZOPH + ", Table 3 (mobile ImageNet): NASNet-A (4 @ 1056)",
    aliases=("nasnet-a-mobile",),
)
register_arch(
    "nasnet-a-cifar",
    space="nasnet",
    arch=genotype_arch(NASNET_A),
    resolution=32,
    num_classes=10,
    space_kwargs={"n_cells": 20, "channels": 32, "concat": NASNET_A_CONCAT},
    params_paper=3.3e6,
    madds_paper=None,
    source=_ZOPH + ", Table 1 (CIFAR-10): NASNet-A (6 @ 768)",
)
register_arch(
    "amoebanet-a",
    space="amoebanet",
    arch=genotype_arch(AMOEBANET_A),
    resolution=224,
    num_classes=1000,
    space_kwargs={**_IMAGENET, "n_cells": 14, "channels": 50},
    params_paper=5.1e6,
    madds_paper=555e6,
    source=_REAL + ", Table 3 (mobile ImageNet): AmoebaNet-A (N=4, F=50)",
    aliases=("amoebanet-a-mobile",),
    note="the stem and output states of the released TensorFlow code differ from the unified "
    "skeleton (see docs/hub.md)",
    exception="amoebanet-stem",
)
register_arch(
    "amoebanet-a-cifar",
    space="amoebanet",
    arch=genotype_arch(AMOEBANET_A),
    resolution=32,
    num_classes=10,
    space_kwargs={"n_cells": 20, "channels": 36},
    params_paper=3.2e6,
    madds_paper=None,
    source=_REAL + ", Table 2 (CIFAR-10): AmoebaNet-A (N=6, F=36)",
)
register_arch(
    "pnas",
    space="pnas",
    arch=genotype_arch(PNASNET_5),
    resolution=224,
    num_classes=1000,
    space_kwargs={**_IMAGENET, "n_cells": 9, "channels": 54},
    params_paper=5.1e6,
    madds_paper=588e6,
    source=_LIU_P + ", Table 4 (mobile ImageNet): PNASNet-5 (N=3, F=54)",
    aliases=("pnas-mobile", "pnasnet-5-mobile"),
)
register_arch(
    "pnas-cifar",
    space="pnas",
    arch=genotype_arch(PNASNET_5),
    resolution=32,
    num_classes=10,
    space_kwargs={"n_cells": 9, "channels": 48},
    params_paper=3.2e6,
    madds_paper=None,
    source=_LIU_P + ", Table 3 (CIFAR-10): PNASNet-5 (N=3, F=48)",
)
register_arch(
    "enas",
    space="enas",
    arch=genotype_arch(ENAS_CELL),
    resolution=32,
    num_classes=10,
    space_kwargs={"n_cells": 17, "channels": 36},
    params_paper=4.6e6,
    madds_paper=None,
    source=_PHAM + ", Table 2 (CIFAR-10): ENAS micro + cutout",
    note="15 layers of 36 filters as in the released final script; its TensorFlow network "
    "differs in details the paper leaves open (see docs/hub.md)",
    exception="enas-network",
)
register_arch(
    "darts-v2",
    space="darts",
    arch=genotype_arch(DARTS_V2, "darts", DARTS_OPS),
    resolution=224,
    num_classes=1000,
    space_kwargs={**_IMAGENET, "n_cells": 14, "channels": 48},
    params_paper=4.7e6,
    madds_paper=574e6,
    source=_LIU_D + ", Table 2 (mobile ImageNet): DARTS (second order)",
    aliases=("darts-v2-mobile",),
    note="quark0/darts#46: conv+fc counts of the released model give 523M, not 574M",
    exception="darts-madds",
)
register_arch(
    "darts-v2-cifar",
    space="darts",
    arch=genotype_arch(DARTS_V2, "darts", DARTS_OPS),
    resolution=32,
    num_classes=10,
    space_kwargs={"n_cells": 20, "channels": 36},
    params_paper=3.3e6,
    madds_paper=None,
    source=_LIU_D + ", Table 1 (CIFAR-10): DARTS (second order) + cutout",
)
register_arch(
    "darts-v1",
    space="darts",
    arch=genotype_arch(DARTS_V1, "darts", DARTS_OPS),
    resolution=32,
    num_classes=10,
    space_kwargs={"n_cells": 20, "channels": 36},
    params_paper=3.3e6,
    madds_paper=None,
    source=_LIU_D + ", Table 1 (CIFAR-10): DARTS (first order) + cutout",
    note="the released first-order cell has one separable convolution fewer than the "
    "second-order one; the paper gives 3.3M for both",
    exception="darts-first-order",
)
