"""The building blocks the mobile spaces of the hub share, written once: conv-BN-activation,
squeeze-and-excitation, the inverted residual (MBConv) with optional grouped 1×1 convolutions and
channel shuffle, ShuffleNetV2's units, the skip that stands in for a removed layer, and the
classifier head.

Every block here is a plain ``nn.Module`` with fixed shapes: the spaces choose *between* them
with ``nf.LayerChoice`` (so that one-shot supernets can be built of them) and never change a
block's shape after it is made.

Vocabulary
    cin, cout   input and output channels
    mid         hidden channels of an inverted residual (``cin × expansion``)
    k, s        kernel side and stride of the depthwise convolution
    g           groups of the 1×1 convolutions (FBNet's ``g2``); a shuffle follows the first
"""

from __future__ import annotations

import torch
from torch import nn

from nasforge.spaces.bench_cell import Zero

__all__ = [
    "conv_bn",
    "act",
    "SqueezeExcite",
    "ChannelShuffle",
    "InvertedResidual",
    "ShuffleUnit",
    "ShuffleXception",
    "SkipOrProject",
    "ClassifierHead",
    "Zero",
]


def act(name: str) -> nn.Module:
    """Returns the activation module called ``name`` (``relu``, ``relu6``, ``hswish`` or
    ``none``)."""
    table: dict[str, type[nn.Module]] = {
        "relu": nn.ReLU,
        "relu6": nn.ReLU6,
        "hswish": nn.Hardswish,
        "none": nn.Identity,
    }
    return table[name]()


def conv_bn(
    cin: int, cout: int, k: int = 1, s: int = 1, groups: int = 1, activation: str = "relu"
) -> nn.Sequential:
    """Returns ``k×k`` convolution (no bias, "same" padding) → batch norm → activation."""
    return nn.Sequential(
        nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
        act(activation),
    )


class SqueezeExcite(nn.Module):
    """Returns ``x`` rescaled per channel by a gate computed from its global average.

    ``hidden`` channels in the bottleneck (biased 1×1 convolutions, ReLU, then a sigmoid or
    hard-sigmoid gate). MnasNet sizes ``hidden`` from the block's *input* channels (×0.25);
    MobileNetV3 from its hidden channels (÷4): the caller decides.
    """

    def __init__(self, channels: int, hidden: int, gate: str = "sigmoid") -> None:
        super().__init__()
        self.reduce = nn.Conv2d(channels, hidden, 1)
        self.expand = nn.Conv2d(hidden, channels, 1)
        self.gate: nn.Module = nn.Hardsigmoid() if gate == "hsigmoid" else nn.Sigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = x.mean((2, 3), keepdim=True)
        return x * self.gate(self.expand(torch.relu(self.reduce(w))))


class ChannelShuffle(nn.Module):
    """Returns ``x`` with its channels interleaved across ``groups`` (ShuffleNet)."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x.shape
        return x.view(n, self.groups, c // self.groups, h, w).transpose(1, 2).reshape(n, c, h, w)


class InvertedResidual(nn.Module):
    """Returns an inverted residual (MBConv) of ``x``: 1×1 expansion → ``k×k`` depthwise →
    optional squeeze-and-excitation → 1×1 projection, plus ``x`` when ``residual``.

    ``expand_conv=False`` drops the 1×1 expansion (MobileNetV2's ``t = 1`` layer, MnasNet's
    SepConv); FBNet keeps it even at expansion 1. ``groups > 1`` makes both 1×1 convolutions
    grouped, with a channel shuffle after the first (FBNet's ``g2``).

    Invariants: the residual is added only when ``s == 1`` and ``cin == cout``.
    """

    def __init__(
        self,
        cin: int,
        cout: int,
        mid: int,
        k: int,
        s: int,
        *,
        activation: str = "relu",
        se_hidden: int = 0,
        se_gate: str = "sigmoid",
        groups: int = 1,
        expand_conv: bool = True,
        residual: bool = True,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        if expand_conv:
            layers.append(conv_bn(cin, mid, 1, 1, groups, activation))
            if groups > 1:
                layers.append(ChannelShuffle(groups))
        else:
            assert mid == cin, f"no expansion convolution, yet mid {mid} != cin {cin}"
        layers.append(conv_bn(mid, mid, k, s, mid, activation))
        if se_hidden:
            layers.append(SqueezeExcite(mid, se_hidden, se_gate))
        layers.append(conv_bn(mid, cout, 1, 1, groups, "none"))
        self.body = nn.Sequential(*layers)
        self.residual = residual and s == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.body(x)
        return out + x if self.residual else out


class SkipOrProject(nn.Module):
    """Returns ``x`` unchanged when the shapes allow, else a 1×1 conv-BN-ReLU with stride ``s``
    (FBNet's ``skip`` candidate at a layer that changes the shape)."""

    def __init__(self, cin: int, cout: int, s: int) -> None:
        super().__init__()
        self.proj = None if cin == cout and s == 1 else conv_bn(cin, cout, 1, s)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x if self.proj is None else self.proj(x)


def _split_branch(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns the two halves of ``x`` after a shuffle of 2 groups (ShuffleNetV2's split)."""
    n, c, h, w = x.shape
    x = x.reshape(n * c // 2, 2, h * w).permute(1, 0, 2).reshape(2, n, c // 2, h, w)
    return x[0], x[1]


class _ShuffleBase(nn.Module):
    """ShuffleNetV2's unit around a main branch: with stride 1, half of the channels pass
    through and half go through ``main``; with stride 2, ``main`` and a projection branch
    (depthwise ``k×k`` stride 2 → 1×1) both see all of ``x``; the results are concatenated."""

    def __init__(self, cin: int, cout: int, k: int, s: int) -> None:
        super().__init__()
        self.s = s
        self.passed = cin // 2 if s == 1 else cin  # channels that skip the main branch
        self.main_in = cin // 2 if s == 1 else cin
        self.main_out = cout - self.passed
        self.mid = cout // 2
        self.proj: nn.Module | None = None
        if s == 2:
            self.proj = nn.Sequential(
                conv_bn(cin, cin, k, 2, cin, "none"), conv_bn(cin, cin, 1, 1, 1, "relu")
            )
        self.main: nn.Module = nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.proj is None:
            kept, x = _split_branch(x)
            return torch.cat((kept, self.main(x)), 1)
        return torch.cat((self.proj(x), self.main(x)), 1)


class ShuffleUnit(_ShuffleBase):
    """Returns ShuffleNetV2's unit with a ``k×k`` depthwise main branch (SPOS's ``k3/k5/k7``):
    1×1 → depthwise ``k×k`` → 1×1."""

    def __init__(self, cin: int, cout: int, k: int, s: int) -> None:
        super().__init__(cin, cout, k, s)
        self.main = nn.Sequential(
            conv_bn(self.main_in, self.mid, 1),
            conv_bn(self.mid, self.mid, k, s, self.mid, "none"),
            conv_bn(self.mid, self.main_out, 1),
        )


class ShuffleXception(_ShuffleBase):
    """Returns ShuffleNetV2's unit with an Xception-like main branch (SPOS's ``xception``):
    three times depthwise 3×3 → 1×1, the first depthwise with the unit's stride."""

    def __init__(self, cin: int, cout: int, s: int) -> None:
        super().__init__(cin, cout, 3, s)
        m = self.mid
        self.main = nn.Sequential(
            conv_bn(self.main_in, self.main_in, 3, s, self.main_in, "none"),
            conv_bn(self.main_in, m, 1),
            conv_bn(m, m, 3, 1, m, "none"),
            conv_bn(m, m, 1),
            conv_bn(m, m, 3, 1, m, "none"),
            conv_bn(m, self.main_out, 1),
        )


class ClassifierHead(nn.Module):
    """Returns logits: optional 1×1 conv-BN-activation to ``features`` channels → global
    average pool → dropout → linear classifier."""

    def __init__(
        self,
        cin: int,
        features: int,
        n_classes: int,
        *,
        activation: str = "relu",
        dropout: float = 0.0,
        bias: bool = True,
    ) -> None:
        super().__init__()
        self.conv = conv_bn(cin, features, 1, 1, 1, activation) if features else nn.Identity()
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(features or cin, n_classes, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x).mean((2, 3))
        return self.fc(self.dropout(x))
