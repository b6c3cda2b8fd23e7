"""Random search and grid search: the two strategies that ignore feedback. Pure (no torch).

Random search draws range decisions (``nf.uniform``, ``nf.integer``) uniformly, log-uniformly
where ``log``. Grid search takes listed candidates and integer ranges as they are; a float range
has no grid, so it needs ``points_per_range`` (the user's own discretisation)."""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from nasforge.errors import ConfigError
from nasforge.space.search_space import Arch
from nasforge.strategy.base import BaseStrategy, checked_points_per_range, register_strategy

__all__ = ["RandomStrategy", "GridStrategy"]


@register_strategy("random", "random_search")
class RandomStrategy(BaseStrategy):
    """Returns the architectures of ``initial`` in order, then ones drawn uniformly at random
    from the space. With ``initial`` the best of K sampled architectures by a zero-cost proxy
    (``nasforge.proxies.top_by_proxy``) and ``n_trials = len(initial)``, this is the proxy
    filter: sample K, keep the best by proxy, train those.

    Invariants: the same seed gives the same sequence; metrics are ignored; the random draws
    do not depend on ``initial``.

    Raises:
        ConfigError: ``initial`` is not a list of architecture dicts.
        ArchitectureError: (at ``setup``) an ``initial`` architecture outside the space.
    """

    grows = True  # a random history is what an edit space samples

    def __init__(self, seed: int = 0, initial: Sequence[Mapping[str, object]] = ()) -> None:
        super().__init__(seed)
        if isinstance(initial, (str, Mapping)) or not all(isinstance(a, Mapping) for a in initial):
            raise ConfigError(
                f"initial must be a list of architecture dicts, got {initial!r}; e.g. "
                "nasforge.proxies.top_by_proxy(...)"
            )
        self.initial = [dict(a) for a in initial]

    def config(self) -> dict[str, Any]:
        """Returns the constructor arguments as plain JSON-able data."""
        out: dict[str, Any] = {"seed": self.seed}
        if self.initial:  # left out when empty: records of earlier runs compare equal
            out["initial"] = [dict(a) for a in self.initial]
        return out

    def _reset(self) -> None:
        self._rng = random.Random(self.seed)
        self._first = [self.space.validate(a) for a in self.initial]
        self._n_first = 0

    def _ask(self) -> Arch:
        if self._n_first < len(self._first):
            self._n_first += 1
            return dict(self._first[self._n_first - 1])
        return self.space.sample(self._rng)

    def _tell(self, arch: Arch, metric: float | None) -> None:
        pass


@register_strategy("grid", "grid_search")
class GridStrategy(BaseStrategy):
    """Returns every architecture once, in the space's grid order, then None.

    ``points_per_range``: how many values each float range (and each integer range with more
    values) takes, evenly spread (log-evenly where ``log``); without it a float range is refused.

    Invariants: no architecture is asked twice; after the grid's size asks it is exhausted.

    Raises:
        ConfigError: ``points_per_range`` not an int >= 1; (at ``setup``) a float range and no
            ``points_per_range``, naming the decision.
    """

    def __init__(self, seed: int = 0, points_per_range: int | None = None) -> None:
        super().__init__(seed)
        self.points_per_range = checked_points_per_range(points_per_range)

    def config(self) -> dict[str, Any]:
        """Returns the constructor arguments as plain JSON-able data."""
        out: dict[str, Any] = {"seed": self.seed}
        if self.points_per_range is not None:  # left out by default: older records match
            out["points_per_range"] = self.points_per_range
        return out

    def _reset(self) -> None:
        floats = [d.label for d in self.space.ranges if d.kind == "float"]
        if floats and self.points_per_range is None:
            raise ConfigError(
                f"grid search lists explicit points, and {floats} are continuous ranges; give "
                "GridStrategy(points_per_range=n) (strategy: {name: grid, points_per_range: n}) "
                "or list the values with nf.choice([...])"
            )
        self._it: Iterator[Arch] = self.space.grid(self.points_per_range)

    def _ask(self) -> Arch | None:
        return next(self._it, None)

    def _tell(self, arch: Arch, metric: float | None) -> None:
        pass
