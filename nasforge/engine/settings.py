"""The settings of a multi-trial experiment as one dataclass: :class:`ExperimentSettings` is
the one list of them, with their defaults and the checks a setting passes on its own.

``Experiment(space, evaluator, strategy, n_trials=30, executor="inprocess")`` and
``Experiment(space, evaluator, strategy, settings=ExperimentSettings(n_trials=30,
executor="inprocess"))`` build the same experiment: the keywords are this dataclass's fields
(keywords given beside ``settings`` replace its fields). What a setting means together with
the evaluator and the strategy (a metric the evaluator declares, a grid that needs no budget)
is checked by the experiment.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nasforge.errors import ConfigError
from nasforge.run.settings import kind_settings

__all__ = ["ExperimentSettings"]


@dataclass
class ExperimentSettings:
    """Returns nothing; every setting of a multi-trial experiment (the ``multitrial`` kind)
    but its space, evaluator and strategy, with its default.

    Raises:
        ConfigError: (:meth:`check`) a setting that is wrong on its own.
    """

    n_trials: int | None = None  # trials to train (cached duplicates do not count)
    time_budget: float | None = None  # seconds across resumes; a grid may go without a budget
    metric: str | None = None  # None: the evaluator's (accuracy, or default for a function)
    mode: str = "max"  # or "min"
    constraints: Any = None  # {"params": ("<=", 1e5)} or ["params <= 1e5"]
    second_objective: tuple[str, str] | None = None  # ("params", "min"): a Pareto front
    # "pool", "inprocess", "ray", a mapping {"name": "ray", "address": ...} or an executor
    executor: Any = "pool"
    concurrency: int = 2  # trials at once (the pool's and Ray's)
    trial_timeout: float | None = None  # seconds; a trial past it is killed and failed
    stopper: Any = None  # "asha", "hyperband", "sh", "median", {"rule": ...} or a BaseStopper
    retrain_duplicates: bool = False  # False: an architecture seen before is `cached`
    save_weights: bool = True  # each trial's weights under checkpoints/ (a ModelSpace's)
    keep_checkpoints: int | None = 5  # the best trials whose weight files stay; None: all
    max_duplicates: int = 200  # duplicates proposed in a row before the space is exhausted
    progress: str = "auto"  # "auto", "bar", "log" or "off"
    threads: int | None = None  # torch threads of the training process (None: 1)
    crossmodel: Any = True  # True, False or {"supergraph": False, ...} (docs/crossmodel.md)
    gpus_per_trial: float = 0  # 0: CPU trials; 0.5: two trials share a GPU
    devices: list[int] | None = None  # GPU ids the executor hands out (None: every GPU)
    # trackers: TensorBoardCallback(logdir), MLflowCallback(uri) or {"type": ..., ...}
    callbacks: Sequence[Any] | None = None

    @classmethod
    def build(
        cls, settings: ExperimentSettings | None = None, **options: Any
    ) -> ExperimentSettings:
        """Returns ``settings`` (default: every default) with ``options`` replacing fields:
        :func:`~nasforge.run.settings.kind_settings`, the one builder of every kind's
        settings, with the keywords that are ``Experiment``'s documented API (no warning).

        Raises:
            ConfigError: an option that is no field (the message suggests the closest), a
                ``settings`` that is not an ExperimentSettings (or a mapping of its fields),
                or a field of the wrong type (``n_trials=True``, ``time_budget="soon"``).
        """
        return kind_settings(cls, settings, options, "Experiment", deprecated=False)

    def check(self) -> None:
        """Returns None when each setting is valid on its own.

        Raises:
            ConfigError: a trial count that is not a positive int (a bool is none), a time
                budget that is not a positive number, a mode other than
                max/min, or a ``keep_checkpoints`` that is not a positive int or None.
        """
        n, t = self.n_trials, self.time_budget
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise ConfigError(f"n_trials must be a positive int or None, got {n!r}")
        if t is not None and (isinstance(t, bool) or not isinstance(t, numbers.Real) or t <= 0):
            raise ConfigError(f"time_budget must be a number of seconds > 0 or None, got {t!r}")
        if self.mode not in ("max", "min"):
            raise ConfigError(f"mode must be 'max' or 'min', got {self.mode!r}")
        k = self.keep_checkpoints
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise ConfigError(
                f"keep_checkpoints must be a positive int (the best trials whose weights are "
                f"kept) or None (keep all), got {k!r}; save_weights=False saves none"
            )
