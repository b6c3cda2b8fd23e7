"""NNI 3.0's "Hello NAS" tutorial space, as NNI's tutorial writes it (imports included).

It is written against NNI and runs unchanged on nasforge:
``nasforge.compat.nni.load("examples/nni/hello_nas.py").MyModelSpace()`` is a nasforge space
(docs/from-nni.md), NNI installed or not. ``benchmarks/nni_equal.py`` checks, with NNI
installed, that NNI and nasforge freeze its architectures to the same network.
"""

import nni
import torch
import torch.nn as nn
import torch.nn.functional as F
from nni.nas.nn.pytorch import LayerChoice, ModelSpace, MutableDropout, MutableLinear


class DepthwiseSeparableConv(nn.Module):
    def __init__(self, in_ch, out_ch):
        super().__init__()
        self.depthwise = nn.Conv2d(in_ch, in_ch, kernel_size=3, groups=in_ch)
        self.pointwise = nn.Conv2d(in_ch, out_ch, kernel_size=1)

    def forward(self, x):
        return self.pointwise(self.depthwise(x))


class MyModelSpace(ModelSpace):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        # LayerChoice is used to select a layer between Conv2d and DwConv.
        self.conv2 = LayerChoice(
            [nn.Conv2d(32, 64, 3, 1), DepthwiseSeparableConv(32, 64)], label="conv2"
        )
        # nni.choice is used to select a dropout rate.
        # The result can be used as parameters of `MutableXXX`.
        self.dropout1 = MutableDropout(nni.choice("dropout", [0.25, 0.5, 0.75]))
        self.dropout2 = nn.Dropout(0.5)
        feature = nni.choice("feature", [64, 128, 256])
        self.fc1 = MutableLinear(9216, feature)
        self.fc2 = MutableLinear(feature, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(self.conv2(x), 2)
        x = torch.flatten(self.dropout1(x), 1)
        x = self.fc2(self.dropout2(F.relu(self.fc1(x))))
        output = F.log_softmax(x, dim=1)
        return output


model_space = MyModelSpace()
