"""The trivial baseline beside a one-shot search's scores: how far its ranking of the
candidates it scored agrees with their size (parameter count, FLOPs). Pure (no torch).

A supernet that ranks candidates as their parameter count does adds little that counting
parameters would not have given for free; a user should see that beside the pick. A run
records :func:`size_agreement` in its meta under :data:`AGREEMENT_META` (JSON), and every
reader (``nasforge status``, the dashboard) shows :func:`agreement_text` of it.

    tau      Kendall's tau-b between the scores and a size over the same candidates
             (ties in either counted as tau-b does); None when fewer than two candidates or
             either list is constant
    verdict  by the largest |tau| over the sizes: >= 0.7 "its ranking adds little beyond
             size", >= 0.4 "its ranking is partly size", below "its ranking is not size's"

Invariants: tau lies in [-1, 1]; tau(a, a) is 1 for a non-constant list; it is symmetric in
its two lists and unchanged by any increasing transform of either.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["AGREEMENT_META", "kendall_tau", "size_agreement", "agreement_text", "read_agreement"]

#: the meta key a run records its agreement under
AGREEMENT_META = "size_agreement"
#: how each size is named in the sentence
_NAMES = {"params": "parameter count", "flops": "FLOPs"}


def kendall_tau(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Returns Kendall's tau-b between two equally long lists of numbers (None when fewer
    than two pairs, or one list is constant).

    Raises:
        ValueError: the lists differ in length.
    """
    if len(a) != len(b):
        raise ValueError(f"kendall_tau needs lists of one length, got {len(a)} and {len(b)}")
    n = len(a)
    concordant = discordant = ties_a = ties_b = 0
    for i in range(n):
        for j in range(i + 1, n):
            da, db = a[i] - a[j], b[i] - b[j]
            if da == 0 and db == 0:
                continue  # tied in both: counts in neither denominator's pairs
            if da == 0:
                ties_a += 1
            elif db == 0:
                ties_b += 1
            elif (da > 0) == (db > 0):
                concordant += 1
            else:
                discordant += 1
    denominator = math.sqrt((concordant + discordant + ties_a) * (concordant + discordant + ties_b))
    if denominator == 0:
        return None
    return (concordant - discordant) / denominator


def size_agreement(
    scores: Sequence[float], sizes: Mapping[str, Sequence[float]], scorer: str = "supernet"
) -> dict[str, Any]:
    """Returns ``{"scorer", "candidates", "tau": {size: tau or None}}``: the agreement of
    ``scores`` (what ``scorer`` gave each candidate) with each size of the same candidates."""
    finite = [i for i, s in enumerate(scores) if math.isfinite(s)]
    tau = {
        name: kendall_tau([scores[i] for i in finite], [float(values[i]) for i in finite])
        for name, values in sizes.items()
    }
    return {"scorer": scorer, "candidates": len(finite), "tau": tau}


def agreement_text(agreement: Mapping[str, Any]) -> str:
    """Returns the sentence a reader shows: "the supernet agrees with parameter count at
    τ 0.91 and with FLOPs at τ 0.88 over 60 candidates: its ranking adds little beyond
    size" (or why there is no figure)."""
    scorer, n = agreement.get("scorer", "supernet"), agreement.get("candidates", 0)
    taus = {k: v for k, v in dict(agreement.get("tau") or {}).items() if v is not None}
    if not taus:
        return (
            f"the {scorer} scored {n} candidate(s): too few (or all equal) for a Kendall τ "
            "against parameter count and FLOPs"
        )
    parts = [f"with {_NAMES.get(k, k)} at τ {v:.2f}" for k, v in taus.items()]
    top = max(abs(v) for v in taus.values())
    if top >= 0.7:
        verdict = "its ranking adds little beyond size"
    elif top >= 0.4:
        verdict = "its ranking is partly size"
    else:
        verdict = "its ranking is not size's"
    return f"the {scorer} agrees {' and '.join(parts)} over {n} candidates: {verdict}"


def read_agreement(text: str | None) -> dict[str, Any] | None:
    """Returns the agreement a run recorded (its meta's JSON), or None when it recorded none
    or the text does not decode."""
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None
