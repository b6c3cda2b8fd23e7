"""An evaluator that records a zero-cost proxy with every trial: ``proxy_<name>`` next to the
metrics of the evaluator it wraps.

The proxy is computed in the worker, before the wrapped evaluator trains, on the trial's
architecture frozen afresh with its weights initialised from ``seed`` (so it is the same for
the same architecture in every trial and every run), on one fixed batch.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from nasforge.engine.evaluator import BaseEvaluator, Report, as_metrics, get_evaluator
from nasforge.errors import ConfigError
from nasforge.proxies import get_proxy, list_proxies, score_arch

__all__ = ["ProxyEvaluator"]


class ProxyEvaluator(BaseEvaluator):
    """Returns the wrapped evaluator's metrics plus ``proxy_<name>``: the proxy of the
    architecture at initialisation on ``(inputs, targets)``.

    Invariants: the wrapped metrics are returned unchanged; the proxy value depends only on the
    architecture, the batch and ``seed``; a proxy that is not finite (a network that passes
    nothing, for NASWOT or jacob_cov) is recorded as ``-1e300``, below every finite score, as a
    run's metrics must be finite numbers.

    Raises:
        ConfigError: an unknown proxy name, or ``inputs`` and ``targets`` of different lengths.
    """

    def __init__(
        self,
        evaluator: Any,
        proxy: str,
        inputs: torch.Tensor,
        targets: torch.Tensor,
        seed: int = 0,
    ) -> None:
        if not isinstance(proxy, str) or proxy not in list_proxies():
            raise ConfigError(f"proxy must be one of {list_proxies()}, got {proxy!r}")
        if len(inputs) != len(targets) or len(inputs) < 2:
            raise ConfigError(
                f"the proxy batch needs >= 2 inputs and one target each, got {len(inputs)} "
                f"inputs and {len(targets)} targets"
            )
        self.inner = get_evaluator(evaluator)
        self.proxy, self.inputs, self.targets, self.seed = proxy, inputs, targets, seed
        self.default_metric = self.inner.default_metric
        declared = self.inner.metric_names
        self.metric_names = None if declared is None else (*declared, self.metric)

    @property
    def metric(self) -> str:
        """Returns the name the proxy value is recorded under: ``proxy_<name>``."""
        return f"proxy_{self.proxy}"

    def check(self) -> None:
        """Raises ConfigError when the wrapped evaluator is misconfigured."""
        get_proxy(self.proxy)
        self.inner.check()

    def evaluate(self, space: Any, arch: dict[str, Any], report: Report) -> Any:
        """Returns the wrapped evaluator's metrics (a dict) with ``proxy_<name>`` added."""
        if not hasattr(space, "freeze"):
            raise ConfigError(
                "a proxy scores a model, but the experiment's space is a plain SearchSpace; "
                "give the experiment the ModelSpace"
            )
        value = score_arch(space, arch, self.proxy, self.inputs, self.targets, self.seed)
        metrics = as_metrics(
            self.inner.evaluate(space, arch, report), self.default_metric, require=False
        )  # the engine checks the named metrics itself
        metrics[self.metric] = value if math.isfinite(value) else -1e300
        return metrics

    def config(self) -> dict[str, Any]:
        """Returns plain data naming the proxy, its batch size and the wrapped evaluator."""
        return {
            "type": "proxy",
            "proxy": self.proxy,
            "batch": len(self.inputs),
            "seed": self.seed,
            "evaluator": self.inner.config(),
        }
