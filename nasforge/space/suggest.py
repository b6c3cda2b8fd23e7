"""Optuna's ``suggest_*`` names for the decisions of a space: ``suggest_float``,
``suggest_int`` and ``suggest_categorical`` take the name first and Optuna's arguments, and
declare the same range or choice as ``nf.uniform``, ``nf.integer`` and ``nf.choice`` (the name
is the label). Written where the value is used while a ``ModelSpace`` is built
(``nn.Dropout(nf.suggest_float("dropout", 0.0, 0.5))``, ``self.lr = nf.suggest_float("lr",
1e-4, 1e-1, log=True)``), they are decisions of the space like any other: every strategy,
dedup and resume see them, and a frozen model holds the plain values.

Optuna asks inside the objective, one trial at a time (define-by-run); nasforge's strategies
need the whole space before the first trial (and a resume replays it), so the space declares
what an Optuna objective asks, and the evaluator reads the values from the frozen model
(``model.lr``, or ``nf.hparams(model)`` for every range).

This module is pure (no torch).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nasforge.errors import SpaceError
from nasforge.space.expr import choice, integer, uniform

__all__ = ["suggest_float", "suggest_int", "suggest_categorical"]


def _name(fn: str, name: object) -> str:
    if not isinstance(name, str) or not name:
        raise SpaceError(
            f"{fn}(name, ...) takes the decision's name first (a non-empty string, as Optuna's "
            f"trial.{fn}), got {name!r}"
        )
    return name


def suggest_float(
    name: str, low: float, high: float, *, step: float | None = None, log: bool = False
) -> float:
    """Returns the float decision ``name`` in ``[low, high]`` (log-uniform when ``log``), as
    Optuna's ``trial.suggest_float``: ``nf.uniform(low, high, log, label=name)``.

    Raises:
        SpaceError: a name that is not a string, bad bounds, a ``step`` (a float range has
            none: list the grid with :func:`suggest_categorical`), or a call outside a model
            space.
        ArchitectureError: (when freezing) the architecture lacks ``name`` or holds a value
            out of range.
    """
    name = _name("suggest_float", name)
    if step is not None:
        raise SpaceError(
            f"suggest_float({name!r}, step={step!r}): a float range has no step here; list "
            f"the grid's values with suggest_categorical({name!r}, [...]), or use suggest_int"
        )
    return uniform(low, high, log=log, label=name)


def suggest_int(name: str, low: int, high: int, *, step: int = 1, log: bool = False) -> int:
    """Returns the integer decision ``name`` in ``low, low + step, ..., high`` (log-uniform
    when ``log``, which needs ``step=1``), as Optuna's ``trial.suggest_int``:
    ``nf.integer(low, high, step, log, label=name)``.

    Raises:
        SpaceError: a name that is not a string, bad bounds or step, or a call outside a
            model space.
        ArchitectureError: (when freezing) the architecture lacks ``name`` or holds a value
            off the grid.
    """
    return integer(low, high, step=step, log=log, label=_name("suggest_int", name))


def suggest_categorical(name: str, choices: Sequence[Any]) -> Any:
    """Returns the decision ``name`` over the listed ``choices``, as Optuna's
    ``trial.suggest_categorical``: ``nf.choice(choices, label=name)``.

    Raises:
        SpaceError: a name that is not a string, no or duplicate choices, or a call outside
            a model space.
        ArchitectureError: (when freezing) the architecture lacks ``name`` or holds a value
            that is not one of the choices.
    """
    return choice(choices, label=_name("suggest_categorical", name))
