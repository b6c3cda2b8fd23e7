"""The experiment loop: ask the strategy, run trials on an executor, record everything in the
store, tell the strategy; resume after a crash by replaying the recorded history.

    replay   a resume replays the record's ask and tell events against a fresh, identically
             seeded strategy, so it ends in the state it had when the engine died; trials
             asked but never told were in flight and are the only ones run again
             (``nasforge.engine.replay``, which also holds the loop's state).
    dedup    an architecture (by arch id) already evaluated is not trained again: its trial is
             recorded as ``cached`` with the earlier metrics (unless ``retrain_duplicates``:
             then its n-th retraining trains with the evaluator's ``reseeded(n)``, another
             seed); one still running makes the duplicate wait for it.
    budget   ``n_trials`` counts trained trials (not cached or cancelled ones);
             ``time_budget`` counts seconds across resumes; in-flight trials always finish.
    names    the metric, constraints and second objective are checked against the metrics the
             evaluator declares (``metric_names``) before anything is written; an evaluator
             that declares none is checked on each finished trial, and the first trial without
             a named metric stops the whole run (no more trials, in-flight ones killed, the
             run recorded ``failed``; when no trial had finished, a new run is not kept: its
             record is removed, so the fixed command runs again in the same folder)
    weights  only the files of the ``keep_checkpoints`` best trials (and of running ones)
             are kept (``nasforge.engine.checkpoints``)
    merge    before the first trial, the cross-model plan (``nasforge.engine.crossmodel``)
             may put the trials on an executor that merges what they share; it records what
             it did in the run (``crossmodel=False`` turns it off).

    steer    ``nasforge stop``/``set`` and the dashboard reach the loop between its polls
             (:meth:`Experiment.apply_request`): stop (letting the running trials finish, or
             cancelling them), cancel one trial, change ``n_trials`` or ``concurrency``; each
             is a run note, and a changed setting is written into the run's config.

Building an experiment from a run file (or a stored section) and recording its evaluator live
in ``nasforge.engine._experiment_section``; this module is the loop.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import math
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nasforge.engine._experiment_section import (
    add_arguments,
    check_budget,
    checked_space,
    experiment_arguments,
    named_metrics,
    record_executor,
    recorded_validation,
    stored_section,
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
from nasforge.engine.executor import get_executor
from nasforge.engine.replay import UNCOUNTED, LoopState, replay
from nasforge.engine.settings import ExperimentSettings
from nasforge.engine.trial import TrialResult, TrialTask, cancel_marker, cancel_marker_name
from nasforge.errors import ConfigError, StoreError, TrialError
from nasforge.run.preflight import require
from nasforge.run.progress import Progress
from nasforge.run.requests import Request
from nasforge.run.results import pareto_front, score
from nasforge.run.runner import BaseRunner, Objective, register_runner
from nasforge.run.status import failure_summary
from nasforge.run.store import Store, TrialOutcome, TrialRecord
from nasforge.run.trial_logs import finish_log, trial_log, trial_log_name
from nasforge.runtime.threads import set_threads
from nasforge.strategy import (
    BaseStrategy,
    default_strategy,
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
    ``strategy`` a name or BaseStrategy (none: ``auto`` on a space with ranges, ``random`` on
    one without); ``settings`` an
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
    controls = frozenset({"stop", "stop:cancel", "cancel", "set:n_trials", "set:concurrency"})
    boundary = "trial"

    def __init__(
        self,
        space: Any,
        evaluator: BaseEvaluator | Any,
        strategy: str | BaseStrategy | None = None,
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
        # none named: auto on a space with ranges, random (as before) on one without
        self.strategy = get_strategy(strategy or default_strategy(self.search_space, "random"))
        self.strategy.setup(self.search_space)
        s.check()
        check_budget(s.n_trials, s.time_budget, self.strategy)
        metric = s.metric if s.metric is not None else self.evaluator.default_metric
        objective = Objective(metric, s.mode, s.constraints, s.second_objective)
        self._wanted = named_metrics(objective)
        check_metric_names(self.evaluator, self._wanted)
        #: the settings it was built with (the objective resolved), as a resume reads them back;
        #: the loop reads them here (``nasforge set`` replaces ``n_trials`` while it runs)
        self.settings = dataclasses.replace(s, metric=metric, constraints=objective.constraints,
                                            second_objective=objective.second)  # fmt: skip
        self.executor = get_executor(s.executor, s.concurrency)
        self.executor.use_gpus(s.gpus_per_trial, s.devices)  # ConfigError now, before the record
        self.stopper = get_stopper(s.stopper)
        self._plan = CrossModelPlan(s.crossmodel)
        #: trial id -> wall-clock times: submitted, entered/returned (the evaluator), recorded
        self.timings: dict[int, dict[str, float]] = {}
        self._loop = LoopState()
        self._progress: Progress | None = None
        # a missing tracker package: ConfigError now, before the record
        super().__init__(objective, directory, source, space, s.callbacks)

    @property
    def n_trials(self) -> int | None:
        """Returns the trial budget (trained trials; None: only ``time_budget`` bounds it)."""
        return self.settings.n_trials

    @n_trials.setter
    def n_trials(self, n: int | None) -> None:
        settings = dataclasses.replace(self.settings, n_trials=n)
        settings.check()
        self.settings = settings

    @property
    def second_objective(self) -> tuple[str, str] | None:
        """Returns the second objective ``(metric, mode)`` of a Pareto front, or None."""
        return self.settings.second_objective

    @classmethod
    def add_arguments(cls, parser: argparse._ActionsContainer) -> None:
        """Returns None after adding the multi-trial flags of ``nasforge run`` and ``resume``
        (``--n-trials``, ``--time-budget``, ``--executor``, ``--concurrency``)."""
        add_arguments(parser)

    @classmethod
    def evaluation_data(cls, section: Mapping[str, Any], limit: int) -> tuple[Any, str] | None:
        """Returns the validation split of the recorded built-in classification evaluator
        (:func:`~nasforge.engine._experiment_section.recorded_validation`), or None."""
        return recorded_validation(section, limit)

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
        """Returns the experiment's settings as JSON-able data (stored with it; the trackers
        are in the run's config, beside the section, for every kind)."""
        return stored_section(self)

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
        """Runs trials until the budget is spent (or the strategy is exhausted, or a stop is
        asked), after replaying the recorded history when resuming.

        Raises:
            TrialError: every trial trained in this run failed (the message groups the errors).
        """
        s = self.settings
        if "torch" in sys.modules:  # a space of plain data trains nothing: keep torch unloaded
            set_threads(s.threads if s.threads is not None else 1)
        self.strategy.setup(self.search_space)  # replay needs the freshly seeded state
        plan = self.strategy.explain()  # what auto chose and why: the run's log and a note
        if plan is not None:
            log.log(logging.INFO if log.isEnabledFor(logging.INFO) else logging.WARNING, plan)
            store.add_note("strategy", "plan", plan)
        if self.stopper is not None:
            self.stopper.reset()
        store.set_plan("trials", s.n_trials)
        self.timings = {}
        self._keeper = CheckpointKeeper(s.keep_checkpoints, store, self._score)
        self._loop = loop = LoopState(resumed=resume)
        self._root = self.directory.resolve()  # once: resolving costs a stat per part
        # the folders of the trials' logs and cancel markers, as text: each trial's files are
        # joined to them (:meth:`_files`), as building a Path per trial cost 3-5% of a no-op trial
        self._logs = str(trial_log(self._root, 0).parent)
        self._control = str(cancel_marker(self._root, 0).parent)
        inflight = self._replay(store)
        if resume:
            self._keeper.sweep(list(loop.records.values()))
        loop.elapsed0, loop.t0 = float(store.get_meta("elapsed", "0") or 0), time.monotonic()
        if resume and not inflight and loop.budget_spent(s):
            log.warning(
                "%s: the search already spent its budget (%d of %s trials); nothing to do. "
                "`nasforge resume %s --n-trials N` gives it more",
                self.directory, loop.n_trained, s.n_trials, self.directory,
            )  # fmt: skip
            return
        self._progress = self.progress(s.n_trials, s.time_budget, s.progress)
        own = self.executor
        self.executor = self._plan.prepare(self.space, self.evaluator, own, store, self.stopper)
        if self.executor is not own:  # a merging executor runs on the same GPUs
            self.executor.use_gpus(own.gpus_per_trial, own.devices or None)
        self.executor.live_stopper = self.stopper  # rung values of running trials (pool)
        self.executor.start(self.space, self.evaluator)
        record_executor(store, self.kind, own, self.executor)
        try:
            for tid in inflight:
                log.info("re-running trial %d, in flight when the experiment stopped", tid)
                store.restart_trial(tid)
                self._launch(tid)
            self._run_loop()
        finally:
            self.executor.shutdown()
            self.executor = own
            store.set_meta("elapsed", repr(loop.elapsed()))
            self._show(force=True)
            self._progress.close()
        counts = store.counts()
        n_trained = sum(n for status, n in counts.items() if status not in ("running", "cached"))
        if n_trained and counts.get("failed", 0) == n_trained:
            failed = store.trials("failed")
            raise TrialError(
                f"all {n_trained} trials failed: {failure_summary(failed)}; fix the "
                f"evaluator (`nasforge status {self.directory}` lists each error)"
            )

    def _replay(self, store: Store) -> list[int]:
        """Rebuilds strategy, stopper and dedup state from the events; returns in-flight ids."""

        def same(asked: dict[str, Any] | None, rec: TrialRecord) -> bool:
            # equal dicts have equal ids: hashing every ask dominated a long replay
            return asked is not None and (
                asked == rec.arch or self.search_space.id_of(asked) == rec.arch_id
            )

        return replay(store, self._loop, self.strategy.ask, same, self._after_finish)

    def _score(self, rec: TrialRecord) -> float | None:
        return score(rec, self.metric, self.mode, self.constraints)

    def _after_finish(self, rec: TrialRecord) -> None:
        """Tells the strategy and updates dedup, stopper and progress state for a record."""
        loop = self._loop
        sc = self._score(rec)
        self.strategy.tell(rec.arch, sc)
        loop.n_cached += rec.status == "cached"
        loop.n_failed += rec.status == "failed"
        if sc is not None and (loop.best is None or sc > loop.best[0]):
            assert rec.metrics is not None, "a scored trial finished, so it has metrics"
            loop.best = (sc, rec.metrics[self.metric])
        if rec.status != "cached":
            if rec.status != "cancelled":  # a cancelled architecture is trained when asked again
                loop.known.setdefault(rec.arch_id, rec.id)
            if loop.running.get(rec.arch_id) == rec.id:
                del loop.running[rec.arch_id]
        self._keeper.add(rec)
        if self.stopper is not None and rec.status != "cached":
            sign = 1 if self.mode == "max" else -1
            self.stopper.add_finished(
                [sign * m[self.metric] for m in rec.intermediates if self.metric in m],
                rec.id,
                rec.status,
            )

    def _can_ask(self) -> bool:
        return self._loop.can_ask(self.settings, self.stopping, self.executor.n_running,
                                  self.executor.concurrency)  # fmt: skip

    def _run_loop(self) -> None:
        store, loop = self.store, self._loop
        assert store is not None
        while True:
            while self._can_ask():
                arch = self.strategy.ask()
                if arch is None:
                    log.info("the strategy has no more architectures to try")
                    loop.exhausted = True
                    break
                aid = self.search_space.id_of(arch)  # one network, one id (edit histories)
                tid = store.add_trial(aid, arch)
                loop.records[tid] = TrialRecord(tid, aid, arch, "running")
                self._launch(tid)
            if loop.dups_in_row >= self.settings.max_duplicates and not loop.exhausted:
                log.warning(
                    "the strategy proposed %d already-evaluated architectures in a "
                    "row; stopping (is the space exhausted?)",
                    loop.dups_in_row,
                )
                loop.exhausted = True
            if self.executor.n_running == 0 and not loop.waiting and not self._can_ask():
                break
            for result in self.executor.poll(0.5):
                self._record(result)
            self.poll_requests()  # nasforge stop / set, the dashboard: from any shell
            if loop.failure:  # the executor's shutdown (in _execute) kills the trials in flight
                raise ConfigError(self._failure())
            self._show()

    def _failure(self) -> str:
        """Returns the message of a run stopped by a misnamed metric, after marking the record
        for removal when nothing in it is worth keeping: a new run (not a resume) none of whose
        trials finished with metrics, so the same command can run again in the same folder."""
        assert self.store is not None and self._loop.failure is not None
        finished = set(self.store.counts()) - {"failed", "running"}
        if self._loop.resumed or finished:
            return self._loop.failure
        self.discard_record = True
        return (
            f"{self._loop.failure}; no trial had finished, so the run was not kept: "
            f"{self.directory} is as it was, and the same command runs again there once fixed"
        )

    # -- steering (nasforge stop / set, the dashboard) -------------------------------------------
    def apply_request(self, request: Request) -> None:
        """Returns None after applying ``request`` between polls: ``stop`` (no more trials;
        ``cancel`` mode cancels the running ones too), ``cancel`` of one running trial, ``set``
        of ``n_trials``/``concurrency`` (written into the run's config, so a resume keeps
        it)."""
        if request.action == "stop":
            self.stopping = request.mode
            self.note("stop", f"stop requested: no more trials; running ones {request.mode}",
                      mode=request.mode, via=request.via)  # fmt: skip
            if request.mode == "cancel":
                for trial in sorted(self._loop.running.values()):
                    self._cancel(trial, request.via)
        elif request.action == "cancel":
            assert request.trial is not None, "a cancel request names its trial"
            self._cancel(request.trial, request.via)
        elif request.action == "set":
            self._set(request.settings, request.via)

    def _cancel(self, trial: int, via: str) -> None:
        """Cancels a running trial: the executor kills its worker, or (in-process) the trial
        stops at its next report."""
        if trial not in self._loop.running.values():
            self.note("ignored", f"trial {trial} is not running; nothing cancelled", trial=trial,
                      via=via)  # fmt: skip
            return
        marker = cancel_marker(self.directory, trial)
        marker.parent.mkdir(exist_ok=True)
        marker.touch()
        how = "killed" if self.executor.cancel(trial) else "stops at its next report"
        self.note("cancel", f"trial {trial} cancelled on request ({how})", trial=trial, via=via)

    def _set(self, settings: dict[str, int], via: str) -> None:
        """Applies ``n_trials`` and ``concurrency`` and records them in the run's config."""
        store = self.store
        assert store is not None, "requests are applied while the run runs"
        changed: dict[str, int] = {}
        if "n_trials" in settings:
            self.n_trials = changed["n_trials"] = settings["n_trials"]
            if self._progress is not None:
                self._progress.total = settings["n_trials"]
            store.set_plan("trials", settings["n_trials"])
        if "concurrency" in settings:
            asked = settings["concurrency"]
            changed["concurrency"] = now = self.executor.set_concurrency(asked)
            if now != asked:
                self.note("ignored", f"concurrency {asked} asked; {self.executor.name} runs "
                          f"{now} at a time: {self.executor.concurrency_limit()}",
                          concurrency=asked, via=via)  # fmt: skip
        config = dict(store.config())
        store.set_config({**config, self.kind: {**config[self.kind], **changed}})
        shown = ", ".join(f"{k}={v}" for k, v in changed.items())
        self.note("set", f"settings changed while running: {shown}", **changed, via=via)

    def _launch(self, tid: int) -> None:
        """Submits a trial, or resolves it from an earlier one with the same architecture."""
        loop, s = self._loop, self.settings
        rec = loop.records[tid]
        aid = rec.arch_id
        if not s.retrain_duplicates and aid in loop.known:
            self._resolve_cached(tid, loop.known[aid])
            return
        if not s.retrain_duplicates and aid in loop.running:
            loop.waiting.setdefault(aid, []).append(tid)
            return
        loop.dups_in_row = 0
        loop.running[aid] = tid
        checkpoint = None
        if self._saves_weights():
            ckpt_dir = self._root / "checkpoints"
            ckpt_dir.mkdir(exist_ok=True)
            checkpoint = str(ckpt_dir / f"trial_{tid}.pt")
        self.timings[tid] = {"submitted": time.time()}
        path, marker = self._files(tid)
        self.executor.submit(
            TrialTask(
                trial=tid,
                arch=rec.arch,
                metric=self.metric,
                sign=1 if self.mode == "max" else -1,
                stopper=None if self.stopper is None else self.stopper.snapshot(tid),
                timeout=s.trial_timeout,
                checkpoint=checkpoint,
                log=path,
                cancel_marker=marker,
                save_above=None if checkpoint is None else self._keeper.threshold(),
                repeat=loop.trainings_before(tid) if s.retrain_duplicates else 0,
            )
        )

    def _files(self, tid: int) -> tuple[str, str]:
        """Returns trial ``tid``'s log and cancel marker (:func:`trial_log`,
        :func:`cancel_marker`) as text."""
        return (os.path.join(self._logs, trial_log_name(tid)),
                os.path.join(self._control, cancel_marker_name(tid)))  # fmt: skip

    def _saves_weights(self) -> bool:
        """Returns whether trials write their weights (``save_weights`` and a space that
        freezes to a model)."""
        return self.settings.save_weights and hasattr(self.space, "freeze")

    def _resolve_cached(self, tid: int, source: int) -> None:
        assert self.store is not None
        src = self.store.trial(source)
        error = None if src.status != "failed" else f"same architecture as failed trial {source}"
        outcome = TrialOutcome("cached", src.metrics, src.intermediates, error, 0.0,
                               src.checkpoint, cached_from=source)  # fmt: skip
        self.store.finish_trial(tid, outcome)
        rec = self.store.trial(tid)
        self._loop.records[tid] = rec
        self._loop.dups_in_row += 1
        self._after_finish(rec)

    def _record(self, result: TrialResult) -> None:
        assert self.store is not None
        loop, tid = self._loop, result.trial
        if result.status == "failed":
            log.warning("trial %d failed: %s", tid, (result.error or "").strip()[-500:])
        metrics, status, error = result.metrics, result.status, result.error
        if metrics is not None and any(not math.isfinite(v) for v in metrics.values()):
            metrics = None
        missing = None
        if status == "done" and metrics is not None:
            missing = missing_metric(tid, metrics, self._wanted)
        if missing is not None:  # the first such trial stops the run: the rest would fail too
            status, error, loop.failure = "failed", missing, missing
        checkpoint = result.checkpoint
        if checkpoint is None and result.status != "failed" and self._saves_weights():
            self._keeper.unsaved()  # below the kept trials' scores: written never, not dropped
        if checkpoint is not None and Path(checkpoint).is_relative_to(self._root):
            checkpoint = str(Path(checkpoint).relative_to(self._root))
        outcome = TrialOutcome(status, metrics, result.intermediates, error, result.duration,
                               checkpoint, placement=result.placement)  # fmt: skip
        # the run's elapsed time goes in the trial's transaction: one commit per trial
        self.store.finish_trial(tid, outcome, meta={"elapsed": repr(loop.elapsed())})
        path, marker = self._files(tid)
        finish_log(path, tid, result, result.log_text)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(marker)
        self.timings.setdefault(tid, {}).update(result.timing, recorded=time.time())
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
        loop.records[tid] = rec
        loop.n_trained += rec.status not in UNCOUNTED
        self._after_finish(rec)
        if loop.failure:  # duplicates waiting on it stay in flight, like the trials killed
            return
        for waiter in loop.waiting.pop(rec.arch_id, []):
            self._resolve_cached(waiter, tid)

    def _show(self, force: bool = False) -> None:
        loop = self._loop
        assert self._progress is not None
        best = None if loop.best is None else loop.best[1]
        self._progress.update(loop.n_trained, self.executor.n_running, loop.n_failed, best,
                              loop.elapsed(), force, loop.n_cached)  # fmt: skip

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
