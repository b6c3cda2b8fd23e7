"""The dashboard's overview: one row per run (what it is, how far it got, its best result),
summarized again only when the run's record changed (:class:`SummaryCache`).

Like :mod:`nasforge.dashboard.data`, it reads records read-only and knows no kind of run: the
space, strategy and plan come from what the record holds.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nasforge.dashboard.data import TrialCache, final_trials, open_run, version
from nasforge.errors import StoreError
from nasforge.run.records import TrialRecord
from nasforge.run.results import rank_trials
from nasforge.run.status import UNCOUNTED
from nasforge.run.store import DB_NAME, Store

__all__ = ["RunSummary", "SummaryCache", "summarize"]


@dataclass
class RunSummary:
    """One row of the overview: what a run is, how far it got and its best result; or, for a
    directory that could not be read, the ``problem`` to show instead."""

    key: str
    name: str
    kind: str = ""
    space: str = ""
    strategy: str = ""
    state: str = ""
    progress: str = ""
    fraction: float | None = None
    metric: str = ""
    mode: str = ""
    best: float | None = None
    best_trial: int | None = None
    n_trials: int = 0
    started: float | None = None
    duration: float | None = None
    problem: str | None = None
    counts: dict[str, int] = field(default_factory=dict)


def _name_of(ref: Any) -> str:
    """Returns a short name for a space or strategy reference of the config."""
    if isinstance(ref, str):
        return ref
    if isinstance(ref, Mapping):
        for k in ("name", "object", "file"):
            if isinstance(ref.get(k), str):
                return ref[k].rsplit(":", 1)[-1] if k == "object" else ref[k]
    return ""


def _describe(config: Mapping[str, Any]) -> tuple[str, str]:
    """Returns (space, strategy or algorithm) named by a run's config, whatever its kind."""
    section = config.get(config.get("kind", ""), {})
    section = section if isinstance(section, Mapping) else {}
    space = _name_of(config.get("space"))
    decisions = section.get("search_space", {})
    if isinstance(decisions, Mapping) and isinstance(decisions.get("decisions"), list):
        n = len(decisions["decisions"])
        space = f"{space} ({n} decisions)" if space else f"{n} decisions"
    strategy = _name_of(section.get("strategy")) or _name_of(section.get("algorithm"))
    return space or "-", strategy or "-"


def _plan(store: Store, trials: Sequence[TrialRecord]) -> tuple[str, int | None, int]:
    """Returns (unit, total or None, done) of the run's plan, as ``nasforge status`` counts."""
    try:
        plan = json.loads(store.get_meta("plan") or "{}")
    except ValueError:
        plan = {}
    unit = str(plan.get("unit", "trials"))
    total = plan.get("total")
    if unit == "trials":
        done = sum(1 for t in trials if t.status not in UNCOUNTED)
    else:
        done = store.n_progress()
    return unit, total if isinstance(total, int) else None, done


def _last_write(directory: Path) -> float | None:
    """Returns when the run's database was last written (file times), or None."""
    times = []
    for name in (DB_NAME, DB_NAME + "-wal"):
        try:
            times.append((directory / name).stat().st_mtime)
        except OSError:
            pass
    return max(times) if times else None


def _duration(store: Store, state: str, directory: Path, created: str | None) -> float | None:
    """Returns the seconds the run has worked, as it recorded them (across resumes, idle time
    between sessions left out); for a record made before runs recorded it, the time from its
    creation to its last write."""
    try:
        if state == "running" and store.get_meta("session_started"):
            before = float(store.get_meta("elapsed_before", "0") or 0)
            return max(0.0, before + time.time() - float(store.get_meta("session_started") or 0))
        if store.get_meta("elapsed"):
            return max(0.0, float(store.get_meta("elapsed") or 0))
    except ValueError:
        return None
    end = time.time() if state == "running" else _last_write(directory)
    return None if created is None or end is None else max(0.0, end - float(created))


def summarize(key: str, name: str, directory: Path, cache: TrialCache) -> RunSummary:
    """Returns the overview row of one run; a run that cannot be read gives a row whose
    ``problem`` says why (never raises for a bad record)."""
    try:
        with open_run(directory) as store:
            config = store.config()
            obj = store.objective()
            trials = cache.trials(store)
            state = store.state()
            unit, total, done = _plan(store, trials)
            created = store.get_meta("created")
            picks = store.picks()
            duration = _duration(store, state, directory, created)
    except StoreError as exc:
        return RunSummary(key, name, problem=str(exc))
    space, strategy = _describe(config)
    ranked = rank_trials(final_trials(trials), obj["metric"], obj["mode"], obj["constraints"],
                         picks=picks)  # fmt: skip
    best = ranked[0] if ranked else None
    best_value = None
    if best is not None:
        assert best.metrics is not None, "a ranked trial finished, so it has metrics"
        best_value = best.metrics[obj["metric"]]
    started = float(created) if created else None
    counts: dict[str, int] = {}
    for t in trials:
        counts[t.status] = counts.get(t.status, 0) + 1
    return RunSummary(
        key=key,
        name=name,
        kind=str(config.get("kind", "")),
        space=space,
        strategy=strategy,
        state=state,
        progress=f"{done} / {total} {unit}" if total else f"{done} {unit}",
        fraction=min(1.0, done / total) if total else None,
        metric=obj["metric"],
        mode=obj["mode"],
        best=best_value,
        best_trial=None if best is None else best.id,
        n_trials=len(trials),
        started=started,
        duration=duration,
        counts=counts,
    )


class SummaryCache:
    """Returns the overview row of a run, summarized again only when its record changed or
    while it runs (whether a writer still holds it is not in the database files).

    Invariants: a row is reused only for an unchanged :func:`version` and a state other than
    ``running``; thread-safe.
    """

    def __init__(self, trials: TrialCache) -> None:
        self.trials = trials
        self._items: dict[Path, tuple[tuple[int, ...], RunSummary]] = {}
        self._lock = threading.Lock()

    def get(self, key: str, name: str, directory: Path) -> RunSummary:
        """Returns the overview row of the run in ``directory`` (never raises for a bad
        record: its row carries the problem)."""
        ver = version(directory)
        with self._lock:
            hit = self._items.get(directory)
        if hit is not None and hit[0] == ver and hit[1].state != "running":
            return hit[1]
        row = summarize(key, name, directory, self.trials)
        with self._lock:
            self._items[directory] = (ver, row)
        return row
