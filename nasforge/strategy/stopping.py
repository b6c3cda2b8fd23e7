"""Early stopping of poor trials: the common stopper interface, the registry of rules, and the
median stopping rule (Golovin et al. 2017, "Google Vizier", section 3.2.2). Pure (no torch).

A stopper lives in the engine, which feeds it the intermediate curves of finished trials
(:meth:`BaseStopper.add_finished`); a running trial gets a plain-data
:meth:`BaseStopper.snapshot` and decides locally (in its worker) at each report with
:func:`should_stop`, so no round trip to the engine is needed. The snapshot names its rule;
:func:`should_stop` looks the rule's ``decide`` up in a dict, so a worker needs no stopper
object, only plain data (it crosses process pipes and Ray unchanged).

    curve        the intermediate values one trial reported, step 0, 1, 2, ...; its length is
                 the resource the trial used (reports, usually epochs)
    running avg  mean of a curve's first s+1 values
    median rule  stop at step s >= warmup_steps if the trial's best value so far is worse than
                 the median of the running averages at step s of the finished trials
                 (at least ``min_trials`` of them reached step s)

The rung rules (successive halving, ASHA, Hyperband) live in :mod:`nasforge.strategy.halving`.
"""

from __future__ import annotations

import abc
import difflib
import inspect
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from nasforge.errors import ConfigError

__all__ = [
    "BaseStopper",
    "MedianStopper",
    "should_stop",
    "register_stopper",
    "get_stopper",
    "list_stoppers",
]

#: rule name -> stopper class; a snapshot's ``rule`` picks the class's ``decide``
_RULES: dict[str, type[BaseStopper]] = {}


def register_stopper(cls: type[BaseStopper]) -> type[BaseStopper]:
    """Returns ``cls`` after registering it under ``cls.rule`` (a class decorator)."""
    _RULES[cls.rule] = cls
    return cls


def list_stoppers() -> list[str]:
    """Returns the registered rule names."""
    return sorted(_RULES)


def get_stopper(spec: BaseStopper | str | dict[str, Any] | None) -> BaseStopper | None:
    """Returns a stopper: None and instances pass through; a name (``"asha"``) or a mapping
    ``{"rule": "asha", "eta": 3, ...}`` builds one (a mapping without ``rule`` is the median
    rule, as records written before the rung rules existed hold).

    Raises:
        ConfigError: an unknown rule, or arguments the rule refuses.
    """
    if spec is None or isinstance(spec, BaseStopper):
        return spec
    if isinstance(spec, str):
        spec = {"rule": spec}
    if not isinstance(spec, dict):
        raise ConfigError(
            f"stopper must be a BaseStopper, a rule name or a mapping, got {spec!r}; e.g. "
            "stopper: {rule: asha, min_resource: 1, eta: 3}"
        )
    args = dict(spec)
    name = args.pop("rule", "median")
    if name not in _RULES:
        close = difflib.get_close_matches(str(name), list(_RULES), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ConfigError(
            f"unknown stopping rule {name!r}; {hint}expected one of {list_stoppers()}"
        )
    cls = _RULES[name]
    params = inspect.signature(cls).parameters
    keys = [k for k, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    unknown = [k for k in args if k not in keys]
    if unknown and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        close = difflib.get_close_matches(str(unknown[0]), keys, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(
            f"stopping rule {name!r} takes no {unknown[0]!r}{hint}; its valid keys are "
            f"rule, {', '.join(keys)}"
        )
    try:
        return cls(**args)
    except TypeError as exc:
        raise ConfigError(
            f"stopping rule {name!r}: {exc}; its valid keys are rule, {', '.join(keys)}"
        ) from exc


class BaseStopper(abc.ABC):
    """Returns stop decisions for running trials from the curves of finished ones.

    Lifecycle: the engine calls :meth:`reset`, then :meth:`add_finished` for every finished
    trial in the order the record tells them (a resume replays that order), and
    :meth:`snapshot` for each trial it launches; the trial's worker calls
    :func:`should_stop` with that snapshot at each report.

    Invariants: values are maximised (the engine negates minimised metrics); a snapshot is
    plain data; a decision depends only on the snapshot and the trial's own curve so far,
    so replaying the same record gives the same decisions.
    """

    #: the registry name, carried by every snapshot
    rule: str = ""
    #: how a trial this rule stops is recorded
    stopped_status: str = "early_stopped"

    @abc.abstractmethod
    def config(self) -> dict[str, Any]:
        """Returns the constructor arguments and ``rule`` as plain data (stored with a run)."""

    @abc.abstractmethod
    def reset(self) -> None:
        """Forgets every finished curve."""

    @abc.abstractmethod
    def add_finished(self, curve: Sequence[float], trial: int = 0, status: str = "done") -> None:
        """Records the (maximised) curve of a finished trial: its id and recorded status."""

    def add_running(self, value: float, trial: int, resource: int) -> bool:
        """Returns whether a running trial's (maximised) ``value`` at ``resource`` changed
        what the snapshots of other running trials hold (the rung rules count the rung values
        of running trials, as ASHA does; this default counts nothing)."""
        return False

    @abc.abstractmethod
    def snapshot(self, trial: int = 0) -> dict[str, Any] | None:
        """Returns the plain data the worker of trial ``trial`` decides from (None: the rule
        never stops that trial). Its ``status`` key, if any, is how a stop is recorded."""

    @staticmethod
    @abc.abstractmethod
    def decide(snapshot: dict[str, Any], curve: Sequence[float]) -> bool:
        """Returns whether a trial with this (non-empty, maximised) curve stops now."""


def should_stop(snapshot: dict[str, Any] | None, curve: Sequence[float]) -> bool:
    """Returns whether a trial whose (maximised) curve so far is ``curve`` should stop now."""
    if not snapshot or not curve:
        return False
    decide: Callable[[dict[str, Any], Sequence[float]], bool] = _RULES[
        snapshot.get("rule", "median")
    ].decide
    return decide(snapshot, curve)


@register_stopper
class MedianStopper(BaseStopper):
    """Returns stop decisions for running trials by the median stopping rule.

    Invariants: values are maximised (the engine negates minimised metrics); a decision depends
    only on the finished curves given so far, so replay gives the same decisions; only trials
    that finished (status ``done``) count.

    Raises:
        ConfigError: negative ``warmup_steps`` or ``min_trials`` < 1.
    """

    rule = "median"

    def __init__(self, warmup_steps: int = 1, min_trials: int = 3) -> None:
        if not isinstance(warmup_steps, int) or warmup_steps < 0:
            raise ConfigError(f"warmup_steps must be an int >= 0, got {warmup_steps!r}")
        if not isinstance(min_trials, int) or min_trials < 1:
            raise ConfigError(f"min_trials must be an int >= 1, got {min_trials!r}")
        self.warmup_steps = warmup_steps
        self.min_trials = min_trials
        self._curves: list[list[float]] = []

    def config(self) -> dict[str, Any]:
        """Returns the constructor arguments as plain data."""
        return {"rule": self.rule, "warmup_steps": self.warmup_steps, "min_trials": self.min_trials}

    def reset(self) -> None:
        """Forgets every finished curve."""
        self._curves = []

    def add_finished(self, curve: Sequence[float], trial: int = 0, status: str = "done") -> None:
        """Records the intermediate curve (maximised values) of a trial that finished."""
        if curve and status == "done":
            self._curves.append([float(v) for v in curve])

    def snapshot(self, trial: int = 0) -> dict[str, Any]:
        """Returns plain data for :func:`should_stop`: the median running average per step."""
        medians: list[float | None] = []
        step = 0
        while True:
            avgs = [sum(c[: step + 1]) / (step + 1) for c in self._curves if len(c) > step]
            if not avgs:
                break
            medians.append(statistics.median(avgs) if len(avgs) >= self.min_trials else None)
            step += 1
        return {"rule": "median", "warmup_steps": self.warmup_steps, "medians": medians}

    @staticmethod
    def decide(snapshot: dict[str, Any], curve: Sequence[float]) -> bool:
        """Returns whether the best value so far is below the median at this step."""
        step = len(curve) - 1
        medians: list[float | None] = snapshot["medians"]
        median = medians[step] if 0 <= step < len(medians) else None
        if step < snapshot["warmup_steps"] or median is None:
            return False
        return max(curve) < median
