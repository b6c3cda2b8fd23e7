"""A process-pool child: what a child the pool forks (or spawns) runs.

:func:`child_main` runs one trial, or, in a spare child, trial after trial as the engine hands
them over a task pipe (restoring the worker's state between them:
:mod:`nasforge.engine.worker_state`), and sends each result on its result pipe;
:class:`PipeLive` carries a live stopper's reports out and its newer snapshots in while a
trial runs. The engine's side is :mod:`nasforge.engine.process_pool`.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from nasforge.engine.evaluator import BaseEvaluator
from nasforge.engine.trial import TrialResult, TrialTask, run_trial
from nasforge.engine.worker_state import WorkerState
from nasforge.run.trial_logs import crash_traceback
from nasforge.runtime.deathsig import die_with_parent
from nasforge.runtime.devices import Placement, set_placement

__all__ = ["PipeLive", "child_main", "child_trial"]


class PipeLive:
    """Returns nothing; a pool child's :class:`~nasforge.engine.trial.LiveStopper`: values go
    to the engine on the result pipe, newer snapshots come back on the task pipe."""

    def __init__(self, results: Any, updates: Any) -> None:
        self._results, self._updates = results, updates

    def publish(self, value: float, resource: int) -> None:
        """Returns nothing; sends ``("report", value, resource)`` to the engine."""
        self._results.send(("report", value, resource))

    def latest(self) -> dict[str, Any] | None:
        """Returns the newest snapshot waiting on the task pipe (None: nothing new)."""
        newest = None
        try:
            while self._updates.poll():
                newest = self._updates.recv()
        except (EOFError, OSError):  # the engine closed the pipe: keep the last snapshot
            pass
        return newest


def child_main(
    conn: Any,
    space: Any,
    evaluator: BaseEvaluator,
    task: TrialTask | None,
    threads: int,
    setup: Callable[[TrialTask], None] | None = None,
    placement: Placement | None = None,
    visible: str | None = None,
    tasks: Any = None,
) -> None:
    """Runs trials and sends each result on ``conn``: ``task`` itself, or (a spare child,
    ``task`` None) each one that arrives on ``tasks`` with its placement and visible GPUs,
    until the engine closes ``tasks`` (it hands a worker another trial only after the last
    one succeeded). Newer stopper snapshots arrive on ``tasks`` while a trial runs."""
    # The forked child shares the engine's open SQLite connection; it never touches it, and
    # multiprocessing ends the child with os._exit, so no finaliser closes it from here.
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the engine's to handle
    if task is not None:
        conn.send(
            child_trial(conn, space, evaluator, task, threads, setup, placement, visible, tasks)
        )
        conn.close()
        return
    state = None  # what each trial starts from, taken before the first one (reuse only)
    # A closed task pipe alone cannot end a worker: siblings forked after it hold copies of
    # the pipe's write end, so its EOF would wait for them. The engine says so in words: a
    # task without another to follow, or None (retired).
    while True:  # a spare: trial after trial while the engine hands it more (reuse)
        try:
            message = tasks.recv()
            while message is not None and not isinstance(message, tuple):  # a snapshot left
                message = tasks.recv()  # from the last trial
        except (EOFError, OSError):  # the pool shut down
            return
        if message is None:  # retired
            return
        task, placement, visible, again = message
        if again and state is None:  # a few ms; GPU workers (never reused) take nothing
            state = WorkerState.take()
        result = child_trial(
            conn, space, evaluator, task, threads, setup, placement, visible, tasks
        )
        # put back what the trial changed; what cannot be put back ends this worker, and the
        # engine, told before the result, gives the next trial a fresh one
        reasons = state.restore() if state is not None and again else []
        if reasons:
            conn.send(("replace", reasons))
        conn.send(result)
        if not again or reasons:
            return


def child_trial(
    conn: Any,
    space: Any,
    evaluator: BaseEvaluator,
    task: TrialTask,
    threads: int,
    setup: Callable[[TrialTask], None] | None,
    placement: Placement | None,
    visible: str | None,
    tasks: Any,
) -> TrialResult:
    """Returns the result of one trial run in a pool child (reports go on ``conn``)."""
    live = None if tasks is None or task.stopper is None else PipeLive(conn, tasks)
    crash_traceback(task.log)  # a segfault's traceback goes to the trial's log
    if visible is not None:  # before anything in this child initialises CUDA
        os.environ["CUDA_VISIBLE_DEVICES"] = visible
    set_placement(placement)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)
    if setup is not None:
        setup(task)
    # the parent enforces the timeout by killing this child
    return run_trial(space, evaluator, task.without_timeout(), live)
