"""Tests of latency measurement on this machine: memoized networks and the layer table."""

from __future__ import annotations

import logging

import pytest

from nasforge.errors import ConfigError
from nasforge.ofa.deploy import CALIBRATE, make_latency
from nasforge.ofa.latency import LatencyTable, MemoizedCost, distinct_shapes
from nasforge.ofa.measure import layer_latencies, layer_latency, network_latency
from nasforge.ofa.mobilenet import OFAMobileNetV3
from nasforge.run.deploy import time_interleaved
from tests.ofa._runfile import ofa_run_file
from tests.ofa.conftest import tiny_spec


def test_memoized_network_latency_measures_each_config_once():
    """Measured latency is positive and each canonical configuration is timed once."""
    net = OFAMobileNetV3(tiny_spec("compofa"))
    space = net.search_space()
    memo = MemoizedCost(space, network_latency(net, n_warmup=0, n_runs=1))
    archs = [space.sample(i) for i in range(12)]
    values = [memo(a) for a in archs + archs]
    assert all(v > 0 for v in values)
    assert memo.n_measured == len({space.arch_id(a) for a in archs}) and memo.n_calls == 24


def test_layer_table_measures_distinct_shapes():
    """The table times every distinct layer shape once and predicts positive latencies."""
    net = OFAMobileNetV3(tiny_spec("compofa_ek"))
    space = net.search_space()
    table = LatencyTable(space)
    n = table.build(layer_latency(n_warmup=0, n_runs=1))
    assert n == len(distinct_shapes(space)) == len(table.entries)
    from nasforge.ofa.latency import layer_shapes

    arch = space.largest()
    assert table.predict(arch) == sum(table.entries[s] for s in layer_shapes(space, arch)) > 0


def test_make_latency_modes():
    """flops mode needs no measurement; measured mode counts distinct configurations."""
    net = OFAMobileNetV3(tiny_spec("compofa"))
    space = net.search_space()
    flops, n = make_latency(net, "flops")
    assert flops(space.largest()) > flops(space.smallest()) and n() == 0
    measured, n = make_latency(net, "measured", n_runs=1)
    measured(space.largest()), measured(space.largest())
    assert n() == 1


def test_make_latency_refuses_an_unknown_runtime_or_key():
    """A latency mapping with an unknown runtime or key is one ConfigError naming it."""
    net = OFAMobileNetV3(tiny_spec("compofa"))
    with pytest.raises(ConfigError, match="'tvm' is not one of"):
        make_latency(net, {"runtime": "tvm"})
    with pytest.raises(ConfigError, match="unknown latency settings \\['cores'\\]"):
        make_latency(net, {"runtime": "onnxruntime", "cores": 2})


def test_interleaved_layer_latencies_on_the_cpu_clock():
    """layer_latencies times every shape it is given, on the calling thread's CPU clock, and
    a table built from it is calibrated on end-to-end networks by make_latency."""
    net = OFAMobileNetV3(tiny_spec("compofa"))
    space = net.search_space()
    shapes = distinct_shapes(space)[:4]
    got = layer_latencies(n_warmup=0, n_runs=2, threads=1, clock="cpu")(shapes)
    assert list(got) == shapes and all(ms > 0 for ms in got.values())
    table, n = make_latency(net, {"mode": "table", "threads": 1, "n_runs": 1, "clock": "cpu",
                                  "calibrate": 3})  # fmt: skip
    assert isinstance(table, LatencyTable) and table.scale > 0
    assert n() == len(distinct_shapes(space)) + 3 and table(space.largest()) > 0


def test_time_interleaved_calls_every_model_once_per_round():
    """time_interleaved warms up and then times rounds that each call every model once, in
    turn, and returns one median per model."""
    order: list[str] = []
    calls = {k: (lambda k=k: order.append(k)) for k in "abc"}
    got = time_interleaved(calls, n_warmup=1, n_runs=3, clock="cpu")
    assert order == list("abc") * 4 and sorted(got) == ["a", "b", "c"]
    assert all(ms >= 0 for ms in got.values())


def test_latency_clock_settings_are_checked():
    """An unknown clock, the cpu clock with several threads and a calibration of one network
    are one ConfigError each, naming the value."""
    net = OFAMobileNetV3(tiny_spec("compofa"))
    with pytest.raises(ConfigError, match="clock 'gpu' is not one of"):
        make_latency(net, {"clock": "gpu", "threads": 1})
    with pytest.raises(ConfigError, match="needs threads: 1 \\(got 2\\)"):
        make_latency(net, {"clock": "cpu", "threads": 2})
    with pytest.raises(ConfigError, match="calibrate 1 is not 0"):
        make_latency(net, {"mode": "table", "calibrate": 1})
    with pytest.raises(ConfigError, match="needs threads: 1"):
        layer_latencies(clock="cpu")


@pytest.mark.slow
def test_onnxruntime_latency_table_and_measured_latency():
    """On onnxruntime (1 thread) the layer table times every distinct shape as an ONNX model
    (and the calibration networks end to end), and measured latency is memoized per
    configuration, both positive."""
    net = OFAMobileNetV3(tiny_spec("compofa"))
    space = net.search_space()
    # the CPU clock and 3 runs: the calibration fit refuses timings that load on the machine
    # scrambled (wall clock, 1 run: a negative fit at load ~3)
    table, n = make_latency(net, {"mode": "table", "runtime": "onnxruntime", "threads": 1,
                                  "n_runs": 3, "clock": "cpu"})  # fmt: skip
    assert n() == len(distinct_shapes(space)) + CALIBRATE and table(space.largest()) > 0
    measured, n = make_latency(net, {"runtime": "onnxruntime", "threads": 1, "n_runs": 1})
    assert measured(space.smallest()) > 0 and measured(space.smallest()) and n() == 1


@pytest.mark.slow
def test_a_hardware_aware_search_on_onnxruntime(tmp_path, caplog):
    """An OFA run whose search sets `latency: {runtime: onnxruntime, threads: 1}` finds a
    sub-network per target, its cost the onnxruntime latency, recorded with the setting."""
    from nasforge.cli import main
    from nasforge.ofa.record import open_ofa_store

    f = ofa_run_file(
        tmp_path,
        "{targets: [1000.0], latency: {runtime: onnxruntime, threads: 1, n_runs: 2},"
        " accuracy: predictor, n_pairs: 4, population: 4, generations: 1}",
    )
    caplog.set_level(logging.DEBUG, logger="nasforge.run")
    assert main(["run", str(f), "--dir", str(tmp_path / "run")]) == 0
    with open_ofa_store(tmp_path / "run") as store:
        (trial,) = store.trials()
    assert 0 < trial.metrics["cost"] <= trial.metrics["target"] == 1000.0
    timed = [r for r in caplog.records if r.name == "nasforge.run" and ": onnx, max" in r.message]
    assert len(timed) >= 4  # each sub-network the search scored went through onnxruntime
