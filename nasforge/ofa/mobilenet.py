"""The elastic MobileNetV3 of OFA / CompOFA as a model space, and extraction with weights.

``OFAMobileNetV3(spec)`` is a :class:`nasforge.ModelSpace`: its ``__init__`` declares, with the
space language, a depth per block (``nf.Repeat`` over a value choice), and per layer an
expansion ratio and a kernel (``nf.choice``), or for CompOFA a width *derived* from the block's
depth (the compound coupling, an expression over the depth choice). The same object is

    a supernet    ``set_active(arch)`` then ``forward``: elastic layers use slices of the
                  largest weights (see :mod:`nasforge.ofa.layers`)
    a space       ``search_space()`` gives the :class:`~nasforge.ofa.spaces.OFASearchSpace`
                  (exact counts); ``nf.freeze(space, arch)`` builds a fresh plain model
    a source      ``extract(supernet, arch)`` freezes the architecture and copies the supernet's
                  active weights into it: its outputs equal the supernet's for that arch
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

import nasforge as nf
from nasforge.errors import ArchitectureError, SpaceError
from nasforge.ofa.latency import LayerShape
from nasforge.ofa.layers import (
    DynamicBatchNorm2d,
    DynamicConv2d,
    DynamicDepthwiseConv,
    DynamicMBConv,
    DynamicSE,
)
from nasforge.ofa.spaces import (
    OFASearchSpace,
    OFASpec,
    coupled_expand,
    depth_label,
    expand_label,
    kernel_label,
)
from nasforge.space.expr import ChoiceInt, Op, is_choice

__all__ = ["OFAMobileNetV3", "extract", "build_layer", "sort_channels"]


class _Coupled:
    """Maps a depth to its coupled width (picklable, so expressions holding it pickle)."""

    def __init__(self, depths: tuple[int, ...], expands: tuple[int, ...]) -> None:
        self.table = dict(zip(depths, expands))

    def __call__(self, depth: int) -> int:
        return self.table[int(depth)]


def _coupled_width(spec: OFASpec, depth: Any) -> Any:
    """Returns the width compound coupling gives ``depth``: an expression over the depth choice
    while recording, a plain int when frozen."""
    if not is_choice(depth):
        return coupled_expand(spec, int(depth))
    fn = _Coupled(spec.depths, spec.expands)
    return ChoiceInt(fn(int(depth)), Op("coupled", fn, (depth.expr,)))


def _stem(spec: OFASpec) -> nn.Sequential:
    c = spec.ch(spec.stem_channels)
    return nn.Sequential(
        nn.Conv2d(spec.in_channels, c, 3, spec.stem_stride, 1, bias=False),
        nn.BatchNorm2d(c),
        nn.Hardswish(),
    )


class _Head(nn.Module):
    """Final 1x1 expansion, global average pooling, feature 1x1 conv, classifier."""

    def __init__(self, cin: int, expand: int, feature: int, n_classes: int) -> None:
        super().__init__()
        self.expand = nn.Sequential(
            nn.Conv2d(cin, expand, 1, bias=False), nn.BatchNorm2d(expand), nn.Hardswish()
        )
        self.feature = nn.Sequential(nn.Conv2d(expand, feature, 1, bias=False), nn.Hardswish())
        self.classifier = nn.Linear(feature, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.expand(x).mean(dim=(2, 3), keepdim=True)
        return self.classifier(torch.flatten(self.feature(x), 1))


class OFAMobileNetV3(nf.ModelSpace):
    """Returns the elastic MobileNetV3 space/supernet of ``spec`` (5 elastic blocks by default).

    Invariants: the decisions recorded are exactly those of ``OFASearchSpace(spec)``; the full
    configuration is active after construction; ``forward`` of a frozen model and of the
    supernet with the same active architecture give the same outputs once weights are copied
    (:func:`extract`).

    Raises:
        ConfigError: ``spec`` is inconsistent (see :class:`OFASpec`).
    """

    def __init__(self, spec: OFASpec | None = None) -> None:
        super().__init__()
        spec = spec or OFASpec()
        self.spec = spec
        self.stem = _stem(spec)
        c_stem = spec.ch(spec.stem_channels)
        self.first = DynamicMBConv(
            c_stem, spec.ch(spec.first_channels), 1, 3, 1, False, spec.divisor
        )
        stages = []
        for b in range(spec.n_blocks):
            depth = nf.choice(spec.depths, label=depth_label(b))
            cins = spec.block_in_channels(b)
            coupled = _coupled_width(spec, depth) if spec.coupling != "ofa" else None
            stages.append(nf.Repeat(self._layer_factory(spec, b, cins, coupled), depth))
        self.stages = nn.ModuleList(stages)
        self.head = _Head(
            spec.ch(spec.stage_channels[-1]),
            spec.ch(spec.final_expand),
            spec.ch(spec.feature_dim),
            spec.n_classes,
        )
        self.resolution = (  # declared last: the decision order is the OFASearchSpace's
            nf.choice(spec.resolutions, label="resolution")
            if len(spec.resolutions) > 1
            else (spec.resolutions[0] if spec.resolutions else None)
        )

    @staticmethod
    def _layer_factory(spec: OFASpec, b: int, cins: list[int], coupled: Any) -> Any:
        def make(j: int) -> DynamicMBConv:
            expand = (
                nf.choice(spec.expands, label=expand_label(b, j))
                if spec.coupling == "ofa"
                else coupled
            )
            kernel = (
                spec.fixed_kernels[b]
                if spec.coupling == "compofa"
                else nf.choice(spec.kernels, label=kernel_label(b, j))
            )
            stride = spec.strides[b] if j == 0 else 1
            return DynamicMBConv(
                cins[j], spec.ch(spec.stage_channels[b]), expand, kernel, stride,
                spec.hswish[b], spec.divisor, se=spec.has_se(b),
            )  # fmt: skip

        return make

    # -- space ------------------------------------------------------------------------------
    def search_space(self) -> OFASearchSpace:
        """Returns the OFA/CompOFA search space of this network (exact conditional counts)."""
        recorded = super().search_space()
        space = self.__dict__.get("_nf_ofa_space")
        if space is None:
            space = OFASearchSpace(self.spec)
            assert list(space) == list(recorded), (list(space), list(recorded))
            object.__setattr__(self, "_nf_ofa_space", space)
        return space

    # -- supernet ---------------------------------------------------------------------------
    def set_active(self, arch: Mapping[str, Any]) -> dict[str, Any]:
        """Makes ``arch`` the active sub-network; returns it in canonical form.

        Raises:
            ArchitectureError: ``arch`` does not fit the space.
        """
        arch = self.search_space().validate(arch)
        stages = self._elastic_stages()
        self._active_depths = [stage.depth_of(arch) for stage, _ in stages]
        self._active_resolution = arch.get("resolution")
        for _, layers in stages:
            for layer in layers:
                layer.activate(arch)
        self._active_arch = arch
        return arch

    def _elastic_stages(self) -> list[tuple[nf.Repeat, list[DynamicMBConv]]]:
        """Returns each elastic block with its layers at the largest depth.

        Invariants: only the supernet has elastic blocks (a frozen model's are nn.Sequential);
        a block's layers are the DynamicMBConvs of ``_layer_factory``.
        """
        out = []
        for stage in self.stages:
            assert isinstance(stage, nf.Repeat), f"a {type(stage).__name__} block is not elastic"
            out.append((stage, [cast(DynamicMBConv, layer) for layer in stage.blocks()]))
        return out

    @property
    def active_arch(self) -> dict[str, Any]:
        """Returns the active architecture (the full network until ``set_active``).

        Raises:
            AttributeError: this is a frozen sub-network, which has none (so that ``hasattr``,
                as ``torch.jit.trace`` calls it, says no).
        """
        if "_active_arch" not in self.__dict__:
            try:
                space = self.search_space()
            except SpaceError as exc:
                raise AttributeError(
                    f"a frozen {type(self).__name__} has no active architecture"
                ) from exc
            self.set_active(space.largest())
        return dict(self._active_arch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Returns the logits of the active sub-network (or of this frozen model)."""
        elastic = isinstance(self.stages[0], nf.Repeat)
        if elastic and "_active_arch" not in self.__dict__:
            self.set_active(self.search_space().largest())
        side = self._active_resolution if elastic else self.resolution
        if side is not None and x.shape[-1] != side:
            x = F.interpolate(x, size=(side, side), mode="bilinear", align_corners=False)
        x = self.first(self.stem(x))
        for b, stage in enumerate(self.stages):
            if elastic:
                assert isinstance(stage, nf.Repeat)
                layers = stage.blocks()[: self._active_depths[b]]
            else:
                assert isinstance(stage, nn.Sequential)  # a frozen Repeat
                layers = list(stage)
            for layer in layers:
                x = layer(x)
        return self.head(x)


def _copy_module(dst: nn.Module, src: nn.Module) -> None:
    copy_active_from = getattr(dst, "copy_active_from", None)  # an elastic layer's own copy
    if copy_active_from is not None:
        copy_active_from(src)
        return
    # direct dict access: extraction is on a hot path; dst is src's frozen counterpart, so src
    # holds a tensor under each name that dst does
    for name, p in dst._parameters.items():
        if p is not None:
            p_src = src._parameters[name]
            assert p_src is not None, name
            p.data.copy_(p_src.data)
    for name, b in dst._buffers.items():
        if b is not None:
            b_src = src._buffers[name]
            assert b_src is not None, name
            b.copy_(b_src)


def extract(supernet: OFAMobileNetV3, arch: Mapping[str, Any]) -> nn.Module:
    """Returns the frozen sub-network of ``arch`` (a fresh plain model of exactly the chosen
    shapes) holding copies of the supernet's weights for that configuration.

    Invariants: in eval mode its outputs equal the supernet's with ``arch`` active (up to float
    rounding); the supernet is unchanged except that ``arch`` becomes active.

    Raises:
        ArchitectureError: ``arch`` does not fit the space.
    """
    arch = supernet.set_active(arch)
    model = nf.freeze(supernet, arch)
    sources = dict(supernet.named_modules())
    with torch.no_grad():
        for name, module in model.named_modules():
            src = sources.get(name)
            if src is None:
                raise ArchitectureError(
                    f"extracted module {name!r} has no counterpart in the supernet"
                )
            _copy_module(module, src)
    model.train(supernet.training)
    return model


def sort_channels(supernet: OFAMobileNetV3) -> None:
    """Sorts the hidden channels of every elastic layer by importance (before width shrinks)."""
    for _, layers in supernet._elastic_stages():
        for layer in layers:
            layer.sort_channels()


def build_layer(shape: LayerShape) -> nn.Module:
    """Returns a fixed module with the shape of one latency-table entry (fresh weights)."""
    if shape.kind == "stem":
        return nn.Sequential(
            nn.Conv2d(shape.cin, shape.cout, shape.kernel, shape.stride, shape.kernel // 2,
                      bias=False), nn.BatchNorm2d(shape.cout), nn.Hardswish(),
        )  # fmt: skip
    if shape.kind == "mb":
        ratio_mid = shape.mid
        layer = DynamicMBConv(shape.cin, shape.cout, 1, shape.kernel, shape.stride, shape.hswish)
        if shape.se:
            layer.se = DynamicSE(ratio_mid, hidden=shape.se)
        if shape.has_expand:  # build with the exact hidden width
            layer.has_expand = True
            layer._mid = {1: ratio_mid}
            layer.expand_conv = DynamicConv2d(shape.cin, ratio_mid, 1)
            layer.expand_bn = DynamicBatchNorm2d(ratio_mid)
            layer.dw_conv = DynamicDepthwiseConv(ratio_mid, [shape.kernel], shape.stride)
            layer.dw_bn = DynamicBatchNorm2d(ratio_mid)
            layer.project = DynamicConv2d(ratio_mid, shape.cout, 1)
        return layer
    if shape.kind == "head":
        return _Head(shape.cin, shape.mid, shape.kernel, shape.cout)
    raise ArchitectureError(f"unknown layer kind {shape.kind!r}; expected stem, mb or head")
