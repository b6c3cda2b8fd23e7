"""Tests of the strategy base: its fast validation answers exactly as the space does."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nasforge.errors import ArchitectureError
from nasforge.space.search_space import Decision, SearchSpace
from nasforge.strategy import get_strategy

EXACT = [
    Decision("n", "value", (1, 2, 3)),
    Decision("b", "value", (True, False, None)),
    Decision("op", "layer", ("conv", "id")),
    Decision("skip", "input", ([0], [1], [0, 1])),
]
#: one space whose candidates all take the fast path, one with a float decision that does not
SPACES = [SearchSpace(EXACT), SearchSpace([*EXACT, Decision("f", "value", (1.0, 0.5))])]

scalars = st.sampled_from([0, 1, 2, 3, 1.0, 0.5, -0.0, 0.0, True, False, None, "conv", "id", "x"])
values = st.one_of(
    scalars,
    st.lists(st.sampled_from([0, 1, True, 1.0, "0"]), max_size=2),
    st.lists(st.sampled_from([0, 1]), max_size=2).map(tuple),
)


def _archs(space: SearchSpace) -> st.SearchStrategy:
    """Returns archs near the space: valid ones, wrong values and types, missing/extra labels."""
    valid = st.builds(lambda seed: space.sample(seed), st.integers(0, 10**6))
    return (
        valid
        | valid.flatmap(lambda a: st.sampled_from(list(a)).map(lambda k: {**a, k: 1}))
        | st.fixed_dictionaries({label: values for label in space})
        | st.dictionaries(st.sampled_from([*space, "extra"]), values)
    )


def _answer(fn, arch):
    try:
        return fn(arch)
    except ArchitectureError as exc:
        return ("error", str(exc))


@pytest.mark.parametrize("space", SPACES, ids=["exact", "with-floats"])
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_fast_validation_equals_the_space(space, data):
    """For any architectures (each twice), the fast validation gives the answer of the
    space itself: the same dict, or the same error."""
    s = get_strategy("random")
    s.setup(space)
    batch = data.draw(st.lists(_archs(space), min_size=1, max_size=6))
    for arch in batch + batch:
        assert _answer(s._validate, arch) == _answer(space.validate, arch)


def test_exact_architectures_take_the_fast_path(monkeypatch):
    """A valid architecture of exact-typed values is answered without SearchSpace.validate."""
    space = SPACES[0]
    s = get_strategy("random")
    s.setup(space)
    arch = {"skip": (0, 1), "op": "id", "b": None, "n": 2}  # any key order, a tuple for a list

    def refuse(self, arch):
        raise AssertionError("validate was called")

    monkeypatch.setattr(SearchSpace, "validate", refuse)
    assert s._validate(arch) == {"n": 2, "b": None, "op": "id", "skip": [0, 1]}
    assert list(s._validate(arch)) == list(space)


def test_validated_answer_is_a_fresh_dict():
    """Mutating a validated architecture does not change the next answer."""
    space = SPACES[0]
    s = get_strategy("random")
    s.setup(space)
    arch = space.sample(0)
    first = s._validate(arch)
    first["n"] = 99
    assert s._validate(arch) == space.validate(arch)


def test_told_values_of_the_wrong_type_are_still_refused():
    """After 1 was told, True (equal to 1 in Python) is still refused where 1 is expected."""
    s = get_strategy("random")
    s.setup(SearchSpace([Decision("n", "value", (1, 2))]))
    s.tell({"n": 1}, 0.5)
    with pytest.raises(ArchitectureError):
        s.tell({"n": True}, 0.5)


def test_tell_before_setup_is_a_config_error():
    """A tell before setup names the fix, as before the lookup table existed."""
    from nasforge.errors import ConfigError

    with pytest.raises(ConfigError, match="setup"):
        get_strategy("random").tell({"n": 1}, 0.5)


def test_a_strategy_mapping_builds_the_strategy_as_in_run_files():
    """`{"name": "evolution", "seed": 3, ...}`, as a run file writes it, builds the strategy
    in Python too (Experiment(strategy=...) and get_strategy)."""
    from nasforge.strategy import RegularizedEvolution, get_strategy

    s = get_strategy({"name": "evolution", "seed": 3, "population_size": 7})
    assert isinstance(s, RegularizedEvolution) and s.seed == 3 and s.population_size == 7
