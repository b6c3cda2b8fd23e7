"""OFA and CompOFA design spaces as pure data: the network plan, the exact counts, conditional
sampling and canonical forms, the compound coupling (CompOFA §4.1) and training phases.

This module is pure (no torch): strategies, latency tables and tests use it alone.

Vocabulary (one table for the single letters used below)
    D   candidate depths of a block (layers kept: the first d of its largest depth)
    W   candidate expansion ratios of an inverted-residual layer ("width")
    K   candidate depthwise kernel sizes
    coupling
        ``ofa``         d per block, w and k per layer, independent: per block sum_d (|W||K|)^d
        ``compofa``     the i-th depth goes with the i-th width for every layer of the block,
                        the kernel is fixed per block: |D| architectures per block
        ``compofa_ek``  compound depth/width, elastic kernel per layer: per block sum_d |K|^d

Labels: ``blocks.{i}.depth``; ``blocks.{i}.{j}.expand`` and ``blocks.{i}.{j}.kernel`` for the
per-layer decisions (only those the coupling leaves free); ``resolution`` when more than one input
resolution is given. A per-layer label of a layer beyond the block's chosen depth still exists in
the flat label set but does not change the network: the *canonical* architecture sets it to its
default, and the space counts, samples and enumerates canonical architectures only, so that
``OFASearchSpace.size`` is the number of distinct networks (the paper's counts).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from nasforge.errors import ArchitectureError, ConfigError
from nasforge.space.search_space import Arch, Decision, SearchSpace

__all__ = [
    "Coupling",
    "OFASpec",
    "OFASearchSpace",
    "Phase",
    "Stage",
    "make_divisible",
    "block_size",
    "coupled_expand",
    "progressive_phases",
    "compofa_phases",
    "compound_to_ofa",
    "depth_label",
    "small_spec",
    "encode",
    "expand_label",
    "kernel_label",
]

Coupling = Literal["ofa", "compofa", "compofa_ek"]
_COUPLINGS = ("ofa", "compofa", "compofa_ek")


def make_divisible(value: float, divisor: int) -> int:
    """Returns ``value`` rounded to the nearest multiple of ``divisor`` (at least ``divisor``,
    never below 90% of ``value``), as MobileNet does."""
    out = max(divisor, int(value + divisor / 2) // divisor * divisor)
    if out < 0.9 * value:
        out += divisor
    return out


def depth_label(block: int) -> str:
    """Returns the label of block ``block``'s depth decision."""
    return f"blocks.{block}.depth"


def expand_label(block: int, layer: int) -> str:
    """Returns the label of a layer's expansion-ratio decision."""
    return f"blocks.{block}.{layer}.expand"


def kernel_label(block: int, layer: int) -> str:
    """Returns the label of a layer's kernel-size decision."""
    return f"blocks.{block}.{layer}.kernel"


@dataclass(frozen=True)
class OFASpec:
    """Returns nothing; describes one elastic MobileNetV3-style network and its design space.

    Channel counts are the base plan times ``width_mult``, rounded by :func:`make_divisible`.
    The defaults are OFA's MobileNetV3 (ImageNet); a small version changes ``width_mult``,
    the channel plan and ``n_classes``.
    """

    coupling: Coupling = "ofa"
    depths: tuple[int, ...] = (2, 3, 4)  # D, ascending
    expands: tuple[int, ...] = (3, 4, 6)  # W, ascending; i-th goes with i-th depth (compofa)
    kernels: tuple[int, ...] = (3, 5, 7)  # K, ascending, odd
    fixed_kernels: tuple[int, ...] = (3, 5, 3, 3, 5)  # per block, compofa only (MobileNetV3)
    resolutions: tuple[int, ...] = ()  # empty or one value: no resolution decision
    in_channels: int = 3
    n_classes: int = 1000
    width_mult: float = 1.0
    divisor: int = 8
    stem_channels: int = 16
    stem_stride: int = 2
    first_channels: int = 16  # the fixed first inverted residual (expand 1, kernel 3)
    stage_channels: tuple[int, ...] = (24, 40, 80, 112, 160)  # one per elastic block
    strides: tuple[int, ...] = (2, 2, 2, 1, 2)
    hswish: tuple[bool, ...] = (False, False, True, True, True)
    se: tuple[bool, ...] = ()  # squeeze-and-excitation per block; empty: none (OFA: F,T,F,T,T)
    final_expand: int = 960
    feature_dim: int = 1280
    image_size: int = 224  # the input side used for FLOPs/latency when no resolution decision

    def __post_init__(self) -> None:
        if self.coupling not in _COUPLINGS:
            raise ConfigError(f"coupling {self.coupling!r} is not one of {_COUPLINGS}")
        n = len(self.stage_channels)
        for name in ("strides", "hswish", "se"):
            if name == "se" and not self.se:
                continue
            if len(getattr(self, name)) != n:
                raise ConfigError(
                    f"OFASpec.{name} has {len(getattr(self, name))} entries, expected one per "
                    f"block ({n}, the length of stage_channels)"
                )
        if self.coupling == "compofa" and len(self.fixed_kernels) != n:
            raise ConfigError(
                f"fixed_kernels has {len(self.fixed_kernels)} entries, expected {n} (one per block)"
            )
        if self.coupling != "ofa" and len(self.depths) != len(self.expands):
            raise ConfigError(
                f"compound coupling pairs the i-th depth with the i-th width: got depths "
                f"{self.depths} and expands {self.expands}; give as many widths as depths"
            )
        for name in ("depths", "expands", "kernels"):
            values = getattr(self, name)
            if not values or list(values) != sorted(set(values)) or min(values) < 1:
                raise ConfigError(
                    f"OFASpec.{name} must be distinct positive ints, ascending; got {values}"
                )
        if any(k % 2 == 0 for k in (*self.kernels, *self.fixed_kernels)):
            raise ConfigError(f"kernel sizes must be odd, got {self.kernels} {self.fixed_kernels}")

    # -- channel plan -----------------------------------------------------------------------
    def ch(self, base: int) -> int:
        """Returns a base channel count scaled by ``width_mult``."""
        return make_divisible(base * self.width_mult, self.divisor)

    @property
    def n_blocks(self) -> int:
        """Returns the number of elastic blocks."""
        return len(self.stage_channels)

    @property
    def max_depth(self) -> int:
        """Returns the largest depth: the number of layers each block holds."""
        return max(self.depths)

    def mid_channels(self, in_channels: int, expand: int) -> int:
        """Returns the hidden width of an inverted residual with ``expand`` on ``in_channels``."""
        return make_divisible(in_channels * expand, self.divisor)

    def block_in_channels(self, block: int) -> list[int]:
        """Returns the input channels of each layer (largest depth) of block ``block``."""
        prev = (
            self.ch(self.first_channels) if block == 0 else self.ch(self.stage_channels[block - 1])
        )
        out = self.ch(self.stage_channels[block])
        return [prev] + [out] * (self.max_depth - 1)

    def has_se(self, block: int) -> bool:
        """Returns whether the layers of block ``block`` have squeeze-and-excitation."""
        return bool(self.se) and bool(self.se[block])

    def se_channels(self, mid: int) -> int:
        """Returns the hidden width of the squeeze-and-excitation of a layer with ``mid`` hidden
        channels (a quarter, rounded as MobileNetV3 does)."""
        return make_divisible(mid // 4, self.divisor)

    def layer_kernels(self, block: int) -> tuple[int, ...]:
        """Returns the kernel candidates of each layer of block ``block``."""
        return (self.fixed_kernels[block],) if self.coupling == "compofa" else self.kernels

    def to_dict(self) -> dict[str, Any]:
        """Returns the spec as JSON-able data."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OFASpec:
        """Returns the spec that :meth:`to_dict` produced."""
        kw: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        return cls(**kw)

    def with_coupling(self, coupling: Coupling) -> OFASpec:
        """Returns the same network plan under another coupling."""
        return replace(self, coupling=coupling)


def coupled_expand(spec: OFASpec, depth: int) -> int:
    """Returns the width that compound coupling gives depth ``depth`` (i-th depth, i-th width)."""
    return spec.expands[spec.depths.index(depth)]


def block_size(spec: OFASpec) -> int:
    """Returns the exact number of distinct configurations of one block."""
    return sum(_per_layer(spec) ** d for d in spec.depths)


def _per_layer(spec: OFASpec) -> int:
    """Returns the number of configurations of one active layer under the coupling."""
    if spec.coupling == "compofa":
        return 1
    return len(spec.kernels) * (len(spec.expands) if spec.coupling == "ofa" else 1)


@dataclass(frozen=True)
class Phase:
    """One training phase: its name and the candidate values it unlocks (a subset of the space).

    Invariants: each set is a non-empty subset of the spec's candidates and contains the largest.
    """

    name: str
    depths: tuple[int, ...]
    expands: tuple[int, ...]
    kernels: tuple[int, ...]
    sort_channels: bool = False  # sort channels by importance before this phase (width phases)


@dataclass(frozen=True)
class Stage:
    """Returns nothing; one stage of a training plan: a phase (None for the full network) and
    its epochs."""

    name: str
    phase: Phase | None
    epochs: int
    lr: float | None = None  # None: the training config's lr


def progressive_phases(spec: OFASpec) -> list[Phase]:
    """Returns OFA's progressive shrinking after the full network: elastic kernel, then depth
    (the two largest, then all), then width (the two largest, then all, channels sorted first)."""
    d, w, k = spec.depths, spec.expands, spec.kernels
    top = lambda v, n: tuple(v[-n:])  # noqa: E731 - the n largest candidates
    phases = [Phase("kernel", top(d, 1), top(w, 1), k)]
    for n in range(2, len(d) + 1):
        phases.append(Phase(f"depth-{n - 1}", top(d, n), top(w, 1), k))
    for n in range(2, len(w) + 1):
        phases.append(Phase(f"width-{n - 1}", d, top(w, n), k, sort_channels=True))
    return phases


def compofa_phases(spec: OFASpec) -> list[Phase]:
    """Returns CompOFA's schedule after the full network: one phase with every configuration
    unlocked (preceded by an elastic-kernel phase for ``compofa_ek``, as the paper's appendix)."""
    d, w, k = spec.depths, spec.expands, spec.kernels
    phases = []
    if spec.coupling == "compofa_ek":
        phases.append(Phase("kernel", d[-1:], w[-1:], k))
    phases.append(Phase("compound", d, w, k, sort_channels=True))
    return phases


class OFASearchSpace(SearchSpace):
    """Returns decisions by label, like :class:`SearchSpace`; counts, samples and enumerates only
    canonical architectures, where per-layer decisions beyond a block's depth take their default.

    Invariants: ``size`` is the exact number of distinct networks: ``block_size(spec) ** n_blocks``
    times the number of resolutions; every sample and every grid element is canonical and valid;
    ``validate`` maps architectures that build the same network to the same canonical form; the
    same seed gives the same samples.
    """

    def __init__(self, spec: OFASpec) -> None:
        self.spec = spec
        decisions: list[Decision] = []
        for b in range(spec.n_blocks):
            decisions.append(Decision(depth_label(b), "depth", spec.depths))
            for j in range(spec.max_depth):
                if spec.coupling == "ofa":
                    decisions.append(Decision(expand_label(b, j), "value", spec.expands))
                if spec.coupling != "compofa":
                    decisions.append(Decision(kernel_label(b, j), "value", spec.kernels))
        if len(spec.resolutions) > 1:
            decisions.append(Decision("resolution", "value", spec.resolutions))
        super().__init__(decisions)
        # every candidate is a plain int: validation of an all-int arch is set membership
        self._int_values = {d.label: frozenset(d.values) for d in decisions}

    @property
    def size(self) -> int:
        """Returns the exact number of distinct networks (canonical architectures)."""
        return block_size(self.spec) ** self.spec.n_blocks * max(1, len(self.spec.resolutions))

    @property
    def flat_size(self) -> int:
        """Returns the product of all label cardinalities (counting inactive layers' labels)."""
        return int(super().size)  # an OFA space has no float range: its size is finite

    # -- canonical form ---------------------------------------------------------------------
    def validate(self, arch: Mapping[str, Any]) -> Arch:
        """Returns ``arch`` in canonical form; labels of layers beyond a block's depth may be
        omitted and are set to their defaults.

        Raises:
            ArchitectureError: see :meth:`SearchSpace.validate`.
        """
        if not isinstance(arch, Mapping):
            raise ArchitectureError(
                f"an architecture is a dict label -> value, got {type(arch).__name__}"
            )
        full = dict(arch)
        for b in range(self.spec.n_blocks):
            d = full.get(depth_label(b))
            for label in self._layer_labels(b):
                if label not in full and d is not None and _layer_of(label) >= d:
                    full[label] = self[label].default
        fast = self._validate_ints(full)
        return self.canonical(fast if fast is not None else super().validate(full))

    def _validate_ints(self, full: dict[str, Any]) -> Arch | None:
        """Returns ``full`` in space order when its labels are exactly the space's and every
        value is a plain int among the candidates (what the general check would return), else
        None (the general check then gives the error)."""
        if len(full) != len(self._int_values):
            return None
        out: Arch = {}
        for label, values in self._int_values.items():
            v = full.get(label)
            if type(v) is not int or v not in values:
                return None
            out[label] = v
        return out

    def canonical(self, arch: Mapping[str, Any]) -> Arch:
        """Returns a valid ``arch`` with inactive layers' decisions set to their defaults."""
        out = dict(arch)
        for b in range(self.spec.n_blocks):
            d = out[depth_label(b)]
            for label in self._layer_labels(b):
                if _layer_of(label) >= d:
                    out[label] = self[label].default
        return out

    def _layer_labels(self, block: int) -> list[str]:
        cache = self.__dict__.setdefault("_layer_labels_cache", {})
        if block not in cache:
            prefix = f"blocks.{block}."
            cache[block] = [lb for lb in self if lb.startswith(prefix) and ".depth" not in lb]
        return cache[block]

    # -- sampling and enumeration -----------------------------------------------------------
    def sample(self, rng: Any = None) -> Arch:
        """Returns one canonical architecture drawn uniformly among the ``size`` networks
        (a depth is drawn with probability proportional to its number of layer configurations).
        """
        rng = _rng(rng)
        spec = self.spec
        per_layer = _per_layer(spec)
        weights = [per_layer**d for d in spec.depths]
        arch: Arch = {}
        for b in range(spec.n_blocks):
            arch[depth_label(b)] = _weighted(rng, spec.depths, weights)
            for label in self._layer_labels(b):
                arch[label] = self[label].values[_pick(rng, len(self[label]))]
        if "resolution" in self:
            arch["resolution"] = spec.resolutions[_pick(rng, len(spec.resolutions))]
        return self.canonical(arch)

    def sample_phase(self, phase: Phase, rng: Any = None) -> Arch:
        """Returns a canonical architecture drawn as OFA trains: each dimension uniformly among
        the values ``phase`` unlocks, independently per block and layer (coupling applied)."""
        rng = _rng(rng)
        arch: Arch = {}
        for b in range(self.spec.n_blocks):
            arch[depth_label(b)] = phase.depths[_pick(rng, len(phase.depths))]
            for label in self._layer_labels(b):
                pool = phase.expands if label.endswith(".expand") else phase.kernels
                arch[label] = pool[_pick(rng, len(pool))]
        if "resolution" in self:
            arch["resolution"] = self.spec.resolutions[_pick(rng, len(self.spec.resolutions))]
        return self.canonical(arch)

    def sample_dims(self, rng: Any = None) -> Arch:
        """Returns a canonical architecture with every dimension drawn uniformly and
        independently (OFA's sampler: depths are equally likely, unlike :meth:`sample`)."""
        s = self.spec
        return self.sample_phase(Phase("all", s.depths, s.expands, s.kernels), rng)

    def largest(self) -> Arch:
        """Returns the architecture of the full network (every decision at its largest)."""
        return self.canonical({lb: d.values[-1] for lb, d in self.items()})

    def smallest(self) -> Arch:
        """Returns the architecture of the smallest network."""
        return self.canonical({lb: d.values[0] for lb, d in self.items()})

    def grid(self, points: int | None = None) -> Iterator[Arch]:
        """Yields every canonical architecture once (only sensible for small spaces); an OFA
        space has no range, so ``points`` changes nothing."""
        per_block = []
        for b in range(self.spec.n_blocks):
            options = []
            labels = self._layer_labels(b)
            for d in self.spec.depths:
                active = [lb for lb in labels if _layer_of(lb) < d]
                for combo in itertools.product(*(self[lb].values for lb in active)):
                    arch = {depth_label(b): d, **dict(zip(active, combo))}
                    for lb in labels:
                        arch.setdefault(lb, self[lb].default)
                    options.append(arch)
            per_block.append(options)
        res = self.spec.resolutions if "resolution" in self else (None,)
        for parts in itertools.product(*per_block):
            for r in res:
                arch = {}
                for p in parts:
                    arch.update(p)
                if r is not None:
                    arch["resolution"] = r
                yield {lb: arch[lb] for lb in self}

    def layers(self, arch: Mapping[str, Any]) -> list[tuple[int, int, int, int]]:
        """Returns ``(block, layer, expand, kernel)`` of every active layer, in forward order."""
        arch = self.validate(arch)
        out = []
        for b in range(self.spec.n_blocks):
            d = arch[depth_label(b)]
            for j in range(d):
                e = (
                    arch[expand_label(b, j)]
                    if self.spec.coupling == "ofa"
                    else coupled_expand(self.spec, d)
                )
                k = (
                    self.spec.fixed_kernels[b]
                    if self.spec.coupling == "compofa"
                    else arch[kernel_label(b, j)]
                )
                out.append((b, j, e, k))
        return out

    def resolution(self, arch: Mapping[str, Any]) -> int:
        """Returns the input side of ``arch``."""
        if "resolution" in self:
            return int(arch["resolution"])
        return self.spec.resolutions[0] if self.spec.resolutions else self.spec.image_size

    def to_dict(self) -> dict[str, Any]:
        """Returns the space as JSON-able data, with the spec that makes it conditional."""
        return {**super().to_dict(), "ofa_spec": self.spec.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SearchSpace:
        """Returns the space that :meth:`to_dict` produced (a plain one without ``ofa_spec``)."""
        if "ofa_spec" in data:
            return cls(OFASpec.from_dict(data["ofa_spec"]))
        return SearchSpace.from_dict(data)


def _layer_of(label: str) -> int:
    return int(label.split(".")[2])


def _rng(rng: Any) -> Any:
    return random.Random(rng) if rng is None or isinstance(rng, int) else rng


def _pick(rng: Any, n: int) -> int:
    if isinstance(rng, random.Random):
        return rng.randrange(n)
    return int(rng.integers(n))


def _weighted(rng: Any, values: Sequence[int], weights: Sequence[int]) -> int:
    total = sum(weights)
    if isinstance(rng, random.Random):
        x = rng.randrange(total)
    else:
        x = int(rng.integers(total))
    for v, w in zip(values, weights):
        if x < w:
            return v
        x -= w
    raise AssertionError("unreachable")  # pragma: no cover


def encode(space: OFASearchSpace, arch: Mapping[str, Any]) -> list[float]:
    """Returns the predictor features of ``arch``: per block and layer slot, a one-hot of the
    expansion ratio and of the kernel (all zeros for a layer beyond the depth), then a one-hot of
    the resolution. Equal networks have equal features.

    Invariants: the length depends on the spec only (``n_features``).
    """
    spec = space.spec
    active = {(b, j): (e, k) for b, j, e, k in space.layers(arch)}
    out: list[float] = []
    for b in range(spec.n_blocks):
        for j in range(spec.max_depth):
            e, k = active.get((b, j), (None, None))
            out += [float(e == v) for v in spec.expands]
            out += [float(k == v) for v in spec.kernels]
    if "resolution" in space:
        out += [float(space.resolution(arch) == r) for r in spec.resolutions]
    return out


def compound_to_ofa(compound: OFASearchSpace, arch: Mapping[str, Any], ofa: OFASearchSpace) -> Arch:
    """Returns the architecture of the OFA space ``ofa`` that builds the same network as the
    CompOFA architecture ``arch`` (each layer: the coupled width, the block's kernel).

    Raises:
        ArchitectureError: the OFA space cannot express it (a width or kernel it lacks).
    """
    out: Arch = {}
    for b in range(compound.spec.n_blocks):
        out[depth_label(b)] = arch[depth_label(b)]
    for b, j, e, k in compound.layers(arch):
        out[expand_label(b, j)] = e
        out[kernel_label(b, j)] = k
    if "resolution" in ofa:
        out["resolution"] = compound.resolution(arch)
    return ofa.validate(out)


def small_spec(coupling: Coupling = "ofa", **overrides: Any) -> OFASpec:
    """Returns a small 5-block plan for 28x28 greyscale images (MNIST-sized), cheap on a CPU."""
    base: dict[str, Any] = dict(
        coupling=coupling, in_channels=1, n_classes=10, width_mult=0.5, divisor=4,
        stem_channels=16, stem_stride=2, first_channels=8,
        stage_channels=(12, 16, 24, 32, 40), strides=(1, 2, 1, 2, 1),
        final_expand=96, feature_dim=128, image_size=28,
    )  # fmt: skip
    base.update(overrides)
    return OFASpec(**base)
