"""Latency tables of a supernet's candidate operations (ProxylessNAS's latency model).

A table gives, for every mixed ``LayerChoice`` of a supernet (by its module path in the space)
and every candidate, the milliseconds that candidate takes at that layer's input shape. The
latency of an architecture is the sum of its chosen candidates' entries over the layers its
frozen network keeps (a node's unchosen edges are not built); that is the figure a latency
target is about. Layers outside the choices (stem, classifier) are the same in every
architecture and are left out.

Tables come from three places:

- :func:`measure_table`: each candidate timed at its layer's input shape (recorded by the
  supernet's node-finding pass) on the supernet's device, batch 1 by default, the median of a
  few runs in eval mode under ``no_grad``, as once-for-all times a layer for its lookup table;
- a user's table, the JSON file or mapping :func:`to_json` writes (``{"format":
  "nasforge-op-latency", "unit": "ms", "layers": {path: {candidate: ms}}}``), or simply
  ``{path: {candidate: ms}}``;
- a per-operation predictor ``{candidate: ms}`` (one figure per candidate name, wherever it
  appears), alone or beside ``layers`` under ``"ops"``.

:class:`OpLatency` keeps the table as buffers of the supernet (``latency.t<i>``), so the search's
checkpoints carry it and a resume uses the very table the search started with.
"""

from __future__ import annotations

import copy
import json
import statistics
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import nn

from nasforge.errors import ConfigError
from nasforge.oneshot.budget import latency_recipe
from nasforge.oneshot.supernet import MixedLayer, MixedRepeat, Supernet
from nasforge.run.deploy import measure_latency

__all__ = [
    "FORMAT",
    "OpLatency",
    "arch_latency",
    "attach",
    "attach_for_budget",
    "conditions",
    "load_table",
    "measure_table",
    "to_json",
]

#: the ``format`` field of a table file
FORMAT = "nasforge-op-latency"


def _layers(net: Supernet) -> list[tuple[str, MixedLayer]]:
    """Returns every mixed LayerChoice of ``net`` with its module path in the space."""
    return [(p, m) for p, m in net.model.named_modules() if isinstance(m, MixedLayer)]


def _time(module: nn.Module, x: torch.Tensor, n_warmup: int, n_runs: int) -> float:
    """Returns the median wall time (ms) of ``module(x)`` in eval mode without gradients."""
    was = module.training
    module.eval()
    sync = torch.cuda.synchronize if x.is_cuda else (lambda: None)
    try:
        with torch.no_grad():
            for _ in range(n_warmup):
                module(x)
            times = []
            for _ in range(n_runs):
                sync()
                t = time.perf_counter()
                module(x)
                sync()
                times.append((time.perf_counter() - t) * 1000)
    finally:
        module.train(was)
    return statistics.median(times)


def _time_on(
    module: nn.Module,
    x: torch.Tensor,
    runtime: str,
    threads: int | None,
    n_warmup: int,
    n_runs: int,
) -> float:
    """Returns the median wall time (ms) of a CPU copy of ``module`` on ``x`` in ``runtime``."""
    was = module.training
    try:
        return measure_latency(copy.deepcopy(module).cpu(), x, runtime, threads, n_warmup, n_runs)
    finally:
        module.train(was)


def measure_table(
    net: Supernet,
    batch: int = 1,
    n_warmup: int = 2,
    n_runs: int = 5,
    runtime: str = "torch",
    threads: int | None = None,
) -> dict[str, dict[str, float]]:
    """Returns ``{module path: {candidate: ms}}`` timed on ``net``'s device at each layer's
    input shape (its ``in_shape``, else the one shape the node-finding pass saw; batch
    ``batch``), for every mixed LayerChoice of ``net``; with ``runtime="onnxruntime"`` each
    candidate is exported to ONNX and timed on the CPU in a session of ``threads`` threads
    (:func:`nasforge.run.deploy.measure_latency`).

    Raises:
        ConfigError: a layer's input shape is unknown (the supernet's node-finding pass never
            reached it, or it takes several inputs): give a ``latency_table`` instead.
    """
    device = next((p.device for p in net.parameters()), torch.device("cpu"))
    g = torch.Generator().manual_seed(0)  # leaves the global generator alone (resume is bitwise)
    table: dict[str, dict[str, float]] = {}
    for path, layer in _layers(net):
        shape = getattr(layer, "in_shape", None)
        if shape is None and len(layer._shapes) == 1:
            shape = next(iter(layer._shapes))
        if shape is None:
            raise ConfigError(
                f"cannot time the candidates of {path!r}: its input shape is unknown (no pass "
                "reached it, or it saw several); give latency_table"
            )
        x = torch.randn((batch, *shape), generator=g)
        if runtime == "torch":
            time_it = partial(_time, x=x.to(device), n_warmup=n_warmup, n_runs=n_runs)
        else:
            time_it = partial(_time_on, x=x, runtime=runtime, threads=threads,
                              n_warmup=n_warmup, n_runs=n_runs)  # fmt: skip
        table[path] = {str(n): time_it(c) for n, c in zip(layer.names, layer.candidates())}
    return table


def load_table(net: Supernet, source: str | Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Returns ``{module path: {candidate: ms}}`` for every mixed LayerChoice of ``net`` from a
    table file or mapping (see the module docstring; a layer's own entry wins over ``ops``).

    Raises:
        ConfigError: unreadable file, malformed table, or a candidate with no entry (named).
    """
    data: Any = source
    if isinstance(source, str):
        try:
            data = json.loads(Path(source).read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read latency table {source}: {exc}") from exc
    if not isinstance(data, Mapping):
        raise ConfigError(f"a latency table is a mapping, got {type(data).__name__}")
    if "layers" in data or "ops" in data:
        layers, ops = dict(data.get("layers") or {}), dict(data.get("ops") or {})
    else:  # one plain mapping: per-layer entries are mappings, per-op ones numbers
        layers = {k: v for k, v in data.items() if isinstance(v, Mapping)}
        ops = {k: v for k, v in data.items() if not isinstance(v, Mapping)}
    table: dict[str, dict[str, float]] = {}
    for path, layer in _layers(net):
        row = {}
        for name in map(str, layer.names):
            ms = layers.get(path, {}).get(name, ops.get(name))
            if isinstance(ms, bool) or not isinstance(ms, (int, float)):
                raise ConfigError(
                    f"latency table has no number for candidate {name!r} of layer {path!r} "
                    f"(got {ms!r}); add it under 'layers' -> {path!r} or 'ops' -> {name!r}"
                )
            row[name] = float(ms)
        table[path] = row
    return table


def to_json(table: Mapping[str, Mapping[str, float]], device: str = "") -> dict[str, Any]:
    """Returns ``table`` in the file format :func:`load_table` reads."""
    return {"format": FORMAT, "unit": "ms", "device": device,
            "layers": {p: dict(r) for p, r in table.items()}}  # fmt: skip


class OpLatency(nn.Module):
    """Returns nothing when called (it is not); holds a supernet's latency table as buffers,
    ``t<i>`` for the i-th mixed LayerChoice in module order (a vector over its candidates).

    Invariants: one buffer per mixed LayerChoice of the supernet it was built for, in the order
    of :meth:`Supernet.mixed`; entries are milliseconds.
    """

    def __init__(self, net: Supernet, table: Mapping[str, Mapping[str, float]]) -> None:
        super().__init__()
        self.paths: list[str] = []
        self.names: list[list[str]] = []
        device = next((p.device for p in net.parameters()), torch.device("cpu"))
        for i, (path, layer) in enumerate(_layers(net)):
            row = table[path]
            ms = torch.tensor([float(row[str(n)]) for n in layer.names], device=device)
            self.register_buffer(f"t{i}", ms)
            self.paths.append(path)
            self.names.append([str(n) for n in layer.names])
        #: per layer, what its presence depends on (:func:`conditions`; modules, not children)
        self.conditions: list[list[Condition]] = conditions(net)

    def rows(self) -> list[torch.Tensor]:
        """Returns the latency vector of each mixed LayerChoice, in module order."""
        return [self._buffers[f"t{i}"] for i in range(len(self.paths))]  # type: ignore[misc]

    def table(self) -> dict[str, dict[str, float]]:
        """Returns the table as ``{module path: {candidate: ms}}`` (what :func:`to_json` takes)."""
        return {p: dict(zip(names, map(float, t)))
                for p, names, t in zip(self.paths, self.names, self.rows())}  # fmt: skip


def attach(net: Supernet, table: Mapping[str, Mapping[str, float]]) -> OpLatency:
    """Returns the :class:`OpLatency` of ``table`` after making it ``net.latency``."""
    lat = OpLatency(net, table)
    net.add_module("latency", lat)
    return lat


def attach_for_budget(
    net: Supernet,
    source: str | Mapping[str, Any] | None,
    measure: Callable[[], Mapping[str, Mapping[str, float]]],
) -> OpLatency:
    """Returns the latency table a latency budget reads, made ``net.latency`` when it was not:
    ``source`` when it is a table (:func:`load_table`), else the table ``net`` already keeps
    (ProxylessNAS's: one table per supernet), else ``measure()`` (every candidate timed at
    its input shape: ``proxyless.latency_table``, whose pass reaches every layer; ``source``
    ``{"measure": {...}}`` says how, :func:`~nasforge.oneshot.budget.latency_recipe`).

    Raises:
        ConfigError: ``source`` given while ``net`` keeps a table of its own (give it once:
            ProxylessNAS's ``latency_table`` is the budget's too); a bad table; a layer whose
            input shape is unknown.
    """
    own = getattr(net, "latency", None)
    if isinstance(own, OpLatency):
        if source is not None:
            raise ConfigError(
                "this search already keeps a latency table (ProxylessNAS's latency_table); it "
                "is the budget's too: give the table once, as latency_table"
            )
        return own
    if source is None or latency_recipe(source) is not None:
        return attach(net, measure())
    return attach(net, load_table(net, source))


#: what a layer's presence in a network depends on: (mixed op, key), where the key is the
#: candidate name of an enclosing LayerChoice, the block index of an enclosing Repeat, or the
#: layer's position among the edges of its node
Condition = tuple[Any, Any]


def conditions(net: Supernet) -> list[list[Condition]]:
    """Returns, per mixed LayerChoice in module order, the conditions under which an
    architecture's network contains it (all must hold)."""
    outer = [
        (p, m) for p, m in net.model.named_modules() if isinstance(m, (MixedLayer, MixedRepeat))
    ]
    out = []
    for path, layer in _layers(net):
        conds: list[Condition] = []
        for p, m in outer:
            if path.startswith(p + "."):
                conds.append((m, path[len(p) + 1 :].split(".")[0]))
        if layer.node is not None:
            conds.append((layer.node, layer.node.edges.index(layer)))
        out.append(conds)
    return out


def _holds(m: Any, key: Any, arch: Mapping[str, Any]) -> bool:
    """Returns whether ``arch`` builds what condition ``(m, key)`` asks for."""
    v = arch[m.label]
    if isinstance(m, MixedLayer):
        return str(v) == key
    if isinstance(m, MixedRepeat):
        return int(key) < v
    return key in ([v] if isinstance(v, int) else list(v))


def arch_latency(net: Supernet, arch: Mapping[str, Any]) -> float:
    """Returns the table latency (ms) of ``arch``: the sum, over the mixed LayerChoices its
    frozen network keeps, of the chosen candidate's entry (a node's unchosen edges, blocks
    beyond the chosen depth and unchosen candidates' insides are not built, so they do not
    count).

    Raises:
        ConfigError: ``net`` has no latency table.
    """
    lat = getattr(net, "latency", None)
    if not isinstance(lat, OpLatency):
        raise ConfigError("this supernet has no latency table; build a proxylessnas search")
    total = 0.0
    for (_, layer), row, conds in zip(_layers(net), lat.rows(), conditions(net)):
        if all(_holds(m, key, arch) for m, key in conds):
            total += float(row[layer.names.index(arch[layer.label])])
    return total
