"""The trivial baseline beside a one-shot search's scores: Kendall's tau between what it
gave the candidates it scored and their size (parameter count, FLOPs), recorded in the run's
meta (:mod:`nasforge.run.agreement` holds the arithmetic and the wording; ``nasforge status``
and the dashboard show it).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from nasforge.proxies.size import SIZES, arch_size
from nasforge.run.agreement import AGREEMENT_META, agreement_text, size_agreement
from nasforge.run.store import Store
from nasforge.space.search_space import Arch, arch_id

__all__ = ["size_baseline", "record_agreement"]

log = logging.getLogger("nasforge.oneshot")


def size_baseline(
    space: Any,
    scored: Sequence[tuple[Arch, float]],
    example: torch.Tensor,
    scorer: str = "supernet",
) -> dict[str, Any]:
    """Returns :func:`~nasforge.run.agreement.size_agreement` of the scores ``scorer`` gave
    the architectures ``scored`` (each once, by arch id; the last score of a repeat) with
    their parameter counts and FLOPs (``example`` sets the input shape)."""
    once = list({arch_id(a): (a, s) for a, s in scored}.values())
    sizes = [arch_size(space, a, example) for a, _ in once]
    return size_agreement([s for _, s in once], {k: [z[k] for z in sizes] for k in SIZES}, scorer)


def record_agreement(store: Store, agreement: Mapping[str, Any]) -> None:
    """Returns None after recording ``agreement`` in the run's meta (where status and the
    dashboard read it) and logging its sentence."""
    store.set_meta(AGREEMENT_META, json.dumps(agreement))
    log.info("%s", agreement_text(agreement))
