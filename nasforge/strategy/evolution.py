"""Regularized (aging) evolution, Real et al. 2019, "Regularized Evolution for Image Classifier
Architecture Search", Algorithm 1. Pure (no torch).

    population  the ``population_size`` most recently *told* architectures with their metrics
    cycle       ask: while the population is not full, the next of ``initial`` (a warm start,
                e.g. the best of many architectures by a zero-cost proxy) or else a random
                architecture; otherwise draw
                ``sample_size`` members at random, take the best (tournament), mutate one
                decision of it and return the child
    aging       tell: append the child; drop the *oldest* member (not the worst) when full
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from nasforge.errors import ConfigError
from nasforge.space.search_space import Arch
from nasforge.strategy.base import BaseStrategy, register_strategy

__all__ = ["RegularizedEvolution"]


@register_strategy("evolution", "regularized_evolution", "aging_evolution")
class RegularizedEvolution(BaseStrategy):
    """Returns children of tournament winners, each differing from its parent in one decision.

    Invariants: the population never holds more than ``population_size`` members; members leave
    in the order they entered (aging); failed trials (metric None) never enter; the same seed and
    ask/tell sequence give the same children; the architectures of ``initial`` are asked first,
    in order, each once, while the population is filling.

    Raises:
        ConfigError: ``population_size`` < 2, ``sample_size`` not in [1, population_size], or
            ``initial`` not a list of architecture dicts.
        ArchitectureError: (at ``setup``) an ``initial`` architecture outside the space.
    """

    def __init__(
        self,
        population_size: int = 20,
        sample_size: int = 5,
        seed: int = 0,
        initial: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        super().__init__(seed)
        if isinstance(initial, (str, Mapping)) or not all(isinstance(a, Mapping) for a in initial):
            raise ConfigError(
                f"initial must be a list of architecture dicts (a warm start), got {initial!r}"
            )
        self.initial = [dict(a) for a in initial]
        if not isinstance(population_size, int) or population_size < 2:
            raise ConfigError(f"population_size must be an int >= 2, got {population_size!r}")
        if not isinstance(sample_size, int) or not 1 <= sample_size <= population_size:
            raise ConfigError(
                f"sample_size must be an int in [1, population_size={population_size}], "
                f"got {sample_size!r}"
            )
        self.population_size = population_size
        self.sample_size = sample_size

    def config(self) -> dict[str, Any]:
        """Returns the constructor arguments as plain JSON-able data."""
        out: dict[str, Any] = {
            "population_size": self.population_size,
            "sample_size": self.sample_size,
            "seed": self.seed,
        }
        if self.initial:  # left out when empty: records of earlier runs compare equal
            out["initial"] = [dict(a) for a in self.initial]
        return out

    def _reset(self) -> None:
        self._rng = random.Random(self.seed)
        self.population: deque[tuple[Arch, float]] = deque()
        self._mutable = [d for d in self.space.decisions if len(d) > 1]
        self._warm = [self.space.validate(a) for a in self.initial]
        self._n_warm = 0  # how many of the warm start have been asked

    def _ask(self) -> Arch:
        if len(self.population) < self.population_size:
            if self._n_warm < len(self._warm):
                self._n_warm += 1
                return dict(self._warm[self._n_warm - 1])
            return self.space.sample(self._rng)
        contenders = self._rng.sample(range(len(self.population)), self.sample_size)
        # ties go to the earliest contender drawn, so the order stays seeded
        parent = max(contenders, key=lambda i: self.population[i][1])
        return self._mutate(self.population[parent][0])

    def _mutate(self, parent: Arch) -> Arch:
        child = dict(parent)
        if not self._mutable:  # a space of one architecture
            return child
        d = self._mutable[self._rng.randrange(len(self._mutable))]
        current = d.index(child[d.label])
        other = self._rng.randrange(len(d) - 1)
        child[d.label] = d.values[other if other < current else other + 1]
        return child

    def _tell(self, arch: Arch, metric: float | None) -> None:
        if metric is None:
            return
        self.population.append((arch, metric))
        if len(self.population) > self.population_size:
            self.population.popleft()
