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

Once-for-all publishes per-device tables (note10, pixel1, ...), one YAML file per input
resolution (``160_lookup_table.yaml``), keyed by layer descriptions (:func:`ofa_lut_keys`)::

    Conv-input:224x224x3-output:112x112x24                            the stem
    expanded_conv-input:112x112x24-output:112x112x24-expand:24-kernel:3-stride:1-idskip:1-se:0-hs:0
    Conv_1-input:7x7x192-output:7x7x1152    AvgPool2D-input:7x7x1152-output:1x1x1152
    Conv_2-input:1x1x1152-output:1x1x1536   Logits-input:1x1x1536-output:1000

(``expand`` is the hidden width, not the ratio). :meth:`LatencyTable.from_ofa_yaml` reads them
into a :class:`PublishedLatencyTable`, which sums an architecture's entries from the table of
its own resolution in once-for-all's order, so that the total equals once-for-all's, exactly.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from nasforge.errors import ConfigError
from nasforge.ofa.spaces import OFASearchSpace, OFASpec
from nasforge.space.search_space import arch_id

__all__ = [
    "LayerShape",
    "layer_shapes",
    "distinct_shapes",
    "count_macs",
    "LatencyTable",
    "PublishedLatencyTable",
    "MemoizedCost",
    "ofa_lut_keys",
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
    """Returns predicted latency (ms) of sub-networks: ``scale * (sum of per-layer
    measurements) + offset``, the two fitted by :meth:`calibrate` (1 and 0 until then).

    Each entry is one whole layer as the network has it (an inverted residual with its
    convolutions, batch norms, activations and shortcut), so a runtime fuses inside it as it
    does in the network. What the sum cannot know, the calibration absorbs: every entry pays
    one call of the runtime (session overhead, input and output copies) that the network pays
    once, and layers run back to back share caches. ``calibrate`` fits the line through a few
    networks measured end to end; it keeps the table's ranking and corrects its level.

    Invariants: each distinct shape is measured at most once; ``predict`` of an architecture is
    ``scale`` times the sum of its layers' entries plus ``offset``, with ``scale > 0``;
    ``to_dict``/``from_dict`` round-trip.
    """

    def __init__(
        self,
        space: OFASearchSpace,
        entries: Mapping[LayerShape, float] | None = None,
        scale: float = 1.0,
        offset: float = 0.0,
    ):
        self.space = space
        self.entries: dict[LayerShape, float] = dict(entries or {})
        self.scale, self.offset = float(scale), float(offset)

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

    def build_many(
        self,
        measure: Callable[[list[LayerShape]], Mapping[LayerShape, float]],
        shapes: Iterable[LayerShape] = (),
    ) -> int:
        """Measures every shape not yet in the table in one call of ``measure`` (``shapes ->
        {shape: ms}``, e.g. :func:`~nasforge.ofa.measure.layer_latencies`, which interleaves
        them); returns how many were measured.

        Raises:
            ConfigError: ``measure`` left a shape out.
        """
        todo = [s for s in list(shapes) or distinct_shapes(self.space) if s not in self.entries]
        got = measure(todo) if todo else {}
        lacking = [s for s in todo if s not in got]
        if lacking:
            raise ConfigError(f"the layer measurement returned no time for {lacking[0]} "
                              f"({len(lacking)} of {len(todo)} shapes lack one)")  # fmt: skip
        self.entries.update((s, float(got[s])) for s in todo)
        return len(todo)

    def calibrate(
        self, archs: Sequence[Mapping[str, Any]], measured: Sequence[float]
    ) -> tuple[float, float]:
        """Fits ``scale`` and ``offset`` (least squares) so that predictions match
        ``measured``, the end-to-end latencies (ms) of ``archs``; returns them. Use networks
        other than those the table is judged on.

        Raises:
            ConfigError: fewer than two networks, lengths differ, their layer sums are all
                equal, or the fitted scale is not positive (the measurements are noise).
        """
        if len(archs) != len(measured) or len(archs) < 2:
            raise ConfigError(f"calibration needs two or more networks with one measured "
                              f"latency each; got {len(archs)} and {len(measured)}")  # fmt: skip
        self.scale, self.offset = 1.0, 0.0
        sums = [self.predict(a) for a in archs]
        mx, my = sum(sums) / len(sums), sum(measured) / len(measured)
        var = sum((x - mx) ** 2 for x in sums)
        cov = sum((x - mx) * (y - my) for x, y in zip(sums, measured, strict=True))
        if var == 0 or cov <= 0:
            raise ConfigError(
                f"cannot calibrate the latency table: over {len(archs)} networks the measured "
                f"latency does not grow with the table's sum (covariance {cov:.3g}, variance "
                f"{var:.3g}); measure more, or more varied, networks with more runs"
            )
        self.scale = cov / var
        self.offset = my - self.scale * mx
        return self.scale, self.offset

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
        return self.scale * total + self.offset

    __call__ = predict

    def to_dict(self) -> dict[str, Any]:
        """Returns the table as JSON-able data (shape key -> ms, and ``calibration``:
        {scale, offset} once calibrated)."""
        data: dict[str, Any] = {s.key(): ms for s, ms in self.entries.items()}
        if (self.scale, self.offset) != (1.0, 0.0):
            data["calibration"] = {"scale": self.scale, "offset": self.offset}
        return data

    @classmethod
    def from_dict(cls, space: OFASearchSpace, data: Mapping[str, Any]) -> LatencyTable:
        """Returns the table that :meth:`to_dict` produced (a :class:`PublishedLatencyTable`
        for the data of one)."""
        if data.get("format") == PublishedLatencyTable.FORMAT:
            tables = {int(r): dict(t) for r, t in data["tables"].items()}
            return PublishedLatencyTable(space, tables)
        cal = data.get("calibration") or {}
        entries = {LayerShape.from_key(k): float(v) for k, v in data.items() if k != "calibration"}
        return cls(space, entries, cal.get("scale", 1.0), cal.get("offset", 0.0))

    @classmethod
    def from_ofa_yaml(
        cls, paths: str | Path | Sequence[str | Path], space: OFASearchSpace | None = None
    ) -> PublishedLatencyTable:
        """Returns once-for-all's published latency tables: a folder holding
        ``<side>_lookup_table.yaml`` files, or the files themselves (one per resolution; the
        side comes from the name, else from the table's stem entry).

        Without ``space``, the space is the published MobileNetV3 plan
        (:func:`~nasforge.ofa.published.published_spec`) with the width read off the tables'
        head entries and the tables' resolutions.

        Raises:
            ConfigError: no table files, an unreadable file or one without a ``Conv`` stem
                entry, two tables of one resolution, or a resolution of ``space`` without a table.
        """
        files = _table_files(paths)
        tables: dict[int, dict[str, float]] = {}
        for f in files:
            entries = _read_yaml_table(f)
            side = _table_side(f, entries)
            if side in tables:
                raise ConfigError(f"two latency tables for resolution {side} (second: {f})")
            tables[side] = entries
        if space is None:
            space = OFASearchSpace(_spec_of_tables(tables))
        return PublishedLatencyTable(space, tables)


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


def ofa_lut_keys(shape: LayerShape) -> list[str]:
    """Returns the keys of once-for-all's MobileNetV3 latency tables that make up ``shape``: one
    for the stem or an inverted residual, four for the head (final expansion, pooling, feature
    mix, classifier), in forward order."""
    s, so = shape.side, shape.side_out
    if shape.kind == "stem":
        return [f"Conv-input:{s}x{s}x{shape.cin}-output:{so}x{so}x{shape.cout}"]
    if shape.kind == "mb":
        return [
            f"expanded_conv-input:{s}x{s}x{shape.cin}-output:{so}x{so}x{shape.cout}"
            f"-expand:{shape.mid}-kernel:{shape.kernel}-stride:{shape.stride}"
            f"-idskip:{int(shape.idskip)}-se:{int(shape.se > 0)}-hs:{int(shape.hswish)}"
        ]
    if shape.kind == "head":
        e, f = shape.mid, shape.kernel  # final expansion, feature width
        return [
            f"Conv_1-input:{s}x{s}x{shape.cin}-output:{s}x{s}x{e}",
            f"AvgPool2D-input:{s}x{s}x{e}-output:1x1x{e}",
            f"Conv_2-input:1x1x{e}-output:1x1x{f}",
            f"Logits-input:1x1x{f}-output:{shape.cout}",
        ]
    raise ConfigError(f"unknown layer kind {shape.kind!r}; expected stem, mb or head")


class PublishedLatencyTable(LatencyTable):
    """Returns predicted latency (ms) from once-for-all's published per-resolution tables.

    Invariants: ``predict(arch)`` adds, starting from 0.0 and in forward order, the ``mean`` of
    every :func:`ofa_lut_keys` entry of ``arch``'s layers in the table of ``arch``'s own
    resolution: once-for-all's sum, term by term; a missing entry raises, never counts as 0.
    """

    FORMAT = "ofa-lut"

    def __init__(self, space: OFASearchSpace, tables: Mapping[int, Mapping[str, float]]) -> None:
        super().__init__(space)
        self.tables = {int(r): dict(t) for r, t in tables.items()}
        sides = space.spec.resolutions or (space.spec.image_size,)
        lacking = [r for r in sides if r not in self.tables]
        if lacking:
            raise ConfigError(
                f"the space offers resolutions {list(sides)} but there are latency tables for "
                f"{sorted(self.tables)} only (none for {lacking}); add the files "
                f"{', '.join(f'{r}_lookup_table.yaml' for r in lacking)} or narrow the space"
            )

    def build(self, measure: Callable[[LayerShape], float], shapes: Iterable[LayerShape] = ()):
        """Refuses: published tables are read, not measured.

        Raises:
            ConfigError: always.
        """
        raise ConfigError("a published latency table cannot be measured; build a LatencyTable")

    def calibrate(self, archs: Sequence[Mapping[str, Any]], measured: Sequence[float]):
        """Refuses: published tables are once-for-all's sums, term by term.

        Raises:
            ConfigError: always.
        """
        raise ConfigError("a published latency table is not calibrated; build a LatencyTable")

    def predict(self, arch: Mapping[str, Any]) -> float:
        """Returns the latency of ``arch`` (ms) summed from its resolution's table.

        Raises:
            ConfigError: a layer's entry is missing from the table (the key is named).
            ArchitectureError: ``arch`` does not fit the space.
        """
        side = self.space.resolution(arch)
        table = self.tables[side]
        total = 0.0
        for shape in layer_shapes(self.space, arch):
            for key in ofa_lut_keys(shape):
                ms = table.get(key)
                if ms is None:
                    raise ConfigError(
                        f"latency table of resolution {side} has no entry {key!r} "
                        f"({len(table)} entries); the table is of another network plan or "
                        "device, or incomplete"
                    )
                total += ms
        return total

    __call__ = predict

    def missing_keys(self) -> dict[int, list[str]]:
        """Returns, per resolution, every key some architecture of the space needs that the
        table of that resolution lacks (empty lists: the tables cover the space)."""
        out: dict[int, list[str]] = {}
        for r in self.space.spec.resolutions or (self.space.spec.image_size,):
            one = OFASearchSpace(replace(self.space.spec, resolutions=(r,)))
            keys = [k for shape in distinct_shapes(one) for k in ofa_lut_keys(shape)]
            out[r] = [k for k in dict.fromkeys(keys) if k not in self.tables[r]]
        return out

    def to_dict(self) -> dict[str, Any]:
        """Returns the tables as JSON-able data (:meth:`LatencyTable.from_dict` reads it)."""
        return {"format": self.FORMAT, "tables": {str(r): t for r, t in self.tables.items()}}


def _table_files(paths: str | Path | Sequence[str | Path]) -> list[Path]:
    items = [paths] if isinstance(paths, (str, Path)) else list(paths)
    files: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            files += sorted(p.glob("*_lookup_table.yaml")) or sorted(p.glob("*.yaml"))
        elif p.is_file():
            files.append(p)
        else:
            raise ConfigError(f"no latency table at {p}; give a folder of *_lookup_table.yaml")
    if not files:
        raise ConfigError(f"no *_lookup_table.yaml files in {items}")
    return files


def _read_yaml_table(path: Path) -> dict[str, float]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader: published files are big
    try:
        data = yaml.load(path.read_text(), Loader=loader)  # noqa: S506 - a safe loader
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read latency table {path}: {exc}") from exc
    if not isinstance(data, Mapping):
        raise ConfigError(f"latency table {path} holds {type(data).__name__}, expected a mapping")
    out: dict[str, float] = {}
    for key, value in data.items():
        ms = value.get("mean") if isinstance(value, Mapping) else value
        if not isinstance(ms, (int, float)):
            raise ConfigError(
                f"latency table {path}: entry {key!r} is {value!r}, expected {{mean: ms, ...}}"
            )
        out[str(key)] = ms
    return out


_SIDE_IN_NAME = re.compile(r"(\d+)_lookup_table")
_STEM_KEY = re.compile(r"Conv-input:(\d+)x\d+x\d+-")


def _table_side(path: Path, entries: Mapping[str, float]) -> int:
    m = _SIDE_IN_NAME.search(path.name)
    if m is not None:
        return int(m.group(1))
    sides = {int(h.group(1)) for k in entries if (h := _STEM_KEY.match(k))}
    if len(sides) != 1:
        raise ConfigError(
            f"cannot tell the resolution of latency table {path}: name it <side>_lookup_table.yaml"
            f" (its Conv entries give sides {sorted(sides)})"
        )
    return sides.pop()


def _spec_of_tables(tables: Mapping[int, Mapping[str, float]]) -> OFASpec:
    from nasforge.ofa.published import published_spec

    final = {int(m.group(1)) for t in tables.values() for k in t
             if (m := re.match(r"Conv_1-input:\d+x\d+x\d+-output:\d+x\d+x(\d+)$", k))}  # fmt: skip
    if len(final) != 1:
        raise ConfigError(
            f"cannot read the network's width off the tables (final expansion widths {final}); "
            "pass the space the tables were measured for"
        )
    return published_spec(width_mult=round(final.pop() / 960, 2), resolutions=sorted(tables))
