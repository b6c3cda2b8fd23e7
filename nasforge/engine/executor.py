"""Executors: where trials run. The engine ``submit``s plain-data tasks and ``poll``s plain
result dicts; an executor never talks to the strategy or the store.

    InProcessExecutor     runs each trial in the engine's own process, one at a time:
                          deterministic, easy to debug; a timeout uses SIGALRM
    ProcessPoolExecutor   (the default; :mod:`nasforge.engine.process_pool`) child processes,
                          ``concurrency`` trials at a time, forked ahead of their trials; a
                          worker whose trial succeeded takes the next one; a child that dies
                          or runs past the timeout fails its trial only

GPUs (``use_gpus``, set from the experiment's ``gpus_per_trial`` and ``devices``): the
in-process executor gives each trial the first of ``devices``; the pool gives each child one
slot of :func:`nasforge.runtime.devices.gpu_slots` (its concurrency is at most the number of
slots) and sets ``CUDA_VISIBLE_DEVICES`` in the child before the trial runs; Ray asks for
``num_gpus`` per task. An evaluator reads its device with ``nasforge.trial_device()``.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Mapping
from typing import Any

# the contract and the table of executors by name sit below the executors (this module's,
# process_pool's and ray_executor's), which register themselves; importing ray_executor
# needs no Ray
from nasforge.engine import ray_executor as _ray_executor  # noqa: F401 - registers "ray"
from nasforge.engine._executor_base import BaseExecutor, executors, register_executor
from nasforge.engine.process_pool import ProcessPoolExecutor  # registers "pool"
from nasforge.engine.trial import TrialResult, TrialTask, run_trial
from nasforge.errors import ConfigError
from nasforge.run.trial_logs import ScratchLog
from nasforge.runtime.devices import placed

__all__ = [
    "BaseExecutor",
    "InProcessExecutor",
    "ProcessPoolExecutor",
    "get_executor",
    "register_executor",
]


@register_executor("inprocess", "in_process", "local", takes_concurrency=False)
class InProcessExecutor(BaseExecutor):
    """Returns results of trials run synchronously in this process (concurrency 1)."""

    name = "inprocess"

    def __init__(self) -> None:
        self._done: collections.deque[TrialResult] = collections.deque()
        self._scratch: ScratchLog | None = None  # made at the first trial that has a log

    @property
    def n_running(self) -> int:
        """Returns the number of finished results not yet polled."""
        return len(self._done)

    def submit(self, task: TrialTask) -> None:
        """Runs the trial now, on the configured devices, its output captured in the run's
        scratch log (:class:`~nasforge.run.trial_logs.ScratchLog`: no file per trial); its
        result, with that text, waits for the next poll."""
        scratch = None
        if task.log is not None:
            if self._scratch is None:
                self._scratch = ScratchLog(os.path.dirname(task.log))
            scratch = self._scratch
        capture = None if scratch is None else scratch.captured(task.trial)
        with placed(self.local_placement()):
            result = run_trial(self._space, self._evaluator, task, capture=capture)
        if scratch is not None:
            result.log_text = scratch.output()
        self._done.append(result)

    def poll(self, timeout: float) -> list[TrialResult]:
        """Returns every result finished since the last poll."""
        out = list(self._done)
        self._done.clear()
        return out

    def shutdown(self) -> None:
        """Closes (and removes) the scratch log."""
        if self._scratch is not None:
            self._scratch.close()
            self._scratch = None

    def most_concurrency(self) -> int:
        """Returns 1: this executor runs one trial at a time."""
        return 1

    def concurrency_limit(self) -> str:
        """Returns why the concurrency stays 1."""
        return "the in-process executor runs one trial at a time (use the pool or Ray)"


def get_executor(
    name_or_obj: str | Mapping[str, Any] | BaseExecutor, concurrency: int = 2
) -> BaseExecutor:
    """Returns an executor: instances pass through; ``inprocess``, ``pool`` or ``ray`` (the
    optional extra ``nasforge[ray]``) build one; a mapping ``{name: ray, address: ...,
    max_retries: 3}`` (a run file's ``executor:``) builds one with those settings.

    Raises:
        ConfigError: an unknown name, or a setting the executor does not take.
    """
    if isinstance(name_or_obj, BaseExecutor):
        return name_or_obj
    settings: dict[str, Any] = {}
    if isinstance(name_or_obj, Mapping):
        settings = dict(name_or_obj)
        name_or_obj = settings.pop("name", None)
        concurrency = settings.pop("concurrency", concurrency)
    entry = executors().get(name_or_obj) if isinstance(name_or_obj, str) else None
    if entry is not None:
        cls, takes_concurrency = entry
        args = (concurrency,) if takes_concurrency else ()
        try:
            return cls(*args, **settings)
        except TypeError as exc:
            raise ConfigError(
                f"executor {name_or_obj!r} does not take the settings {sorted(settings)} "
                f"({exc}); see the arguments of {cls.__name__}"
            ) from exc
    names = ", ".join(repr(n) for n in sorted(executors()))
    raise ConfigError(
        f"unknown executor {name_or_obj!r}; expected one of {names} ('pool' is the default), "
        "or a BaseExecutor instance"
    )
