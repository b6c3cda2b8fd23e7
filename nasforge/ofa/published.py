"""Once-for-all's published artifacts as pure data: the network plans of the published
MobileNetV3 supernets, their names, once-for-all's architecture dictionaries and the feature
layout of its published accuracy predictor.

This module is pure (no torch). The torch side is :mod:`nasforge.ofa.pretrained` (checkpoints)
and :mod:`nasforge.ofa.predictor` (the predictor); latency tables are read by
:meth:`nasforge.ofa.latency.LatencyTable.from_ofa_yaml`.

Vocabulary
    net id      a published supernet's name, e.g. ``ofa_mbv3_d234_e346_k357_w1.2``: depths
                2, 3, 4; expansion ratios 3, 4, 6; kernels 3, 5, 7; width multiplier 1.2
    ofa arch    once-for-all's dictionary ``{"ks": [...], "e": [...], "d": [...], "r": [side]}``:
                a kernel and a ratio for each of the 20 layer slots (5 blocks x 4), a depth per
                block, the input side (``"image_size"`` instead of ``"r"`` in its NAS code)
    features    the published predictor's input: for each layer slot a one-hot of its kernel,
                then for each slot a one-hot of its ratio (zeros for a slot beyond its block's
                depth), then a one-hot of the resolution in slots ``(side - 112) // 16``
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from nasforge.errors import ArchitectureError, ConfigError
from nasforge.ofa.spaces import (
    OFASearchSpace,
    OFASpec,
    depth_label,
    expand_label,
    kernel_label,
)
from nasforge.space.search_space import Arch

__all__ = [
    "PUBLISHED_MBV3",
    "TUTORIAL_RESOLUTIONS",
    "RESOLUTION_SLOTS",
    "published_spec",
    "parse_net_id",
    "to_ofa_arch",
    "from_ofa_arch",
    "ofa_features",
    "n_ofa_features",
]

PUBLISHED_MBV3 = ("ofa_mbv3_d234_e346_k357_w1.0", "ofa_mbv3_d234_e346_k357_w1.2")
TUTORIAL_RESOLUTIONS = (160, 176, 192, 208, 224)  # the tutorial's latency tables and search
RESOLUTION_SLOTS = (112, 16, 8)  # first side, step, number of slots: 112, 128, ..., 224

_NET_ID = re.compile(r"ofa_mbv3_d(\d+)_e(\d+)_k(\d+)_w(\d+(?:\.\d+)?)")


def published_spec(
    width_mult: float = 1.0,
    resolutions: Sequence[int] = TUTORIAL_RESOLUTIONS,
    depths: Sequence[int] = (2, 3, 4),
    expands: Sequence[int] = (3, 4, 6),
    kernels: Sequence[int] = (3, 5, 7),
    n_classes: int = 1000,
) -> OFASpec:
    """Returns the plan of once-for-all's published MobileNetV3 supernet: stem 16, first layer 16,
    blocks 24/40/80/112/160 (strides 2, 2, 2, 1, 2; ReLU, ReLU, then h-swish; squeeze-and-
    excitation in blocks 1, 3 and 4), head 960 -> 1280, all scaled by ``width_mult``."""
    return OFASpec(
        coupling="ofa", depths=tuple(depths), expands=tuple(expands), kernels=tuple(kernels),
        resolutions=tuple(sorted(resolutions)), n_classes=n_classes, width_mult=width_mult,
        se=(False, True, False, True, True),
    )  # fmt: skip


def parse_net_id(name: str) -> dict[str, Any] | None:
    """Returns ``{"depths", "expands", "kernels", "width_mult"}`` read from a published
    supernet's name (anywhere in ``name``, e.g. a file path), or None if it holds none."""
    m = _NET_ID.search(name)
    if m is None:
        return None
    digits = lambda s: tuple(sorted(int(c) for c in s))  # noqa: E731 - "346" -> (3, 4, 6)
    return {
        "depths": digits(m.group(1)),
        "expands": digits(m.group(2)),
        "kernels": digits(m.group(3)),
        "width_mult": float(m.group(4)),
    }


def _check_ofa_space(space: OFASearchSpace) -> None:
    if space.spec.coupling != "ofa":
        raise ConfigError(
            f"once-for-all's arch format needs a space with coupling 'ofa', got "
            f"{space.spec.coupling!r}; map a CompOFA arch with compound_to_ofa first"
        )


def to_ofa_arch(space: OFASearchSpace, arch: Mapping[str, Any]) -> dict[str, list[int]]:
    """Returns once-for-all's dictionary of ``arch`` (layer slots beyond a block's depth carry
    the canonical defaults, which once-for-all ignores as well).

    Raises:
        ArchitectureError: ``arch`` does not fit ``space``.
        ConfigError: ``space`` is not an OFA-coupled space.
    """
    _check_ofa_space(space)
    arch = space.validate(arch)
    spec = space.spec
    ks, es = [], []
    for b in range(spec.n_blocks):
        for j in range(spec.max_depth):
            ks.append(int(arch[kernel_label(b, j)]))
            es.append(int(arch[expand_label(b, j)]))
    ds = [int(arch[depth_label(b)]) for b in range(spec.n_blocks)]
    return {"ks": ks, "e": es, "d": ds, "r": [space.resolution(arch)]}


def from_ofa_arch(space: OFASearchSpace, ofa_arch: Mapping[str, Any]) -> Arch:
    """Returns the canonical architecture of ``space`` that once-for-all's dictionary describes
    (``"r"`` as a one-element list or ``"image_size"``; without either, the space's side).

    Raises:
        ArchitectureError: wrong list lengths, or a value the space does not offer.
        ConfigError: ``space`` is not an OFA-coupled space.
    """
    _check_ofa_space(space)
    spec = space.spec
    n_slots = spec.n_blocks * spec.max_depth
    try:
        ks, es, ds = list(ofa_arch["ks"]), list(ofa_arch["e"]), list(ofa_arch["d"])
    except KeyError as exc:
        raise ArchitectureError(
            f"once-for-all arch {dict(ofa_arch)!r} lacks {exc}; expected keys ks, e, d and r"
        ) from None
    if len(ks) != n_slots or len(es) != n_slots or len(ds) != spec.n_blocks:
        raise ArchitectureError(
            f"once-for-all arch has {len(ks)} kernels, {len(es)} ratios and {len(ds)} depths; "
            f"this space expects {n_slots}, {n_slots} and {spec.n_blocks}"
        )
    arch: dict[str, Any] = {}
    for b in range(spec.n_blocks):
        arch[depth_label(b)] = int(ds[b])
        for j in range(spec.max_depth):
            if j < int(ds[b]):  # slots beyond the depth take the defaults
                arch[kernel_label(b, j)] = int(ks[b * spec.max_depth + j])
                arch[expand_label(b, j)] = int(es[b * spec.max_depth + j])
    side = ofa_arch.get("r", ofa_arch.get("image_size"))
    if isinstance(side, (list, tuple)):
        side = side[0]
    if "resolution" in space and side is not None:
        arch["resolution"] = int(side)
    return space.validate(arch)


def n_ofa_features(spec: OFASpec) -> int:
    """Returns the length of :func:`ofa_features` for ``spec`` (128 for the published plan)."""
    n_slots = spec.n_blocks * spec.max_depth
    return n_slots * (len(spec.kernels) + len(spec.expands)) + RESOLUTION_SLOTS[2]


def ofa_features(space: OFASearchSpace, arch: Mapping[str, Any]) -> list[float]:
    """Returns the published predictor's features of ``arch`` (see the module's vocabulary).

    Invariants: the length is :func:`n_ofa_features`; equal networks have equal features; the
    kernel one-hots come first, then the ratio one-hots, then the resolution slots.

    Raises:
        ArchitectureError: ``arch`` does not fit ``space``, or its side is outside the slots
            (112 to 224).
        ConfigError: ``space`` is not an OFA-coupled space.
    """
    _check_ofa_space(space)
    spec = space.spec
    active = {(b, j): (e, k) for b, j, e, k in space.layers(arch)}
    ks: list[float] = []
    es: list[float] = []
    for b in range(spec.n_blocks):
        for j in range(spec.max_depth):
            e, k = active.get((b, j), (None, None))
            ks += [float(k == v) for v in spec.kernels]
            es += [float(e == v) for v in spec.expands]
    first, step, n = RESOLUTION_SLOTS
    side = space.resolution(arch)
    slot = (side - first) // step
    if not 0 <= slot < n:
        raise ArchitectureError(
            f"resolution {side} is outside the predictor's slots {first}..{first + step * n - 1}"
        )
    return ks + es + [float(i == slot) for i in range(n)]
