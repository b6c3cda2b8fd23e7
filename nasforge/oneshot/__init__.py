"""One-shot search: the same model space searched by one weight-sharing supernet.

``nasforge.oneshot.search(space, "darts" | "nasb" | "spos" | ..., (X, y), epochs=...)`` returns
a :class:`SearchResult` whose ``arch`` freezes with ``nf.freeze(space, arch)``. One algorithm per
module, each registered by name with its own settings (:mod:`~nasforge.oneshot.algorithms`):
:mod:`~nasforge.oneshot.supernet` (conversion, export, weight inheritance),
:mod:`~nasforge.oneshot.darts`, :mod:`~nasforge.oneshot.nasb`, :mod:`~nasforge.oneshot.spos`,
:mod:`~nasforge.oneshot.enas`, :mod:`~nasforge.oneshot.fewshot`,
:mod:`~nasforge.oneshot.proxyless` (with :mod:`~nasforge.oneshot.op_latency`, its latency tables);
:mod:`~nasforge.oneshot.runner` runs a search as a recorded run (``nasforge run``, kind
``oneshot``); :mod:`~nasforge.oneshot.cmp` splits a DARTS/NASB search over consecutive
partitions (model parallel, CMP) and replicas (``model_parallel=M, schedule="cmp"``).
"""

from nasforge.oneshot.algorithms import config_for, register_algorithm
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
from nasforge.oneshot.runner import OneShot, OneShotExperiment, OneShotSearch
from nasforge.oneshot.search import ALGORITHMS, SearchState, get_algorithm, search, supernet
from nasforge.oneshot.selection import EvolutionSettings, SelectionSettings
from nasforge.oneshot.supernet import Algorithm, NoSettings, Supernet, inherit_weights

__all__ = [
    "ALGORITHMS",
    "Algorithm",
    "Context",
    "EvolutionSettings",
    "NoSettings",
    "OneShot",
    "OneShotExperiment",
    "OneShotSearch",
    "RevSearchConfig",
    "RevSearchResult",
    "ReversibleLayer",
    "ReversibleStack",
    "SearchConfig",
    "SearchResult",
    "SearchState",
    "SelectionSettings",
    "Supernet",
    "activate",
    "cmp_search",
    "config_for",
    "get_algorithm",
    "inherit_weights",
    "peak_saved_bytes",
    "recalibrate_bn",
    "register_algorithm",
    "rev_search",
    "search",
    "set_reconstruct",
    "supernet",
]
