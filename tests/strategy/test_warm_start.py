"""The ``initial`` architectures of random search and evolution: asked first, then as before."""

import pytest

from nasforge.errors import ArchitectureError, ConfigError
from nasforge.space.search_space import Decision, SearchSpace
from nasforge.strategy import RandomStrategy, RegularizedEvolution, get_strategy


def _space() -> SearchSpace:
    return SearchSpace([Decision("a", "layer", (0, 1, 2, 3)), Decision("b", "layer", ("x", "y"))])


FIRST = [{"a": 3, "b": "y"}, {"a": 0, "b": "x"}, {"a": 3, "b": "x"}]


def test_random_search_asks_initial_first_then_its_unchanged_random_sequence() -> None:
    """The listed archs come first in order; the random draws after them are the plain ones."""
    warm = RandomStrategy(seed=4, initial=FIRST)
    plain = RandomStrategy(seed=4)
    warm.setup(_space())
    plain.setup(_space())
    assert [warm.ask() for _ in range(3)] == FIRST
    assert [warm.ask() for _ in range(5)] == [plain.ask() for _ in range(5)]
    assert warm.config() == {"seed": 4, "initial": FIRST}
    assert plain.config() == {"seed": 4}


def test_evolution_fills_its_first_population_from_initial() -> None:
    """Evolution's first asks are the warm start; once the population is full it mutates."""
    evo = get_strategy("evolution", population_size=3, sample_size=2, seed=1, initial=FIRST)
    evo.setup(_space())
    asked = [evo.ask() for _ in range(3)]
    assert asked == FIRST
    for arch, metric in zip(asked, [1.0, 0.0, 0.5]):
        evo.tell(arch, metric)
    child = evo.ask()
    # one decision away from a tournament winner of the warm population
    assert any(sum(child[k] != p[k] for k in p) == 1 for p in FIRST)
    rebuilt = RegularizedEvolution(**evo.config())
    rebuilt.setup(_space())
    rebuilt.replay(zip(asked, [1.0, 0.0, 0.5]))
    assert rebuilt.ask() == child


def test_initial_outside_the_space_or_not_dicts_is_refused() -> None:
    """An unknown value fails at setup; a non-list fails at construction, naming the fix."""
    with pytest.raises(ArchitectureError):
        RandomStrategy(initial=[{"a": 9, "b": "x"}]).setup(_space())
    with pytest.raises(ConfigError, match="initial must be a list"):
        RegularizedEvolution(initial={"a": 0, "b": "x"})
