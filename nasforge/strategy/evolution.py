"""Regularized (aging) evolution, Real et al. 2019, "Regularized Evolution for Image Classifier
Architecture Search", Algorithm 1. Pure (no torch).

    population  the ``population_size`` most recently *told* architectures with their metrics
    cycle       ask: while the population is not full, the next of ``initial`` (a warm start,
                e.g. the best of many architectures by a zero-cost proxy) or else a random
                architecture; otherwise draw
                ``sample_size`` members at random, take the best (tournament), mutate one
                decision of it and return the child (on a space that grows by edits, append
                one edit drawn from those that apply to it). A listed decision moves to another
                candidate; a range (``nf.uniform``/``nf.integer``) takes a Gaussian step of
                ``mutation_scale`` (a fraction of the range) in its transformed coordinate
                (``log`` value where ``log``), reflected at the ends
    aging       tell: append the child; drop the *oldest* member (not the worst) when full
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from nasforge.errors import ConfigError
from nasforge.space.search_space import Arch, Decision
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
        ConfigError: ``population_size`` < 2, ``sample_size`` not in [1, population_size],
            ``initial`` not a list of architecture dicts, or ``mutation_scale`` not in (0, 1].
        ArchitectureError: (at ``setup``) an ``initial`` architecture outside the space.
    """

    grows = True  # on an edit space a child is its parent plus one sampled edit

    def __init__(
        self,
        population_size: int = 20,
        sample_size: int = 5,
        seed: int = 0,
        initial: Sequence[Mapping[str, Any]] = (),
        mutation_scale: float = 0.1,
    ) -> None:
        super().__init__(seed)
        if isinstance(mutation_scale, bool) or not (
            isinstance(mutation_scale, (int, float)) and 0 < mutation_scale <= 1
        ):
            raise ConfigError(
                f"mutation_scale must be a number in (0, 1] (the standard deviation of a range's "
                f"step, as a fraction of the range), got {mutation_scale!r}"
            )
        self.mutation_scale = float(mutation_scale)
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
        if self.mutation_scale != 0.1:  # likewise left out at its default
            out["mutation_scale"] = self.mutation_scale
        return out

    def _reset(self) -> None:
        self._rng = random.Random(self.seed)
        self.population: deque[tuple[Arch, float]] = deque()
        self._mutable = [d for d in self.space.decisions if d.count > 1]
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
        if self.space.grows:  # a history grows by one of the edits that apply to its network
            options = self.space.edits(parent)
            if not options:
                return dict(parent)
            return self.space.extend(parent, options[self._rng.randrange(len(options))])
        child = dict(parent)
        if not self._mutable:  # a space of one architecture
            return child
        d = self._mutable[self._rng.randrange(len(self._mutable))]
        if d.domain is not None:
            child[d.label] = self._step(d, child[d.label])
            return child
        current = d.index(child[d.label])
        other = self._rng.randrange(len(d) - 1)
        child[d.label] = d.values[other if other < current else other + 1]
        return child

    def _step(self, d: Decision, value: Any) -> Any:
        """Returns ``value`` moved by a Gaussian step in the range's unit coordinate, reflected
        into ``[0, 1]``; an integer range always moves (a step that rounds back to ``value``
        goes one grid point in its direction)."""
        assert d.domain is not None
        u0 = d.domain.to_unit(value)
        step = self._rng.gauss(0.0, self.mutation_scale)
        u = u0 + step
        u = abs(u) % 2.0  # reflect at 0 and 1: a walk that keeps its distribution inside
        u = 2.0 - u if u > 1.0 else u
        new = d.domain.from_unit(u)
        if d.domain.integer and new == value:
            direction = 1 if step >= 0 else -1
            if not d.domain.low <= value + direction * d.domain.step <= d.domain.high:
                direction = -direction
            new = value + direction * d.domain.step
        assert math.isfinite(new)
        return new

    def _tell(self, arch: Arch, metric: float | None) -> None:
        if metric is None:
            return
        self.population.append((arch, metric))
        if len(self.population) > self.population_size:
            self.population.popleft()
