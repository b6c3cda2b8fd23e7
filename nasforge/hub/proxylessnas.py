"""ProxylessNAS's space (Cai, Zhu & Han, ICLR 2019, §4 and Figure 4) and its three published
networks, ``proxylessnas-gpu``, ``-cpu`` and ``-mobile``.

A MobileNetV2-like backbone: a 3×3 stem, a fixed inverted residual of expansion 1, then six
stages of 4, 4, 4, 4, 4 and 1 searched layers (strides 2, 2, 2, 1, 2, 1). Each searched layer
``s{i}.{j}`` picks one inverted residual ``k{3,5,7}_e{3,6}`` (ReLU6), and every layer but a
stage's first may also be ``zero``: the layer is skipped and only its identity shortcut
remains, which is how the search chooses depth. So the space has 6^6 · 7^15 ≈ 2.2·10^17
architectures; the paper states no count.

Widths are constructor arguments, not decisions: the published GPU and CPU networks were
searched on wider backbones than the mobile one (the reference implementation's network
configurations), so each published network is registered with its ``widths``.

    widths = (stem, first layer, stage 1 … stage 6, head features)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

import nasforge as nf
from nasforge.errors import SpaceError
from nasforge.hub._blocks import ClassifierHead, InvertedResidual, Zero, conv_bn
from nasforge.hub._registry import register_arch, register_space

__all__ = ["ProxylessNASSpace", "PROXYLESS_OPS", "MOBILE_WIDTHS", "GPU_WIDTHS", "CPU_WIDTHS"]

#: the inverted residuals of a searched layer, in the space's order (``zero`` is appended on
#: every layer but a stage's first)
PROXYLESS_OPS: tuple[str, ...] = tuple(f"k{k}_e{e}" for k in (3, 5, 7) for e in (3, 6))
_DEPTHS = (4, 4, 4, 4, 4, 1)
_STRIDES = (2, 2, 2, 1, 2, 1)
MOBILE_WIDTHS = (32, 16, 32, 40, 80, 96, 192, 320, 1280)
GPU_WIDTHS = (40, 24, 32, 56, 112, 128, 256, 432, 1728)
CPU_WIDTHS = (40, 24, 32, 48, 88, 104, 216, 360, 1432)


def _mbconv(name: str, cin: int, cout: int, s: int) -> Callable[[], nn.Module]:
    k, e = (int(part[1:]) for part in name.split("_"))
    return lambda: InvertedResidual(cin, cout, cin * e, k, s, activation="relu6", residual=False)


class _Layer(nn.Module):
    """Returns one searched layer: the chosen inverted residual, plus the input on every layer
    but a stage's first (so ``zero`` leaves the identity)."""

    def __init__(self, label: str, cin: int, cout: int, s: int, first: bool) -> None:
        super().__init__()
        ops: dict[str, Callable[[], nn.Module]] = {
            name: _mbconv(name, cin, cout, s) for name in PROXYLESS_OPS
        }
        if not first:
            ops["zero"] = Zero
        self.op = nf.LayerChoice(ops, label=label)
        self.shortcut = not first

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.op(x)
        return out + x if self.shortcut else out


class ProxylessNASSpace(nf.ModelSpace):
    """Returns ProxylessNAS's space on the backbone ``widths`` (see the module's docstring).

    Invariants: 21 decisions ``s{i}.{j}`` (stage i in 1…6, layer j from 0); a stage's first
    layer has the 6 inverted residuals, the others also ``zero``.

    Raises:
        SpaceError: ``widths`` does not have 9 positive entries.
    """

    def __init__(
        self,
        n_classes: int = 1000,
        widths: Sequence[int] = MOBILE_WIDTHS,
        in_channels: int = 3,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if len(widths) != 9 or min(widths) < 1:
            raise SpaceError(
                f"ProxylessNASSpace widths must be 9 positive ints (stem, first layer, 6 stages, "
                f"head), got {list(widths)}; the mobile network's are {list(MOBILE_WIDTHS)}"
            )
        stem, first, *stages, features = widths
        self.stem = conv_bn(in_channels, stem, 3, 2, activation="relu6")
        self.first = InvertedResidual(
            stem, first, stem, 3, 1, activation="relu6", expand_conv=False, residual=False
        )
        layers, c = [], first
        for i, (cout, n, s) in enumerate(zip(stages, _DEPTHS, _STRIDES), start=1):
            for j in range(n):
                layers.append(_Layer(f"s{i}.{j}", c, cout, s if j == 0 else 1, j == 0))
                c = cout
        self.layers = nn.Sequential(*layers)
        self.head = ClassifierHead(c, features, n_classes, activation="relu6", dropout=dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Returns the logits of a frozen network (a recorded space refuses forward)."""
        return self.head(self.layers(self.first(self.stem(x))))


def _arch(kernels: str, expansions: str, kept: str) -> dict[str, str]:
    """Returns an architecture from three strings of 21 characters (stage by stage): the kernel,
    the expansion, and whether the layer is kept (``1``) or ``zero`` (``0``)."""
    labels = [f"s{i}.{j}" for i, n in enumerate(_DEPTHS, start=1) for j in range(n)]
    return {
        label: f"k{k}_e{e}" if keep == "1" else "zero"
        for label, k, e, keep in zip(labels, kernels, expansions, kept, strict=True)
    }


# The published networks, layer by layer (the reference implementation's network
# configurations; the stages are separated by spaces for reading).
_MOBILE = _arch(
    "5333 7355 7555 5555 7777 7".replace(" ", ""),
    "3333 3333 6333 6333 6633 6".replace(" ", ""),
    "1100 1111 1111 1111 1111 1".replace(" ", ""),
)
_GPU = _arch(
    "5333 7333 7555 5335 7775 7".replace(" ", ""),
    "3333 3333 6333 6333 6666 6".replace(" ", ""),
    "1000 1001 1001 1011 1111 1".replace(" ", ""),
)
_CPU = _arch(
    "3333 3335 3333 5333 5553 5".replace(" ", ""),
    "6333 6333 6333 6333 6333 6".replace(" ", ""),
    "1111 1111 1001 1111 1111 1".replace(" ", ""),
)

_PAPER = "Cai, Zhu & Han 2019, ProxylessNAS (ICLR)"
_NOTE = (
    "the paper's tables (Table 2, mobile; Table 4, GPU) give top-1 and latency, not parameters "
    "or multiply-adds; the reference implementation's published configurations count "
    "{ref} parameters"
)

register_space(
    "proxylessnas",
    ProxylessNASSpace,
    paper=_PAPER,
    size_paper=None,
    family="proxylessnas",
    note="6^6 · 7^15: six inverted residuals per layer, plus zero on the 15 non-first layers; "
    "the paper states no count",
)
for _name, _a, _w, _ref, _table in (
    ("proxylessnas-mobile", _MOBILE, MOBILE_WIDTHS, "4,080,512", "Table 2, Proxyless-R (mobile)"),
    ("proxylessnas-gpu", _GPU, GPU_WIDTHS, "7,119,848", "Table 4, Proxyless (GPU)"),
    ("proxylessnas-cpu", _CPU, CPU_WIDTHS, "4,361,648", "Table 4, Proxyless (CPU)"),
):
    register_arch(
        _name,
        space="proxylessnas",
        arch=_a,
        space_kwargs={"widths": _w},
        resolution=224,
        num_classes=1000,
        params_paper=None,
        madds_paper=None,
        source=f"{_PAPER}, {_table}",
        note=_NOTE.format(ref=_ref),
    )
