"""Zero-cost proxies (:mod:`nasforge.proxies.scores`) and their uses in a search
(:mod:`nasforge.proxies.select`): keep the best of K sampled architectures by proxy, or seed
evolution's first population with them. The trivial proxies ``params`` and ``flops``
(:mod:`nasforge.proxies.size`) rank by size.

``get_proxy("synflow")(model, inputs, targets)`` scores one model; ``list_proxies()`` names
them all.
"""

from nasforge.proxies.scores import (
    Proxy,
    get_proxy,
    grad_norm,
    jacob_cov,
    linearised,
    list_proxies,
    naswot,
    register_proxy,
    snip,
    synflow,
)
from nasforge.proxies.select import rank_by_proxy, score_arch, top_by_proxy
from nasforge.proxies.size import arch_size, flops, params

__all__ = [
    "Proxy",
    "arch_size",
    "flops",
    "params",
    "get_proxy",
    "grad_norm",
    "jacob_cov",
    "linearised",
    "list_proxies",
    "naswot",
    "rank_by_proxy",
    "register_proxy",
    "score_arch",
    "snip",
    "synflow",
    "top_by_proxy",
]
