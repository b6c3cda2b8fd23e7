"""A resource budget as a one-shot search holds it: what it may bound, its check, and how far a
size lies over it. Pure (no torch); :mod:`nasforge.oneshot.budgeted` counts sizes and applies
the budget to the algorithms.

    budget   ``{"params": 2e4}``, ``{"flops": 5e5}``, ``{"latency": 1.5}`` or several: each
             bounded size at most its limit (the sizes :func:`nasforge.proxies.size.arch_size`
             counts: parameters, and multiply-accumulates of one example's forward pass; and
             latency, milliseconds by the supernet's latency table,
             :mod:`nasforge.oneshot.op_latency`: measured on this machine or given)
    load     the sum over the bounded sizes of size / limit (what a projection lowers)
    excess   the sum over the bounded sizes of max(0, size / limit - 1) (0: within)

Invariants: ``within(s, b)`` exactly when ``excess(s, b) == 0``; a checked budget maps each
of its keys, a name of :data:`BUDGET_SIZES`, to a float > 0.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

from nasforge.errors import ConfigError

__all__ = [
    "BUDGET_SIZES",
    "MEASURE_KEYS",
    "check_budget",
    "latency_recipe",
    "within",
    "load",
    "excess",
    "describe",
]

#: what a budget may bound (the sizes :mod:`nasforge.proxies.size` counts, and the latency
#: in ms a supernet's latency table gives)
BUDGET_SIZES = ("params", "flops", "latency")


def check_budget(budget: Any, setting: str = "budget") -> dict[str, float] | None:
    """Returns ``budget`` as ``{size: limit}`` with float limits (None for no budget).

    Raises:
        ConfigError: not a non-empty mapping, a key that is no size of :data:`BUDGET_SIZES`,
            or a limit that is not a finite number > 0 (the message names ``setting``).
    """
    if budget is None:
        return None
    if not isinstance(budget, Mapping) or not budget:
        raise ConfigError(
            f"{setting} must be a mapping such as {{params: 20000}}, {{flops: 5e5}} or "
            f"{{latency: 1.5}} (ms), got "
            f"{budget!r:.80}"
        )
    out: dict[str, float] = {}
    for key, limit in budget.items():
        if key not in BUDGET_SIZES:
            raise ConfigError(
                f"{setting} bounds {key!r}; a budget bounds {list(BUDGET_SIZES)} (e.g. "
                f"{{params: 20000}})"
            )
        if (
            isinstance(limit, bool)
            or not isinstance(limit, numbers.Real)
            or not math.isfinite(limit)
            or limit <= 0
        ):
            raise ConfigError(f"{setting} {key} must be a finite number > 0, got {limit!r}")
        out[str(key)] = float(limit)
    return out


#: how a latency budget's table may be timed (``budget_latency_table: {measure: {...}}``):
#: the arguments of ``nasforge.oneshot.proxyless.latency_table``
MEASURE_KEYS = ("runtime", "threads", "batch", "n_warmup", "n_runs")


def latency_recipe(source: Any) -> dict[str, Any] | None:
    """Returns the timing settings of ``source`` when it asks for a measured table
    (``{"measure": {"runtime": "onnxruntime", "threads": 1}}``), else None (a table, a file,
    or nothing: timed with the defaults).

    Raises:
        ConfigError: ``measure`` beside other keys, not a mapping, or with a key that is no
            timing setting (:data:`MEASURE_KEYS`).
    """
    if not isinstance(source, Mapping) or "measure" not in source:
        return None
    how = source["measure"]
    if len(source) != 1 or not isinstance(how, Mapping):
        raise ConfigError(
            "budget_latency_table: {measure: {runtime: onnxruntime, threads: 1}} asks for a "
            f"measured table and takes nothing beside it, got {dict(source)!r:.120}"
        )
    unknown = sorted(set(how) - set(MEASURE_KEYS))
    if unknown:
        raise ConfigError(f"budget_latency_table measure takes {list(MEASURE_KEYS)}, not {unknown}")
    return dict(how)


def within(sizes: Mapping[str, float], budget: Mapping[str, float] | None) -> bool:
    """Returns whether ``sizes`` lie within ``budget`` (each bounded size at most its limit)."""
    return budget is None or all(sizes[k] <= limit for k, limit in budget.items())


def load(sizes: Mapping[str, float], budget: Mapping[str, float]) -> float:
    """Returns the sum over the bounded sizes of size / limit."""
    return sum(sizes[k] / limit for k, limit in budget.items())


def excess(sizes: Mapping[str, float], budget: Mapping[str, float]) -> float:
    """Returns the sum over the bounded sizes of max(0, size / limit - 1): 0 within budget."""
    return sum(max(0.0, sizes[k] / limit - 1.0) for k, limit in budget.items())


def describe(sizes: Mapping[str, float], budget: Mapping[str, float]) -> str:
    """Returns ``"params 31,000 > 20,000"``-like text of each bounded size against its limit
    (latency in ms, to three decimals)."""
    return ", ".join(
        f"{k} {_figure(k, sizes[k])} {'<=' if sizes[k] <= limit else '>'} {_figure(k, limit)}"
        for k, limit in budget.items()
    )


def _figure(size: str, value: float) -> str:
    return f"{value:,.3f} ms" if size == "latency" else f"{value:,.0f}"
