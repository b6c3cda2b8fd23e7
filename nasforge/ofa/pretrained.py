"""Loading once-for-all's published MobileNetV3 supernets into nasforge's space, strictly.

A published checkpoint (``ofa_mbv3_d234_e346_k357_w1.0`` or ``_w1.2``, a file holding
``{"state_dict": {...}}`` or the state dict itself) names its tensors after the ``ofa``
package's modules. Each name maps to one tensor of :class:`~nasforge.ofa.mobilenet.
OFAMobileNetV3` (``i = 1 + block * max_depth + layer``):

    first_conv.{conv.weight, bn.*}                      stem.{0.weight, 1.*}
    blocks.0.conv.{depth_conv, point_linear}.*          first.{dw_conv, dw_bn, project, ...}
    blocks.i.conv.inverted_bottleneck.{conv, bn}        stages.b.j.{expand_conv, expand_bn}
    blocks.i.conv.depth_conv.conv.{conv.weight, 7to5_matrix, 5to3_matrix}
                                                        stages.b.j.dw_conv.{weight, transforms.*}
    blocks.i.conv.depth_conv.bn.*                       stages.b.j.dw_bn.*
    blocks.i.conv.depth_conv.se.fc.{reduce, expand}.*   stages.b.j.se.{reduce, expand}.*
    blocks.i.conv.point_linear.{conv, bn}               stages.b.j.{project, project_bn}
    final_expand_layer.{conv.weight, bn.*}              head.expand.{0.weight, 1.*}
    feature_mix_layer.conv.weight                       head.feature.0.weight
    classifier.linear.{weight, bias}                    head.classifier.{weight, bias}

Both layouts the package has used are read: ``blocks.i.conv.`` and the older
``blocks.i.mobile_inverted_conv.``, and dynamic modules' nested ``bn.bn.`` / ``conv.conv.weight``
as well as their flat forms.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path

import torch

from nasforge.errors import StoreError
from nasforge.ofa.mobilenet import OFAMobileNetV3
from nasforge.ofa.published import parse_net_id, published_spec
from nasforge.ofa.spaces import OFASpec

__all__ = ["load_pretrained", "ofa_to_nasforge_key", "read_state_dict"]

logger = logging.getLogger(__name__)

_BN = r"(weight|bias|running_mean|running_var|num_batches_tracked)"
_NESTED = re.compile(r"(^|\.)(bn|conv|linear)\.\2\.")  # ".bn.bn." -> ".bn." (dynamic modules)
_BLOCK = re.compile(r"blocks\.(\d+)\.conv\.(.+)")
_LAYER_RULES = [  # (pattern of the part after blocks.i.conv., nasforge suffix)
    (re.compile(r"inverted_bottleneck\.conv\.weight"), "expand_conv.weight"),
    (re.compile(rf"inverted_bottleneck\.bn\.{_BN}"), r"expand_bn.\1"),
    (re.compile(r"depth_conv\.conv\.weight"), "dw_conv.weight"),
    (re.compile(r"depth_conv\.conv\.(\d+to\d+)_matrix"), r"dw_conv.transforms.\1"),
    (re.compile(rf"depth_conv\.bn\.{_BN}"), r"dw_bn.\1"),
    (re.compile(r"depth_conv\.se\.fc\.(reduce|expand)\.(weight|bias)"), r"se.\1.\2"),
    (re.compile(r"point_linear\.conv\.weight"), "project.weight"),
    (re.compile(rf"point_linear\.bn\.{_BN}"), r"project_bn.\1"),
]
_TOP_RULES = [
    (re.compile(r"first_conv\.conv\.weight"), "stem.0.weight"),
    (re.compile(rf"first_conv\.bn\.{_BN}"), r"stem.1.\1"),
    (re.compile(r"final_expand_layer\.conv\.weight"), "head.expand.0.weight"),
    (re.compile(rf"final_expand_layer\.bn\.{_BN}"), r"head.expand.1.\1"),
    (re.compile(r"feature_mix_layer\.conv\.weight"), "head.feature.0.weight"),
    (re.compile(r"classifier\.linear\.(weight|bias)"), r"head.classifier.\1"),
]


def _normalise(key: str) -> str:
    """Returns ``key`` in one layout: ``.conv.`` for ``.mobile_inverted_conv.``, and the flat
    forms of the dynamic modules' nested ``bn.bn.``, ``conv.conv.weight``, ``linear.linear.``."""
    key = key.replace(".mobile_inverted_conv.", ".conv.")
    return _NESTED.sub(r"\1\2.", key)


def ofa_to_nasforge_key(key: str, max_depth: int) -> str | None:
    """Returns the nasforge state-dict name of the ``ofa`` package's tensor ``key`` (either
    layout), or None when no rule maps it; ``max_depth`` is the layers per block."""
    key = _normalise(key)
    m = _BLOCK.fullmatch(key)
    if m is not None:
        i, rest = int(m.group(1)), m.group(2)
        if i == 0:
            prefix = "first."
        else:
            b, j = divmod(i - 1, max_depth)
            prefix = f"stages.{b}.{j}."
        for pattern, target in _LAYER_RULES:
            hit = pattern.fullmatch(rest)
            if hit is not None:
                return prefix + hit.expand(target)
        return None
    for pattern, target in _TOP_RULES:
        hit = pattern.fullmatch(key)
        if hit is not None:
            return hit.expand(target)
    return None


def read_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """Returns the tensors of a published checkpoint (``{"state_dict": ...}`` unwrapped), read
    with ``weights_only=True``.

    Raises:
        StoreError: the file is missing or unreadable, or holds no state dict of tensors.
    """
    p = Path(path)
    if not p.is_file():
        raise StoreError(f"no checkpoint at {p}; pass the path of a published supernet file")
    try:
        data = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as exc:  # corrupt, foreign or pickled objects that weights_only refuses
        raise StoreError(f"cannot read checkpoint {p} with weights_only=True: {exc}") from exc
    if isinstance(data, Mapping) and "state_dict" in data:
        data = data["state_dict"]
    if not isinstance(data, Mapping) or not all(isinstance(v, torch.Tensor) for v in data.values()):
        raise StoreError(
            f"{p} holds {type(data).__name__}, expected a state dict (name -> tensor) or "
            "{'state_dict': ...} as once-for-all publishes"
        )
    return dict(data)


def _infer_spec(path: Path, state: Mapping[str, torch.Tensor]) -> OFASpec:
    """Returns the published plan named by the file (``..._w1.2``) or read off the tensors."""
    named = parse_net_id(path.name)
    n_classes = 1000
    for k, v in state.items():
        if _normalise(k) == "classifier.linear.weight":
            n_classes = int(v.shape[0])
    if named is not None:
        return published_spec(n_classes=n_classes, **named)
    width = 1.0
    for k, v in state.items():
        if _normalise(k) == "final_expand_layer.conv.weight":
            width = round(int(v.shape[0]) / 960, 2)
    logger.info("%s: no net id in the name; read width %.2f off the head", path.name, width)
    return published_spec(width_mult=width, n_classes=n_classes)


def load_pretrained(path: str | Path, spec: OFASpec | None = None) -> OFAMobileNetV3:
    """Returns nasforge's supernet holding the published once-for-all checkpoint at ``path``.

    ``spec`` defaults to the published plan the file's name gives (``ofa_mbv3_d234_e346_k357_
    w1.2``), else the plan of :func:`~nasforge.ofa.published.published_spec` with the width
    read off the tensors. Loading is strict: every tensor of the file maps to a tensor of the
    network with the same shape, and every tensor of the network is given (batch-norm counters
    ``num_batches_tracked`` excepted: old checkpoints lack them and evaluation never reads them).

    Invariants: with the same weights, nasforge's supernet and extracted sub-networks compute
    once-for-all's outputs (to float rounding) for every architecture.

    Raises:
        StoreError: unreadable file, a tensor no rule maps, a tensor the network lacks, a shape
            mismatch, or a network tensor the file does not give (the first one is named).
    """
    p = Path(path)
    state = read_state_dict(p)
    spec = spec or _infer_spec(p, state)
    net = OFAMobileNetV3(spec)
    own = net.state_dict()
    mapped: dict[str, torch.Tensor] = {}
    for key, tensor in state.items():
        target = ofa_to_nasforge_key(key, spec.max_depth)
        if target is None:
            raise StoreError(
                f"{p}: tensor {key!r} {tuple(tensor.shape)} is not part of a once-for-all "
                "MobileNetV3 supernet (no rule maps it); is this a ProxylessNAS or ResNet file?"
            )
        if target not in own:
            raise StoreError(
                f"{p}: tensor {key!r} maps to {target!r}, which the network of spec "
                f"(width {spec.width_mult}, depths {spec.depths}, kernels {spec.kernels}, se "
                f"{spec.se}) lacks; pass the spec the checkpoint was trained with"
            )
        if tuple(tensor.shape) != tuple(own[target].shape):
            raise StoreError(
                f"{p}: tensor {key!r} has shape {tuple(tensor.shape)}, the network's {target!r} "
                f"has {tuple(own[target].shape)} (width {spec.width_mult}, expands "
                f"{spec.expands}, kernels {spec.kernels}); pass the matching spec"
            )
        if target in mapped:
            raise StoreError(f"{p}: tensors map twice onto {target!r} (both layouts at once?)")
        mapped[target] = tensor
    for name in own:
        if name not in mapped and not name.endswith("num_batches_tracked"):
            raise StoreError(
                f"{p}: the network's tensor {name!r} {tuple(own[name].shape)} is not in the "
                "checkpoint; the file is truncated or of another plan"
            )
    net.load_state_dict(mapped, strict=False)
    net.eval()
    return net
