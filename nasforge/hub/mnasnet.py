"""MnasNet's factorized hierarchical search space (Tan et al., CVPR 2019, §3.2) and MnasNet-A1.

The network is MobileNetV2's skeleton cut into 7 blocks; each block picks its own layer and
repeats it, so layers differ between blocks but not inside one. Per block ``i`` (labels
``b{i}.…``), as in the paper's Figure 4:

    op        ConvOp × kernel × SE ratio: ``{conv, dconv, mb3, mb6}`` × ``{k3, k5}`` × SE
              ``{0, 0.25}``, named ``mb6_k5_se`` etc. (16 values). ``conv`` is a regular
              convolution, ``dconv`` a depthwise separable one (MnasNet-A1's SepConv), ``mbE``
              an inverted residual of expansion E.
    skip      SkipOp: ``none``, ``identity`` (residual) or ``pool`` (3×3 average of the input
              added); on every layer but a block's first, which changes the shape.
    filters   output channels F_i as a multiple of the block's base width: ``{0.75, 1.0,
              1.25}`` (the value is the multiplier, so an architecture fits any ``width_mult``).
    depth     layers N_i: MobileNetV2's count ``{-1, 0, +1}``; a block of one layer (the first
              and the last) takes ``{1, 2, 3}`` instead, as removing it would leave the next
              block an input of the wrong width.

So each block has S = 16 · 3 · 3 · 3 = 432 choices, the paper's per-block size, and the space
has 432^7 ≈ 2.8·10^18 architectures (the paper's 10^13 example is S^B for B = 5 blocks).

Open detail. The paper takes filter sizes relative to MobileNetV2, yet MnasNet-A1's widths
(40, 80, 112) are not {0.75, 1, 1.25} × MobileNetV2's (32, 64, 96) for 112. The base widths
here are MnasNet-A1's own (the reference implementation's ``mnasnet_a1`` block strings), so the
published network lies in the space at multiplier 1.0; the size is unchanged.

The squeeze-and-excitation bottleneck is 0.25 × the layer's *input* channels, as the reference
implementation sizes it (``se_ratio`` times ``input_filters``).

``filter_multipliers`` of one value makes every shape fixed: the space is then made of
``LayerChoice`` and ``Repeat`` only and one-shot supernets (SPOS, NASB) can be built from it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

import nasforge as nf
from nasforge.errors import SpaceError
from nasforge.hub._blocks import (
    ClassifierHead,
    InvertedResidual,
    SqueezeExcite,
    Zero,
    conv_bn,
)
from nasforge.hub._registry import register_arch, register_space
from nasforge.ofa.spaces import make_divisible

__all__ = ["MnasNetSpace", "MNASNET_OPS", "MNASNET_SKIPS", "MNASNET_A1"]

#: (base width, MobileNetV2's layer count, stride) of the 7 blocks
_BLOCKS: tuple[tuple[int, int, int], ...] = (
    (16, 1, 1),
    (24, 2, 2),
    (40, 3, 2),
    (80, 4, 2),
    (112, 3, 1),
    (160, 3, 2),
    (320, 1, 1),
)
_CONVS = ("conv", "dconv", "mb3", "mb6")
#: the op values of a block, in the space's order
MNASNET_OPS: tuple[str, ...] = tuple(
    f"{c}_k{k}{'_se' if se else ''}" for c in _CONVS for k in (3, 5) for se in (False, True)
)
MNASNET_SKIPS: tuple[str, ...] = ("none", "identity", "pool")


def _op(name: str, cin: int, cout: int, s: int) -> Callable[[], nn.Module]:
    """Returns a factory of the layer body ``name`` (see :data:`MNASNET_OPS`)."""
    conv, k_text, *se = name.split("_")
    k = int(k_text[1:])
    se_hidden = max(1, int(cin * 0.25)) if se else 0
    if conv == "conv":

        def regular() -> nn.Module:
            body = conv_bn(cin, cout, k, s)
            return nn.Sequential(body, SqueezeExcite(cout, se_hidden)) if se_hidden else body

        return regular
    expansion = 1 if conv == "dconv" else int(conv[2:])
    return lambda: InvertedResidual(
        cin, cout, cin * expansion, k, s,
        se_hidden=se_hidden, expand_conv=expansion != 1, residual=False,
    )  # fmt: skip


def _skip(name: str) -> Callable[[], nn.Module]:
    table: dict[str, Callable[[], nn.Module]] = {
        "none": Zero,
        "identity": nn.Identity,
        "pool": lambda: nn.AvgPool2d(3, 1, 1, count_include_pad=False),
    }
    return table[name]


class _Layer(nn.Module):
    """Returns one layer of a block: the chosen body, plus the chosen skip of the input."""

    def __init__(self, block: int, cin: int, cout: int, s: int, first: bool) -> None:
        super().__init__()
        self.op = nf.LayerChoice(
            {name: _op(name, cin, cout, s) for name in MNASNET_OPS}, label=f"b{block}.op"
        )
        self.skip = (
            None
            if first
            else nf.LayerChoice({n: _skip(n) for n in MNASNET_SKIPS}, label=f"b{block}.skip")
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.op(x)
        return out if self.skip is None else out + self.skip(x)


class MnasNetSpace(nf.ModelSpace):
    """Returns MnasNet's factorized hierarchical space (see the module's table).

    ``width_mult`` scales every width (tests use small ones); ``filter_multipliers`` are the
    F_i candidates relative to the base widths (one value: fixed shapes, supernet-ready).

    Invariants: 4 decisions per block, labelled ``b{i}.op``, ``b{i}.skip``, ``b{i}.filters``
    (absent with one multiplier) and ``b{i}.depth``; every layer of a block shares them.

    Raises:
        SpaceError: a multiplier or ``width_mult`` is not positive.
    """

    def __init__(
        self,
        n_classes: int = 1000,
        width_mult: float = 1.0,
        filter_multipliers: Sequence[float] = (0.75, 1.0, 1.25),
        in_channels: int = 3,
        dropout: float = 0.2,
    ) -> None:
        super().__init__()
        if width_mult <= 0 or not filter_multipliers or min(filter_multipliers) <= 0:
            raise SpaceError(
                f"MnasNetSpace needs positive widths: got width_mult={width_mult}, "
                f"filter_multipliers={list(filter_multipliers)}; pass e.g. (0.75, 1.0, 1.25)"
            )
        c = make_divisible(32 * width_mult, 8)
        self.stem = conv_bn(in_channels, c, 3, 2)
        blocks = []
        for i, (base, n, s) in enumerate(_BLOCKS):
            scaled = make_divisible(base * width_mult, 8)
            mult = (
                nf.choice(list(filter_multipliers), label=f"b{i}.filters")
                if len(filter_multipliers) > 1
                else filter_multipliers[0]
            )
            cout = max(1, round(scaled * float(mult)))
            blocks.append(
                nf.Repeat(
                    self._layers(i, c, cout, s), (max(n - 1, 1), max(n - 1, 1) + 2), f"b{i}.depth"
                )
            )
            c = cout
        self.blocks = nn.Sequential(*blocks)
        self.head = ClassifierHead(c, make_divisible(1280 * max(width_mult, 1.0), 8), n_classes,
                                   dropout=dropout)  # fmt: skip

    @staticmethod
    def _layers(i: int, cin: int, cout: int, s: int) -> Callable[[int], nn.Module]:
        def make(j: int) -> nn.Module:
            return _Layer(i, cin if j == 0 else cout, cout, s if j == 0 else 1, j == 0)

        return make

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Returns the logits of a frozen MnasNet (a recorded space refuses forward)."""
        return self.head(self.blocks(self.stem(x)))


def _a1() -> dict[str, object]:
    plan = [  # op, skip, depth (filters: multiplier 1.0, the base widths)
        ("dconv_k3", "none", 1),
        ("mb6_k3", "identity", 2),
        ("mb3_k5_se", "identity", 3),
        ("mb6_k3", "identity", 4),
        ("mb6_k3_se", "identity", 2),
        ("mb6_k5_se", "identity", 3),
        ("mb6_k3", "identity", 1),
    ]
    arch: dict[str, object] = {}
    for i, (op, skip, depth) in enumerate(plan):
        arch.update(
            {f"b{i}.op": op, f"b{i}.skip": skip, f"b{i}.filters": 1.0, f"b{i}.depth": depth}
        )
    return arch


#: MnasNet-A1 (the paper's Figure 7(a)) in the default space
MNASNET_A1: dict[str, object] = _a1()

_PAPER = "Tan et al. 2019, MnasNet (CVPR)"
register_space(
    "mnasnet",
    MnasNetSpace,
    paper=_PAPER,
    size_paper=432**7,
    family="mnasnet",
    note="S^B (§3.2) with the paper's S = 432 choices per block and the B = 7 blocks of its "
    "networks (Figure 7); §3.2's 10^13 is its example with B = 5",
)
register_arch(
    "mnasnet-a1",
    space="mnasnet",
    arch=MNASNET_A1,
    resolution=224,
    num_classes=1000,
    params_paper=3.9e6,
    madds_paper=312e6,
    source=f"{_PAPER}, Table 1: MnasNet-A1",
)
