"""Once-for-All and CompOFA: elastic supernets, compound coupling, progressive shrinking,
distillation and fast deployment search (Cai et al. 2020; Sahni et al. 2021).

Pure modules (no torch): :mod:`~nasforge.ofa.spaces` (design spaces, exact counts, coupling,
phases), :mod:`~nasforge.ofa.latency` (layer shapes, FLOPs, latency tables, memoization),
:mod:`~nasforge.ofa.evolution` (evolutionary deployment search, Pareto fronts),
:mod:`~nasforge.ofa.published` (once-for-all's published plans, arch dictionaries and predictor
features; its latency tables load with ``LatencyTable.from_ofa_yaml``). Torch modules:
:mod:`~nasforge.ofa.layers`, :mod:`~nasforge.ofa.mobilenet`, :mod:`~nasforge.ofa.train`,
:mod:`~nasforge.ofa.measure`, :mod:`~nasforge.ofa.predictor`, :mod:`~nasforge.ofa.pretrained`
(``load_pretrained``: published supernet checkpoints); :mod:`~nasforge.ofa.record` keeps
a run in an engine experiment store (config, epochs, checkpoints, searches). Importing this
package imports nothing else (but :mod:`nasforge._lazy`): its names load from the pure modules
when first used (``nasforge`` itself stays quick to start), and the torch parts are imported
from their modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nasforge._lazy import lazy_names

#: name -> the pure module that defines it (loaded on first use)
_EXPORTS = {
    "LatencyTable": "nasforge.ofa.latency",
    "LayerShape": "nasforge.ofa.latency",
    "MemoizedCost": "nasforge.ofa.latency",
    "PublishedLatencyTable": "nasforge.ofa.latency",
    "count_macs": "nasforge.ofa.latency",
    "layer_shapes": "nasforge.ofa.latency",
    "from_ofa_arch": "nasforge.ofa.published",
    "published_spec": "nasforge.ofa.published",
    "to_ofa_arch": "nasforge.ofa.published",
    "OFASearchSpace": "nasforge.ofa.spaces",
    "OFASpec": "nasforge.ofa.spaces",
    "Phase": "nasforge.ofa.spaces",
    "block_size": "nasforge.ofa.spaces",
    "compofa_phases": "nasforge.ofa.spaces",
    "progressive_phases": "nasforge.ofa.spaces",
}

__all__ = [
    "LatencyTable",
    "LayerShape",
    "MemoizedCost",
    "OFASearchSpace",
    "OFASpec",
    "Phase",
    "PublishedLatencyTable",
    "block_size",
    "compofa_phases",
    "count_macs",
    "from_ofa_arch",
    "layer_shapes",
    "progressive_phases",
    "published_spec",
    "to_ofa_arch",
]


__getattr__, __dir__ = lazy_names(globals(), _EXPORTS, __all__)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from nasforge.ofa.latency import (
        LatencyTable,
        LayerShape,
        MemoizedCost,
        PublishedLatencyTable,
        count_macs,
        layer_shapes,
    )
    from nasforge.ofa.published import from_ofa_arch, published_spec, to_ofa_arch
    from nasforge.ofa.spaces import (
        OFASearchSpace,
        OFASpec,
        Phase,
        block_size,
        compofa_phases,
        progressive_phases,
    )
