"""Tests of layer shapes, analytical FLOPs, the latency table and memoization (pure)."""

from __future__ import annotations

import pytest

from nasforge.errors import ConfigError
from nasforge.ofa.latency import (
    LatencyTable,
    LayerShape,
    MemoizedCost,
    count_macs,
    distinct_shapes,
    layer_shapes,
)
from nasforge.ofa.spaces import OFASearchSpace, OFASpec


def test_layer_shapes_follow_depths():
    """A network has stem, first layer, one shape per active layer, and the head."""
    space = OFASearchSpace(OFASpec())
    arch = space.smallest()
    shapes = layer_shapes(space, arch)
    assert len(shapes) == 2 + 5 * 2 + 1
    assert shapes[0].kind == "stem" and shapes[-1].kind == "head"
    assert len(layer_shapes(space, space.largest())) == 2 + 5 * 4 + 1


def test_macs_monotone_and_full_net_matches_ofa_scale():
    """The full OFA MobileNetV3 at 224 costs about 0.6 GMACs, the smallest about 0.13."""
    space = OFASearchSpace(OFASpec())
    big, small = count_macs(space, space.largest()), count_macs(space, space.smallest())
    assert 450e6 < big < 700e6 and 90e6 < small < 180e6 and small < big


def test_every_shape_is_in_distinct_shapes():
    """distinct_shapes covers every layer of sampled architectures and repeats none."""
    space = OFASearchSpace(OFASpec(resolutions=(160, 224)))
    table = set(distinct_shapes(space))
    assert len(table) == len(distinct_shapes(space))
    for seed in range(50):
        assert set(layer_shapes(space, space.sample(seed))) <= table


def test_latency_table_sums_layers_and_measures_each_shape_once():
    """predict is the sum of the layers' entries; build measures each distinct shape once."""
    space = OFASearchSpace(OFASpec(coupling="compofa"))
    calls = []

    def measure(shape: LayerShape) -> float:
        calls.append(shape)
        return shape.macs() / 1e6

    table = LatencyTable(space)
    n = table.build(measure)
    assert n == len(calls) == len(set(calls)) == len(distinct_shapes(space))
    assert table.build(measure) == 0
    arch = space.sample(2)
    assert table.predict(arch) == pytest.approx(count_macs(space, arch) / 1e6)
    again = LatencyTable.from_dict(space, table.to_dict())
    assert again.predict(arch) == table.predict(arch)
    with pytest.raises(ConfigError):
        LatencyTable(space).predict(arch)


def test_calibration_recovers_a_per_call_overhead_and_round_trips():
    """Entries that each pay a per-call overhead the network pays once are calibrated back:
    the fit on a few networks recovers scale and offset, predicts other networks exactly,
    keeps their ranks, and survives to_dict/from_dict."""
    space = OFASearchSpace(OFASpec(depths=(3,)))  # one depth: a fixed number of layers
    overhead = 0.05  # what every isolated layer call pays, and the network pays once

    def true_ms(arch) -> float:  # 1.5x the layers' own time: what the network measures
        return 1.5 * count_macs(space, arch) / 1e6 + overhead

    table = LatencyTable(space)
    table.build_many(lambda shapes: {s: s.macs() / 1e6 + overhead for s in shapes})
    cal = [space.sample(i) for i in range(4)]
    raw = [table.predict(a) for a in cal]
    scale, offset = table.calibrate(cal, [true_ms(a) for a in cal])
    n_layers = len(layer_shapes(space, cal[0]))
    assert scale == pytest.approx(1.5) and offset == pytest.approx(overhead * (1 - 1.5 * n_layers))
    others = [space.sample(i) for i in range(10, 16)]
    for arch in others:
        assert table.predict(arch) == pytest.approx(true_ms(arch))
    assert [table.predict(a) for a in cal] != raw
    again = LatencyTable.from_dict(space, table.to_dict())
    assert (again.scale, again.offset) == (scale, offset)
    assert again.predict(others[0]) == table.predict(others[0])


def test_calibration_refuses_too_few_or_unrelated_measurements():
    """Fewer than two networks, or measurements that fall as the sum grows, are one
    ConfigError each; a table's build_many refuses a measurement that leaves a shape out."""
    space = OFASearchSpace(OFASpec(coupling="compofa"))
    table = LatencyTable(space)
    table.build(lambda s: s.macs() / 1e6)
    a, b = space.smallest(), space.largest()
    with pytest.raises(ConfigError, match="two or more networks"):
        table.calibrate([a], [1.0])
    with pytest.raises(ConfigError, match="does not grow with the table's sum"):
        table.calibrate([a, b], [2.0, 1.0])
    with pytest.raises(ConfigError, match="returned no time for"):
        LatencyTable(space).build_many(lambda shapes: {})


def test_memoized_cost_counts_distinct_networks():
    """Equal networks (different inactive labels) are measured once."""
    space = OFASearchSpace(OFASpec())
    memo = MemoizedCost(space, lambda a: float(count_macs(space, a)))
    a = space.smallest()
    b = dict(a, **{"blocks.0.3.kernel": 7})  # an inactive layer: same network
    memo(a), memo(b), memo(space.largest())
    assert memo.n_measured == 2 and memo.n_calls == 3
