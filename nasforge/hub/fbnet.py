"""FBNet's layer-wise space (Wu et al., CVPR 2019, Tables 1 and 2) and FBNet-A, -B and -C.

The macro-architecture is fixed (Table 1): a 3×3 stem of 16 channels, 22 searched layers in
stages of 1, 4, 4, 4, 4, 4 and 1 (widths 16, 24, 32, 64, 112, 184, 352; strides 1, 2, 2, 2, 1,
2, 1), a 1×1 convolution to 1984 channels (``last_channels``; the released FBNet-A has 1504),
pooling and the classifier. Each searched layer
``l{n}`` (n = 0 … 21) picks one of Table 2's 9 candidate blocks:

    k{3,5}_e{1,3,6}   1×1 conv (expansion e) → k×k depthwise → 1×1 conv, with the residual when
                      the shapes match
    k{3,5}_e1_g2      the same with expansion 1 and both 1×1 convolutions in 2 groups, a
                      channel shuffle after the first
    skip_connect      the paper's "skip": the identity, or a 1×1 conv-BN-ReLU where the layer
                      changes the shape, as the reference implementation does (the paper leaves
                      it open)

so the space has 9^22 ≈ 9.8·10^20 architectures, the count the paper states (§3.2).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

import nasforge as nf
from nasforge.hub._blocks import ClassifierHead, InvertedResidual, SkipOrProject, conv_bn
from nasforge.hub._registry import register_arch, register_space
from nasforge.ofa.spaces import make_divisible

__all__ = ["FBNetSpace", "FBNET_OPS", "FBNET_A", "FBNET_B", "FBNET_C"]

#: Table 2's candidate blocks, in the space's order
FBNET_OPS: tuple[str, ...] = (
    "k3_e1", "k3_e1_g2", "k3_e3", "k3_e6", "k5_e1", "k5_e1_g2", "k5_e3", "k5_e6", "skip_connect",
)  # fmt: skip
#: (width, layers, stride) of the stages (Table 1)
_STAGES = ((16, 1, 1), (24, 4, 2), (32, 4, 2), (64, 4, 2), (112, 4, 1), (184, 4, 2), (352, 1, 1))


def _block(name: str, cin: int, cout: int, s: int) -> Callable[[], nn.Module]:
    if name == "skip_connect":
        return lambda: SkipOrProject(cin, cout, s)
    k, e, *g = name.split("_")
    groups = 2 if g else 1
    return lambda: InvertedResidual(
        cin, cout, cin * int(e[1:]), int(k[1:]), s, groups=groups, expand_conv=True
    )


class FBNetSpace(nf.ModelSpace):
    """Returns FBNet's space (see the module's docstring); ``width_mult`` scales every width
    (FBNet's own small models use it; tests use tiny ones); ``last_channels`` is the width of the
    1×1 convolution before pooling (Table 1's 1984; the released FBNet-A's 1504).

    Invariants: 22 decisions ``l0`` … ``l21``, each over :data:`FBNET_OPS`.
    """

    def __init__(
        self,
        n_classes: int = 1000,
        width_mult: float = 1.0,
        in_channels: int = 3,
        dropout: float = 0.0,
        last_channels: int = 1984,
    ) -> None:
        super().__init__()

        def ch(c: int) -> int:
            return make_divisible(c * width_mult, 8)

        c = ch(16)
        self.stem = conv_bn(in_channels, c, 3, 2)
        layers: list[nn.Module] = []
        for cout, n, s in _STAGES:
            for j in range(n):
                stride = s if j == 0 else 1
                ops = {name: _block(name, c, ch(cout), stride) for name in FBNET_OPS}
                layers.append(nf.LayerChoice(ops, label=f"l{len(layers)}"))
                c = ch(cout)
        self.layers = nn.Sequential(*layers)
        self.head = ClassifierHead(c, ch(last_channels), n_classes, dropout=dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Returns the logits of a frozen FBNet (a recorded space refuses forward)."""
        return self.head(self.layers(self.stem(x)))


def _arch(ops: str) -> dict[str, str]:
    """Returns the architecture whose 22 layers are the space-separated ``ops``."""
    names = ops.split()
    assert len(names) == 22 and set(names) <= set(FBNET_OPS), names
    return {f"l{n}": name for n, name in enumerate(names)}


# FBNet-A/B/C layer by layer, as the authors' released model definitions list them
# (facebookresearch/mobile-vision, mobile_cv/arch/fbnet_v2/fbnet_modeldef_cls_fbnet.py)
FBNET_A = _arch(
    "skip_connect  k3_e3 k3_e1 skip_connect skip_connect  k5_e6 k3_e3 k5_e1 k3_e3  "
    "k5_e6 k5_e3 k5_e1_g2 k5_e6  k3_e6 k5_e1_g2 k5_e3 k3_e1_g2  k5_e6 k5_e6 k5_e3 k5_e6  k5_e6"
)
FBNET_B = _arch(
    "k3_e1  k3_e6 k5_e1 k3_e1 k3_e1  k5_e6 k5_e3 k3_e6 k5_e6  k5_e6 k5_e6 skip_connect k5_e3  "
    "k5_e6 k3_e1 k5_e1 k5_e3  k5_e6 k5_e1 k5_e6 k5_e6  k3_e6"
)
FBNET_C = _arch(
    "k3_e1  k3_e6 skip_connect k3_e1 k3_e1  k5_e6 k5_e3 k5_e6 k3_e6  k5_e6 k5_e3 k5_e6 k5_e6  "
    "k5_e6 k5_e6 k5_e6 k5_e3  k5_e6 k5_e6 k5_e6 k5_e6  k3_e6"
)

_PAPER = "Wu et al. 2019, FBNet (CVPR)"
register_space(
    "fbnet",
    FBNetSpace,
    paper=_PAPER,
    size_paper=9**22,
    family="fbnet",
    note="22 layers of 9 candidate blocks (§3.2)",
)
_FBNET_B_NOTE = (
    "the released FBNet-B has 4.86M parameters (306M multiply-adds, within 5%): no layer list "
    "or head we found gives the paper's 4.5M (see docs/hub.md)"
)
for _name, _a, _params, _madds, _last, _exception, _note in (
    ("fbnet-a", FBNET_A, 4.3e6, 249e6, 1504, "", "the released head has 1504 channels"),
    ("fbnet-b", FBNET_B, 4.5e6, 295e6, 1984, "fbnet-b-params", _FBNET_B_NOTE),
    ("fbnet-c", FBNET_C, 5.5e6, 375e6, 1984, "", ""),
):
    register_arch(
        _name,
        space="fbnet",
        arch=_a,
        space_kwargs={"last_channels": _last},
        resolution=224,
        num_classes=1000,
        params_paper=_params,
        madds_paper=_madds,
        source=f"{_PAPER}, Table 3: {_name.upper().replace('FBNET', 'FBNet')}",
        note=_note,
        exception=_exception,
    )
