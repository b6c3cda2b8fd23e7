"""Running one trial inside a worker (the engine's process, a pool process or a Ray task):
build the report callable, call the evaluator, turn every outcome into a plain result dict.

A :class:`TrialTask` (plain data, built by the engine) goes to the worker; a
:class:`TrialResult` (plain data, recorded by the engine) comes back. Both pickle, so they
cross process pipes and Ray's object store unchanged.
"""

from __future__ import annotations

import math
import os
import signal
import threading
import time
import traceback
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from nasforge.engine.evaluator import BaseEvaluator, EarlyStop, as_metrics
from nasforge.run.trial_logs import captured
from nasforge.runtime.devices import trial_placement
from nasforge.runtime.weights import save_weights
from nasforge.strategy.stopping import should_stop

__all__ = [
    "cancel_marker",
    "cancel_marker_name",
    "TrialTask",
    "TrialResult",
    "LiveStopper",
    "run_trial",
    "save_weights",
    "failed_result",
    "cancelled_result",
    "CANCELLED",
]


def cancel_marker(directory: str | Path, trial: int) -> Path:
    """Returns the file whose existence cancels ``trial`` at its next report (the in-process
    executor's way; the others kill the trial's worker): ``DIR/control/trial_N.cancel``, an
    absolute path (an absolute ``directory`` is kept as given: resolving it costs a ``stat``
    per part, on every trial, and names the same file)."""
    root = directory if os.path.isabs(directory) else Path(directory).resolve()
    return Path(root, "control", cancel_marker_name(trial))


def cancel_marker_name(trial: int) -> str:
    """Returns the file name of ``trial``'s cancel marker in the run's ``control/`` folder."""
    return f"trial_{trial}.cancel"


@dataclass(frozen=True)
class TrialTask:
    """Returns nothing; what a worker needs to run one trial."""

    trial: int  # the trial id in the store
    arch: dict[str, Any]  # the architecture, already validated against the space
    metric: str  # the optimised metric, to name a bare float and to feed the stopper
    sign: int = 1  # +1 to maximise the metric, -1 to minimise it
    stopper: Any = None  # a stopper snapshot (plain data) or None
    timeout: float | None = None  # seconds, enforced in the worker or by killing it
    checkpoint: str | None = None  # where to save the trained weights, or None
    log: str | None = None  # where the trial's output goes (``nasforge.run.trial_logs``)
    #: a file whose appearance cancels the trial at its next report (``nasforge stop --trial``
    #: on the in-process executor; the others kill the trial's worker instead)
    cancel_marker: str | None = None
    #: write the weights only when ``sign * metric`` is at least this (None: always): the run
    #: keeps only its best trials' weights, and a lower score is dropped at once
    #: (:meth:`nasforge.engine.checkpoints.CheckpointKeeper.threshold`)
    save_above: float | None = None
    #: how many trainings of the architecture the run made before this one (``retrain_duplicates``):
    #: 0 trains with the evaluator as given, ``n`` with :meth:`BaseEvaluator.reseeded` ``(n)``
    repeat: int = 0

    def without_timeout(self) -> TrialTask:
        """Returns the task with no timeout (the parent enforces it by killing the worker)."""
        return replace(self, timeout=None)


@dataclass
class TrialResult:
    """Returns nothing; the outcome of one trial as a worker reports it."""

    trial: int
    status: str  # "done", "failed", "early_stopped" or "pruned"
    metrics: dict[str, float] | None = None
    intermediates: list[dict[str, float]] = field(default_factory=list)
    error: str | None = None
    duration: float | None = None
    checkpoint: str | None = None
    placement: dict[str, Any] | None = None  # where it ran: {"node", "devices"} (run/devices)
    retries: int = 0  # times the executor ran it again after its worker or node died
    #: wall-clock times (time.time()) of the evaluator's call and return, which the engine
    #: sets against its own dispatch and record times (the trial's start-up cost)
    timing: dict[str, float] = field(default_factory=dict)
    #: the trial's captured output, where the worker cannot write the run's log (Ray)
    log_text: str | None = None


def failed_result(trial: int, error: str) -> TrialResult:
    """Returns the result of a trial that failed outside its evaluator (died, timed out)."""
    return TrialResult(trial, "failed", error=error)


class _Timeout(BaseException):  # noqa: N818 - control flow, raised by the alarm handler
    pass


class _Cancelled(BaseException):  # noqa: N818 - control flow, raised by report
    pass


#: the error text of a trial cancelled on request
CANCELLED = "cancelled on request (nasforge stop)"


def cancelled_result(trial: int) -> TrialResult:
    """Returns the result of a trial cancelled on request (``nasforge stop``)."""
    return TrialResult(trial, "cancelled", error=CANCELLED)


class LiveStopper(Protocol):
    """Returns nothing; a channel between a running trial and its engine's stopper (the pool
    gives one to each child): the trial publishes each maximised value it reports, and picks
    up the newest snapshot the engine pushed, without waiting for either."""

    def publish(self, value: float, resource: int) -> None:
        """Returns nothing; sends the trial's value at ``resource`` (its number of reports)."""

    def latest(self) -> dict[str, Any] | None:
        """Returns the newest snapshot pushed since the last call, or None if none was."""


def run_trial(
    space: Any,
    evaluator: BaseEvaluator,
    task: TrialTask,
    live: LiveStopper | None = None,
    capture: AbstractContextManager[Any] | None = None,
) -> TrialResult:
    """Returns the result dict of one trial, its output captured in ``task.log`` (or by
    ``capture``, a context that captures it elsewhere: the in-process executor's scratch
    log); never raises for a failure of the trial itself (see :func:`_run_trial`)."""
    with captured(task.log, task.trial) if capture is None else capture:
        return _run_trial(space, evaluator, task, live)


def _worth_saving(task: TrialTask, metrics: dict[str, float] | None) -> bool:
    """Returns whether the trial's weights could be kept: no ``save_above``, no score to
    compare, or a score (``sign * metric``) at least ``save_above``."""
    if task.save_above is None or not metrics or task.metric not in metrics:
        return True
    return task.sign * metrics[task.metric] >= task.save_above


def _run_trial(
    space: Any, evaluator: BaseEvaluator, task: TrialTask, live: LiveStopper | None = None
) -> TrialResult:
    """Returns the result dict of one trial; never raises for a failure of the trial itself.

    Invariants: a raise, a None/NaN/infinite metric or a timeout gives status ``failed`` with
    the error text (a traceback for raises); a stop requested by the stopper gives
    ``early_stopped`` (or the snapshot's ``status``, ``pruned`` for the rung rules) with the
    last reported metrics as the final ones; a returned dict without ``task.metric`` is
    ``done`` with the metrics it has (the engine stops the run). With ``live``, the stopper
    decides from the newest snapshot the engine pushed (rung values of running trials too).
    """
    metric, sign = task.metric, task.sign
    if task.repeat:  # a retraining: another seed where the evaluator has one to change
        evaluator = evaluator.reseeded(task.repeat) or evaluator
    snapshot = task.stopper
    intermediates: list[dict[str, float]] = []
    curve: list[float] = []

    def report(value: Any, step: int | None = None) -> None:
        nonlocal snapshot
        metrics = as_metrics(value, metric, require=False)
        intermediates.append(metrics)
        if task.cancel_marker is not None and os.path.exists(task.cancel_marker):
            raise _Cancelled()
        if metric in metrics:
            curve.append(sign * metrics[metric])
            if live is not None and snapshot is not None:
                live.publish(curve[-1], len(curve))
                snapshot = live.latest() or snapshot
            if should_stop(snapshot, curve):
                raise EarlyStop()

    result = TrialResult(task.trial, "failed")
    start = time.perf_counter()
    timeout = task.timeout
    use_alarm = bool(timeout) and threading.current_thread() is threading.main_thread()
    if use_alarm:
        assert timeout  # use_alarm implies it

        def on_alarm(signum: int, frame: Any) -> None:
            raise _Timeout()

        old = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, float(timeout))
    entered = time.time()
    try:
        value = evaluator.evaluate(space, dict(task.arch), report)
        # a dict without the optimised metric comes back as it is: the engine, which knows
        # every metric the run names, stops the run on it (missing_metric)
        metrics = as_metrics(value, metric, require=False)
        bad = {k: v for k, v in metrics.items() if not math.isfinite(v)}
        if bad:
            raise ValueError(f"the evaluator returned non-finite metrics {bad}")
        result.status, result.metrics = "done", metrics
    except EarlyStop:
        stopped = (task.stopper or {}).get("status", "early_stopped")  # "pruned": a rung rule
        result.status, result.metrics = stopped, dict(intermediates[-1])
    except _Cancelled:
        result.status, result.error = "cancelled", CANCELLED
        result.metrics = dict(intermediates[-1]) if intermediates else None
    except _Timeout:
        result.error = f"timed out after {timeout} s (trial_timeout)"
    except Exception:  # noqa: BLE001 - any failure of user code is recorded, not raised
        result.error = traceback.format_exc(limit=20)
    finally:
        result.timing = {"entered": entered, "returned": time.time()}
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
    model = getattr(evaluator, "last_model", None)
    if (
        task.checkpoint
        and model is not None
        and result.status != "failed"
        and _worth_saving(task, result.metrics)
    ):
        try:
            result.checkpoint = save_weights(model, task.checkpoint)
        except Exception as exc:  # noqa: BLE001 - a failed save must not lose the metrics
            result.error = f"saving weights failed: {exc}"
    if model is not None:
        evaluator.last_model = None
    result.intermediates = intermediates
    result.duration = time.perf_counter() - start
    placement = trial_placement()  # set by the executor that runs the trial
    result.placement = None if placement is None else placement.to_dict()
    return result
