"""MobileNetV3's elastic space, as once-for-all searches it (Cai et al., ICLR 2020, §3.3), and
CompOFA's coupled version of it (Sahni et al., ICLR 2021, §4.1): the hub's entries are
:class:`nasforge.ofa.mobilenet.OFAMobileNetV3` itself, not a copy, so an architecture found
here is one of the once-for-all supernet's sub-networks and the other way round.

MobileNetV3-Large's plan (stem 16, a fixed first layer, blocks of 24/40/80/112/160 channels
with strides 2, 2, 2, 1, 2, squeeze-and-excitation in blocks 1, 3 and 4, h-swish from block 2,
head 960 → 1280); per block a depth in {2, 3, 4} and per layer an expansion ratio in {3, 4, 6}
and a kernel in {3, 5, 7}: ((3·3)^2 + (3·3)^3 + (3·3)^4)^5 ≈ 2.2·10^19 networks, the count
once-for-all states. CompOFA ties the i-th depth to the i-th ratio and fixes each block's
kernel (3, 5, 3, 3, 5): 3^5 = 243 networks.

``mobilenetv3-large`` is the network of Howard et al. (ICCV 2019, Table 1) as far as this space
holds it: its block 2 has 200 and 184 hidden channels after the first layer (expansions 2.5 and
2.3), which are not ratios of the space, so those three layers take the smallest ratio, 3.
"""

from __future__ import annotations

from dataclasses import replace

from nasforge.hub._registry import register_arch, register_space
from nasforge.ofa.mobilenet import OFAMobileNetV3
from nasforge.ofa.published import published_spec
from nasforge.ofa.spaces import Coupling, depth_label, expand_label, kernel_label

__all__ = ["mobilenetv3_space", "compofa_space", "MOBILENETV3_LARGE"]


def mobilenetv3_space(
    n_classes: int = 1000,
    width_mult: float = 1.0,
    coupling: Coupling = "ofa",
    image_size: int = 224,
) -> OFAMobileNetV3:
    """Returns once-for-all's MobileNetV3 space (one input resolution, ``image_size``), with
    ``coupling`` ``"ofa"`` (independent choices) or ``"compofa"`` (CompOFA's coupling).

    Raises:
        ConfigError: ``coupling`` is not a known coupling.
    """
    spec = published_spec(width_mult, resolutions=(), n_classes=n_classes)
    return OFAMobileNetV3(replace(spec, coupling=coupling, image_size=image_size))


def _large() -> dict[str, int]:
    plan = [  # depth, expansion ratio per layer, kernel (MobileNetV3-Large, Table 1)
        (2, (4, 3), 3),
        (3, (3, 3, 3), 5),
        (4, (6, 3, 3, 3), 3),  # 240, 200, 184, 184 hidden channels: 6, 2.5, 2.3, 2.3
        (2, (6, 6), 3),
        (3, (6, 6, 6), 5),
    ]
    arch: dict[str, int] = {}
    for b, (depth, ratios, kernel) in enumerate(plan):
        arch[depth_label(b)] = depth
        for j in range(4):  # layers beyond the depth take the defaults (canonical form)
            arch[expand_label(b, j)] = ratios[j] if j < depth else 3
            arch[kernel_label(b, j)] = kernel if j < depth else 3
    return arch


#: MobileNetV3-Large in once-for-all's space (see the module's docstring for block 2)
MOBILENETV3_LARGE: dict[str, int] = _large()

register_space(
    "mobilenetv3",
    mobilenetv3_space,
    paper="Cai et al. 2020, Once-for-All (ICLR)",
    size_paper=((3 * 3) ** 2 + (3 * 3) ** 3 + (3 * 3) ** 4) ** 5,
    family="mobilenetv3",
    note="((3·3)^2 + (3·3)^3 + (3·3)^4)^5 (§3.3): 5 blocks of depth 2-4, each layer 3 ratios "
    "× 3 kernels; the space is nasforge.ofa's OFAMobileNetV3",
)


def compofa_space(
    n_classes: int = 1000, width_mult: float = 1.0, image_size: int = 224
) -> OFAMobileNetV3:
    """Returns CompOFA's coupled MobileNetV3 space (243 networks)."""
    return mobilenetv3_space(n_classes, width_mult, "compofa", image_size)


register_space(
    "compofa",
    compofa_space,
    paper="Sahni et al. 2021, CompOFA (ICLR)",
    size_paper=3**5,
    family="mobilenetv3",
    note="3^5 = 243 (§4.1): one coupled (depth, ratio) per block, fixed kernels",
)
register_arch(
    "mobilenetv3-large",
    space="mobilenetv3",
    arch=MOBILENETV3_LARGE,
    resolution=224,
    num_classes=1000,
    params_paper=5.4e6,
    madds_paper=219e6,
    source="Howard et al. 2019, Searching for MobileNetV3 (ICCV), Table 3: Large 1.0",
    note="block 2's expansions 2.5 and 2.3 (200 and 184 hidden channels) are not in the space; "
    "the nearest ratio, 3, adds 25K parameters and a few million multiply-adds. The paper's "
    "5.4M is rounded: the exact network (torchvision's mobilenet_v3_large) has 5.48M",
    exception="mobilenetv3-block2",
)
