"""The executor contract and the table of executors by name.

:class:`BaseExecutor` is what every executor implements (the engine ``submit``s plain-data
tasks and ``poll``s plain results); :func:`register_executor` puts an executor class in the
table under its names, which :func:`nasforge.engine.executor.get_executor` (and a run file's
``executor:``) looks names up in. Both sit below the executors that register
(:mod:`nasforge.engine.executor`, :mod:`nasforge.engine.process_pool`,
:mod:`nasforge.engine.ray_executor`), so that the pool and Ray's executor need not import
each other to be found. Their public home is :mod:`nasforge.engine.executor`, which imports
both executors and re-exports these names; this module is internal.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from nasforge.engine.evaluator import BaseEvaluator
from nasforge.engine.trial import TrialResult, TrialTask
from nasforge.errors import ConfigError
from nasforge.runtime.devices import Placement, check_gpus, local_placement

__all__: list[str] = []

#: name -> (executor class, whether its first argument is ``concurrency``)
_EXECUTORS: dict[str, tuple[type[BaseExecutor], bool]] = {}

E = TypeVar("E", bound="type[BaseExecutor]")


class BaseExecutor(abc.ABC):
    """Returns results of submitted trials from :meth:`poll`.

    Invariants: each submitted task yields exactly one result, whatever happens to the trial;
    ``n_running`` never exceeds ``concurrency``; ``shutdown`` leaves no process behind.
    ``tests/engine/test_executor_conformance.py`` holds every executor to this contract, one
    test per clause: a new executor joins its list.
    """

    name: str = ""
    concurrency: int = 1
    gpus_per_trial: float = 0.0  # GPUs per trial: 0, a share 1/n, or a whole number
    devices: tuple[int, ...] = ()  # the GPUs trials may use (empty for CPU trials)
    #: the run's stopper, set by the engine: an executor that can pass values of running
    #: trials to it (``add_running``) and fresh snapshots back to them (the pool) does so
    live_stopper: Any = None

    def use_gpus(self, gpus_per_trial: float = 0, devices: Sequence[int] | None = None) -> None:
        """Gives each trial ``gpus_per_trial`` GPUs out of ``devices`` (None: every GPU this
        machine has); checked now, before anything runs.

        Raises:
            ConfigError: as :func:`nasforge.runtime.devices.check_gpus` (a bad amount, a GPU that
                does not exist, more GPUs than there are).
        """
        self.gpus_per_trial, self.devices = check_gpus(gpus_per_trial, devices)

    def local_placement(self) -> Placement:
        """Returns the placement of a trial run in this process (in-process executors)."""
        return local_placement(self.gpus_per_trial, self.devices)

    def start(self, space: Any, evaluator: BaseEvaluator) -> None:
        """Prepares to run trials of ``evaluator`` on ``space``; raises ConfigError if it can't."""
        self._space, self._evaluator = space, evaluator

    @property
    @abc.abstractmethod
    def n_running(self) -> int:
        """Returns the number of trials submitted and not yet returned by poll."""

    @abc.abstractmethod
    def submit(self, task: TrialTask) -> None:
        """Starts a trial (may run it to completion right away)."""

    @abc.abstractmethod
    def poll(self, timeout: float) -> list[TrialResult]:
        """Returns results of finished trials, waiting up to ``timeout`` s for at least one."""

    def shutdown(self) -> None:  # noqa: B027 - optional hook
        """Stops every running trial and frees resources."""

    def set_concurrency(self, n: int) -> int:
        """Returns the number of trials this executor runs at once from now on, after being
        asked for ``n`` while it runs (``nasforge set DIR concurrency=N``): ``n`` bounded by
        what the executor has (:meth:`concurrency_limit` says what bounds it). Running trials
        are never stopped: a lower concurrency takes effect as they finish.

        Raises:
            ConfigError: ``n`` is not a positive int.
        """
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(f"concurrency must be an int >= 1, got {n!r}")
        most = self.most_concurrency()
        self.concurrency = n if most is None else min(n, most)
        return self.concurrency

    def most_concurrency(self) -> int | None:
        """Returns the most trials this executor can run at once here (None: it knows no
        bound; Ray's cluster decides how many of the asked trials run at once)."""
        return None

    def concurrency_limit(self) -> str:
        """Returns what bounds this executor's concurrency, for a message (empty: nothing)."""
        return ""

    def cancel(self, trial: int) -> bool:
        """Returns whether the running ``trial`` was stopped now (its one ``cancelled``
        result comes from the next poll; True at most once per trial); False leaves it to the
        trial's cancel marker, read at its next report (the in-process executor)."""
        return False

    def spec(self) -> str | dict[str, Any]:
        """Returns what rebuilds this executor with :func:`get_executor` (its name, or a
        mapping with ``name`` and its settings), as stored in the run's config."""
        return self.name

    def resume_from(self, spec: Any) -> None:  # noqa: B027 - optional hook
        """Takes over, on resume, what the run's record says this executor used (``spec`` as
        :meth:`spec` returned it then); by default nothing."""


def register_executor(*names: str, takes_concurrency: bool = True) -> Callable[[E], E]:
    """Returns a class decorator that records an executor class under ``names`` (its first
    argument is ``concurrency`` unless ``takes_concurrency`` is False).

    Raises:
        ConfigError: no name given, or a name that another class already has.
    """
    if not names:
        raise ConfigError("register_executor needs at least one name, e.g. @register_executor('x')")

    def decorate(cls: E) -> E:
        for name in names:
            held = _EXECUTORS.get(name)
            if held is not None and held[0] is not cls:
                raise ConfigError(
                    f"executor name {name!r} is taken by {held[0].__name__}; register "
                    f"{cls.__name__} under another name"
                )
            _EXECUTORS[name] = (cls, takes_concurrency)
        return cls

    return decorate


def executors() -> dict[str, tuple[type[BaseExecutor], bool]]:
    """Returns a copy of the table: name -> (executor class, whether it takes ``concurrency``)."""
    return dict(_EXECUTORS)
