"""Range decisions (nf.uniform, nf.integer): the pure arithmetic (property tests), the search
space's handling (validate, size, grid, sample, serialisation, ids), and declaring them in a
ModelSpace, a MutatedSpace and a run file's mapping."""

from __future__ import annotations

import json
import math
import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import nasforge as nf
from nasforge.errors import ArchitectureError, SpaceError
from nasforge.space.ranges import Range, canonical_float
from nasforge.space.search_space import Decision, SearchSpace, arch_id

SETTINGS = settings(max_examples=60, deadline=None)

finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)
positive = st.floats(1e-8, 1e6, allow_nan=False, allow_infinity=False)


@st.composite
def ranges(draw: st.DrawFn) -> Range:
    """Returns any valid range: float or integer, linear or log."""
    integer, log = draw(st.booleans()), draw(st.booleans())
    if integer:
        low = draw(st.integers(1 if log else -1000, 1000))
        high = draw(st.integers(low, low + 5000))
        step = 1 if log else draw(st.integers(1, 50))
        return Range(low, high, log, True, step)
    low = draw(positive if log else finite)
    high = draw(st.floats(low, low * 1e4 if log else low + 1e6, allow_nan=False))
    return Range(low, high, log)


@SETTINGS
@given(finite)
def test_canonical_float_is_idempotent_and_survives_text(x: float) -> None:
    """A canonical float is its own canonical form, also after printing and parsing."""
    c = canonical_float(x)
    assert canonical_float(c) == c
    assert canonical_float(float(repr(c))) == c
    assert canonical_float(float(json.loads(json.dumps(c)))) == c


@SETTINGS
@given(ranges(), st.floats(0, 1))
def test_from_unit_is_canonical_and_inside(r: Range, u: float) -> None:
    """Every unit position maps to a canonical value inside the range (on its step grid)."""
    v = r.from_unit(u)
    assert r.canonical(v) == v
    assert r.low <= v <= r.high


@SETTINGS
@given(ranges(), st.floats(0, 1))
def test_unit_round_trip_of_float_ranges(r: Range, u: float) -> None:
    """to_unit undoes from_unit on float ranges (up to the 12-digit rounding)."""
    if r.integer or r.low == r.high:
        return
    v = r.from_unit(u)
    assert r.from_unit(r.to_unit(v)) == pytest.approx(v, rel=1e-9, abs=1e-9)


@SETTINGS
@given(ranges(), st.integers(1, 12))
def test_points_are_sorted_distinct_and_inside(r: Range, n: int) -> None:
    """points(n) gives at most n distinct canonical values, sorted, ends included."""
    pts = r.points(n)
    assert 1 <= len(pts) <= n
    assert pts == sorted(set(pts))
    assert all(r.canonical(p) == p for p in pts)
    if n > 1 and len(pts) > 1:
        assert pts[0] == r.low and pts[-1] == r.high


@SETTINGS
@given(ranges(), st.integers(0, 2**32 - 1))
def test_samples_are_inside_and_seeded(r: Range, seed: int) -> None:
    """A sample lies in the range, and the same seed gives the same sample."""
    a = r.sample(random.Random(seed))
    assert r.canonical(a) == a
    assert r.sample(random.Random(seed)) == a


@SETTINGS
@given(st.integers(-100, 100), st.integers(0, 300), st.integers(1, 20))
def test_integer_count_matches_enumeration(low: int, span: int, step: int) -> None:
    """An integer range's count is the number of grid values from low to high."""
    r = Range(low, low + span, integer=True, step=step)
    assert r.count == len(range(low, low + span + 1, step))
    assert r.points(int(r.count)) == list(range(low, low + span + 1, step))


def test_log_sampling_is_even_in_log_space() -> None:
    """A log range puts about as many samples in each decade."""
    r = Range(1e-4, 1e-1, log=True)
    rng = random.Random(0)
    decades = [0, 0, 0]
    for _ in range(3000):
        decades[min(2, int(-math.log10(r.sample(rng)) - 1))] += 1
    assert all(900 < n < 1100 for n in decades), decades


@pytest.mark.parametrize(
    "args, match",
    [
        ((1.0, 0.5), "above high"),
        ((0.0, 1.0, True), "low > 0"),
        ((float("nan"), 1.0), "finite"),
        ((1.5, 3, False, True), "ints"),
        ((1, 9, True, True, 2), "step=1"),
        ((0.0, 1.0, False, False, 2), "no step"),
    ],
)
def test_bad_ranges_are_refused(args: tuple, match: str) -> None:
    """Bad bounds are a SpaceError naming the rule."""
    with pytest.raises(SpaceError, match=match):
        Range(*args)


# -- in a search space ---------------------------------------------------------------------------
def _space() -> SearchSpace:
    return SearchSpace(
        [
            Decision("width", "value", (8, 16)),
            Decision("lr", "float", (), Range(1e-4, 1e-1, log=True)),
            Decision("warmup", "int", (), Range(0, 100, integer=True, step=10)),
        ]
    )


def test_validate_refuses_values_out_of_range() -> None:
    """Out of range, off the step grid, not a number: an ArchitectureError naming the label
    and the range."""
    space = _space()
    for bad, match in [
        ({"lr": 0.5}, r"'lr'.*out of range.*uniform\(0.0001, 0.1, log=True\)"),
        ({"lr": float("nan")}, "not finite"),
        ({"lr": True}, "not a number"),
        ({"warmup": 15}, "off the step grid"),
        ({"warmup": 2.5}, "not an integer"),
    ]:
        with pytest.raises(ArchitectureError, match=match):
            space.validate({"width": 8, "lr": 0.01, "warmup": 10, **bad})


def test_arch_id_is_stable_for_floats() -> None:
    """The same value written differently (1e-3, 0.001, a float32 round trip, an int for
    a float range, 30.0 for an int) gives one id once validated."""
    space = _space()
    ids = {
        space.arch_id({"width": 8, "lr": lr, "warmup": w})
        for lr, w in [(1e-3, 30), (0.001, 30.0), (0.0010000000000000002, 30)]
    }
    assert len(ids) == 1
    a = space.validate({"width": 8, "lr": 0.001, "warmup": 30})
    assert arch_id(json.loads(json.dumps(a))) == arch_id(a)
    assert type(a["warmup"]) is int and type(a["lr"]) is float


def test_size_is_infinite_and_grid_refuses_without_points() -> None:
    """A float range makes the size infinite; grid() refuses naming it, grid(points=n) works."""
    space = _space()
    assert space.size == math.inf
    with pytest.raises(SpaceError, match=r"\['lr'\].*points=n"):
        space.grid()
    grid = list(space.grid(points=3))
    assert len(grid) == 2 * 3 * 3
    assert {a["lr"] for a in grid} == {0.0001, 0.00316227766017, 0.1}
    ints = SearchSpace([Decision("n", "int", (), Range(1, 4, integer=True))])
    assert ints.size == 4 and [a["n"] for a in ints.grid()] == [1, 2, 3, 4]


def test_serialisation_and_len_of_ranges() -> None:
    """to_dict/from_dict round-trip ranges; len/index on a range raise, naming it."""
    space = _space()
    data = json.loads(json.dumps(space.to_dict()))
    assert SearchSpace.from_dict(data) == space
    with pytest.raises(SpaceError, match="'lr' is a range"):
        len(space["lr"])
    with pytest.raises(SpaceError, match="'lr' is a range"):
        space.index_of(space.default())
    assert space.default() == {"width": 8, "lr": 0.00316227766017, "warmup": 50}
    assert space.sample(1) == space.sample(1)


def test_from_spec_reads_a_run_file_mapping() -> None:
    """A run file's mapping gives lists, float and integer ranges; a bad form is named."""
    space = SearchSpace.from_spec(
        {
            "width": [8, 16],
            "lr": {"uniform": [1e-4, 1e-1], "log": True},
            "warmup": {"integer": [0, 100], "step": 10},
        }
    )
    assert space == _space()
    with pytest.raises(SpaceError, match="'lr'"):
        SearchSpace.from_spec({"lr": {"loguniform": [1, 2]}})


# -- in model spaces -----------------------------------------------------------------------------
class Net(nf.ModelSpace):
    def __init__(self) -> None:
        super().__init__()
        width = nf.choice([8, 16], label="width")
        self.fc = nn.Linear(4, width)
        self.drop = nn.Dropout(nf.uniform(0.0, 0.5, label="dropout"))
        self.lr = nf.uniform(1e-4, 1e-1, log=True, label="lr")
        self.warmup = nf.integer(0, 100, step=10)  # labelled by its attribute

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.fc(x))


def test_model_space_records_ranges_and_freezes_them() -> None:
    """A frozen model holds plain values; nf.hparams returns the ranges' values."""
    space = Net()
    ss = space.search_space()
    assert [d.kind for d in ss.decisions] == ["value", "float", "float", "int"]
    assert ss["warmup"].domain == Range(0, 100, integer=True, step=10)
    arch = {"width": 16, "dropout": 0.25, "lr": 3e-3, "warmup": 20}
    model = nf.freeze(space, arch)
    assert type(model.lr) is float and model.lr == 3e-3 and model.drop.p == 0.25
    assert nf.hparams(model) == {"dropout": 0.25, "lr": 0.003, "warmup": 20}
    assert model(torch.zeros(2, 4)).shape == (2, 16)
    with pytest.raises(ArchitectureError, match="'lr'"):
        nf.freeze(space, {**arch, "lr": 1.0})


def test_a_range_where_listed_values_are_needed_is_refused() -> None:
    """Repeat needs every depth: a depth from a range is refused, naming the range."""

    class Deep(nf.ModelSpace):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nf.Repeat(lambda i: nn.Identity(), nf.integer(1, 3, label="depth"))

    with pytest.raises(SpaceError, match=r"integer\(1, 3\).*'depth'.*nf.choice"):
        Deep()


def test_tied_range_labels_must_agree() -> None:
    """A label used twice with different ranges is a SpaceError."""

    class Tied(nf.ModelSpace):
        def __init__(self) -> None:
            super().__init__()
            self.a = nf.uniform(0.0, 1.0, label="p")
            self.b = nf.uniform(0.0, 2.0, label="p")

    with pytest.raises(SpaceError, match="'p' is used twice"):
        Tied()


class _Base(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.drop = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.fc(x))


class _DropoutMutator(nf.Mutator):
    def mutate(self, graph: nf.space.MutableGraph) -> None:
        p = nf.uniform(0.0, 0.9, label="p")
        for node in graph.nodes(nn.Dropout):
            graph.replace_module(node, nn.Dropout(p))


def test_mutated_space_takes_a_range_from_a_mutator() -> None:
    """nf.uniform inside Mutator.mutate is a decision of the MutatedSpace."""
    space = nf.MutatedSpace(_Base(), [_DropoutMutator()])
    assert space.search_space()["p"].kind == "float"
    model = nf.freeze(space, {"p": 0.3})
    assert model.drop.p == 0.3 and nf.hparams(model) == {"p": 0.3}


def test_one_shot_refuses_ranges_in_one_line() -> None:
    """A supernet refuses a space with a range in one line naming the decision."""
    from nasforge.oneshot.search import get_algorithm
    from nasforge.oneshot.supernet import Supernet

    class Mixed(nf.ModelSpace):
        def __init__(self) -> None:
            super().__init__()
            self.op = nf.LayerChoice([nn.Linear(4, 4), nn.Identity()], label="op")
            self.lr = nf.uniform(1e-4, 1e-1, log=True, label="lr")

    with pytest.raises(SpaceError, match=r"one-shot.*'lr'.*multi-trial") as info:
        Supernet(Mixed(), get_algorithm("darts"))
    assert "\n" not in str(info.value)
