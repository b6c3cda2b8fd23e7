"""Deployment search: evolutionary search for the most accurate sub-network under a latency or
FLOPs budget (OFA's setting, after Real et al. 2019), and Pareto fronts over several budgets.

This module is pure (no torch): accuracy and cost are plain functions ``arch -> float``
(a predictor, a measured accuracy, a memoized latency measurement, a lookup table, FLOPs).

One generation, population P (100), parents P * parent_ratio, mutations P * mutation_ratio:

    parents   = the best ``n_parents`` of the population by accuracy
    children  = mutate(random parent)           until n_mutations feasible children
              + crossover(two random parents)  until the population is full again
    feasible  = cost(child) <= budget           (infeasible children are re-drawn)

Invariants: every architecture evaluated lies in the space and is canonical; every returned
architecture satisfies the budget; the same seed and functions give the same result.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from nasforge.errors import ConfigError
from nasforge.run.results import pareto_indices
from nasforge.space.search_space import Arch, SearchSpace, arch_id
from nasforge.strategy.base import BaseStrategy

__all__ = [
    "EvolutionConfig",
    "DeploymentResult",
    "DeploymentEvolution",
    "mutate",
    "crossover",
    "evolve",
    "search_targets",
    "pareto_front",
]

logger = logging.getLogger(__name__)

Score = Callable[[Mapping[str, Any]], float]


@dataclass(frozen=True)
class EvolutionConfig:
    """Returns nothing; the evolutionary settings (OFA's defaults)."""

    population: int = 100
    n_generations: int = 500  # OFA: 500; CompOFA converges in fewer
    parent_ratio: float = 0.25
    mutation_ratio: float = 0.5
    mutate_prob: float = 0.1  # per decision
    max_tries: int = 10_000  # draws allowed to find feasible architectures, per generation
    patience: int | None = None  # stop after this many generations without improvement

    def __post_init__(self) -> None:
        if self.population < 2 or not 0 < self.parent_ratio <= 1 or self.n_generations < 0:
            raise ConfigError(
                f"population must be >= 2, parent_ratio in (0, 1], n_generations >= 0; got "
                f"{self.population}, {self.parent_ratio}, {self.n_generations}"
            )


@dataclass
class DeploymentResult:
    """Returns nothing; the outcome of one search: best architecture, its accuracy and cost,
    the target, and the best accuracy after each generation."""

    target: float
    arch: Arch
    accuracy: float
    cost: float
    history: list[float] = field(default_factory=list)
    n_evaluated: int = 0


def _canon(space: SearchSpace, arch: Mapping[str, Any]) -> Arch:
    return space.validate(arch)


def mutate(space: SearchSpace, arch: Mapping[str, Any], prob: float, rng: random.Random) -> Arch:
    """Returns ``arch`` with each decision re-drawn uniformly with probability ``prob``."""
    out = dict(arch)
    for label, d in space.items():
        if rng.random() < prob:
            out[label] = d.values[rng.randrange(len(d))]
    return _canon(space, out)


def crossover(
    space: SearchSpace, a: Mapping[str, Any], b: Mapping[str, Any], rng: random.Random
) -> Arch:
    """Returns an architecture taking each decision from ``a`` or ``b`` with equal chance."""
    return _canon(space, {lb: (a if rng.random() < 0.5 else b)[lb] for lb in space})


class DeploymentEvolution(BaseStrategy):
    """Returns, by ask/tell, the architectures of OFA's generational evolution under a budget.

    The budget is the caller's: it tells None for a drawn architecture over budget (the same
    slot is drawn again, up to ``max_tries`` times) and the accuracy otherwise. Phases::

        init      fill the population with feasible samples (OFA's per-dimension sampling);
                  when none of the first max_tries/10 draws fits, grow it from mutations of the
                  smallest network instead (feasible whenever any network is)
        mutate    n_mutations children, each a mutation of a random parent
        cross     crossovers of two random parents until the population is full again
                  (parents = the best parent_ratio of the population)

    Invariants: pure; the same seed and the same tells give the same architectures; ``best``
    is the most accurate feasible architecture told so far (the first of equals); ``ask``
    returns None after ``n_generations`` generations (or ``patience`` without improvement).

    Raises:
        ConfigError: (from ``ask``) ``max_tries`` draws in a row were all over budget.
    """

    _asked: Arch | None  # the architecture just asked (set by _reset, then by ask)

    def __init__(self, config: EvolutionConfig = EvolutionConfig(), seed: int = 0) -> None:
        super().__init__(seed)
        self.cfg = config

    def config(self) -> dict[str, Any]:
        """Returns the evolution settings and the seed as plain data."""
        return {**asdict(self.cfg), "seed": self.seed}

    def ask(self) -> Arch | None:
        """Returns the next architecture to score (canonical by construction: the space's
        sampler, :func:`mutate` and :func:`crossover` validate what they build), or None."""
        self._asked = self._ask()
        return self._asked

    def tell(self, arch: Mapping[str, Any], metric: float | None) -> None:
        """Records the accuracy of ``arch``, or None when it is over budget; the architecture
        just asked is not validated a second time."""
        if arch is self._asked and (metric is None or isinstance(metric, float)):
            self._tell(self._asked, metric)
        else:
            super().tell(arch, metric)

    def _reset(self) -> None:
        self._rng = random.Random(self.seed)
        self._asked = None
        self._sampler = getattr(self.space, "sample_dims", self.space.sample)
        self._base: Arch | None = None  # the smallest network, once sampling has failed
        self._phase = "init"
        self._pop: list[tuple[Arch, float]] = []
        self._parents: list[Arch] = []
        self._children: list[tuple[Arch, float]] = []
        self._tries = 0
        self.generation = 0
        self.best: tuple[Arch, float] | None = None
        self.history: list[float] = []
        self._stale = 0

    def _limit(self) -> tuple[int, str]:
        if self._phase == "init":
            if self._base is not None and not self._pop:
                return 1, "smallest"
            if not self._pop:
                return self.cfg.max_tries // 10 or 1, "sampled"
            return self.cfg.max_tries, "sampled"
        return self.cfg.max_tries, "mutated" if self._phase == "mutate" else "crossed"

    def _ask(self) -> Arch | None:
        if self._phase == "done":
            return None
        limit, what = self._limit()
        if self._tries >= limit:
            smallest = getattr(self.space, "smallest", None)
            if what == "sampled" and not self._pop and self._base is None and smallest:
                self._base, self._tries = smallest(), 0  # a budget random networks rarely meet
                limit, what = self._limit()
            else:
                raise ConfigError(
                    f"no {what} architecture met the budget in {limit} draws; raise the "
                    "budget (the smallest sub-network's cost is a lower bound) or max_tries"
                )
        self._tries += 1
        rng, prob = self._rng, self.cfg.mutate_prob
        if self._phase == "init":
            if self._base is None:
                return self._sampler(rng)
            return self._base if not self._pop else mutate(self.space, self._base, prob, rng)
        p = self._parents
        if self._phase == "mutate":
            return mutate(self.space, rng.choice(p), prob, rng)
        return crossover(self.space, rng.choice(p), rng.choice(p), rng)

    def _tell(self, arch: Arch, metric: float | None) -> None:
        if metric is None:  # over budget: the slot is drawn again
            return
        self._tries = 0
        n_pop = self.cfg.population
        if self._phase == "init":
            self._pop.append((arch, metric))
            if len(self._pop) == n_pop:
                self.best = max(self._pop, key=lambda m: m[1])
                self._next_generation()
            return
        self._children.append((arch, metric))
        n_mut = int(n_pop * self.cfg.mutation_ratio)
        if self._phase == "mutate" and len(self._children) >= n_mut:
            self._phase = "cross"
        if self._phase == "cross" and len(self._parents) + len(self._children) >= n_pop:
            self._end_generation()

    def _next_generation(self) -> None:
        if self.generation >= self.cfg.n_generations:
            self._phase = "done"
            return
        n_parents = max(1, int(self.cfg.population * self.cfg.parent_ratio))
        ranked = sorted(self._pop, key=lambda m: m[1], reverse=True)[:n_parents]
        self._parent_members = ranked
        self._parents = [a for a, _ in ranked]
        self._children = []
        n_mut = int(self.cfg.population * self.cfg.mutation_ratio)
        self._phase = "mutate" if n_mut > 0 else "cross"
        if self._phase == "cross" and len(self._parents) >= self.cfg.population:
            self._end_generation()

    def _end_generation(self) -> None:
        self._pop = self._parent_members + self._children
        gen_best = max(self._pop, key=lambda m: m[1])
        assert self.best is not None
        self._stale = 0 if gen_best[1] > self.best[1] else self._stale + 1
        if gen_best[1] > self.best[1]:
            self.best = gen_best
        self.history.append(self.best[1])
        self.generation += 1
        if self.cfg.patience is not None and self._stale >= self.cfg.patience:
            logger.debug("stopping after %d generations without improvement", self._stale)
            self._phase = "done"
            return
        self._next_generation()


def evolve(
    space: SearchSpace,
    accuracy: Score,
    cost: Score,
    budget: float,
    config: EvolutionConfig = EvolutionConfig(),
    seed: int = 0,
    progress: Callable[[int, float], None] | None = None,
) -> DeploymentResult:
    """Returns the most accurate architecture found whose ``cost`` is at most ``budget``: the
    ask/tell loop of :class:`DeploymentEvolution`, with accuracy and cost memoized per
    architecture (an architecture over budget is never scored).

    Raises:
        ConfigError: no sampled architecture meets the budget.
    """
    scores: dict[str, float] = {}
    costs: dict[str, float] = {}
    strategy = DeploymentEvolution(config, seed)
    strategy.setup(space)
    generation = 0
    while (arch := strategy.ask()) is not None:
        key = arch_id(arch)
        if key not in costs:
            costs[key] = float(cost(arch))
        if costs[key] > budget:
            strategy.tell(arch, None)
            continue
        if key not in scores:
            scores[key] = float(accuracy(arch))
        strategy.tell(arch, scores[key])
        if progress is not None and strategy.generation > generation:
            generation = strategy.generation
            progress(generation - 1, strategy.history[-1])
    assert strategy.best is not None
    best, score = strategy.best
    return DeploymentResult(
        budget, best, score, costs[arch_id(best)], strategy.history, len(scores)
    )


def search_targets(
    space: SearchSpace,
    accuracy: Score,
    cost: Score,
    targets: Sequence[float],
    config: EvolutionConfig = EvolutionConfig(),
    seed: int = 0,
    progress: Callable[[float, int, float], None] | None = None,
) -> list[DeploymentResult]:
    """Returns one search result per budget in ``targets`` (in the given order); accuracy and
    cost functions are shared, so memoized measurements serve every target."""
    out = []
    for t in targets:
        cb = (lambda g, a, t=t: progress(t, g, a)) if progress else None
        out.append(evolve(space, accuracy, cost, t, config, seed, cb))
    return out


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Returns the indices of the points ``(cost, accuracy)`` that no other point dominates
    (lower or equal cost and higher or equal accuracy, one strictly), sorted by cost."""
    return pareto_indices([(-c, a) for c, a in points])
