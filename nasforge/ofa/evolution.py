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
from dataclasses import dataclass, field
from typing import Any

from nasforge.errors import ConfigError
from nasforge.run.results import pareto_indices
from nasforge.space.search_space import Arch, SearchSpace, arch_id

__all__ = [
    "EvolutionConfig",
    "DeploymentResult",
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


def _feasible(
    draw: Callable[[], Arch], cost: Score, budget: float, tries: int, what: str
) -> tuple[Arch, float]:
    for _ in range(tries):
        arch = draw()
        c = cost(arch)
        if c <= budget:
            return arch, c
    raise ConfigError(
        f"no {what} architecture met the budget {budget:g} in {tries} draws; raise the budget "
        "(the smallest sub-network's cost is a lower bound) or max_tries"
    )


def evolve(
    space: SearchSpace,
    accuracy: Score,
    cost: Score,
    budget: float,
    config: EvolutionConfig = EvolutionConfig(),
    seed: int = 0,
    progress: Callable[[int, float], None] | None = None,
) -> DeploymentResult:
    """Returns the most accurate architecture found whose ``cost`` is at most ``budget``.

    Raises:
        ConfigError: no sampled architecture meets the budget.
    """
    rng = random.Random(seed)
    scores: dict[str, float] = {}

    def score(arch: Arch) -> float:
        key = arch_id(arch)
        if key not in scores:
            scores[key] = float(accuracy(arch))
        return scores[key]

    costs: dict[str, float] = {}

    def cost_of(arch: Arch) -> float:
        key = arch_id(arch)
        if key not in costs:
            costs[key] = float(cost(arch))
        return costs[key]

    # OFA draws each dimension uniformly (depths equally likely), which finds small feasible
    # networks far more often than exact-uniform sampling of the space
    sampler = getattr(space, "sample_dims", space.sample)
    try:
        pop = [_feasible(lambda: sampler(rng), cost_of, budget, config.max_tries // 10 or 1,
                         "sampled")[0]]  # fmt: skip
    except ConfigError:
        # a tight budget that random networks rarely meet: grow the population from mutations
        # of the smallest network instead (it is feasible whenever any network is)
        smallest = getattr(space, "smallest", None)
        if smallest is None:
            raise
        base = smallest()

        def sampler(_: Any) -> Arch:
            return mutate(space, base, config.mutate_prob, rng)

        pop = [_feasible(lambda: base, cost_of, budget, 1, "smallest")[0]]
    pop += [
        _feasible(lambda: sampler(rng), cost_of, budget, config.max_tries, "sampled")[0]
        for _ in range(config.population - 1)
    ]
    n_parents = max(1, int(config.population * config.parent_ratio))
    n_mut = int(config.population * config.mutation_ratio)
    best, history, stale = max(pop, key=score), [], 0
    for gen in range(config.n_generations):
        parents = sorted(pop, key=score, reverse=True)[:n_parents]
        children = []
        for _ in range(n_mut):
            children.append(_feasible(
                lambda p=parents: mutate(space, rng.choice(p), config.mutate_prob, rng),
                cost_of, budget, config.max_tries, "mutated")[0])  # fmt: skip
        while len(parents) + len(children) < config.population:
            children.append(_feasible(
                lambda p=parents: crossover(space, rng.choice(p), rng.choice(p), rng),
                cost_of, budget, config.max_tries, "crossed")[0])  # fmt: skip
        pop = parents + children
        gen_best = max(pop, key=score)
        stale = 0 if score(gen_best) > score(best) else stale + 1
        if score(gen_best) > score(best):
            best = gen_best
        history.append(score(best))
        if progress is not None:
            progress(gen, score(best))
        if config.patience is not None and stale >= config.patience:
            logger.debug("stopping after %d generations without improvement", stale)
            break
    return DeploymentResult(budget, best, score(best), cost_of(best), history, len(scores))


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
