"""Test helper: SYNTHETIC files in once-for-all's published formats (the real tables and
predictor cannot be downloaded here). The formats are the published ones; the numbers are made
up: latencies derived from multiply-adds plus seeded noise, predictor weights seeded at random.

    write_ofa_tables(dir, width)   ``<side>_lookup_table.yaml`` per resolution, every entry
                                   ``{count, mean, std}`` under once-for-all's MobileNetV3 keys
    ofa_layout_state(width)        a supernet state dict under once-for-all's tensor names
    write_ofa_predictor(path)      the tutorial predictor's state dict (``nn.Sequential`` of
                                   Linear(128, 400), 3 x 400, Linear(400, 1)) in torch's legacy
                                   (non-zip) serialisation, as ``acc_predictor.pth`` is stored
"""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import torch
import yaml
from torch import nn

from nasforge.ofa.latency import distinct_shapes, ofa_lut_keys
from nasforge.ofa.mobilenet import OFAMobileNetV3
from nasforge.ofa.pretrained import ofa_to_nasforge_key
from nasforge.ofa.published import TUTORIAL_RESOLUTIONS, published_spec
from nasforge.ofa.spaces import OFASearchSpace

__all__ = ["write_ofa_tables", "write_ofa_predictor", "ofa_layout_state"]


def write_ofa_tables(
    directory: Path, width: float = 1.2, resolutions=TUTORIAL_RESOLUTIONS, seed: int = 0
) -> list[Path]:
    """Returns the SYNTHETIC per-resolution tables written to ``directory`` (made-up ms)."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    files = []
    for r in resolutions:
        space = OFASearchSpace(replace(published_spec(width), resolutions=(r,)))
        table = {}
        for shape in distinct_shapes(space):
            keys = ofa_lut_keys(shape)
            for key in keys:  # the head's share split over its four entries
                ms = shape.macs() / 1e6 / 15 / len(keys) + rng.uniform(0.0, 0.2)
                table[key] = {"count": 50, "mean": ms, "std": ms * 0.01}
        path = directory / f"{r}_lookup_table.yaml"
        path.write_text(yaml.safe_dump(table))
        files.append(path)
    return files


def write_ofa_predictor(path: Path, seed: int = 0) -> nn.Sequential:
    """Returns the SYNTHETIC tutorial-layout predictor written (legacy format) to ``path``."""
    torch.manual_seed(seed)
    model = nn.Sequential(
        nn.Linear(128, 400), nn.ReLU(), nn.Linear(400, 400), nn.ReLU(),
        nn.Linear(400, 400), nn.ReLU(), nn.Linear(400, 1),
    )  # fmt: skip
    with torch.no_grad():
        model[-1].bias.fill_(0.75)  # an accuracy-like output around 0.75
        model[-1].weight.mul_(0.1)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), path, _use_new_zipfile_serialization=False)
    return model


_BN = ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")


def ofa_layout_state(width: float = 1.0, n_classes: int = 10) -> dict:
    """Returns a SYNTHETIC supernet state dict in once-for-all's key layout (nasforge's random
    initial weights under the published names; needs no ofa package)."""
    net = OFAMobileNetV3(published_spec(width_mult=width, n_classes=n_classes))
    inverse = {}
    names = [f"blocks.{i}.conv.{part}" for i in range(21) for part in (
        "inverted_bottleneck.conv.conv.weight", "depth_conv.conv.conv.weight",
        "depth_conv.conv.7to5_matrix", "depth_conv.conv.5to3_matrix",
        "depth_conv.se.fc.reduce.weight", "depth_conv.se.fc.reduce.bias",
        "depth_conv.se.fc.expand.weight", "depth_conv.se.fc.expand.bias",
        "point_linear.conv.conv.weight",
    )] + [f"blocks.{i}.conv.{m}.bn.bn.{s}" for i in range(21)
          for m in ("inverted_bottleneck", "depth_conv", "point_linear")
          for s in _BN] + [
        "first_conv.conv.weight", "final_expand_layer.conv.weight",
        "feature_mix_layer.conv.weight", "classifier.linear.weight", "classifier.linear.bias",
    ] + [f"{m}.bn.{s}" for m in ("first_conv", "final_expand_layer") for s in _BN]  # fmt: skip
    own = net.state_dict()
    for name in names:
        target = ofa_to_nasforge_key(name, 4)
        if target in own:
            inverse[name] = own[target].clone()
    return inverse
