"""Single Path One-Shot's ShuffleNetV2-based space (Guo et al., ECCV 2020, §4.1 and Table 1)
and its searched network, ``spos``.

A 3×3 stem of 16 channels with stride 2 (no max pool, unlike ShuffleNetV2: a fourth stage
takes its place), then 20 searched layers in stages
of 4, 4, 8 and 4 (widths 64, 160, 320, 640; the first layer of each stage has stride 2), a 1×1
convolution to 1024 channels, pooling and the classifier (no bias). Each layer ``l{n}`` picks
one of four ShuffleNetV2 units: ``k3``, ``k5``, ``k7`` (the depthwise kernel of the main
branch) or ``xception`` (three depthwise 3×3 convolutions), so the space has 4^20 ≈ 1.1·10^12
architectures, the count the paper states (§4.1, "choice block search").
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

import nasforge as nf
from nasforge.errors import SpaceError
from nasforge.hub._blocks import ClassifierHead, ShuffleUnit, ShuffleXception, conv_bn
from nasforge.hub._registry import register_arch, register_space

__all__ = ["SposSpace", "SPOS_OPS", "SPOS_SEARCHED"]

#: the choice blocks of a layer, in the space's (and the paper's) order
SPOS_OPS: tuple[str, ...] = ("k3", "k5", "k7", "xception")
_STAGES = ((64, 4), (160, 4), (320, 8), (640, 4))


def _unit(name: str, cin: int, cout: int, s: int) -> Callable[[], nn.Module]:
    if name == "xception":
        return lambda: ShuffleXception(cin, cout, s)
    return lambda: ShuffleUnit(cin, cout, int(name[1:]), s)


class SposSpace(nf.ModelSpace):
    """Returns SPOS's ShuffleNetV2 space (see the module's docstring); ``widths`` are the four
    stage widths (even numbers; tests use tiny ones).

    Raises:
        SpaceError: a stage width is odd or not larger than the one before.

    Invariants: 20 decisions ``l0`` … ``l19``, each over :data:`SPOS_OPS`.
    """

    def __init__(
        self,
        n_classes: int = 1000,
        widths: tuple[int, int, int, int] = (64, 160, 320, 640),
        stem: int = 16,
        features: int = 1024,
        in_channels: int = 3,
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        if any(w % 2 or w <= c for w, c in zip(widths, (stem, *widths))):
            raise SpaceError(
                f"SPOS stage widths {list(widths)} after a stem of {stem} must be even and "
                "increase stage by stage (a stride-2 unit adds channels); e.g. (64, 160, 320, 640)"
            )
        self.stem = conv_bn(in_channels, stem, 3, 2)
        layers: list[nn.Module] = []
        c = stem
        for width, (_, n) in zip(widths, _STAGES):
            for j in range(n):
                ops = {name: _unit(name, c, width, 2 if j == 0 else 1) for name in SPOS_OPS}
                layers.append(nf.LayerChoice(ops, label=f"l{len(layers)}"))
                c = width
        self.layers = nn.Sequential(*layers)
        self.head = ClassifierHead(c, features, n_classes, dropout=dropout, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Returns the logits of a frozen network (a recorded space refuses forward)."""
        return self.head(self.layers(self.stem(x)))


#: the searched network of the paper's Table 3 ("SPOS", block search), as the reference
#: implementation lists it (choice indices 0-3 into SPOS_OPS)
SPOS_SEARCHED: dict[str, str] = {
    f"l{n}": SPOS_OPS[i]
    for n, i in enumerate((0, 0, 3, 1, 1, 1, 0, 0, 2, 0, 2, 1, 1, 0, 2, 0, 2, 1, 3, 2))
}

_PAPER = "Guo et al. 2020, Single Path One-Shot (ECCV)"
register_space(
    "spos",
    SposSpace,
    paper=_PAPER,
    size_paper=4**20,
    family="spos",
    note="20 layers of 4 choice blocks (§4.1)",
)
register_arch(
    "spos",
    space="spos",
    arch=SPOS_SEARCHED,
    resolution=224,
    num_classes=1000,
    params_paper=None,
    madds_paper=319e6,
    source=f"{_PAPER}, Table 3: block search (319M FLOPs)",
    note="the paper gives FLOPs (multiply-adds), not parameters",
)
