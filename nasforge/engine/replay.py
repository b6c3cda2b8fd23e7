"""The experiment loop's state, and how a resume rebuilds it from the record (Retiarii's
replay-based recovery). Pure: no torch.

    LoopState  what one run (or resume) of the loop knows: the trials and their records,
               which architectures were evaluated or are running, the counts that the budget
               and the progress line read, the best score so far; and the two questions the
               loop asks of it between polls (:meth:`LoopState.can_ask`,
               :meth:`LoopState.budget_spent`)
    replay     the store's events (ask, tell, in happening order) are replayed against a
               fresh, identically seeded strategy: an ask event calls ``strategy.ask()``, a
               tell event hands the recorded trial to ``tell`` (the experiment's own bookkeeping
               of a finished trial, the strategy's ``tell`` included). The strategy ends in
               exactly the state it had when the engine died; trials asked but never told
               were in flight and are the only ones run again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nasforge.engine.settings import ExperimentSettings
from nasforge.run.store import Store, TrialRecord

__all__ = ["LoopState", "UNCOUNTED", "replay"]

log = logging.getLogger("nasforge.engine")

#: trial statuses that do not count toward ``n_trials``: a duplicate resolved from an earlier
#: trial, and a trial cancelled before it finished training
UNCOUNTED = ("cached", "cancelled")


@dataclass
class LoopState:
    """Returns nothing; the state of one run (or resume) of the loop, rebuilt by replay."""

    records: dict[int, TrialRecord] = field(default_factory=dict)
    known: dict[str, int] = field(default_factory=dict)  # arch id -> trial that evaluated it
    running: dict[str, int] = field(default_factory=dict)  # arch id -> trial running it now
    waiting: dict[str, list[int]] = field(default_factory=dict)  # arch id -> duplicates waiting
    n_trained: int = 0  # trials that count toward n_trials (see UNCOUNTED)
    n_cached: int = 0
    n_failed: int = 0
    dups_in_row: int = 0  # duplicates proposed in a row (max_duplicates ends the search)
    exhausted: bool = False  # the strategy has nothing more to propose
    best: tuple[float, float] | None = None  # (score, metric) of the best trial so far
    failure: str | None = None  # why the run must stop now (a metric it names is missing)
    resumed: bool = False  # the loop continues a recorded run (nasforge resume)
    elapsed0: float = 0.0  # seconds spent before this session (a resume)
    t0: float = field(default_factory=time.monotonic)

    def elapsed(self) -> float:
        """Returns the seconds the run has spent, across resumes."""
        return self.elapsed0 + time.monotonic() - self.t0

    def trainings_before(self, tid: int) -> int:
        """Returns how many trials before ``tid`` trained its architecture (none cached): the
        index of its retraining (``retrain_duplicates``), the same when a resume runs it
        again."""
        aid = self.records[tid].arch_id
        return sum(r.arch_id == aid and r.status != "cached" for i, r in self.records.items()
                   if i < tid)  # fmt: skip

    def budget_spent(self, s: ExperimentSettings) -> bool:
        """Returns whether the trial or time budget of ``s`` is spent (what a resume checks
        first)."""
        if s.n_trials is not None and self.n_trained >= s.n_trials:
            return True
        return s.time_budget is not None and self.elapsed() >= s.time_budget

    def can_ask(
        self, s: ExperimentSettings, stopping: str | None, n_running: int, concurrency: int
    ) -> bool:
        """Returns whether the loop may ask the strategy for another trial now: no failure,
        stop request (``stopping``: its mode) or exhausted strategy, fewer than
        ``max_duplicates`` duplicates in a row, a free slot (``n_running`` trials on the
        executor plus the duplicates waiting for one, against ``concurrency``), and budget
        left once the trials in flight count."""
        if self.failure or stopping or self.exhausted or self.dups_in_row >= s.max_duplicates:
            return False
        if n_running + sum(len(w) for w in self.waiting.values()) >= concurrency:
            return False
        if s.n_trials is not None and self.n_trained + len(self.running) >= s.n_trials:
            return False
        return s.time_budget is None or self.elapsed() < s.time_budget


def replay(
    store: Store,
    state: LoopState,
    ask: Callable[[], dict[str, Any] | None],
    same: Callable[[dict[str, Any] | None, TrialRecord], bool],
    tell: Callable[[TrialRecord], None],
) -> list[int]:
    """Returns the ids of the trials in flight when the record was last written, after
    rebuilding ``state`` from the store's events: each ask event calls ``ask()`` (a strategy
    whose answer is not ``same`` as the recorded architecture is not deterministic: logged,
    and the record wins), each tell event calls ``tell(record)``."""
    state.records = records = {t.id: t for t in store.trials()}
    told: set[int] = set()
    for kind, tid in store.events():
        rec = records[tid]
        if kind == "ask":
            asked = ask()
            if not same(asked, rec):
                log.warning(
                    "replay: strategy asked %s where trial %d recorded %s; the strategy is "
                    "not deterministic, continuing with the record",
                    asked,
                    tid,
                    rec.arch,
                )
        else:
            told.add(tid)
            tell(rec)
    state.n_trained = sum(1 for t in records.values() if t.status not in UNCOUNTED and t.id in told)
    return [tid for tid in records if tid not in told]
