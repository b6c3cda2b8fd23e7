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
             a finalist trained again from other seeds (the two-stage confirmation) shows
             each training and their mean;
             :func:`shortlist_rows` is that as a table (status, the dashboard), and export
             writes it as ``shortlist.json``
"""

from __future__ import annotations

import json
import math
import statistics
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
    ``resource`` (the reports it reached), ``pick`` (any of its trainings is the run's
    pick) and ``metric`` (its first training's value), ``trainings`` (each: ``trial``,
    ``status``, ``metric``) and ``mean`` (over its trainings when it had several, else
    None); empty when the run recorded no shortlist."""
    shortlist = read_shortlist(store)
    if shortlist is None:
        return []
    trials: dict[str, list[TrialRecord]] = {}
    for record in store.trials():  # with curves: the reports each reached
        if record.status != "cached":
            trials.setdefault(record.arch_id, []).append(record)
    picks = set(store.picks())
    out = []
    for i, c in enumerate(_candidates(shortlist["candidates"]), 1):
        runs = trials.get(str(c.get("arch_id")), [])
        t = runs[0] if runs else None
        values = [(r.metrics or {}).get(metric) for r in runs]
        finite = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
        out.append({
            "position": i, "rule": shortlist.get("rule"), **dict(c),
            "trial": None if t is None else t.id,
            "status": None if t is None else t.status,
            "resource": None if t is None else len(t.intermediates),
            "pick": any(r.id in picks for r in runs),
            "metric": values[0] if values else None,
            # a confirmed finalist's trainings (its first, then those from other seeds)
            "trainings": [{"trial": r.id, "status": r.status, "metric": v}
                          for r, v in zip(runs, values)],
            "mean": statistics.mean(finite) if len(runs) > 1 and finite else None,
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
        value = fmt_number(r["metric"])
        if r["trial"] is not None:
            n = len(r["trainings"])
            status = (f"{r['status']} @{r['resource']}" + (f", trained {n} times" if n > 1 else "")
                      + (" (the pick)" * r["pick"]))  # fmt: skip
        if r["mean"] is not None:
            shown = ", ".join(fmt_number(t["metric"]) for t in r["trainings"])
            value = f"mean {fmt_number(r['mean'])} of {shown}"
        rows.append(
            [str(r["position"]), str(r.get("arch_id", "")), fmt_number(r.get("score")),
             fmt_number(r.get("params")), fmt_number(r.get("flops")),
             "" if r["trial"] is None else str(r["trial"]), status, value]
        )  # fmt: skip
    return header, rows


def _candidates(items: Sequence[Any]) -> list[Mapping[str, Any]]:
    """Returns the candidates that are mappings (a damaged entry is left out)."""
    return [c for c in items if isinstance(c, Mapping)]
