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

Importing this package imports nothing else (but :mod:`nasforge._lazy`): its names load from
their modules when first used, so the pure :mod:`~nasforge.oneshot.cmp_schedule` imports
without torch. ``search`` and ``supernet`` are the functions, as before, though each is a
submodule's name too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nasforge._lazy import Target, lazy_names

#: name -> the module that defines it (loaded on first use)
_EXPORTS: dict[str, Target] = {
    "ALGORITHMS": "nasforge.oneshot.algorithms",
    "config_for": "nasforge.oneshot.algorithms",
    "get_algorithm": "nasforge.oneshot.algorithms",
    "register_algorithm": "nasforge.oneshot.algorithms",
    "cmp_search": "nasforge.oneshot.cmp",
    "SearchConfig": "nasforge.oneshot.common",
    "SearchResult": "nasforge.oneshot.common",
    "activate": "nasforge.oneshot.common",
    "recalibrate_bn": "nasforge.oneshot.common",
    "RevSearchConfig": "nasforge.oneshot.dartsformer",
    "RevSearchResult": "nasforge.oneshot.dartsformer",
    "rev_search": "nasforge.oneshot.dartsformer",
    "peak_saved_bytes": "nasforge.oneshot.peak_memory",
    "Context": "nasforge.oneshot.reversible",
    "ReversibleLayer": "nasforge.oneshot.reversible",
    "ReversibleStack": "nasforge.oneshot.reversible",
    "set_reconstruct": "nasforge.oneshot.reversible",
    "OneShot": "nasforge.oneshot.runner",
    "OneShotSearch": "nasforge.oneshot.runner",
    "SearchState": "nasforge.oneshot.search",
    "search": "nasforge.oneshot.search",
    "supernet": "nasforge.oneshot.search",
    "EvolutionSettings": "nasforge.oneshot.selection",
    "SelectionSettings": "nasforge.oneshot.selection",
    "Algorithm": "nasforge.oneshot.supernet",
    "NoSettings": "nasforge.oneshot.supernet",
    "Supernet": "nasforge.oneshot.supernet",
    "inherit_weights": "nasforge.oneshot.supernet",
}

__all__ = [
    "ALGORITHMS",
    "Algorithm",
    "Context",
    "EvolutionSettings",
    "NoSettings",
    "OneShot",
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

__getattr__, __dir__ = lazy_names(globals(), _EXPORTS, __all__)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from nasforge.oneshot.algorithms import (
        ALGORITHMS,
        config_for,
        get_algorithm,
        register_algorithm,
    )
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
    from nasforge.oneshot.search import SearchState, search, supernet
    from nasforge.oneshot.selection import EvolutionSettings, SelectionSettings
    from nasforge.oneshot.supernet import Algorithm, NoSettings, Supernet, inherit_weights
