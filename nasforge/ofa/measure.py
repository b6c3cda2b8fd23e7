"""Measuring on the current machine: wall-clock latency of sub-networks and of single layers
(for :class:`~nasforge.ofa.latency.LatencyTable`), as plain ``arch -> ms`` / ``shape -> ms``
functions for the pure search code, on eager PyTorch (``runtime="torch"``) or on the runtime
that serves the model (``runtime="onnxruntime"``: each network or layer exported to ONNX,
verified, and timed in a session of ``threads`` threads; see :mod:`nasforge.run.deploy`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from nasforge.ofa.latency import LayerShape
from nasforge.ofa.mobilenet import OFAMobileNetV3, build_layer, extract
from nasforge.run.deploy import measure_latency

__all__ = ["time_module", "network_latency", "layer_latency"]


def time_module(
    module: nn.Module,
    x: torch.Tensor,
    n_warmup: int = 2,
    n_runs: int = 5,
    runtime: str = "torch",
    threads: int | None = None,
) -> float:
    """Returns the median wall time of ``module(x)`` in milliseconds (eval mode, no grad) on
    ``runtime`` with ``threads`` threads (see :func:`nasforge.run.deploy.measure_latency`).

    Raises:
        ConfigError: unknown runtime, or onnxruntime is not installed.
        ExportError: the module does not export to ONNX (``runtime="onnxruntime"``).
    """
    return measure_latency(module, x, runtime, threads, n_warmup, n_runs)


def network_latency(
    supernet: OFAMobileNetV3,
    batch: int = 1,
    n_warmup: int = 2,
    n_runs: int = 5,
    runtime: str = "torch",
    threads: int | None = None,
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
        return time_module(model, x, n_warmup, n_runs, runtime, threads)

    return measure


def layer_latency(
    batch: int = 1,
    n_warmup: int = 2,
    n_runs: int = 5,
    runtime: str = "torch",
    threads: int | None = None,
) -> Callable[[LayerShape], float]:
    """Returns ``shape -> ms``: builds one layer of that shape and times it on ``runtime``
    (for the lookup table)."""

    def measure(shape: LayerShape) -> float:
        layer = build_layer(shape)
        x = torch.randn(batch, shape.cin, shape.side, shape.side)
        return time_module(layer, x, n_warmup, n_runs, runtime, threads)

    return measure
