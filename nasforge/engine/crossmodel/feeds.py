"""Shared data applied by the engine: a process pool whose concurrent trials, when their
evaluator declares a :class:`~nasforge.engine.crossmodel.shareddata.DataSpec` (``data_spec``)
and how many batches a trial reads (``data_batches``), read them from one producer per wave.

A wave is the trials that claim places of one :class:`SharedFeed` while its first batches are
still in the ring; a trial that starts later opens the next feed. Each trial's process gets its
place installed (``shareddata.install``) before the evaluator runs, and the evaluator's
``shareddata.batches(spec, n)`` reads from it.

Introspective policy: the first ``concurrency`` trials run with their own loaders and the next
``concurrency`` shared; their mean durations decide which way the rest run.

Invariants: each trial reads exactly the batches of its spec, shared or not; no producer
outlives the executor.
"""

from __future__ import annotations

import logging
from typing import Any

from nasforge.engine.crossmodel.policy import Introspection
from nasforge.engine.crossmodel.shareddata import DataSpec, SharedFeed, install
from nasforge.engine.executor import ProcessPoolExecutor
from nasforge.engine.trial import TrialResult, TrialTask

__all__ = ["SharedDataPool"]

log = logging.getLogger("nasforge.engine.crossmodel")


class SharedDataPool(ProcessPoolExecutor):
    """Returns results of trials each run in a forked process, as the process pool does, with
    concurrent trials of one data spec fed by one producer (see the module docstring).

    Raises:
        ConfigError: as :class:`ProcessPoolExecutor`.
    """

    def __init__(
        self,
        concurrency: int,
        spec: DataSpec,
        n_batches: int,
        introspection: Introspection | None,
        record: Any,
    ) -> None:
        super().__init__(concurrency, "fork")
        self.data_spec, self.n_batches = spec, n_batches  # not .spec: that is the executor's
        self.intro, self.record = introspection, record
        self.child_setup = self._install
        self._feeds: list[SharedFeed] = []
        self._places: dict[int, tuple[SharedFeed, int] | None] = {}
        self._ways: dict[int, str] = {}
        self._n_submitted = 0
        self._verdict_recorded = False

    def _way(self) -> str:
        if self.intro is None:
            return "merged"
        n = self._n_submitted
        if n < self.concurrency:
            return "independent"
        if n < 2 * self.concurrency or not self.intro.decided():
            return "merged"
        return self.intro.choice()

    def _place(self) -> tuple[SharedFeed, int]:
        if self._feeds:
            i = self._feeds[-1].claim()
            if i is not None:
                return self._feeds[-1], i
        feed = SharedFeed(self.data_spec, self.concurrency, self.n_batches, attached=1)
        self._feeds.append(feed)
        return feed, 0

    def submit(self, task: TrialTask) -> None:
        """Claims the trial a place in the current feed (or opens one), then starts it."""
        way = self._way()
        self._n_submitted += 1
        self._ways[task.trial] = way
        place = self._place() if way == "merged" else None
        self._places[task.trial] = place
        super().submit(task)
        if place is not None:  # the producer can now tell a dead trial from a slow start
            place[0].pids[place[1]] = int(self._running[task.trial][0].pid)

    def _install(self, task: TrialTask) -> None:
        place = self._places.get(task.trial)
        install(None if place is None else place[0].consumer(place[1]))

    def poll(self, timeout: float) -> list[TrialResult]:
        """Returns finished trials' results; measures them for the policy; closes feeds whose
        producer is done."""
        out = super().poll(timeout)
        for r in out:
            self._places.pop(r.trial, None)
            way = self._ways.pop(r.trial, "")
            if self.intro is None or r.status != "done" or r.duration is None:
                continue
            if len(self.intro.seconds[way]) < self.concurrency:
                self.intro.seconds[way].append(r.duration)
                if self.intro.decided() and not self._verdict_recorded:
                    self._verdict_recorded = True
                    sp = self.intro.speedup()
                    verdict = "kept" if self.intro.choice() == "merged" else "reverted"
                    self.record(verdict, "shareddata", f"shared is {sp:.2f}x own loaders "
                                "(mean trial seconds)", speedup=sp)  # fmt: skip
        live = {id(f) for f, _ in (p for p in self._places.values() if p is not None)}
        for f in list(self._feeds[:-1]):
            if id(f) not in live:
                f.close()
                self._feeds.remove(f)
        return out

    def shutdown(self) -> None:
        """Kills running trials and every producer."""
        super().shutdown()
        for f in self._feeds:
            f.close()
        self._feeds.clear()
