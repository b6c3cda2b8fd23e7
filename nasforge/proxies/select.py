"""Proxies in a search: score an architecture of a model space at initialisation, and rank K
sampled architectures by a proxy.

The strategies stay pure: what they get from here is plain data. A *filter* is
``top_by_proxy(...)`` (sample K, keep the best ``n`` by proxy) handed to
``RandomStrategy(initial=...)`` with ``n_trials=n`` (train those); a *warm start* hands them
to ``RegularizedEvolution(initial=...)``. ``ProxyEvaluator``
(:mod:`nasforge.engine.proxy_evaluator`) records the proxy value with each trial.

Invariants: the same space, architecture, batch and seed give the same score; scoring leaves
the global random state as it found it.
"""

from __future__ import annotations

import math
import random
from typing import Any

import torch
from torch.nn.parameter import is_lazy

from nasforge.errors import ConfigError
from nasforge.proxies.scores import Proxy, get_proxy
from nasforge.space import freeze
from nasforge.space.search_space import Arch, arch_id

__all__ = ["score_arch", "rank_by_proxy", "top_by_proxy"]


def score_arch(
    space: Any,
    arch: Arch,
    proxy: str | Proxy,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    seed: int = 0,
) -> float:
    """Returns ``proxy`` of ``arch`` frozen from ``space`` with its weights initialised from
    ``seed`` (the global random state is restored afterwards; lazy modules are shaped by one
    eval-mode pass of the first input).

    Raises:
        ArchitectureError: ``arch`` is not in ``space``.
        ConfigError: an unknown proxy name.
    """
    fn = get_proxy(proxy)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = freeze(space, arch)
        if any(is_lazy(p) for p in model.parameters()):  # lazy modules: shaped by one pass
            with torch.no_grad():
                model.eval()(inputs[:1])
            model.train()
    return float(fn(model, inputs, targets))


def rank_by_proxy(
    space: Any,
    proxy: str | Proxy,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    n_samples: int,
    seed: int = 0,
) -> list[tuple[Arch, float]]:
    """Returns up to ``n_samples`` distinct architectures drawn uniformly from ``space`` with
    their proxy scores, best first (ties keep the order of drawing; ``-inf`` and NaN last).

    Raises:
        ConfigError: ``n_samples`` is not a positive int.
    """
    if not isinstance(n_samples, int) or isinstance(n_samples, bool) or n_samples < 1:
        raise ConfigError(f"n_samples must be an int >= 1, got {n_samples!r}")
    search = space.search_space()
    rng = random.Random(seed)
    drawn: dict[str, Arch] = {}
    # a small space may hold fewer than n_samples architectures: stop after enough misses
    for _ in range(20 * n_samples):
        if len(drawn) == n_samples:
            break
        arch = search.sample(rng)
        drawn.setdefault(arch_id(arch), arch)
    scored = [(a, score_arch(space, a, proxy, inputs, targets, seed)) for a in drawn.values()]
    return sorted(scored, key=lambda s: -s[1] if math.isfinite(s[1]) else math.inf)


def top_by_proxy(
    space: Any,
    proxy: str | Proxy,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    n_samples: int,
    keep: int,
    seed: int = 0,
) -> list[Arch]:
    """Returns the ``keep`` best of ``n_samples`` uniformly drawn architectures by ``proxy``:
    the proxy filter's choice, or evolution's warm start (``initial=``).

    Raises:
        ConfigError: ``keep`` is not an int in [1, n_samples].
    """
    if not isinstance(keep, int) or isinstance(keep, bool) or not 1 <= keep <= n_samples:
        raise ConfigError(f"keep must be an int in [1, n_samples={n_samples}], got {keep!r}")
    return [
        arch for arch, _ in rank_by_proxy(space, proxy, inputs, targets, n_samples, seed)[:keep]
    ]
