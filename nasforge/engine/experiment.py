"""The experiment loop: ask the strategy, run trials on an executor, record everything in the
store, tell the strategy; resume after a crash by replaying the recorded history.

    replay   the store's events (ask, tell, in happening order) are replayed against a fresh,
             identically seeded strategy: an ask event calls ``strategy.ask()``, a tell event
             ``strategy.tell(recorded arch, recorded score)``. The strategy ends in exactly the
             state it had when the engine died; trials asked but never told were in flight and
             are the only ones run again.
    dedup    an architecture (by arch id) already evaluated is not trained again: its trial is
             recorded as ``cached`` with the earlier metrics (unless ``retrain_duplicates``);
             one still running makes the duplicate wait for it.
    budget   ``n_trials`` counts trained trials (not cached ones); ``time_budget`` counts
             seconds across resumes; in-flight trials always finish.
    names    the metric, constraints and second objective are checked against the metrics the
             evaluator declares (``metric_names``) before anything is written; an evaluator
             that declares none is checked on each finished trial, and the first trial without
             a named metric stops the whole run (no more trials, in-flight ones killed, the
             run recorded ``failed``)
    weights  only the files of the ``keep_checkpoints`` best trials (and of running ones)
             are kept (``nasforge.engine.checkpoints``)
    merge    before the first trial, the cross-model plan (``nasforge.engine.crossmodel``)
             may put the trials on an executor that merges what they share; it records what
             it did in the run (``crossmodel=False`` turns it off).

Building an experiment from a run file (or a stored section) and recording its evaluator live
in ``nasforge.engine._experiment_section``; this module is the loop.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import math
import sys
import time
from pathlib import Path
from typing import Any

from nasforge.engine._control import apply_requests, cancel_marker, discard_requests
from nasforge.engine._experiment_section import (
    add_arguments,
    check_budget,
    checked_space,
    evaluator_ref,
    experiment_arguments,
    named_metrics,
)
from nasforge.engine.checkpoints import CheckpointKeeper
from nasforge.engine.crossmodel.plan import CrossModelPlan
from nasforge.engine.evaluator import (
    BaseEvaluator,
    FunctionEvaluator,
    check_metric_names,
    get_evaluator,
    missing_metric,
)
from nasforge.engine.executor import BaseExecutor, get_executor
from nasforge.engine.settings import ExperimentSettings
from nasforge.engine.trial import TrialResult, TrialTask
from nasforge.errors import ConfigError, StoreError, TrialError
from nasforge.run.preflight import require
from nasforge.run.progress import Progress
from nasforge.run.results import pareto_front, score
from nasforge.run.runner import BaseRunner, Objective, register_runner
from nasforge.run.status import failure_summary
from nasforge.run.store import Store, TrialRecord
from nasforge.run.tracking import get_callbacks
from nasforge.run.trial_logs import RunLog, finish_log, trial_log
from nasforge.runtime.threads import set_threads
from nasforge.strategy import (
    BaseStrategy,
    get_stopper,
    get_strategy,
    list_strategies,
)

__all__ = ["Experiment"]

log = logging.getLogger("nasforge.engine")


@register_runner
class Experiment(BaseRunner):
    """Returns, after :meth:`run`, the trials of a search of ``space`` with ``strategy`` and
    ``evaluator``, recorded in ``directory``.

    Arguments: ``space`` a ModelSpace (models are frozen per trial) or a plain SearchSpace (the
    evaluator gets the arch dict); ``evaluator`` a BaseEvaluator or ``fn(model, report)``;
    ``strategy`` a name or BaseStrategy; ``settings`` an
    :class:`~nasforge.engine.settings.ExperimentSettings` (the budget ``n_trials`` /
    ``time_budget``, the metric, ``executor``, ``stopper``, ``callbacks``, ...: its fields and
    their defaults), and any of its fields as keywords, which replace those of ``settings``:
    ``Experiment(space, fn, "random", n_trials=10)``. An evaluator reads its device with
    ``nasforge.trial_device()`` (docs/cluster.md); ``metric`` defaults to the evaluator's
    (``accuracy`` for the built-in ones, ``default`` for a function returning a float).

    It is the ``multitrial`` kind of run: ``nasforge run FILE`` builds it from a run file whose
    strategy is a multi-trial one (``random``, ``grid``, ``evolution``, ``tpe``, ``rl``, or any
    registered with ``register_strategy``).

    Invariants: configuration errors are raised before the store is created or any trial runs;
    a finished trial is committed before the strategy hears of it; the same seed with the
    in-process executor gives the same trial list, with or without a crash and resume.

    Raises:
        ConfigError: unknown strategy, executor or setting, a space without decisions, an
            evaluator with a wrong signature or that never returns a value, no budget, bad
            metric options, a metric (or constraint, second objective) the evaluator declares
            it does not return, more GPUs than this machine has (or a GPU where it has none);
            (from ``run``) the first finished trial whose metrics lack one of them.
        StoreError: ``run`` on a directory that already holds an experiment, or ``resume`` on
            one that is missing, foreign, corrupted, or was made with another space/strategy.
        TrialError: (from ``run``) every trial failed; the message summarises the errors.
    """

    kind = "multitrial"

    def __init__(
        self,
        space: Any,
        evaluator: BaseEvaluator | Any,
        strategy: str | BaseStrategy = "random",
        settings: ExperimentSettings | None = None,
        *,
        directory: str | Path | None = None,
        source: dict[str, Any] | None = None,
        **options: Any,
    ) -> None:
        s = ExperimentSettings.build(settings, **options)  # ConfigError on an unknown option
        # -- validate everything here, at the public edge, before any side effect --------------
        self.search_space = checked_space(space)
        self.space = space
        self.evaluator = get_evaluator(evaluator)
        if (
            self.evaluator.needs_model
            and not hasattr(space, "freeze")
            and not isinstance(self.evaluator, FunctionEvaluator)
        ):
            raise ConfigError(
                f"{type(self.evaluator).__name__} trains models, but the space is a plain "
                "SearchSpace; pass the ModelSpace instance"
            )
        self.evaluator.check()
        self.strategy = get_strategy(strategy)
        self.strategy.setup(self.search_space)
        s.check()
        check_budget(s.n_trials, s.time_budget, self.strategy)
        metric = s.metric if s.metric is not None else self.evaluator.default_metric
        objective = Objective(metric, s.mode, s.constraints, s.second_objective)
        self._wanted = named_metrics(objective)
        check_metric_names(self.evaluator, self._wanted)
        #: the settings it was built with (the objective resolved), as a resume reads them back
        self.settings = dataclasses.replace(s, metric=metric, constraints=objective.constraints,
                                            second_objective=objective.second)  # fmt: skip
        self.second_objective = objective.second
        self.n_trials, self.time_budget = s.n_trials, s.time_budget
        self.executor = get_executor(s.executor, s.concurrency)
        self.executor.use_gpus(s.gpus_per_trial, s.devices)  # ConfigError now, before the record
        self.gpus_per_trial, self.devices = s.gpus_per_trial, s.devices
        self.trial_timeout = s.trial_timeout
        self.stopper = get_stopper(s.stopper)
        self.retrain_duplicates = s.retrain_duplicates
        self.save_weights = s.save_weights
        self.keep_checkpoints = s.keep_checkpoints
        self.max_duplicates = s.max_duplicates
        self.progress_mode = s.progress
        self.threads = s.threads
        self.crossmodel = s.crossmodel
        self._plan = CrossModelPlan(s.crossmodel)
        self.callbacks = get_callbacks(s.callbacks)  # a missing tracker package: ConfigError now
        super().__init__(objective, directory, source, space)

    @classmethod
    def add_arguments(cls, parser: argparse._ActionsContainer) -> None:
        """Returns None after adding the multi-trial flags of ``nasforge run`` and ``resume``
        (``--n-trials``, ``--time-budget``, ``--executor``, ``--concurrency``)."""
        add_arguments(parser)

    # -- the multitrial kind -------------------------------------------------------------------
    @classmethod
    def names(cls) -> list[str]:
        """Returns the registered multi-trial strategy names."""
        return list_strategies()

    @classmethod
    def claims(cls, strategy: Any) -> bool:
        """Returns whether ``strategy`` is a multi-trial strategy (a name or an object)."""
        return isinstance(strategy, BaseStrategy) or super().claims(strategy)

    @classmethod
    def from_section(
        cls, settings: Any, *, base: Path | None = None, **overrides: Any
    ) -> Experiment:
        """Returns an experiment from a run file's settings (``space`` and ``evaluator`` or
        ``evaluate``, or ``benchmark: {nas_bench_macro: path}``; ``strategy`` a name, mapping
        or object; any other ``Experiment`` argument) or from a stored section.

        Raises:
            ConfigError: a missing space or evaluator, a bad reference or setting.
        """
        space, evaluator, strategy, kwargs = experiment_arguments(settings, base, overrides)
        return cls(space, evaluator, strategy, **kwargs)

    def compatible_keys(self) -> tuple[str, ...]:
        """Returns the settings a resume must keep: the space's decisions and the strategy."""
        return ("search_space", "strategy")

    def check(self) -> None:
        """Returns None when the executor's optional package is installed (Ray for the
        ``ray`` executor) and the Ray cluster it names answers, checked before the record
        exists.

        Raises:
            ConfigError: it is missing (``pip install 'nasforge[ray]'``), or no cluster is
                found (``address: auto``) or answers at the address.
        """
        from nasforge.engine.ray_executor import RayExecutor

        if isinstance(self.executor, RayExecutor):
            require("ray", "ray", "the 'ray' executor")
            self.executor.check_cluster()

    def section(self) -> dict[str, Any]:
        """Returns the experiment's settings as JSON-able data (stored with it)."""
        return {
            "search_space": self.search_space.to_dict(),
            "strategy": {"name": self.strategy.name, "config": self.strategy.config()},
            "evaluator": evaluator_ref(self.evaluator),
            "n_trials": self.n_trials,
            "time_budget": self.time_budget,
            "executor": self.executor.spec(),
            "concurrency": self.executor.concurrency,
            "trial_timeout": self.trial_timeout,
            "stopper": None if self.stopper is None else self.stopper.config(),
            "retrain_duplicates": self.retrain_duplicates,
            "save_weights": self.save_weights,
            "keep_checkpoints": self.keep_checkpoints,
            "max_duplicates": self.max_duplicates,
            "threads": self.threads,
            "crossmodel": self.crossmodel,
            "gpus_per_trial": self.gpus_per_trial,
            "devices": self.devices,
            # trackers that can be rebuilt, so that a resume from the record tracks too
            **({"callbacks": specs} if (specs := self._callback_specs()) else {}),
        }

    def _callback_specs(self) -> list[dict[str, Any]]:
        return [spec for c in self.callbacks if (spec := c.spec()) is not None]

    # -- the loop ------------------------------------------------------------------------------
    def run(self, resume: bool = False) -> Experiment:
        """Returns self after running (or, with ``resume``, continuing) the search; see
        :meth:`BaseRunner.run`. A resume first hands the executor the settings the record
        says it ran with (e.g. the address of the Ray cluster), before the config is
        replaced."""
        if resume:
            try:
                with Store.open(self.directory) as store:
                    recorded = dict(store.config().get(self.kind) or {}).get("executor")
            except StoreError:
                recorded = None  # no record: super().run raises the error that says so
            self.executor.resume_from(recorded)
        super().run(resume)
        return self

    def _execute(self, store: Store, resume: bool) -> None:
        """Runs trials until the budget is spent (or the strategy is exhausted), after
        replaying the recorded history when resuming.

        Raises:
            TrialError: every trial trained in this run failed (the message groups the errors).
        """
        if "torch" in sys.modules:  # a space of plain data trains nothing: keep torch unloaded
            set_threads(self.threads if self.threads is not None else 1)
        self.strategy.setup(self.search_space)  # replay needs the freshly seeded state
        if self.stopper is not None:
            self.stopper.reset()
        store.set_plan("trials", self.n_trials)
        self._records: dict[int, TrialRecord] = {}
        self._known: dict[str, int] = {}  # arch id -> trial that evaluated it
        self._running: dict[str, int] = {}  # arch id -> trial now running it
        self._waiting: dict[str, list[int]] = {}  # arch id -> duplicate trials waiting on it
        self._n_trained = 0
        self._dups_in_row = 0
        self._exhausted = False
        self._n_cached = self._n_failed = 0
        self._best: tuple[float, float] | None = None
        self._stop: str | None = None  # why the run must stop now (a metric it names is missing)
        self._stopping: str | None = None  # "finish" or "cancel": stopped on request
        #: trial id -> wall-clock times: submitted, entered/returned (the evaluator), recorded
        self.timings: dict[int, dict[str, float]] = {}
        self._keeper = CheckpointKeeper(self.keep_checkpoints, store, self._score)
        inflight = self._replay(store)
        info = {"directory": str(self.directory.resolve()), "name": self.directory.resolve().name,
                "metric": self.metric, "mode": self.mode, "kind": self.kind,
                "strategy": self.strategy.name}  # fmt: skip
        for callback in self.callbacks:
            callback.on_run_start(info)
        if resume:
            self._keeper.sweep(list(self._records.values()))
        self._elapsed0 = float(store.get_meta("elapsed", "0") or 0)
        self._t0 = time.monotonic()
        self._progress = Progress(self.n_trials, self.time_budget, self.progress_mode)
        own = self.executor
        self.executor = self._plan.prepare(self.space, self.evaluator, own, store, self.stopper)
        if self.executor is not own:  # a merging executor runs on the same GPUs
            self.executor.use_gpus(own.gpus_per_trial, own.devices or None)
        self.executor.live_stopper = self.stopper  # rung values of running trials (pool)
        self.executor.start(self.space, self.evaluator)
        self._record_executor(store, own)
        self._runlog = RunLog(self.directory).attach()
        self._progress.sink = self._runlog.line
        discard_requests(self.directory)
        try:
            for tid in inflight:
                log.info("re-running trial %d, in flight when the experiment stopped", tid)
                store.restart_trial(tid)
                self._launch(tid)
            self._loop()
        finally:
            self.executor.shutdown()
            self.executor = own
            store.set_meta("elapsed", repr(self._elapsed()))
            self._show(force=True)
            self._progress.close()
            self._runlog.detach()
            for callback in self.callbacks:
                callback.on_run_end()
        counts = store.counts()
        n_trained = sum(n for status, n in counts.items() if status not in ("running", "cached"))
        if n_trained and counts.get("failed", 0) == n_trained:
            failed = store.trials("failed")
            raise TrialError(
                f"all {n_trained} trials failed: {failure_summary(failed)}; fix the "
                f"evaluator (`nasforge status {self.directory}` lists each error)"
            )

    def _record_executor(self, store: Store, executor: BaseExecutor) -> None:
        """Records the executor's settings once it started (e.g. the address of the Ray
        cluster it joined), so that a resume from the record runs on the same one."""
        config = dict(store.config())
        section = dict(config[self.kind])
        if section.get("executor") != executor.spec():
            section["executor"] = executor.spec()
            store.set_config({**config, self.kind: section})

    def _elapsed(self) -> float:
        return self._elapsed0 + time.monotonic() - self._t0

    def _replay(self, store: Store) -> list[int]:
        """Rebuilds strategy, stopper and dedup state from the events; returns in-flight ids."""
        records = {t.id: t for t in store.trials()}
        self._records = records
        told: set[int] = set()
        for kind, tid in store.events():
            rec = records[tid]
            if kind == "ask":
                asked = self.strategy.ask()
                # equal dicts have equal ids: hashing every ask dominated a long replay
                if asked is None or (
                    asked != rec.arch and self.search_space.id_of(asked) != rec.arch_id
                ):
                    log.warning(
                        "replay: strategy asked %s where trial %d recorded %s; the "
                        "strategy is not deterministic, continuing with the record",
                        asked,
                        tid,
                        rec.arch,
                    )
            else:
                told.add(tid)
                self._after_finish(rec)
        inflight = [tid for tid in records if tid not in told]
        self._n_trained = sum(
            1 for t in records.values() if t.status not in ("cached",) and t.id in told
        )
        return inflight

    def _score(self, rec: TrialRecord) -> float | None:
        return score(rec, self.metric, self.mode, self.constraints)

    def _after_finish(self, rec: TrialRecord) -> None:
        """Tells the strategy and updates dedup, stopper and progress state for a record."""
        sc = self._score(rec)
        self.strategy.tell(rec.arch, sc)
        self._n_cached += rec.status == "cached"
        self._n_failed += rec.status == "failed"
        if sc is not None and (self._best is None or sc > self._best[0]):
            assert rec.metrics is not None, "a scored trial finished, so it has metrics"
            self._best = (sc, rec.metrics[self.metric])
        if rec.status != "cached":
            self._known.setdefault(rec.arch_id, rec.id)
            if self._running.get(rec.arch_id) == rec.id:
                del self._running[rec.arch_id]
        self._keeper.add(rec)
        if self.stopper is not None and rec.status != "cached":
            sign = 1 if self.mode == "max" else -1
            self.stopper.add_finished(
                [sign * m[self.metric] for m in rec.intermediates if self.metric in m],
                rec.id,
                rec.status,
            )

    def _can_ask(self) -> bool:
        if (
            self._stop
            or self._stopping
            or self._exhausted
            or self._dups_in_row >= self.max_duplicates
        ):
            return False
        busy = self.executor.n_running + sum(len(w) for w in self._waiting.values())
        if busy >= self.executor.concurrency:
            return False
        if self.n_trials is not None and self._n_trained + len(self._running) >= self.n_trials:
            return False
        if self.time_budget is not None and self._elapsed() >= self.time_budget:
            return False
        return True

    def _loop(self) -> None:
        store = self.store
        assert store is not None
        while True:
            while self._can_ask():
                arch = self.strategy.ask()
                if arch is None:
                    log.info("the strategy has no more architectures to try")
                    self._exhausted = True
                    break
                aid = self.search_space.id_of(arch)  # one network, one id (edit histories)
                tid = store.add_trial(aid, arch)
                self._records[tid] = TrialRecord(tid, aid, arch, "running")
                self._launch(tid)
            if self._dups_in_row >= self.max_duplicates and not self._exhausted:
                log.warning(
                    "the strategy proposed %d already-evaluated architectures in a "
                    "row; stopping (is the space exhausted?)",
                    self._dups_in_row,
                )
                self._exhausted = True
            if self.executor.n_running == 0 and not self._waiting and not self._can_ask():
                break
            for result in self.executor.poll(0.5):
                self._record(result)
            apply_requests(self)  # nasforge stop / set, from any shell
            if self._stop:  # the executor's shutdown (in _execute) kills the trials in flight
                raise ConfigError(self._stop)
            self._show()

    def _launch(self, tid: int) -> None:
        """Submits a trial, or resolves it from an earlier one with the same architecture."""
        rec = self._records[tid]
        aid = rec.arch_id
        if not self.retrain_duplicates and aid in self._known:
            self._resolve_cached(tid, self._known[aid])
            return
        if not self.retrain_duplicates and aid in self._running:
            self._waiting.setdefault(aid, []).append(tid)
            return
        self._dups_in_row = 0
        self._running[aid] = tid
        checkpoint = None
        if self.save_weights and hasattr(self.space, "freeze"):
            ckpt_dir = self.directory.resolve() / "checkpoints"
            ckpt_dir.mkdir(exist_ok=True)
            checkpoint = str(ckpt_dir / f"trial_{tid}.pt")
        self.timings[tid] = {"submitted": time.time()}
        self.executor.submit(
            TrialTask(
                trial=tid,
                arch=rec.arch,
                metric=self.metric,
                sign=1 if self.mode == "max" else -1,
                stopper=None if self.stopper is None else self.stopper.snapshot(tid),
                timeout=self.trial_timeout,
                checkpoint=checkpoint,
                log=str(trial_log(self.directory.resolve(), tid)),
                cancel_marker=str(cancel_marker(self.directory, tid)),
            )
        )

    def _resolve_cached(self, tid: int, source: int) -> None:
        assert self.store is not None
        src = self.store.trial(source)
        error = None if src.status != "failed" else f"same architecture as failed trial {source}"
        self.store.finish_trial(
            tid,
            "cached",
            src.metrics,
            src.intermediates,
            error,
            0.0,
            src.checkpoint,
            cached_from=source,
        )
        rec = self.store.trial(tid)
        self._records[tid] = rec
        self._dups_in_row += 1
        self._after_finish(rec)
        for callback in self.callbacks:
            callback.on_trial_end(rec)

    def _record(self, result: TrialResult) -> None:
        assert self.store is not None
        tid = result.trial
        if result.status == "failed":
            log.warning("trial %d failed: %s", tid, (result.error or "").strip()[-500:])
        metrics, status, error = result.metrics, result.status, result.error
        if metrics is not None and any(not math.isfinite(v) for v in metrics.values()):
            metrics = None
        missing = None
        if status == "done" and metrics is not None:
            missing = missing_metric(tid, metrics, self._wanted)
        if missing is not None:  # the first such trial stops the run: the rest would fail too
            status, error, self._stop = "failed", missing, missing
        checkpoint = result.checkpoint
        if checkpoint is not None and Path(checkpoint).is_relative_to(self.directory.resolve()):
            checkpoint = str(Path(checkpoint).relative_to(self.directory.resolve()))
        self.store.finish_trial(
            tid,
            status,
            metrics,
            result.intermediates,
            error,
            result.duration,
            checkpoint,
            placement=result.placement,
        )
        finish_log(trial_log(self.directory, tid), tid, result, result.log_text)
        cancel_marker(self.directory, tid).unlink(missing_ok=True)
        self.timings.setdefault(tid, {}).update(result.timing, recorded=time.time())
        self.store.set_meta("elapsed", repr(self._elapsed()))
        if result.retries:
            self.store.add_note(
                "executor",
                "retried",
                f"trial {tid} ran {result.retries + 1} times: its worker or node died "
                f"{result.retries} time(s) and {self.executor.name} ran it again",
                trial=tid,
                retries=result.retries,
            )
        rec = self.store.trial(tid)
        self._records[tid] = rec
        self._n_trained += 1
        self._after_finish(rec)
        for callback in self.callbacks:
            callback.on_trial_end(rec)
        if self._stop:  # duplicates waiting on it stay in flight, like the trials killed
            return
        for waiter in self._waiting.pop(rec.arch_id, []):
            self._resolve_cached(waiter, tid)

    def _show(self, force: bool = False) -> None:
        best = None if self._best is None else self._best[1]
        self._progress.update(
            self._n_trained,
            self.executor.n_running,
            self._n_failed,
            best,
            self._elapsed(),
            force,
            self._n_cached,
        )

    # -- results (trials() and best() come from BaseRunner) ----------------------------------
    def pareto_front(self) -> list[TrialRecord]:
        """Returns the Pareto front of (metric, second_objective).

        Raises:
            ConfigError: no ``second_objective`` was configured.
        """
        if self.second_objective is None:
            raise ConfigError("set second_objective=(metric, 'max'|'min') for a Pareto front")
        return pareto_front(
            self.trials(), (self.metric, self.mode), self.second_objective, self.constraints
        )
