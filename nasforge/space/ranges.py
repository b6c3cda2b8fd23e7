"""Ranges: the domain of a continuous or integer decision (a learning rate, a dropout rate, a
warm-up length), and the arithmetic strategies need on it. Pure: no torch, no numpy.

    range        ``Range(low, high, log, step, integer)``: every float (or every ``step``-th
                 int) in ``[low, high]``; ``log`` spreads samples evenly over ``log(value)``
    transformed  the coordinate strategies work in: ``log(x)`` when ``log``, else ``x``. An
                 integer range widens it by half a step at each end, so that every integer gets
                 the same share of it (as Optuna's ``IntDistribution`` does)
    unit         the transformed coordinate rescaled to ``[0, 1]``: ``to_unit``/``from_unit``
    canonical    a float rounded to 12 significant digits, ``-0.0`` made ``0.0``; an int a
                 builtin ``int``. Architectures hold canonical values, so an architecture's id
                 is the same whether its value was sampled, parsed from YAML or read back from
                 the record
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nasforge.errors import ArchitectureError, SpaceError

if TYPE_CHECKING:  # numpy only names a type here
    import numpy as np

__all__ = ["Range", "canonical_float", "uniform_draw"]

#: significant digits a float of a range keeps (enough for any learning rate; few enough that a
#: value printed and parsed back, or computed twice in different processes, is the same)
_DIGITS = 12


def canonical_float(x: float) -> float:
    """Returns ``x`` rounded to 12 significant digits, with ``-0.0`` made ``0.0``.

    Invariants: idempotent; ``canonical_float(float(repr(y)))`` equals ``y`` for a canonical
    ``y``.
    """
    return float(f"{float(x):.{_DIGITS}g}") + 0.0


def uniform_draw(rng: random.Random | np.random.Generator) -> float:
    """Returns a float drawn uniformly from ``[0, 1)`` with ``random.Random`` or a numpy
    ``Generator``.

    Raises:
        TypeError: ``rng`` is neither.
    """
    if isinstance(rng, random.Random):
        return rng.random()
    if hasattr(rng, "random"):
        return float(rng.random())
    raise TypeError(f"rng must be random.Random or numpy.random.Generator, got {type(rng)!r}")


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpaceError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise SpaceError(f"{name} must be finite, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Range:
    """Returns nothing; the domain of one continuous (``integer=False``) or integer decision.

    Invariants: ``low <= high``; ``low > 0`` when ``log``; an integer range has an int
    ``step >= 1`` and ``high`` on its grid ``low + k * step``; a float range has no step;
    ``from_unit`` always returns a canonical value inside the range.

    Raises:
        SpaceError: a bound that is not a finite number (an int for an integer range), ``low >
            high``, ``log`` with ``low <= 0``, a step that is not a positive int, or ``log``
            with ``step != 1`` (the log grid of an integer range is its integers).
    """

    low: float
    high: float
    log: bool = False
    integer: bool = False
    step: int = 1

    def __post_init__(self) -> None:
        what = "integer(...)" if self.integer else "uniform(...)"
        low, high = _number(f"{what} low", self.low), _number(f"{what} high", self.high)
        if self.integer:
            if low != int(low) or high != int(high):
                raise SpaceError(f"{what}: low and high must be ints, got {self.low}, {self.high}")
            step = self.step
            if isinstance(step, bool) or not isinstance(step, int) or step < 1:
                raise SpaceError(f"{what}: step must be an int >= 1, got {step!r}")
            if self.log and step != 1:
                raise SpaceError(f"{what}: log=True needs step=1, got step={step}")
            object.__setattr__(self, "low", int(low))
            object.__setattr__(self, "high", int(low) + (int(high) - int(low)) // step * step)
        else:
            if self.step != 1:
                raise SpaceError(
                    f"{what} takes no step (got {self.step!r}); for a grid of floats list them "
                    "with nf.choice([...])"
                )
            object.__setattr__(self, "low", canonical_float(low))
            object.__setattr__(self, "high", canonical_float(high))
        if self.low > self.high:
            raise SpaceError(f"{what}: low={self.low} is above high={self.high}; swap them")
        if self.log and self.low <= 0:
            raise SpaceError(
                f"{what}: log=True needs low > 0 (the log of {self.low} is undefined); "
                "raise low or drop log"
            )
        object.__setattr__(self, "log", bool(self.log))

    # -- size ----------------------------------------------------------------------------------
    @property
    def count(self) -> float:
        """Returns the number of values: exact for an integer range, ``math.inf`` for floats
        (a float range of one point, ``low == high``, counts 1)."""
        if self.integer:
            return (int(self.high) - int(self.low)) // self.step + 1
        return 1 if self.low == self.high else math.inf

    # -- the transformed coordinate ------------------------------------------------------------
    def _bounds(self) -> tuple[float, float]:
        """Returns the transformed coordinate's ends (widened by half a step for ints)."""
        pad = 0.5 * self.step if self.integer else 0.0
        lo, hi = self.low - pad, self.high + pad
        if self.log:
            return math.log(lo), math.log(hi)
        return lo, hi

    def to_unit(self, value: float) -> float:
        """Returns where ``value`` lies in ``[0, 1]``, evenly in the transformed coordinate."""
        lo, hi = self._bounds()
        if hi == lo:
            return 0.5
        x = math.log(value) if self.log else float(value)
        return min(1.0, max(0.0, (x - lo) / (hi - lo)))

    def from_unit(self, u: float) -> Any:
        """Returns the canonical value at position ``u`` (clipped to ``[0, 1]``)."""
        lo, hi = self._bounds()
        x = lo + min(1.0, max(0.0, u)) * (hi - lo)
        value = math.exp(x) if self.log else x
        if self.integer:
            k = round((value - self.low) / self.step)
            k = min(max(k, 0), (int(self.high) - int(self.low)) // self.step)
            return int(self.low) + k * self.step
        return min(max(canonical_float(value), self.low), self.high)

    def sample(self, rng: random.Random | np.random.Generator) -> Any:
        """Returns a value drawn uniformly in the transformed coordinate (log-uniform when
        ``log``)."""
        return self.from_unit(uniform_draw(rng))

    def points(self, n: int) -> list[Any]:
        """Returns ``n`` values evenly spread in the transformed coordinate, ends included
        (fewer for an integer range with fewer values; one, the middle, for ``n == 1``).

        Raises:
            SpaceError: ``n`` is not an int >= 1.
        """
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise SpaceError(f"points per range must be an int >= 1, got {n!r}")
        if n == 1:
            return [self.default]
        if self.integer:
            if self.count <= n:
                return [int(self.low) + k * self.step for k in range(int(self.count))]
        # the ends of the (unpadded) range and n - 2 points between, in the transformed coordinate
        a = math.log(self.low) if self.log else float(self.low)
        b = math.log(self.high) if self.log else float(self.high)
        out: dict[Any, None] = {}
        for i in range(n):
            x = a + (b - a) * i / (n - 1)
            v = self.low if i == 0 else self.high if i == n - 1 else math.exp(x) if self.log else x
            if self.integer:
                v = int(self.low) + round((v - self.low) / self.step) * self.step
            out.setdefault(self.canonical(v), None)
        return list(out)

    @property
    def default(self) -> Any:
        """Returns the middle of the range in the transformed coordinate (the geometric mean
        of the ends when ``log``): the value a space is recorded with."""
        if self.integer:
            a = math.log(self.low) if self.log else float(self.low)
            b = math.log(self.high) if self.log else float(self.high)
            mid = (a + b) / 2
            v = math.exp(mid) if self.log else mid
            k = round((v - self.low) / self.step)
            return int(self.low) + min(max(k, 0), int(self.count) - 1) * self.step
        if self.log:
            return self.canonical(math.sqrt(self.low * self.high))
        return self.canonical((self.low + self.high) / 2)

    # -- membership ----------------------------------------------------------------------------
    def canonical(self, value: object, label: str = "") -> Any:
        """Returns ``value`` as the range holds it (a canonical float, or an int).

        Raises:
            ArchitectureError: not a number, not finite, not an integer for an integer range,
                off the step grid, or outside ``[low, high]``; the message names the range.
        """
        where = f"label {label!r}: " if label else ""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ArchitectureError(f"{where}{value!r} is not a number; expected {self.describe()}")
        if not math.isfinite(value):
            raise ArchitectureError(f"{where}{value!r} is not finite; expected {self.describe()}")
        out: Any
        if self.integer:
            if value != int(value):
                raise ArchitectureError(
                    f"{where}{value!r} is not an integer; expected {self.describe()}"
                )
            out = int(value)
            if (out - int(self.low)) % self.step:
                raise ArchitectureError(
                    f"{where}{value!r} is off the step grid; expected {self.describe()}"
                )
        else:
            out = canonical_float(value)
        if not self.low <= out <= self.high:
            raise ArchitectureError(f"{where}{value!r} is out of range; expected {self.describe()}")
        return out

    def describe(self) -> str:
        """Returns the range as a user would write it, e.g. ``uniform(0.0001, 0.1, log=True)``."""
        head = "integer" if self.integer else "uniform"
        extra = ", log=True" if self.log else ""
        if self.integer and self.step != 1:
            extra += f", step={self.step}"
        return f"{head}({self.low}, {self.high}{extra})"

    # -- serialisation -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Returns the range as plain JSON-able data (``step`` only for integer ranges)."""
        out: dict[str, Any] = {"low": self.low, "high": self.high, "log": self.log}
        if self.integer:
            out["step"] = self.step
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], integer: bool) -> Range:
        """Returns the range that :meth:`to_dict` produced."""
        return cls(
            data["low"],
            data["high"],
            bool(data.get("log", False)),
            integer,
            int(data.get("step", 1)) if integer else 1,
        )
