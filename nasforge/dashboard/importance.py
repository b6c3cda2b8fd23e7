"""Which decisions of a space matter most for a run's metric: Optuna's mean-decrease-in-impurity
importance evaluator (a random forest) over the run's finished trials.

Optuna's fANOVA evaluator ranks the decisions the same way on the runs we tried, but takes
about 25 s on 2,000 trials of 12 decisions on this machine, against under 1 s for this one.

The trials become an in-memory Optuna study (one categorical distribution per decision, the
values the trials took; a numeric decision with fractional or more than ``_MAX_LEVELS``
distinct values — a range such as a learning rate — one float distribution over its span, on
a log scale when it spans two decades or more of positive values), so any run whose trials
carry architectures gets an importance view, whichever kind wrote it. Nothing is written anywhere.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from nasforge.errors import ConfigError
from nasforge.run.records import TrialRecord
from nasforge.run.results import score

__all__ = ["decision_importance", "MAX_TRIALS"]

log = logging.getLogger(__name__)

#: the importance is fitted on the latest this many scored trials (a forest on more is slow)
MAX_TRIALS = 2000
#: a numeric decision with more distinct values than this is continuous, not a category
_MAX_LEVELS = 10


def _numeric(values: Sequence[Any]) -> bool:
    """Returns whether a decision's values are a numeric range rather than categories."""
    nums = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(nums) != len(values):
        return False
    return len(nums) > _MAX_LEVELS or any(float(v) != int(v) for v in nums)


def _distribution(values: Sequence[Any]) -> Any:
    """Returns the Optuna distribution of a decision's observed values."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution

    if not _numeric(values):
        return CategoricalDistribution(list(values))
    low, high = float(min(values)), float(max(values))
    return FloatDistribution(low, high, log=low > 0 and high >= 100 * low)


def _category(v: Any) -> Any:
    """Returns a value Optuna accepts as a categorical choice (lists and mappings as JSON)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return json.dumps(v, sort_keys=True)


def decision_importance(
    trials: Sequence[TrialRecord],
    metric: str,
    mode: str,
    constraints: dict[str, Any] | None = None,
    seed: int = 0,
) -> dict[str, float]:
    """Returns decision label -> importance (non-negative, summing to 1, largest first) of
    the architectures' decisions for ``metric``, by a random forest's mean decrease in
    impurity over the latest :data:`MAX_TRIALS` scored trials.

    Invariants: the same trials and seed give the same importances; decisions that every
    trial takes the same value for are left out (they explain nothing).

    Raises:
        ConfigError: fewer than 2 scored trials, or no decision varies between them.
    """
    import optuna
    from optuna.distributions import BaseDistribution, FloatDistribution
    from optuna.importance import MeanDecreaseImpurityImportanceEvaluator

    scored = [(t, score(t, metric, mode, constraints or {})) for t in trials]
    kept = [(t, s) for t, s in scored if s is not None and t.arch][-MAX_TRIALS:]
    if len(kept) < 2:
        raise ConfigError(
            f"importance needs at least 2 trials with a {metric!r} value and an architecture; "
            f"this run has {len(kept)}: wait for more trials"
        )
    values: dict[str, list[Any]] = {}
    for t, _ in kept:
        for k, v in t.arch.items():
            c = _category(v)
            if c not in values.setdefault(k, []):
                values[k].append(c)
    varying = {k: vs for k, vs in values.items() if len(vs) > 1}
    if not varying:
        raise ConfigError(
            f"importance: no decision varies among the {len(kept)} scored trials (each took "
            "one value), so none explains the metric"
        )
    dists: dict[str, BaseDistribution] = {k: _distribution(vs) for k, vs in varying.items()}
    frozen = []
    for t, s in kept:
        params = {k: _category(t.arch.get(k)) for k in varying}
        if any(params[k] not in varying[k] for k in varying):
            continue  # a trial missing a decision (a conditional one) is left out
        for k, d in dists.items():
            if isinstance(d, FloatDistribution):
                params[k] = float(params[k])
        frozen.append(optuna.trial.create_trial(params=params, distributions=dists, value=s))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize")  # scores are maximised
    study.add_trials(frozen)
    result = optuna.importance.get_param_importances(
        study, evaluator=MeanDecreaseImpurityImportanceEvaluator(seed=seed)
    )
    log.debug("importance over %d trials: %s", len(frozen), result)
    return dict(result)
