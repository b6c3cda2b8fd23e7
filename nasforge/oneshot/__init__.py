"""One-shot search: the same model space searched by one weight-sharing supernet.

``nasforge.oneshot.search(space, "darts" | "nasb" | "spos", (X, y), epochs=...)`` returns a
:class:`SearchResult` whose ``arch`` freezes with ``nf.freeze(space, arch)``. One algorithm per
module: :mod:`~nasforge.oneshot.supernet` (conversion, export, weight inheritance),
:mod:`~nasforge.oneshot.darts`, :mod:`~nasforge.oneshot.nasb`, :mod:`~nasforge.oneshot.spos`,
:mod:`~nasforge.oneshot.proxyless` (with :mod:`~nasforge.oneshot.op_latency`, its latency tables);
:mod:`~nasforge.oneshot.runner` runs a search as a recorded run (``nasforge run``, kind
``oneshot``); :mod:`~nasforge.oneshot.cmp` splits a DARTS/NASB search over consecutive
partitions (model parallel, CMP) and replicas (``model_parallel=M, schedule="cmp"``).
"""

from nasforge._deprecated import module_getattr
from nasforge.oneshot.cmp import cmp_search
from nasforge.oneshot.common import SearchConfig, SearchResult, activate, recalibrate_bn
from nasforge.oneshot.dartsformer import RevSearchConfig, RevSearchResult, rev_search
from nasforge.oneshot.peak_memory import peak_saved_bytes
from nasforge.oneshot.reversible import (
    Context,
    ReversibleLayer,
    ReversibleStack,
    set_reconstruct,
)
from nasforge.oneshot.runner import OneShot, OneShotSearch
from nasforge.oneshot.search import ALGORITHMS, SearchState, get_algorithm, search, supernet
from nasforge.oneshot.supernet import Algorithm, Supernet, inherit_weights

#: OneShotExperiment (0.1's name of OneShotSearch) is gone; asking for it says so
__getattr__ = module_getattr(__name__)

__all__ = [
    "ALGORITHMS",
    "Algorithm",
    "Context",
    "OneShot",
    "OneShotSearch",
    "RevSearchConfig",
    "RevSearchResult",
    "ReversibleLayer",
    "ReversibleStack",
    "SearchConfig",
    "SearchResult",
    "SearchState",
    "Supernet",
    "activate",
    "cmp_search",
    "get_algorithm",
    "inherit_weights",
    "peak_saved_bytes",
    "recalibrate_bn",
    "rev_search",
    "search",
    "set_reconstruct",
    "supernet",
]
