"""An NNI 3.0 model space with every choice kind, written against NNI: LayerChoice (list and
dict), InputChoice, ``nni.choice`` with arithmetic, Repeat, Cell, MutableConv2d, MutableLinear.

``nasforge.compat.nni.load("examples/nni/every_kind.py").EveryKind()`` is a nasforge space (NNI
installed or not); tests/compat/test_nni.py and docs/from-nni.md search it.
"""

import nni
import torch
import torch.nn as nn
from nni.nas.nn.pytorch import (
    Cell,
    InputChoice,
    LayerChoice,
    ModelSpace,
    MutableConv2d,
    MutableLinear,
    Repeat,
)


class Block(nn.Module):
    def __init__(self, index):
        super().__init__()
        self.act = LayerChoice({"relu": nn.ReLU(), "tanh": nn.Tanh()}, label=f"act{index}")

    def forward(self, x):
        return self.act(x) + x


class EveryKind(ModelSpace, label_prefix="net"):
    def __init__(self):
        super().__init__()
        kernel = nni.choice("kernel", [1, 3])
        self.stem = nn.Conv2d(1, 4, 3, padding=1)
        self.conv = MutableConv2d(4, 4, kernel, padding=(kernel - 1) // 2)
        self.pool = LayerChoice([nn.MaxPool2d(3, 1, 1), nn.AvgPool2d(3, 1, 1)], label="pool")
        self.blocks = Repeat(Block, (1, 3), label="depth")
        self.skip = InputChoice(2, 1, label="skip")
        ops = [lambda node, op, chosen: nn.Identity(), lambda node, op, chosen: nn.Tanh()]
        self.cell = Cell(ops, num_nodes=2, num_predecessors=1, label="cell")
        hidden = nni.choice("hidden", [4, 8])
        self.fc1 = MutableLinear(2 * 4 * 8 * 8, hidden * 2)
        self.fc2 = MutableLinear(hidden * 2, 10)

    def forward(self, x):
        x = torch.relu(self.conv(self.stem(x)))
        x = self.skip([x, self.blocks(self.pool(x))])
        x = self.cell([x])
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))
