"""The dashboard's data access layer: plain data read from run records, read-only.

Every function here opens a run with ``Store.open(readonly=True)`` (a read-only SQLite
connection: it never blocks the writer and never changes a byte of the record), reads what
one view needs and closes it again. Nothing here knows which kind of run wrote a record:
views are driven by what the record holds (its objective, metrics, progress rows, artifacts).

The trials of a large run are read once per change of the record: :class:`TrialCache` keeps
each run's light trials (no architectures) keyed by the database files' size and time. The
overview's one row per run is :mod:`nasforge.dashboard.overview`'s.
"""

from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from nasforge.errors import ConfigError, StoreError
from nasforge.run.progress import fmt_number
from nasforge.run.records import TrialRecord
from nasforge.run.results import pareto_front, rank_trials, score
from nasforge.run.store import DB_NAME, Store
from nasforge.runtime.devices import placement_text

__all__ = [
    "TrialCache",
    "open_run",
    "version",
    "metric_names",
    "trial_page",
    "best_so_far",
    "curves",
    "rungs",
    "pareto",
    "trial_detail",
    "diff",
    "plain",
    "check_trial",
    "final_trials",
    "run_facts",
    "timeline",
    "MAX_PAGE_SIZE",
    "MAX_METRIC_COLUMNS",
]

#: the most rows one page of the trial table holds (a larger page size asked is capped)
MAX_PAGE_SIZE = 500
#: the most metrics a view shows (table columns, choices, a trial's metrics), the objective
#: first: a record with more (a hand-made or damaged one) still gives a page of bounded size
MAX_METRIC_COLUMNS = 100
#: the most characters of an architecture shown in a table cell
_ARCH_TEXT = 2000
_NUMBER = (int, float)


def final_trials(trials: Sequence[TrialRecord]) -> list[TrialRecord]:
    """Returns the trials whose metrics are final results: all but the pruned ones, whose
    metrics are the value of the rung they were stopped at (one epoch's accuracy is no
    result to rank or to learn importances from)."""
    return [t for t in trials if t.status != "pruned"]


def run_facts(store: Store) -> dict[str, str]:
    """Returns the run's ``stopper`` (its rule and settings, ``none``, or ``""`` for a kind
    without one), the resource ``spent`` (reports summed over the trained trials, by
    status; ``""`` when none were reported), the size ``baseline`` of a one-shot score and
    the ``shortlist`` (each candidate's first-stage score beside its second-stage result),
    as text for the run's summary line (``""``: the run recorded none)."""
    from nasforge.run.agreement import AGREEMENT_META, agreement_text, read_agreement
    from nasforge.run.shortlist import shortlist_rows
    from nasforge.run.status import resource_spent

    config = store.config()
    section = config.get(str(config.get("kind", "")), {})
    stopper = ""
    if isinstance(section, Mapping) and "stopper" in section:
        s = section["stopper"]
        if isinstance(s, Mapping):
            rest = ", ".join(f"{k} {plain(v)}" for k, v in s.items() if k != "rule")
            stopper = f"{s.get('rule', '?')}" + (f" ({rest})" if rest else "")
        else:
            stopper = "none" if s is None else plain(s)
    spent = resource_spent(store.trials())
    total = spent.pop("total")
    parts = ", ".join(f"{k} {v}" for k, v in sorted(spent.items()) if v)
    agreement = read_agreement(store.get_meta(AGREEMENT_META))
    header, rows = shortlist_rows(store, store.objective()["metric"])
    shortlist = "; ".join(f"#{r[0]} {r[2]} → {r[6]}" + (f" {r[7]}" if r[7] else "") for r in rows)
    return {
        "stopper": stopper,
        "spent": f"{total} reports ({parts})" if total else "",
        "baseline": "" if agreement is None else agreement_text(agreement),
        "shortlist": f"{header[2]} → stage 2: {shortlist}" if rows else "",
    }


def timeline(store: Store) -> dict[str, list[Any]]:
    """Returns the run's trials over time, for a run without progress rows (a multi-trial
    search): ``seconds`` since the run was created at which each trial ended, and after it
    the cumulative ``trials`` ended, ``reports`` (the resource spent) and ``pruned`` trials.
    Empty lists when no trial ended yet."""
    created = float(store.get_meta("created") or 0.0)
    ended = sorted(
        (t.finished, len(t.intermediates), t.status)
        for t in store.trials()
        if t.finished is not None and t.status not in ("cached", "running")
    )
    out: dict[str, list[Any]] = {"seconds": [], "trials": [], "reports": [], "pruned": []}
    reports = pruned = 0
    for i, (finished, n, status) in enumerate(ended, 1):
        reports += n
        pruned += status == "pruned"
        out["seconds"].append(round(finished - created, 3))
        out["trials"].append(i)
        out["reports"].append(reports)
        out["pruned"].append(pruned)
    return out


def check_trial(directory: Path, t: TrialRecord) -> TrialRecord:
    """Returns ``t`` when every value a view reads is of its type: metrics numbers (or
    null), ``duration``, ``started`` and ``finished`` numbers, ``error`` text.

    Raises:
        StoreError: a value is of another type (a damaged or hand-edited record), naming the
            trial's row and the field.
    """
    bad: list[str] = []
    for k, v in (t.metrics or {}).items():
        if v is not None and not isinstance(v, _NUMBER):
            bad.append(f"metric {k!r} is {type(v).__name__} {str(v)[:40]!r}")
    for name in ("duration", "started", "finished"):
        v = getattr(t, name)
        if v is not None and (not isinstance(v, _NUMBER) or isinstance(v, bool)):
            bad.append(f"{name} is {type(v).__name__} {str(v)[:40]!r}")
    if t.error is not None and not isinstance(t.error, str):
        bad.append(f"error is {type(t.error).__name__}, not text")
    if bad:
        raise StoreError(
            f"{directory}: trials row {t.id} is damaged ({'; '.join(bad[:3])}); restore a "
            f"copy of the record, or delete that row"
        )
    return t


def version(directory: Path) -> tuple[int, ...]:
    """Returns a token that changes whenever the run's database changes (size and time of
    ``run.db`` and of its WAL file unless that is empty: a reader creates an empty one);
    reading it opens nothing."""
    out: list[int] = []
    for name in (DB_NAME, DB_NAME + "-wal"):
        try:
            st = (directory / name).stat()
        except OSError:
            out += [0, 0]
            continue
        out += [st.st_mtime_ns, st.st_size] if st.st_size or name == DB_NAME else [0, 0]
    return tuple(out)


@contextmanager
def open_run(directory: Path) -> Iterator[Store]:
    """Returns (as a context) the run's record opened read-only; closed on exit.

    Raises:
        StoreError: no run there, or the record is unreadable or of another format.
    """
    store = Store.open(directory, readonly=True)
    try:
        yield store
    finally:
        store.close()


class TrialCache:
    """Returns each run's light trials (metrics, no architectures), read again only when the
    record changed.

    Invariants: an entry is served only while :func:`version` of its run, and whether a
    writer works on it, are unchanged; at most ``size`` runs are kept (least recently used
    dropped first); thread-safe.
    """

    def __init__(self, size: int = 16) -> None:
        self.size = size
        self._items: OrderedDict[Path, tuple[tuple[int, ...], list[TrialRecord]]] = OrderedDict()
        self._lock = threading.Lock()

    def trials(self, store: Store) -> list[TrialRecord]:
        """Returns the light trials of ``store``'s run, in id order (shared: do not mutate).

        Raises:
            StoreError: a trial row does not decode.
        """
        # whether a writer works on the run is part of the key: once it is gone, the trials
        # it left running read as interrupted although the database did not change
        key, ver = store.directory, (*version(store.directory), store.state() == "running")
        with self._lock:
            hit = self._items.get(key)
            if hit is not None and hit[0] == ver:
                self._items.move_to_end(key)
                return hit[1]
        trials = [check_trial(store.directory, t) for t in store.trials(light=True)]
        with self._lock:
            self._items[key] = (ver, trials)
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return trials


def plain(value: Any) -> str:
    """Returns a short text for a value of a record (numbers to 5 significant digits, JSON
    for the rest)."""
    if value is None:
        return ""
    if isinstance(value, float):
        return fmt_number(value)
    if isinstance(value, (int, str)):
        return str(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def metric_names(
    trials: Sequence[TrialRecord], first: str = "", limit: int | None = MAX_METRIC_COLUMNS
) -> list[str]:
    """Returns the metric names the trials report, ``first`` first, the rest sorted; at most
    ``limit`` of them (None: all)."""
    names = {k for t in trials if t.metrics for k in t.metrics}
    out = ([first] if first in names else []) + sorted(names - {first})
    return out if limit is None else out[:limit]


def _error_line(error: str | None) -> str:
    lines = (error or "").strip().splitlines()
    return lines[-1][:200] if lines else ""


def _sort_value(t: TrialRecord, column: str) -> tuple[int, Any]:
    """Returns a sort key for one table column: missing values sort after present ones."""
    if column.startswith("m:"):
        v = (t.metrics or {}).get(column[2:])
        return (0, v) if isinstance(v, (int, float)) and not math.isnan(v) else (1, 0.0)
    value = {
        "id": t.id,
        "status": t.status,
        "how": t.evaluation,
        "seconds": t.duration,
        "error": t.error or None,
        "where": placement_text(t.placement) or None,
    }.get(column, t.id)
    return (0, value) if value is not None else (1, 0)


def _table_request(
    page: Any, page_size: Any, sort_by: Any, statuses: Any
) -> tuple[int, int, list[tuple[str, bool]], list[str]]:
    """Returns (page, page size capped at :data:`MAX_PAGE_SIZE`, [(column, descending)],
    statuses) of a trial-table request as the browser sent it.

    Raises:
        ConfigError: a value of the wrong type (a hand-made request), named.
    """
    if not isinstance(page, int) or isinstance(page, bool):
        raise ConfigError(f"page {page!r} is not a page number")
    if not isinstance(page_size, int) or isinstance(page_size, bool) or page_size < 1:
        raise ConfigError(f"page size {page_size!r} is not a positive number of rows")
    if not isinstance(sort_by, (list, tuple)) or not all(
        isinstance(sp, Mapping)
        and isinstance(sp.get("column_id", "id"), str)
        and sp.get("direction", "asc") in ("asc", "desc")
        for sp in sort_by
    ):
        raise ConfigError(
            f"sort order {str(sort_by)[:80]!r} is not a list of "
            "{'column_id': NAME, 'direction': 'asc'|'desc'}"
        )
    if not isinstance(statuses, (list, tuple)) or not all(isinstance(x, str) for x in statuses):
        raise ConfigError(f"status filter {str(statuses)[:80]!r} is not a list of statuses")
    order = [(sp.get("column_id", "id"), sp.get("direction") == "desc") for sp in sort_by]
    return page, min(page_size, MAX_PAGE_SIZE), order, list(statuses)


def trial_page(
    store: Store,
    cache: TrialCache,
    page: int = 0,
    page_size: int = 20,
    sort_by: Sequence[Mapping[str, str]] = (),
    statuses: Sequence[str] = (),
) -> dict[str, Any]:
    """Returns one page of the trial table: ``rows`` (plain dicts, architecture, last error
    line and ``where`` the trial ran included), ``n_rows`` after filtering, ``n_pages``,
    ``metrics`` (the metric columns, the objective's first).

    Invariants: sorting is stable (ties keep id order); a missing metric sorts last in both
    directions; a page holds at most :data:`MAX_PAGE_SIZE` rows and
    :data:`MAX_METRIC_COLUMNS` metric columns (``n_metrics`` counts them all).

    Raises:
        ConfigError: the page, page size, sort order or statuses are of the wrong type.
        StoreError: a trial row is damaged.
    """
    page, page_size, order, statuses = _table_request(page, page_size, sort_by, statuses)
    obj = store.objective()
    trials = cache.trials(store)
    wanted = set(statuses)
    rows = [t for t in trials if not wanted or t.status in wanted]
    for col, desc in reversed(order):
        present = [t for t in rows if _sort_value(t, col)[0] == 0]
        missing = [t for t in rows if _sort_value(t, col)[0] == 1]
        present.sort(key=lambda t: _sort_value(t, col)[1], reverse=desc)
        rows = present + missing
    n_pages = max(1, math.ceil(len(rows) / page_size))
    page = min(max(0, page), n_pages - 1)
    shown = [
        check_trial(store.directory, store.trial(t.id))
        for t in rows[page * page_size : (page + 1) * page_size]
    ]
    names = metric_names(trials, obj["metric"], limit=None)
    columns = names[:MAX_METRIC_COLUMNS]
    out = []
    for t in shown:
        row: dict[str, Any] = {
            "id": t.id,
            "status": t.status + (f" (of {t.cached_from})" if t.cached_from else ""),
            "how": t.evaluation,
            "seconds": None if t.duration is None else round(t.duration, 3),
            "arch": plain(t.arch)[:_ARCH_TEXT],
            "error": _error_line(t.error),
            "where": placement_text(t.placement),
            "rung": len(t.intermediates) if t.intermediates else None,
        }
        m = t.metrics or {}
        row.update({f"m:{k}": m[k] for k in columns if k in m})
        out.append(row)
    return {
        "rows": out,
        "n_rows": len(rows),
        "n_pages": n_pages,
        "page": page,
        "metrics": columns,
        "n_metrics": len(names),
    }


def best_so_far(store: Store, cache: TrialCache) -> dict[str, Any]:
    """Returns the best feasible value of the objective after each finished trial (pruned
    ones left out: their value is one rung's): ``id``,
    ``seconds`` (since the run was created), ``value`` (the trial's) and ``best`` lists, plus
    ``metric`` and ``mode``.

    Invariants: ``best`` is monotone (never worse than an earlier entry).
    """
    obj = store.objective()
    metric, mode, constraints = obj["metric"], obj["mode"], obj["constraints"]
    created = float(store.get_meta("created") or 0.0)
    out: dict[str, Any] = {
        "metric": metric,
        "mode": mode,
        "id": [],
        "seconds": [],
        "value": [],
        "best": [],
    }
    best: float | None = None
    for t in final_trials(cache.trials(store)):
        s = score(t, metric, mode, constraints)
        if s is None:
            continue
        best = s if best is None else max(best, s)
        sign = 1 if mode == "max" else -1
        out["id"].append(t.id)
        out["seconds"].append(None if t.finished is None else round(t.finished - created, 3))
        out["value"].append(sign * s)
        out["best"].append(sign * best)
    return out


def curves(store: Store, cache: TrialCache, limit: int = 20) -> dict[str, Any]:
    """Returns the intermediate reports of the ``limit`` best trials that have them:
    ``metrics`` (names reported) and ``trials`` (``id`` and ``series``: name -> values)."""
    obj = store.objective()
    trials = cache.trials(store)
    ranked = rank_trials(trials, obj["metric"], obj["mode"], obj["constraints"])
    ranked_ids = {t.id for t in ranked}
    order = [t.id for t in ranked] + [t.id for t in trials if t.id not in ranked_ids]
    found: list[dict[str, Any]] = []
    names: dict[str, None] = {}  # in order of appearance, at most MAX_METRIC_COLUMNS
    for tid in order:
        if len(found) >= limit:
            break
        inter = store.trial(tid).intermediates
        series: dict[str, list[float | None]] = {}
        for i, report in enumerate(inter):
            for k, v in report.items():
                if not isinstance(v, (int, float)) or isinstance(v, bool):
                    continue
                if k in names or len(names) < MAX_METRIC_COLUMNS:
                    names.setdefault(k)
                    series.setdefault(k, [None] * i).append(v)
        if series:
            found.append({"id": tid, "series": series})
    return {"metrics": list(names), "trials": found}


def rungs(store: Store) -> dict[str, Any]:
    """Returns where each trained trial ended: ``points`` (id, ``resource``: the reports it
    reached, ``value``: its last value of the objective metric, status) and ``counts``
    (resource -> number of trials that ended there), for the rung chart."""
    metric = store.objective()["metric"]
    points: list[dict[str, Any]] = []
    counts: dict[int, int] = {}
    for t in store.trials():
        if t.status in ("cached", "running") or not t.intermediates:
            continue
        r = len(t.intermediates)
        counts[r] = counts.get(r, 0) + 1
        value = t.intermediates[-1].get(metric)
        points.append({"id": t.id, "resource": r, "value": value, "status": t.status})
    return {"metric": metric, "points": points, "counts": dict(sorted(counts.items()))}


def pareto(
    store: Store,
    cache: TrialCache,
    x: tuple[str, str],
    y: tuple[str, str],
    group: str | None = None,
) -> dict[str, Any]:
    """Returns the trials as points of two metrics (``points``: id, x, y, group) and the
    ids of the non-dominated ones (``front``, sorted along x), for (metric, "max"|"min")
    objectives ``x`` and ``y``; ``group`` names a metric that splits the points (e.g. a
    deployment target), each group with its own front. Pruned trials are points (marked
    ``pruned``) but never on a front."""
    constraints = store.objective()["constraints"]
    measured = [  # (trial, its metrics): the trials that have both metrics
        (t, t.metrics)
        for t in cache.trials(store)
        if t.status != "failed" and t.metrics and x[0] in t.metrics and y[0] in t.metrics
    ]
    groups: dict[Any, list[TrialRecord]] = {}
    for t, m in measured:
        groups.setdefault(m.get(group) if group else None, []).append(t)
    front: list[int] = []
    for members in groups.values():
        front += [t.id for t in pareto_front(final_trials(members), y, x, constraints)]
    metrics_of = {t.id: m for t, m in measured}
    front.sort(key=lambda i: metrics_of[i][x[0]])
    points = [
        {
            "id": t.id,
            "x": m[x[0]],
            "y": m[y[0]],
            "group": m.get(group) if group else None,
            "pruned": t.status == "pruned",
        }
        for t, m in measured
    ]
    return {"points": points, "front": front}


def _trial_id(value: Any) -> int:
    """Returns ``value`` as a trial id.

    Raises:
        StoreError: it is not a whole number.
    """
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise StoreError(f"{str(value)[:40]!r} is not a trial id (a whole number)")
    try:
        return int(value)
    except ValueError:
        raise StoreError(f"{str(value)[:40]!r} is not a trial id (a whole number)") from None


def trial_detail(store: Store, trial_id: int) -> dict[str, Any]:
    """Returns one trial as plain data (its decisions, metrics, status, error, timings).

    Raises:
        StoreError: no trial has that id.
    """
    return store.trial(_trial_id(trial_id)).to_dict()


def diff(store: Store, a: int, b: int) -> list[dict[str, Any]]:
    """Returns one row per decision of trials ``a`` and ``b``: ``label``, ``a``, ``b`` (text)
    and ``same``, differing decisions first.

    Raises:
        StoreError: either trial does not exist.
    """
    ta, tb = store.trial(_trial_id(a)).arch, store.trial(_trial_id(b)).arch
    rows = [
        {"label": k, "a": plain(ta.get(k)), "b": plain(tb.get(k)), "same": ta.get(k) == tb.get(k)}
        for k in sorted(set(ta) | set(tb))
    ]
    return sorted(rows, key=lambda r: r["same"])
