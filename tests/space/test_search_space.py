"""Tests of the pure search-space layer: sizes, sampling, grid, validation, ids."""

import json
import random
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nasforge.errors import ArchitectureError, SpaceError
from nasforge.space.search_space import Decision, SearchSpace, arch_id


def _space() -> SearchSpace:
    return SearchSpace(
        [
            Decision("width", "value", (16, 32, 64)),
            Decision("op", "layer", ("conv3", "conv5")),
            Decision("skip", "input", ([0, 1], [0, 2], [1, 2])),
            Decision("p", "value", (0.0, 0.5)),
        ]
    )


def test_pure_modules_do_not_import_torch() -> None:
    """The pure layer of the space language imports without torch."""
    code = (
        "import sys; import nasforge.space.search_space, nasforge.space.expr, "
        "nasforge.space.context; assert 'torch' not in sys.modules, sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_size_is_exact_beyond_64_bits() -> None:
    """The size is the exact product, also for spaces of more than 10^19 architectures."""
    space = SearchSpace([Decision(f"d{i}", "value", tuple(range(9))) for i in range(21)])
    assert space.size == 9**21
    assert space.size > 2**64


def test_sample_is_seeded_and_inside() -> None:
    """The same seed gives the same samples, and every sample validates."""
    space = _space()
    a = [space.sample(random.Random(7)) for _ in range(3)]
    b = [space.sample(random.Random(7)) for _ in range(3)]
    assert a == b
    rng = np.random.default_rng(3)
    for _ in range(50):
        space.validate(space.sample(rng))


def test_sampling_is_uniform() -> None:
    """Each candidate is drawn about equally often."""
    space = _space()
    rng = random.Random(0)
    counts = {v: 0 for v in (16, 32, 64)}
    for _ in range(3000):
        counts[space.sample(rng)["width"]] += 1
    assert all(900 < c < 1100 for c in counts.values()), counts


def test_grid_enumerates_every_architecture_once() -> None:
    """The grid has exactly `size` distinct architectures."""
    space = _space()
    ids = [arch_id(a) for a in space.grid()]
    assert len(ids) == space.size == len(set(ids))


def test_validate_errors_name_the_label() -> None:
    """Unknown, missing and out-of-candidates labels raise ArchitectureError naming the label."""
    space = _space()
    good = space.default()
    with pytest.raises(ArchitectureError, match="unknown label.*'depth'"):
        space.validate({**good, "depth": 3})
    with pytest.raises(ArchitectureError, match="missing label.*'op'"):
        space.validate({k: v for k, v in good.items() if k != "op"})
    with pytest.raises(ArchitectureError, match="'width'.*48.*\\[16, 32, 64\\]"):
        space.validate({**good, "width": 48})
    with pytest.raises(ArchitectureError, match="'p'"):
        space.validate({**good, "p": 1})  # 1 is not 0.0 nor 0.5
    with pytest.raises(ArchitectureError):
        space.validate([1, 2])  # type: ignore[arg-type]


def test_validate_accepts_tuples_and_canonicalises() -> None:
    """A tuple where the space holds a list is the same architecture, with the same id."""
    space = _space()
    arch = {"op": "conv5", "width": 32, "skip": (0, 2), "p": 0.5}
    canon = space.validate(arch)
    assert canon["skip"] == [0, 2]
    assert list(canon) == list(space)
    assert arch_id(arch) == arch_id(canon) == space.arch_id(dict(reversed(list(arch.items()))))


def test_arch_id_is_stable_across_processes() -> None:
    """The id is a pure function of the canonical JSON (same in another interpreter)."""
    arch = {"b": [1, 2], "a": 0.25, "c": "x"}
    code = f"from nasforge.space.search_space import arch_id; print(arch_id({arch!r}))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == arch_id(arch)


def test_bad_decisions_are_refused() -> None:
    """Empty, duplicate and unlabelled decisions, and repeated labels, are SpaceErrors."""
    with pytest.raises(SpaceError, match="no candidates"):
        Decision("x", "value", ())
    with pytest.raises(SpaceError, match="duplicate"):
        Decision("x", "value", (1, 1))
    with pytest.raises(SpaceError, match="declared twice"):
        SearchSpace([Decision("x", "value", (1,)), Decision("x", "value", (2,))])
    with pytest.raises(SpaceError):
        Decision("", "value", (1,))


def test_round_trip_through_json() -> None:
    """A space survives to_dict/JSON/from_dict unchanged."""
    space = _space()
    again = SearchSpace.from_dict(json.loads(json.dumps(space.to_dict())))
    assert again == space


@given(st.lists(st.integers(1, 5), min_size=1, max_size=6), st.integers(0, 2**32))
def test_index_round_trip(sizes: list[int], seed: int) -> None:
    """from_index(index_of(arch)) == arch for any sample of any space."""
    space = SearchSpace([Decision(f"d{i}", "value", tuple(range(n))) for i, n in enumerate(sizes)])
    arch = space.sample(seed)
    assert space.from_index(space.index_of(arch)) == arch


def test_fair_sample_takes_every_candidate_of_each_decision_once() -> None:
    """FairNAS's paths: as many as the most candidates (3), each decision with 3 takes every
    one once; one with fewer takes each of its own and draws the rest; seeded; each valid."""
    space = _space()
    paths = space.fair_sample(random.Random(5))
    assert len(paths) == 3
    assert sorted(p["width"] for p in paths) == [16, 32, 64]
    assert sorted(json.dumps(p["skip"]) for p in paths) == ["[0, 1]", "[0, 2]", "[1, 2]"]
    assert {p["op"] for p in paths} == {"conv3", "conv5"}
    assert all(space.validate(p) == p for p in paths)
    assert space.fair_sample(random.Random(5)) == paths
    orders = {tuple(p["width"] for p in space.fair_sample(random.Random(s))) for s in range(40)}
    assert len(orders) == 6  # every order of the three turns up: the order is shuffled


def test_fair_sample_refuses_a_range() -> None:
    """A range has no candidates to take in turn: SpaceError naming it."""
    space = SearchSpace.from_spec({"lr": {"uniform": [1e-3, 1e-1], "log": True}, "op": ["a", "b"]})
    with pytest.raises(SpaceError, match="lr"):
        space.fair_sample(0)
