"""Cost models of OFA sub-networks without torch: layer shapes, analytical FLOPs (multiply-adds),
a per-layer latency lookup table, and memoization of measured latency by configuration.

This module is pure (no torch). Measuring a layer or a network on the current machine is done
by :mod:`nasforge.ofa.measure`, which hands plain functions (``shape -> ms``, ``arch -> ms``) to
the objects here.

Every network is a sequence of :class:`LayerShape`: the stem convolution, the fixed first
inverted residual, the active inverted residuals of the elastic blocks, and the head (final
1x1 expansion, global pooling, feature 1x1 convolution, classifier). A layer's input side does
not depend on the depths chosen before it (only the first layer of a block strides), so the
table of distinct shapes is small: for OFA's default plan about a hundred per resolution.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from nasforge.errors import ConfigError
from nasforge.ofa.spaces import OFASearchSpace, OFASpec
from nasforge.space.search_space import arch_id

__all__ = [
    "LayerShape",
    "layer_shapes",
    "distinct_shapes",
    "count_macs",
    "LatencyTable",
    "MemoizedCost",
]


@dataclass(frozen=True)
class LayerShape:
    """One layer of a sub-network: kind (``stem``, ``mb``, ``head``), channels, kernel, stride,
    input side and activation; hashable, so it keys the latency table.

    For ``mb`` (inverted residual) ``mid`` is the hidden width (equal to ``cin`` when there is no
    expansion convolution), ``se`` the hidden width of its squeeze-and-excitation (0: none) and
    ``idskip`` whether it adds its input (an identity shortcut: stride 1 and ``cin == cout``);
    for ``head`` ``mid`` is the final expansion and ``kernel`` the feature width.
    """

    kind: str
    cin: int
    mid: int
    cout: int
    kernel: int
    stride: int
    side: int
    hswish: bool
    se: int = 0
    idskip: bool = False

    @property
    def side_out(self) -> int:
        """Returns the output side (padding keeps ``side / stride``, rounded up)."""
        return (self.side - 1) // self.stride + 1

    @property
    def has_expand(self) -> bool:
        """Returns whether an ``mb`` layer has its 1x1 expansion convolution."""
        return self.kind == "mb" and self.mid != self.cin

    def macs(self) -> int:
        """Returns the multiply-adds of this layer on one image (what OFA calls FLOPs)."""
        s_in, s_out = self.side * self.side, self.side_out * self.side_out
        if self.kind == "stem":
            return s_out * self.cin * self.cout * self.kernel * self.kernel
        if self.kind == "mb":
            expand = s_in * self.cin * self.mid if self.has_expand else 0
            se = 2 * self.mid * self.se
            return expand + se + s_out * self.mid * (self.kernel * self.kernel + self.cout)
        if self.kind == "head":
            return s_in * self.cin * self.mid + self.mid * self.kernel + self.kernel * self.cout
        raise AssertionError(self.kind)

    def key(self) -> str:
        """Returns a stable string key of this shape (for JSON tables)."""
        return ",".join(str(v) for v in asdict(self).values())

    @classmethod
    def from_key(cls, key: str) -> LayerShape:
        """Returns the shape that :meth:`key` produced (also a key written before shapes had
        ``se`` and ``idskip``: no SE, identity skip where stride 1 keeps the width)."""
        kind, *nums = key.split(",")
        if len(nums) == 7:  # the older 8-field key
            *ints, hs = nums
            se, idskip = 0, None
        else:
            *ints, hs, se_s, skip = nums
            se, idskip = int(se_s), skip == "True"
        cin, mid, cout, kernel, stride, side = (int(v) for v in ints)
        if idskip is None:
            idskip = kind == "mb" and stride == 1 and cin == cout
        return cls(kind, cin, mid, cout, kernel, stride, side, hs == "True", se, idskip)


def _fixed_prefix(spec: OFASpec, side: int) -> tuple[list[LayerShape], int]:
    stem = LayerShape("stem", spec.in_channels, 0, spec.ch(spec.stem_channels), 3,
                      spec.stem_stride, side, True)  # fmt: skip
    cout = spec.ch(spec.first_channels)
    first = LayerShape("mb", stem.cout, stem.cout, cout, 3, 1, stem.side_out, False,
                       idskip=stem.cout == cout)  # fmt: skip
    return [stem, first], first.side_out


def _block_sides(spec: OFASpec, side: int) -> list[int]:
    """Returns the input side of each block's first layer."""
    sides = []
    for s in spec.strides:
        sides.append(side)
        side = (side - 1) // s + 1
    return sides + [side]


def layer_shapes(space: OFASearchSpace, arch: Mapping[str, Any]) -> list[LayerShape]:
    """Returns the shapes of every layer of ``arch``'s network, in forward order.

    Raises:
        ArchitectureError: ``arch`` does not fit ``space``.
    """
    spec = space.spec
    prefix, side = _fixed_prefix(spec, space.resolution(arch))
    sides = _block_sides(spec, side)
    shapes = list(prefix)
    for b, j, e, k in space.layers(arch):
        cin = spec.block_in_channels(b)[j]
        stride = spec.strides[b] if j == 0 else 1
        s = sides[b] if j == 0 else sides[b + 1]
        shapes.append(_mb(spec, b, cin, e, k, stride, s))
    shapes.append(_head(spec, sides[-1]))
    return shapes


def _mb(spec: OFASpec, b: int, cin: int, e: int, k: int, stride: int, side: int) -> LayerShape:
    cout = spec.ch(spec.stage_channels[b])
    mid = spec.mid_channels(cin, e)
    se = spec.se_channels(mid) if spec.has_se(b) else 0
    idskip = stride == 1 and cin == cout
    return LayerShape("mb", cin, mid, cout, k, stride, side, spec.hswish[b], se, idskip)


def _head(spec: OFASpec, side: int) -> LayerShape:
    return LayerShape("head", spec.ch(spec.stage_channels[-1]), spec.ch(spec.final_expand),
                      spec.n_classes, spec.ch(spec.feature_dim), 1, side, True)  # fmt: skip


def distinct_shapes(space: OFASearchSpace) -> list[LayerShape]:
    """Returns every distinct layer shape any architecture of ``space`` can contain, once each,
    in a stable order: what a latency lookup table must measure."""
    spec = space.spec
    found: dict[LayerShape, None] = {}
    resolutions = spec.resolutions or (spec.image_size,)
    expands = spec.expands
    for r in resolutions:
        prefix, side = _fixed_prefix(spec, r)
        found.update(dict.fromkeys(prefix))
        sides = _block_sides(spec, side)
        for b in range(spec.n_blocks):
            cins = spec.block_in_channels(b)
            for j in (0, 1):  # layers 1.. of a block share one shape
                for e in expands:
                    for k in spec.layer_kernels(b):
                        stride = spec.strides[b] if j == 0 else 1
                        side_in = sides[b] if j == 0 else sides[b + 1]
                        found[_mb(spec, b, cins[j], e, k, stride, side_in)] = None
        found[_head(spec, sides[-1])] = None
    return list(found)


def count_macs(space: OFASearchSpace, arch: Mapping[str, Any]) -> int:
    """Returns the multiply-adds of ``arch``'s network on one image, counted analytically."""
    return sum(s.macs() for s in layer_shapes(space, arch))


class LatencyTable:
    """Returns predicted latency (ms) of sub-networks as the sum of per-layer measurements.

    Invariants: each distinct shape is measured at most once; ``predict`` of an architecture is
    the sum of its layers' entries; ``to_dict``/``from_dict`` round-trip.
    """

    def __init__(self, space: OFASearchSpace, entries: Mapping[LayerShape, float] | None = None):
        self.space = space
        self.entries: dict[LayerShape, float] = dict(entries or {})

    def build(
        self, measure: Callable[[LayerShape], float], shapes: Iterable[LayerShape] = ()
    ) -> int:
        """Measures every shape not yet in the table; returns how many were measured."""
        n = 0
        for shape in list(shapes) or distinct_shapes(self.space):
            if shape not in self.entries:
                self.entries[shape] = float(measure(shape))
                n += 1
        return n

    def predict(self, arch: Mapping[str, Any]) -> float:
        """Returns the predicted latency of ``arch`` in milliseconds.

        Raises:
            ConfigError: a layer shape of ``arch`` is missing from the table (build it first).
        """
        total = 0.0
        for shape in layer_shapes(self.space, arch):
            try:
                total += self.entries[shape]
            except KeyError:
                raise ConfigError(
                    f"layer shape {shape} is not in the latency table ({len(self.entries)} "
                    "entries); call LatencyTable.build(measure) for this space first"
                ) from None
        return total

    __call__ = predict

    def to_dict(self) -> dict[str, float]:
        """Returns the table as JSON-able data (shape key -> ms)."""
        return {s.key(): ms for s, ms in self.entries.items()}

    @classmethod
    def from_dict(cls, space: OFASearchSpace, data: Mapping[str, float]) -> LatencyTable:
        """Returns the table that :meth:`to_dict` produced."""
        return cls(space, {LayerShape.from_key(k): float(v) for k, v in data.items()})


class MemoizedCost:
    """Returns ``fn(arch)`` for a canonical architecture, computing each configuration once
    (CompOFA §5.7: memoize measured latency by configuration).

    Invariants: ``n_measured`` is the number of distinct canonical configurations computed;
    equal networks (same canonical architecture) share one entry.
    """

    def __init__(self, space: OFASearchSpace, fn: Callable[[Mapping[str, Any]], float]) -> None:
        self.space, self.fn = space, fn
        self.cache: dict[str, float] = {}
        self.n_calls = 0

    def __call__(self, arch: Mapping[str, Any]) -> float:
        self.n_calls += 1
        canon = self.space.validate(arch)
        key = arch_id(canon)
        if key not in self.cache:
            self.cache[key] = float(self.fn(canon))
        return self.cache[key]

    @property
    def n_measured(self) -> int:
        """Returns how many distinct configurations were computed."""
        return len(self.cache)
