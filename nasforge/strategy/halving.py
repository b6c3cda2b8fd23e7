"""Budget-aware early stopping by rungs: successive halving, asynchronous successive halving
(ASHA, Li et al. 2020, "A System for Massively Parallel Hyperparameter Tuning") and Hyperband
(Li et al. 2018) as stop rules of the engine. Pure (no torch).

    resource   the number of reports a trial made (usually epochs); a curve of length r
               reached resource r, and ``curve[r - 1]`` is its value there
    rung k     resource r_k = min_resource * eta**k, for every r_k < max_resource (the last
               resource is where a trial ends anyway, so it is no decision point)
    ASHA       at rung k a trial goes on only if its value is among the best max(1, n // eta)
               of the n values at rung k: the trials recorded so far that reached rung k, and
               itself. Fewer than ``min_trials`` values: it goes on (a grace period)
    SH         trials come in cohorts of ``n_trials`` (by trial id); synchronous successive
               halving would let n_{k+1} = n_k // eta of a cohort's n_k trials at rung k go on
               (n_0 = n_trials). Without pausing trials, a trial stops at rung k as soon as
               n_{k+1} recorded members of its cohort already beat it there, which synchronous
               SH would also have stopped (for curves that do not cross)
    Hyperband  brackets b = 0..s_max (s_max = floor(log_eta(max/min))): bracket b is ASHA with
               minimum resource min_resource * eta**b, and gets trials in the proportion of
               Hyperband's n_b = ceil((s_max + 1) * eta**(s_max - b) / (s_max - b + 1)); a
               trial's bracket comes from its id, through a fixed interleaved cycle

The engine learns rung values from finished trials (``done``, ``pruned``, ``failed``:
every recorded report is a real measurement) and, for every rung rule (ASHA, Hyperband, SH),
from running trials as they reach a rung (``add_running``): as in the ASHA paper, a trial at
rung k is compared with every trial that reached rung k so far, not only the finished ones.
A running trial decides from the snapshot taken when it was launched, refreshed whenever the
executor can push a newer one (the pool and Ray do, between reports, without the trial
waiting).
Counting running trials makes a decision depend on timing, as in every asynchronous rule; a
resume rebuilds the rung values of the finished trials from the record.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from nasforge.errors import ConfigError
from nasforge.strategy.stopping import BaseStopper, register_stopper

__all__ = [
    "ASHAStopper",
    "HyperbandStopper",
    "SuccessiveHalvingStopper",
    "rungs",
    "hyperband_brackets",
]

#: statuses whose reports count as rung values (a cached trial repeats another's reports)
_COUNTED = ("done", "pruned", "early_stopped", "failed")


def _check(name: str, value: Any, low: int, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{name} must be an int >= {low}, got {value!r}")


def rungs(min_resource: int, eta: int, max_resource: int | None, up_to: int) -> list[int]:
    """Returns the rung resources min_resource * eta**k below max_resource and <= up_to."""
    out, r = [], min_resource
    while r <= up_to and (max_resource is None or r < max_resource):
        out.append(r)
        r *= eta
    return out


def _is_rung(r: int, min_resource: int, eta: int, max_resource: int | None) -> bool:
    return r in rungs(min_resource, eta, max_resource, r)


class _RungSettings(BaseStopper):
    """Returns stop decisions by a rule with ASHA's four settings (``min_resource``, ``eta``,
    ``max_resource``, ``min_trials``), which ASHA and Hyperband share: they are checked here,
    and :meth:`config` returns them; a subclass adds its state, snapshot and decision.

    Raises:
        ConfigError: ``min_resource`` < 1, ``eta`` < 2, ``max_resource`` <= ``min_resource``
            (or missing where ``max_required``), ``min_trials`` < 1.
    """

    def __init__(
        self,
        min_resource: int,
        eta: int,
        max_resource: int | None,
        min_trials: int,
        *,
        max_required: bool,
    ) -> None:
        _check("min_resource", min_resource, 1)
        _check("eta", eta, 2)
        _check("max_resource", max_resource, min_resource + 1, allow_none=not max_required)
        _check("min_trials", min_trials, 1)
        self.min_resource, self.eta = min_resource, eta
        self.max_resource, self.min_trials = max_resource, min_trials

    def _settings(self) -> dict[str, Any]:
        return {
            "min_resource": self.min_resource,
            "eta": self.eta,
            "max_resource": self.max_resource,
            "min_trials": self.min_trials,
        }

    def config(self) -> dict[str, Any]:
        """Returns the constructor arguments as plain data."""
        return {"rule": self.rule, **self._settings()}


@register_stopper
class ASHAStopper(_RungSettings):
    """Returns stop decisions by asynchronous successive halving (module docstring).

    Invariants: a trial is never stopped between rungs, nor at or past ``max_resource``; the
    best value at a rung always goes on; a decision reads only the snapshot and the trial's
    own curve.

    Raises:
        ConfigError: ``min_resource`` < 1, ``eta`` < 2, ``max_resource`` <= ``min_resource``,
            ``min_trials`` < 1.
    """

    rule = "asha"
    stopped_status = "pruned"

    def __init__(
        self,
        min_resource: int = 1,
        eta: int = 3,
        max_resource: int | None = None,
        min_trials: int = 1,
    ) -> None:
        super().__init__(min_resource, eta, max_resource, min_trials, max_required=False)
        self._values: dict[int, list[float]] = {}
        self._live: dict[int, dict[int, float]] = {}  # running trial -> rung -> value

    def reset(self) -> None:
        """Forgets every recorded rung value."""
        self._values = {}
        self._live = {}

    def add_finished(self, curve: Sequence[float], trial: int = 0, status: str = "done") -> None:
        """Records the values a finished trial had at each rung it reached (replacing those
        it reported while running)."""
        self._live.pop(trial, None)
        if status not in _COUNTED:
            return
        for r in rungs(self.min_resource, self.eta, self.max_resource, len(curve)):
            self._values.setdefault(r, []).append(float(curve[r - 1]))

    def add_running(self, value: float, trial: int, resource: int) -> bool:
        """Returns True after recording a running trial's value at a rung (False off rungs)."""
        if not _is_rung(resource, self.min_resource, self.eta, self.max_resource):
            return False
        self._live.setdefault(trial, {})[resource] = float(value)
        return True

    def snapshot(self, trial: int = 0) -> dict[str, Any]:
        """Returns plain data for :func:`should_stop`: the values per rung of the finished
        trials and of the running ones other than ``trial``."""
        values = {r: list(v) for r, v in self._values.items()}
        for other, reached in self._live.items():
            if other != trial:
                for r, v in reached.items():
                    values.setdefault(r, []).append(v)
        return {
            "rule": "asha",
            "status": self.stopped_status,
            **self._settings(),
            "rungs": {r: sorted(v, reverse=True) for r, v in sorted(values.items())},
        }

    @staticmethod
    def decide(snapshot: dict[str, Any], curve: Sequence[float]) -> bool:
        """Returns whether the trial is outside the top 1/eta at the rung it just reached."""
        r, eta = len(curve), snapshot["eta"]
        if not _is_rung(r, snapshot["min_resource"], eta, snapshot["max_resource"]):
            return False
        value = curve[-1]
        values: list[float] = [*snapshot["rungs"].get(r, []), value]
        if len(values) < snapshot["min_trials"]:
            return False
        keep: int = max(1, len(values) // eta)
        return value < sorted(values, reverse=True)[keep - 1]


def hyperband_brackets(min_resource: int, eta: int, max_resource: int) -> list[int]:
    """Returns the cycle of bracket indices trials are dealt from: bracket b appears
    n_b = ceil((s_max + 1) * eta**(s_max - b) / (s_max - b + 1)) times, interleaved."""
    s_max = len(rungs(min_resource, eta, None, max_resource)) - 1
    counts = [
        math.ceil((s_max + 1) * eta ** (s_max - b) / (s_max - b + 1)) for b in range(s_max + 1)
    ]
    return [b for i in range(max(counts)) for b in range(s_max + 1) if i < counts[b]]


@register_stopper
class HyperbandStopper(_RungSettings):
    """Returns stop decisions by asynchronous Hyperband: brackets of ASHA with minimum
    resources min_resource * eta**b, a trial's bracket fixed by its id (module docstring).

    Invariants: the same trial id always falls in the same bracket; brackets never see each
    other's values; the last bracket (minimum resource = max_resource's rung) stops nothing.

    Raises:
        ConfigError: as :class:`ASHAStopper`, and ``max_resource`` missing.
    """

    rule = "hyperband"
    stopped_status = "pruned"

    def __init__(
        self, min_resource: int = 1, eta: int = 3, max_resource: int = 9, min_trials: int = 1
    ) -> None:
        super().__init__(min_resource, eta, max_resource, min_trials, max_required=True)
        self.cycle = hyperband_brackets(min_resource, eta, max_resource)
        self.reset()

    def bracket(self, trial: int) -> int:
        """Returns the bracket of trial ``trial`` (a pure function of the id)."""
        return self.cycle[trial % len(self.cycle)]

    def reset(self) -> None:
        """Forgets every recorded rung value."""
        self._brackets: list[ASHAStopper | None] = []
        for b in range(max(self.cycle) + 1):
            low = self.min_resource * self.eta**b
            self._brackets.append(
                ASHAStopper(low, self.eta, self.max_resource, self.min_trials)
                if low < self.max_resource
                else None  # it starts at max_resource: nothing to decide
            )

    def add_finished(self, curve: Sequence[float], trial: int = 0, status: str = "done") -> None:
        """Records a finished trial's rung values in its own bracket."""
        asha = self._brackets[self.bracket(trial)]
        if asha is not None:
            asha.add_finished(curve, trial, status)

    def add_running(self, value: float, trial: int, resource: int) -> bool:
        """Returns whether a running trial's rung value was recorded in its own bracket."""
        asha = self._brackets[self.bracket(trial)]
        return asha is not None and asha.add_running(value, trial, resource)

    def snapshot(self, trial: int = 0) -> dict[str, Any] | None:
        """Returns the ASHA snapshot of the trial's bracket, or None where it decides nothing."""
        b = self.bracket(trial)
        asha = self._brackets[b]
        return None if asha is None else {**asha.snapshot(trial), "bracket": b}

    @staticmethod
    def decide(snapshot: dict[str, Any], curve: Sequence[float]) -> bool:
        """Returns the ASHA decision of the trial's bracket."""
        return ASHAStopper.decide(snapshot, curve)


@register_stopper
class SuccessiveHalvingStopper(BaseStopper):
    """Returns stop decisions by successive halving in cohorts of ``n_trials`` trials (by id),
    stopping a trial at rung k once n_{k+1} recorded members of its cohort beat it there.

    Invariants: at most n_{k+1} = n_{k} // eta trials of a cohort are beaten by fewer than
    n_{k+1} others at rung k, so at most that many go on when members arrive best first; for
    curves that do not cross, a trial synchronous SH keeps is never stopped.

    Raises:
        ConfigError: as :class:`ASHAStopper`, ``max_resource`` missing, or a cohort too small
            for one trial to reach ``max_resource`` (``n_trials`` < eta**n_rungs).
    """

    rule = "sh"
    stopped_status = "pruned"

    def __init__(
        self,
        min_resource: int = 1,
        eta: int = 3,
        max_resource: int = 9,
        n_trials: int | None = None,
    ) -> None:
        _check("min_resource", min_resource, 1)
        _check("eta", eta, 2)
        _check("max_resource", max_resource, min_resource + 1)
        levels = rungs(min_resource, eta, max_resource, max_resource)
        n_trials = eta ** len(levels) if n_trials is None else n_trials
        _check("n_trials", n_trials, eta ** len(levels))
        self.min_resource, self.eta, self.max_resource = min_resource, eta, max_resource
        self.n_trials = n_trials
        self.levels = levels
        quota, n = [], n_trials
        for _ in levels:
            n //= eta
            quota.append(n)
        self.quota = quota  # how many of a cohort go on past each rung
        self._values: dict[int, dict[int, list[float]]] = {}
        self._live: dict[int, dict[int, float]] = {}  # running trial -> rung -> value

    def config(self) -> dict[str, Any]:
        """Returns the constructor arguments as plain data."""
        return {
            "rule": self.rule,
            "min_resource": self.min_resource,
            "eta": self.eta,
            "max_resource": self.max_resource,
            "n_trials": self.n_trials,
        }

    def cohort(self, trial: int) -> int:
        """Returns the cohort of trial ``trial``: consecutive ids, ``n_trials`` at a time."""
        return (trial - 1) // self.n_trials

    def reset(self) -> None:
        """Forgets every recorded rung value."""
        self._values = {}
        self._live = {}

    def add_finished(self, curve: Sequence[float], trial: int = 0, status: str = "done") -> None:
        """Records a finished trial's rung values in its cohort (replacing those it reported
        while running)."""
        self._live.pop(trial, None)
        if status not in _COUNTED:
            return
        mine = self._values.setdefault(self.cohort(trial), {})
        for r in rungs(self.min_resource, self.eta, self.max_resource, len(curve)):
            mine.setdefault(r, []).append(float(curve[r - 1]))

    def add_running(self, value: float, trial: int, resource: int) -> bool:
        """Returns True after recording a running trial's value at a rung (False off rungs):
        the other running members of its cohort count it, as they count finished ones."""
        if resource not in self.levels:
            return False
        self._live.setdefault(trial, {})[resource] = float(value)
        return True

    def snapshot(self, trial: int = 0) -> dict[str, Any]:
        """Returns plain data for :func:`should_stop`: the quota per rung and the values there
        of the cohort's finished trials and of its running ones other than ``trial``."""
        cohort = self.cohort(trial)
        mine = {r: list(v) for r, v in self._values.get(cohort, {}).items()}
        for other, reached in self._live.items():
            if other != trial and self.cohort(other) == cohort:
                for r, v in reached.items():
                    mine.setdefault(r, []).append(v)
        return {
            "rule": "sh",
            "status": self.stopped_status,
            "rungs": {r: [q, sorted(mine.get(r, []), reverse=True)]
                      for r, q in zip(self.levels, self.quota, strict=True)},
        }  # fmt: skip

    @staticmethod
    def decide(snapshot: dict[str, Any], curve: Sequence[float]) -> bool:
        """Returns whether at least the rung's quota of cohort members beat the trial there."""
        rung = snapshot["rungs"].get(len(curve))
        if rung is None:
            return False
        quota: int = rung[0]
        values: list[float] = rung[1]
        value = curve[-1]
        return sum(1 for v in values if v > value) >= quota
