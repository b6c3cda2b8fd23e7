"""A run's shortlist: the architectures a first stage proposed, with the scores it gave them,
beside what a second stage measured of each (the two-stage search, docs/oneshot.md). Pure
(no torch); readers (``nasforge status``, the dashboard, export) show it by the shape of the
data, never by asking which kind wrote it.

    record   meta ``shortlist`` (JSON): ``{"rule": what proposed it ("spos", "proxy
             synflow", "params", ...), "k", "pool": candidates scored, "budget": {size:
             limit} or None, "candidates": [{"arch", "arch_id", "score", "params",
             "flops"}, ...]}`` best first; written once, when the first stage ends, so a
             resume finds the first stage done
    results  :func:`shortlist_results` joins each candidate with the trial of its
             architecture (by arch id): status, the reports (epochs) it reached, its metric;
             :func:`shortlist_rows` is that as a table (status, the dashboard), and export
             writes it as ``shortlist.json``
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from nasforge.errors import StoreError
from nasforge.run.progress import fmt_number
from nasforge.run.store import Store, TrialRecord

__all__ = [
    "SHORTLIST_META",
    "write_shortlist",
    "read_shortlist",
    "shortlist_results",
    "shortlist_rows",
]

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


def shortlist_results(store: Store, metric: str) -> list[dict[str, Any]]:
    """Returns the run's shortlist joined with the second stage, one entry per candidate in
    the first stage's order: ``position`` (1 first), ``rule``, the candidate's ``arch``,
    ``arch_id``, ``score`` and sizes, then ``trial`` (None: not trained yet), ``status``,
    ``resource`` (the reports it reached), ``pick`` and ``metric`` (its value); empty when
    the run recorded no shortlist."""
    shortlist = read_shortlist(store)
    if shortlist is None:
        return []
    trials: dict[str, TrialRecord] = {}
    for record in store.trials():  # with curves: the reports each reached
        if record.status != "cached":
            trials.setdefault(record.arch_id, record)
    picks = set(store.picks())
    out = []
    for i, c in enumerate(_candidates(shortlist["candidates"]), 1):
        t = trials.get(str(c.get("arch_id")))
        out.append({
            "position": i, "rule": shortlist.get("rule"), **dict(c),
            "trial": None if t is None else t.id,
            "status": None if t is None else t.status,
            "resource": None if t is None else len(t.intermediates),
            "pick": t is not None and t.id in picks,
            "metric": None if t is None else (t.metrics or {}).get(metric),
        })  # fmt: skip
    return out


def shortlist_rows(store: Store, metric: str) -> tuple[list[str], list[list[str]]]:
    """Returns (header, rows) of :func:`shortlist_results` as a table shows them: each
    candidate's score and sizes, then its trial (id, status with the reports it reached,
    ``metric``); empty when the run recorded no shortlist."""
    results = shortlist_results(store, metric)
    if not results:
        return [], []
    header = ["#", "arch", f"stage 1 ({results[0]['rule'] or '?'})", "params", "flops",
              "trial", "stage 2", metric]  # fmt: skip
    rows = []
    for r in results:
        status = "not trained yet"
        if r["trial"] is not None:
            status = f"{r['status']} @{r['resource']}" + (" (the pick)" * r["pick"])
        rows.append(
            [str(r["position"]), str(r.get("arch_id", "")), fmt_number(r.get("score")),
             fmt_number(r.get("params")), fmt_number(r.get("flops")),
             "" if r["trial"] is None else str(r["trial"]), status, fmt_number(r["metric"])]
        )  # fmt: skip
    return header, rows


def _candidates(items: Sequence[Any]) -> list[Mapping[str, Any]]:
    """Returns the candidates that are mappings (a damaged entry is left out)."""
    return [c for c in items if isinstance(c, Mapping)]
