"""The engine's one hook for cross-model optimizations: detect from the evaluator and the
space what applies (:func:`~nasforge.engine.crossmodel.policy.detect`), apply it without any
change to the user's space, evaluator or strategy, measure it against independent execution,
revert or fall back, and record each step in the run.

    CrossModelPlan.prepare(space, evaluator, executor, store) -> the executor to use

Applied by the engine: ``supergraph`` (an evaluator that trains every architecture from
shared weights runs its trials in-process on one in-memory super-graph) and ``opbatch`` (the
built-in classification evaluator over a space with a frozen prefix: trials run in groups of
the executor's concurrency (at least 2), merged, so that the strategy sees the asks and tells
it would see on that executor; :mod:`.groups`) and ``shareddata`` (an evaluator that declares
``data_spec`` and ``data_batches`` and reads ``shareddata.batches``, on the forked process
pool: one producer per wave of concurrent trials; :mod:`.feeds`).

What the engine did is logged and recorded as the run's notes (:meth:`Store.add_note`, shown
by ``nasforge status``): rows with ``"source": "crossmodel"``, an ``optimization``, and the
events ``applied``, ``measured``, ``kept``, ``reverted``, ``fell_back``, ``off`` and ``none``.

Invariants: with every option off, ``prepare`` returns the executor it was given and records
only that the optimizations were off; a merged run computes the same trials as an
independent one (the super-graph and the checkpoint compute the same numbers).
"""

from __future__ import annotations

import collections
import logging
import time
from typing import Any, Protocol, runtime_checkable

from nasforge.engine.crossmodel.policy import Applied, Introspection, detect, options
from nasforge.engine.evaluator import BaseEvaluator
from nasforge.engine.executor import BaseExecutor
from nasforge.engine.trial import TrialResult, TrialTask, run_trial
from nasforge.errors import ConfigError
from nasforge.runtime.devices import placed

__all__ = ["CrossModelPlan", "SupergraphExecutor", "SOURCE", "events"]

log = logging.getLogger("nasforge.engine.crossmodel")

#: The ``source`` of the notes this package adds to a run's record.
SOURCE = "crossmodel"


def events(store: Any) -> list[dict[str, Any]]:
    """Returns the cross-model events recorded in a run, in order (empty when none)."""
    return store.notes(SOURCE)


class _Recorder:
    """Appends events to the run's record and the log."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def __call__(self, event: str, optimization: str, detail: str, **numbers: float) -> None:
        log.info("cross-model %s %s: %s", optimization, event, detail)
        if self.store is None:
            return
        rounded = {k: round(v, 4) for k, v in numbers.items()}
        self.store.add_note(SOURCE, event, detail, optimization=optimization, **rounded)


class CrossModelPlan:
    """Returns, from :meth:`prepare`, the executor a search runs on after the cross-model
    optimizations that apply were put in place.

    ``crossmodel`` is True (every optimization on), False (all off) or a mapping such as
    ``{"supergraph": False}``.

    Raises:
        ConfigError: an unknown option name or a non-boolean value.
    """

    def __init__(self, crossmodel: Any = True) -> None:
        try:
            self.enabled = options(crossmodel)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc

    def traits(self, space: Any, evaluator: Any) -> dict[str, Any]:
        """Returns the evaluator's and the space's traits the policy reads, as plain data."""
        from nasforge.engine.crossmodel.groups import has_frozen_prefix, mergeable_recipe

        spec = getattr(evaluator, "data_spec", None)
        recipe = mergeable_recipe(evaluator) if self.enabled["opbatch"] else None
        return {
            "shares_weights": bool(getattr(evaluator, "shares_weights", False)),
            "data_spec": None
            if spec is None or not hasattr(evaluator, "data_batches")
            else repr(spec),
            "frozen_prefix": recipe is not None and has_frozen_prefix(space, recipe),
        }

    def prepare(
        self,
        space: Any,
        evaluator: Any,
        executor: BaseExecutor,
        store: Any,
        stopper: Any = None,
    ) -> BaseExecutor:
        """Returns the executor to run the search on: ``executor`` itself, or one that applies
        the detected optimizations (recorded in ``store``). A ``stopper`` (early stopping per
        trial) keeps trials apart."""
        record = _Recorder(store)
        off = [k for k, v in self.enabled.items() if not v]
        if off:
            record("off", ",".join(off), "turned off by the crossmodel option")
        traits = self.traits(space, evaluator) if stopper is None else {}
        applied = detect(traits, self.enabled, executor.concurrency)
        if not applied and any(self.enabled.values()):
            why = "early stopping keeps trials apart" if stopper is not None else (
                "no shared weights, frozen prefix or data spec shared by the trials"
            )  # fmt: skip
            record("none", "-", f"nothing to merge: {why}")
        for a in applied:
            if a.name == "supergraph":
                return self._supergraph(a, space, evaluator, executor, record)
            if a.name == "shareddata" and getattr(executor, "start_method", None) == "fork":
                from nasforge.engine.crossmodel.feeds import SharedDataPool

                n = int(evaluator.data_batches)
                record("applied", a.name, a.reason + f"; {n} batches per trial")
                intro = Introspection(trials=executor.concurrency)
                return SharedDataPool(executor.concurrency, evaluator.data_spec, n, intro, record)
            if a.name == "opbatch":
                from nasforge.engine.crossmodel.groups import GroupExecutor

                size = max(2, executor.concurrency)
                record("applied", a.name, a.reason + f"; groups of {size} (the concurrency)")
                return GroupExecutor(size, Introspection(trials=1), record)
        return executor

    def _supergraph(
        self, a: Applied, space: Any, evaluator: Any, executor: BaseExecutor, record: _Recorder
    ) -> BaseExecutor:
        own = evaluator.sharing
        if own == "supergraph":
            record(
                "applied", a.name, "the evaluator already keeps a super-graph; trials in-process"
            )
            return SupergraphExecutor(own, None, record)
        try:  # building the super-graph is where merging fails (a space no supernet can mix)
            evaluator.switch(space, "supergraph")
            evaluator.switch(space, own)
        except Exception as exc:  # noqa: BLE001 - any failure to merge means: run unmerged
            record("fell_back", a.name, f"cannot build the super-graph ({type(exc).__name__}: "
                   f"{exc}); trials run as configured")  # fmt: skip
            return executor
        record("applied", a.name, a.reason + f"; measured against {own!r} first")
        return SupergraphExecutor(own, Introspection(trials=3), record)


@runtime_checkable
class _SharesWeights(Protocol):
    """Returns what the super-graph needs of an evaluator with ``shares_weights``: ``switch``
    moves its shared state from one sharing mode to another."""

    def switch(self, space: Any, sharing: str) -> None: ...


class SupergraphExecutor(BaseExecutor):
    """Returns results of weight-sharing trials run one at a time in this process, the first
    with the evaluator's own sharing mode, the next on the super-graph, then the faster one
    (an introspective policy; with ``introspection=None`` always the super-graph).

    Invariants: trials run in submission order, one at a time (weight sharing trains
    architectures in sequence); switching modes moves the exact shared state.
    """

    name = "supergraph"
    concurrency = 1

    def __init__(self, own: str, introspection: Introspection | None, record: Any) -> None:
        self.own, self.intro, self.record = own, introspection, record
        self._done: collections.deque[TrialResult] = collections.deque()
        self._verdict_recorded = False

    @property
    def n_running(self) -> int:
        """Returns the number of finished results not yet polled."""
        return len(self._done)

    def start(self, space: Any, evaluator: BaseEvaluator) -> None:
        """Prepares to run trials of ``evaluator``, one that shares weights, on ``space``."""
        assert isinstance(evaluator, _SharesWeights), "the super-graph needs shared weights"
        super().start(space, evaluator)
        self._shared = evaluator

    def _mode(self) -> str:
        if self.intro is None:
            return "supergraph"
        return "supergraph" if self.intro.choice() == "merged" else self.own

    def submit(self, task: TrialTask) -> None:
        """Runs the trial now, in the mode the introspective policy picks."""
        mode = self._mode()
        self._shared.switch(self._space, mode)
        t = time.perf_counter()
        with placed(self.local_placement()):
            result = run_trial(self._space, self._evaluator, task)
        took = time.perf_counter() - t
        self._done.append(result)
        if self.intro is None or self.intro.decided() or result.status != "done":
            return
        way = "merged" if mode == "supergraph" else "independent"
        self.intro.add(way, took)
        self.record("measured", "supergraph", f"trial {task.trial} in {mode} mode", seconds=took)
        if self.intro.decided() and not self._verdict_recorded:
            self._verdict_recorded = True
            speedup = self.intro.speedup()
            if self.intro.choice() == "merged":
                self.record("kept", "supergraph", "merged is faster", speedup=speedup)
            else:
                self.record("reverted", "supergraph", f"{self.own} mode is faster", speedup=speedup)

    def poll(self, timeout: float) -> list[TrialResult]:
        """Returns every result finished since the last poll."""
        out = list(self._done)
        self._done.clear()
        return out

    def shutdown(self) -> None:
        """Leaves the evaluator in its own sharing mode, with the shared state."""
        if hasattr(self, "_shared"):
            self._shared.switch(self._space, self.own)
