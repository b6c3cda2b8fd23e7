"""A run's shortlist: the architectures a first stage proposed, with the scores it gave them,
beside what a second stage measured of each (the two-stage search, docs/oneshot.md). Pure
(no torch); readers (``nasforge status``, the dashboard, export) show it by the shape of the
data, never by asking which kind wrote it.

    record   meta ``shortlist`` (JSON): ``{"rule": what proposed it ("spos", "proxy
             synflow", "params", ...), "k", "pool": candidates scored, "budget": {size:
             limit} or None, "candidates": [{"arch", "arch_id", "score", "params",
             "flops"}, ...]}`` best first; written once, when the first stage ends, so a
             resume finds the first stage done
    rows     :func:`shortlist_rows` joins each candidate with the trial of its architecture
             (by arch id): status, the reports (epochs) it reached, its metric
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from nasforge.errors import StoreError
from nasforge.run.progress import fmt_number
from nasforge.run.store import Store, TrialRecord

__all__ = ["SHORTLIST_META", "write_shortlist", "read_shortlist", "shortlist_rows"]

#: the meta key a run records its shortlist under
SHORTLIST_META = "shortlist"


def write_shortlist(store: Store, shortlist: Mapping[str, Any]) -> None:
    """Returns None after recording ``shortlist`` (the format above) in the run's meta."""
    store.set_meta(SHORTLIST_META, json.dumps(dict(shortlist)))


def read_shortlist(store: Store) -> dict[str, Any] | None:
    """Returns the shortlist the run recorded, or None when it recorded none.

    Raises:
        StoreError: the recorded shortlist does not decode.
    """
    text = store.get_meta(SHORTLIST_META)
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise StoreError(
            f"{store.directory}: the recorded shortlist does not decode: {exc}"
        ) from exc
    if not isinstance(data, dict) or not isinstance(data.get("candidates"), list):
        raise StoreError(f"{store.directory}: the recorded shortlist has no candidates list")
    return data


def shortlist_rows(store: Store, metric: str) -> tuple[list[str], list[list[str]]]:
    """Returns (header, rows) of the run's shortlist, one row per candidate in the first
    stage's order: its score and sizes, then the trial of its architecture (id, status with
    the reports it reached, ``metric``); empty when the run recorded no shortlist."""
    shortlist = read_shortlist(store)
    if shortlist is None:
        return [], []
    trials: dict[str, TrialRecord] = {}
    for record in store.trials():  # with curves: the reports each reached
        if record.status != "cached":
            trials.setdefault(record.arch_id, record)
    picks = set(store.picks())
    header = ["#", "arch", f"stage 1 ({shortlist.get('rule', '?')})", "params", "flops",
              "trial", "stage 2", metric]  # fmt: skip
    rows = []
    for i, c in enumerate(_candidates(shortlist["candidates"]), 1):
        t = trials.get(str(c.get("arch_id")))
        status = "not trained yet"
        if t is not None:
            status = f"{t.status} @{len(t.intermediates)}" + (" (the pick)" * (t.id in picks))
        value = (t.metrics or {}).get(metric) if t is not None else None
        rows.append(
            [str(i), str(c.get("arch_id", "")), fmt_number(c.get("score")),
             fmt_number(c.get("params")), fmt_number(c.get("flops")),
             "" if t is None else str(t.id), status, fmt_number(value)]
        )  # fmt: skip
    return header, rows


def _candidates(items: Sequence[Any]) -> list[Mapping[str, Any]]:
    """Returns the candidates that are mappings (a damaged entry is left out)."""
    return [c for c in items if isinstance(c, Mapping)]
