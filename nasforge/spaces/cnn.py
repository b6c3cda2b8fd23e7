"""Small CNN spaces for 8×8 (digits) or larger single-channel images.

``DigitsCNN`` is written with inline choices and uses every kind: a value choice (width, with
arithmetic for the second stage), layer choices (operator per block), a depth choice (Repeat),
and an input choice (a skip connection). ``digits_mutated_space`` is the same idea as an
unmodified base model plus the three generic mutators.

Shape table (input ``1×H×W``; ``c`` = width):

    stem        conv3  1 → c            H×W
    stage1      Repeat(depth) of LayerChoice{conv3, conv5, sep3}(c → c)
    down        conv3 stride 2  c → 2c   H/2×W/2
    stage2      LayerChoice{conv3, conv5, sep3}(2c → 2c)
    skip        InputChoice over [down, stage2], summed
    head        global average pool, Dropout(choice), Linear(2c → n_classes)
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
from torch import nn

import nasforge as nf

__all__ = ["ConvBNReLU", "SepConv", "DigitsCNN", "DigitsBase", "digits_mutated_space", "OPS"]


class ConvBNReLU(nn.Sequential):
    """Returns conv → batch norm → ReLU with 'same' padding."""

    def __init__(self, c_in: int, c_out: int, k: int, stride: int = 1) -> None:
        super().__init__(
            nn.Conv2d(c_in, c_out, k, stride, padding=k // 2, bias=False),
            nn.BatchNorm2d(c_out),
            nn.ReLU(inplace=True),
        )


class SepConv(nn.Sequential):
    """Returns depthwise conv → pointwise conv → batch norm → ReLU."""

    def __init__(self, c_in: int, c_out: int, k: int) -> None:
        super().__init__(
            nn.Conv2d(c_in, c_in, k, padding=k // 2, groups=c_in, bias=False),
            nn.Conv2d(c_in, c_out, 1, bias=False),
            nn.BatchNorm2d(c_out),
            nn.ReLU(inplace=True),
        )


#: Candidate operators of a block, by name: ``(channels) -> module``.
OPS: dict[str, Callable[[int], nn.Module]] = {
    "conv3": lambda c: ConvBNReLU(c, c, 3),
    "conv5": lambda c: ConvBNReLU(c, c, 5),
    "sep3": lambda c: SepConv(c, c, 3),
}


def _op_choice(c: int, label: str | None = None) -> nf.LayerChoice:
    return nf.LayerChoice({name: partial(f, c) for name, f in OPS.items()}, label=label)


class DigitsCNN(nf.ModelSpace):
    """Returns the digits CNN space; ``widths`` and ``depths`` set the candidate values."""

    def __init__(
        self,
        n_classes: int = 10,
        widths: tuple[int, ...] = (16, 24, 32),
        depths: tuple[int, ...] = (1, 2, 3),
        dropouts: tuple[float, ...] = (0.0, 0.25),
    ) -> None:
        super().__init__()
        c = nf.choice(widths, label="width")
        self.stem = ConvBNReLU(1, c, 3)
        self.stage1 = nf.Repeat(lambda i: _op_choice(c), nf.choice(depths, label="depth"))
        self.down = ConvBNReLU(c, c * 2, 3, stride=2)
        self.stage2 = _op_choice(c * 2)
        self.skip = nf.InputChoice(2, n_chosen=1, reduction="sum")
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(nf.choice(dropouts, label="dropout"))
        self.fc = nn.Linear(c * 2, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stage1(self.stem(x))
        d = self.down(x)
        x = self.skip([d, self.stage2(d)])
        x = torch.flatten(self.pool(x), 1)
        return self.fc(self.dropout(x))


class DigitsBase(nn.Module):
    """Returns a plain (choice-free) digits CNN: the base model for the mutator example."""

    def __init__(self, n_classes: int = 10, c: int = 16) -> None:
        super().__init__()
        self.stem = ConvBNReLU(1, c, 3)
        self.conv1 = ConvBNReLU(c, c, 3)
        self.down = ConvBNReLU(c, 2 * c, 3, stride=2)
        self.conv2 = ConvBNReLU(2 * c, 2 * c, 3)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(2 * c, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(self.stem(x))
        d = self.down(x)
        y = self.conv2(d)
        return self.fc(torch.flatten(self.pool(y), 1))


def _same_shape(kind: str) -> Callable[[nn.Module], nn.Module]:
    def build(old: nn.Module) -> nn.Module:
        # the mutated sites are DigitsBase's ConvBNReLU blocks: a Sequential led by its conv
        assert isinstance(old, nn.Sequential), type(old).__name__
        conv = old[0]
        assert isinstance(conv, nn.Conv2d), type(conv).__name__
        c_in, c_out, stride = conv.in_channels, conv.out_channels, conv.stride[0]
        if kind == "sep3":
            assert stride == 1
            return SepConv(c_in, c_out, 3)
        return ConvBNReLU(c_in, c_out, int(kind[-1]), stride)

    return build


def digits_mutated_space(n_classes: int = 10, c: int = 16) -> nf.MutatedSpace:
    """Returns ``DigitsBase`` mutated by the three generic mutators:

    - operator: ``conv1`` and ``conv2`` each become conv3, conv5 or sep3;
    - input: the pooling reads ``conv2`` or skips it and reads ``down``;
    - insert: after ``down``, nothing, a Dropout(0.2) or an extra conv3 block.
    """
    mutators = [
        nf.OperatorMutator(
            lambda node, module: node.op == "call_module" and node.target in ("conv1", "conv2"),
            {k: _same_shape(k) for k in ("conv3", "conv5", "sep3")},
            label="op",
        ),
        nf.InputMutator("pool", ["conv2", "down"], label="skip"),
        nf.InsertMutator(
            "down",
            {
                "none": None,
                "dropout": lambda: nn.Dropout(0.2),
                "conv": lambda: ConvBNReLU(2 * c, 2 * c, 3),
            },
            label="insert",
        ),
    ]
    return nf.MutatedSpace(DigitsBase(n_classes, c), mutators, leaves=(ConvBNReLU, SepConv))
