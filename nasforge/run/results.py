"""Reading results out of trial records: the objective that ranks them (:class:`Objective`),
feasibility under constraints, ranking, the Pareto front of two objectives. Pure functions
over plain records (no torch)."""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from nasforge.errors import ConfigError
from nasforge.run.store import TrialRecord

__all__ = [
    "Constraints",
    "parse_constraints",
    "feasible",
    "score",
    "rank_trials",
    "pareto_front",
    "pareto_indices",
    "Objective",
]

#: constraints as a run file or a caller gives them: ``{metric: [op, bound]}``, a string like
#: ``"params <= 1e5"``, a list of such strings, or None (none)
Constraints = Mapping[str, Sequence[object]] | str | Iterable[str] | None

_OPS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt, "==": operator.eq}


def parse_constraints(constraints: Constraints) -> dict[str, list[Any]]:
    """Returns constraints as ``{metric: [op, bound]}``; accepts that form, tuples, or strings
    like ``"params <= 100000"`` (a string or a list of them).

    Raises:
        ConfigError: an unknown operator or a bound that is not a number.
    """
    if not constraints:
        return {}
    if isinstance(constraints, str):
        constraints = [constraints]
    out: dict[str, list[Any]] = {}
    if isinstance(constraints, Mapping):
        items = [(k, *v) for k, v in constraints.items()]
    else:
        items = []
        for text in constraints:
            for op in ("<=", ">=", "==", "<", ">"):
                if op in text:
                    name, bound = text.split(op, 1)
                    items.append((name.strip(), op, bound.strip()))
                    break
            else:
                raise ConfigError(
                    f"constraint {text!r} has no operator; write e.g. 'params <= 1e5'"
                )
    for name, op, bound in items:
        if op not in _OPS:
            raise ConfigError(f"constraint on {name!r}: operator {op!r} is not one of {list(_OPS)}")
        try:
            out[str(name)] = [op, float(bound)]
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"constraint on {name!r}: bound {bound!r} is not a number") from exc
    return out


def feasible(metrics: Mapping[str, float] | None, constraints: Mapping[str, Sequence[Any]]) -> bool:
    """Returns whether finished metrics satisfy every constraint (a missing metric fails)."""
    if metrics is None:
        return False
    for name, (op, bound) in constraints.items():
        value = metrics.get(name)
        if value is None or not _OPS[op](value, bound):
            return False
    return True


def score(
    record: TrialRecord, metric: str, mode: str, constraints: Mapping[str, Sequence[Any]]
) -> float | None:
    """Returns the maximised score a strategy is told: None for failed or infeasible trials,
    and for a value that is not a finite number (a damaged record's ``NaN``: it would make
    every comparison of a ranking false, so the best trial would be any trial)."""
    if record.status == "failed" or not feasible(record.metrics, constraints):
        return None
    value = record.metrics.get(metric) if record.metrics else None
    if value is None or not math.isfinite(value):
        return None
    return value if mode == "max" else -value


def rank_trials(
    trials: Sequence[TrialRecord],
    metric: str,
    mode: str,
    constraints: Mapping[str, Sequence[Any]] | None = None,
    unique: bool = True,
    picks: Sequence[int] = (),
) -> list[TrialRecord]:
    """Returns feasible finished trials best first (ties by id); one per arch id if ``unique``.
    The run's ``picks`` (the trials its kind chose: a one-shot search's architecture, a
    deployment search's one per target; :meth:`Store.picks <nasforge.run.store.Store.picks>`)
    come first, in their order, whatever their metric: what a kind chose is what it exports."""
    constraints = constraints or {}
    chosen = {tid: i for i, tid in enumerate(picks)}
    scored = [(score(t, metric, mode, constraints), t) for t in trials]
    first = sorted((t for t in trials if t.id in chosen), key=lambda t: chosen[t.id])
    good = sorted(
        ((s, t) for s, t in scored if s is not None and t.id not in chosen),
        key=lambda p: (-p[0], p[1].id),
    )
    seen: set[str] = set()
    out = []
    for _, t in [(0.0, t) for t in first] + good:
        if unique and t.arch_id in seen:
            continue
        seen.add(t.arch_id)
        out.append(t)
    return out


def pareto_indices(points: Sequence[tuple[float, float]]) -> list[int]:
    """Returns the indices of the points ``(a, b)``, both maximised, that no other point
    dominates (at least as good in both, better in one), sorted by ``a`` descending.

    Invariants: pure; one index per distinct non-dominated point (ties keep the first).
    """
    order = sorted(range(len(points)), key=lambda i: (-points[i][0], -points[i][1], i))
    front, best_b = [], float("-inf")
    for i in order:
        if points[i][1] > best_b:
            front.append(i)
            best_b = points[i][1]
    return front


def pareto_front(
    trials: Sequence[TrialRecord],
    first: tuple[str, str],
    second: tuple[str, str],
    constraints: Mapping[str, Sequence[Any]] | None = None,
) -> list[TrialRecord]:
    """Returns the non-dominated feasible trials for two (metric, "max"|"min") objectives,
    sorted by the first objective, best first.

    Invariants: no returned trial is dominated by any feasible trial; one trial per arch id.
    """
    kept = [
        (t, t.metrics)
        for t in rank_trials(trials, first[0], first[1], constraints)
        if t.metrics is not None and second[0] in t.metrics
    ]
    kept.sort(key=lambda tm: tm[0].id)  # ties go to the earlier trial
    pts = [
        (m[first[0]] * (1 if first[1] == "max" else -1),
         m[second[0]] * (1 if second[1] == "max" else -1))
        for _, m in kept
    ]  # fmt: skip
    return [kept[i][0] for i in pareto_indices(pts)]


class Objective:
    """Returns nothing; what ranks a run's trials: a metric, ``max`` or ``min``, constraints
    such as ``params <= 1e5``, and an optional second objective for a Pareto front.

    Raises:
        ConfigError: a mode other than max/min, a bad constraint or second objective.
    """

    def __init__(
        self,
        metric: str = "accuracy",
        mode: str = "max",
        constraints: Constraints = None,
        second: Sequence[str] | None = None,
    ) -> None:
        if mode not in ("max", "min"):
            raise ConfigError(f"mode must be 'max' or 'min', got {mode!r}")
        if second is not None and (len(second) != 2 or second[1] not in ("max", "min")):
            raise ConfigError(f"second_objective must be (metric, 'max'|'min'), got {second!r}")
        self.metric, self.mode = str(metric), mode
        self.constraints = parse_constraints(constraints)
        self.second = None if second is None else (str(second[0]), str(second[1]))

    def to_dict(self) -> dict[str, Any]:
        """Returns the objective as plain data (stored in every run's config)."""
        return {"metric": self.metric, "mode": self.mode, "constraints": self.constraints,
                "second": None if self.second is None else list(self.second)}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Objective:
        """Returns the objective :meth:`to_dict` wrote."""
        return cls(data["metric"], data["mode"], data.get("constraints"), data.get("second"))
