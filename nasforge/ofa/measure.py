"""Measuring on the current machine: wall-clock latency of sub-networks and of single layers
(for :class:`~nasforge.ofa.latency.LatencyTable`), as plain ``arch -> ms`` / ``shape -> ms``
functions for the pure search code, on eager PyTorch (``runtime="torch"``) or on the runtime
that serves the model (``runtime="onnxruntime"``: each network or layer exported to ONNX,
verified, and timed in a session of ``threads`` threads; see :mod:`nasforge.run.deploy`),
on the wall clock or the calling thread's CPU clock (``clock="cpu"``, one thread).

:func:`layer_latencies` times a table's layers interleaved (:func:`table_latencies` with the
networks it is calibrated on, in the same rounds; :func:`network_latencies` networks alone):
every model is prepared (exported, its session opened) first, then each timed round calls
every one once, so that a burst of load on the machine, or of contention for its caches,
spreads over all of them instead of inflating the few timed during
it (on a loaded machine even the CPU clock of one burst of calls varies by a quarter).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from nasforge.ofa.latency import LayerShape
from nasforge.ofa.mobilenet import OFAMobileNetV3, build_layer, extract
from nasforge.run.deploy import check_clock, latency_call, measure_latency, time_interleaved

__all__ = [
    "time_module",
    "network_latency",
    "network_latencies",
    "layer_latency",
    "layer_latencies",
    "table_latencies",
]


def time_module(
    module: nn.Module,
    x: torch.Tensor,
    n_warmup: int = 2,
    n_runs: int = 5,
    runtime: str = "torch",
    threads: int | None = None,
    clock: str = "wall",
) -> float:
    """Returns the median time of ``module(x)`` in milliseconds (eval mode, no grad) on
    ``runtime`` with ``threads`` threads on ``clock`` (see
    :func:`nasforge.run.deploy.measure_latency`).

    Raises:
        ConfigError: unknown runtime or clock, or onnxruntime is not installed.
        ExportError: the module does not export to ONNX (``runtime="onnxruntime"``).
    """
    return measure_latency(module, x, runtime, threads, n_warmup, n_runs, clock)


def network_latency(
    supernet: OFAMobileNetV3,
    batch: int = 1,
    n_warmup: int = 2,
    n_runs: int = 5,
    runtime: str = "torch",
    threads: int | None = None,
    clock: str = "wall",
) -> Callable[[Mapping[str, Any]], float]:
    """Returns ``arch -> ms``: extracts the sub-network and times a forward of ``batch`` images
    on ``runtime`` (wrap it in :class:`~nasforge.ofa.latency.MemoizedCost` to measure each
    config once)."""
    space = supernet.search_space()
    spec = space.spec

    def measure(arch: Mapping[str, Any]) -> float:
        side = space.resolution(arch)
        model = extract(supernet, arch)
        x = torch.randn(batch, spec.in_channels, side, side)
        return time_module(model, x, n_warmup, n_runs, runtime, threads, clock)

    return measure


def layer_latency(
    batch: int = 1,
    n_warmup: int = 2,
    n_runs: int = 5,
    runtime: str = "torch",
    threads: int | None = None,
    clock: str = "wall",
) -> Callable[[LayerShape], float]:
    """Returns ``shape -> ms``: builds one layer of that shape and times it on ``runtime``
    (for the lookup table)."""

    def measure(shape: LayerShape) -> float:
        layer = build_layer(shape)
        x = torch.randn(batch, shape.cin, shape.side, shape.side)
        return time_module(layer, x, n_warmup, n_runs, runtime, threads, clock)

    return measure


def layer_latencies(
    batch: int = 1,
    n_warmup: int = 2,
    n_runs: int = 5,
    runtime: str = "torch",
    threads: int | None = None,
    clock: str = "wall",
) -> Callable[[Iterable[LayerShape]], dict[LayerShape, float]]:
    """Returns ``shapes -> {shape: ms}`` (for :meth:`LatencyTable.build_many`): builds every
    layer, then times ``n_runs`` interleaved rounds, each calling every layer once in turn
    after ``n_warmup`` untimed rounds; an entry is the median of its layer's ``n_runs`` times.

    Raises:
        ConfigError: unknown runtime or clock, the cpu clock with threads other than 1, or
            onnxruntime is not installed.
        ExportError: a layer does not export to ONNX (``runtime="onnxruntime"``).
    """
    check_clock(clock, threads)

    def measure(shapes: Iterable[LayerShape]) -> dict[LayerShape, float]:
        calls = _layer_calls(shapes, batch, runtime, threads)
        return time_interleaved(calls, n_warmup, n_runs, clock)

    return measure


def _layer_calls(
    shapes: Iterable[LayerShape], batch: int, runtime: str, threads: int | None
) -> dict[Any, Callable[[], Any]]:
    calls: dict[Any, Callable[[], Any]] = {}
    for shape in shapes:
        x = torch.randn(batch, shape.cin, shape.side, shape.side)
        calls[shape] = latency_call(build_layer(shape), x, runtime, threads)
    return calls


def _network_calls(
    supernet: OFAMobileNetV3,
    archs: Sequence[Mapping[str, Any]],
    batch: int,
    runtime: str,
    threads: int | None,
) -> dict[Any, Callable[[], Any]]:
    space = supernet.search_space()
    calls: dict[Any, Callable[[], Any]] = {}
    for i, arch in enumerate(archs):
        side = space.resolution(arch)
        x = torch.randn(batch, space.spec.in_channels, side, side)
        calls[i] = latency_call(extract(supernet, arch), x, runtime, threads)
    return calls


def table_latencies(
    supernet: OFAMobileNetV3,
    shapes: Sequence[LayerShape],
    archs: Sequence[Mapping[str, Any]],
    batch: int = 1,
    n_warmup: int = 2,
    n_runs: int = 5,
    runtime: str = "torch",
    threads: int | None = None,
    clock: str = "wall",
) -> tuple[dict[LayerShape, float], list[float]]:
    """Returns ({shape: ms} of ``shapes``' layers, [ms] of ``archs``' sub-networks), all timed
    in the same interleaved rounds: a table and the networks it is calibrated on, measured
    under the same conditions.

    Raises:
        ConfigError: unknown runtime or clock, the cpu clock with threads other than 1, or
            onnxruntime is not installed.
        ExportError: a layer or sub-network does not export to ONNX.
    """
    check_clock(clock, threads)
    calls = _layer_calls(shapes, batch, runtime, threads)
    nets = _network_calls(supernet, archs, batch, runtime, threads)
    calls.update({("net", i): call for i, call in nets.items()})
    times = time_interleaved(calls, n_warmup, n_runs, clock)
    return {s: times[s] for s in shapes}, [times[("net", i)] for i in range(len(archs))]


def network_latencies(
    supernet: OFAMobileNetV3,
    archs: Sequence[Mapping[str, Any]],
    batch: int = 1,
    n_warmup: int = 2,
    n_runs: int = 5,
    runtime: str = "torch",
    threads: int | None = None,
    clock: str = "wall",
) -> list[float]:
    """Returns the latency (ms) of each of ``archs``' sub-networks, timed interleaved like
    :func:`layer_latencies` (what a table is calibrated and judged on).

    Raises:
        ConfigError: unknown runtime or clock, the cpu clock with threads other than 1, or
            onnxruntime is not installed.
        ExportError: a sub-network does not export to ONNX (``runtime="onnxruntime"``).
    """
    check_clock(clock, threads)
    calls = _network_calls(supernet, archs, batch, runtime, threads)
    times = time_interleaved(calls, n_warmup, n_runs, clock)
    return [times[i] for i in range(len(archs))]
