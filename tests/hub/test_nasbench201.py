"""NAS-Bench-201's space: its 15,625 cells in the benchmark's order, and its arch strings."""

from __future__ import annotations

import itertools

import pytest
import torch

import nasforge as nf
from nasforge import hub
from nasforge.errors import ArchitectureError
from nasforge.hub.nasbench201 import NB201_EDGES, NB201_OPS, from_arch_string, to_arch_string

from ._engine import multi_trial, one_shot

BEST = (
    "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|"
    "+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|"
)


def test_size_and_operation_order_are_the_benchmarks() -> None:
    """Exactly 5^6 cells; every edge's values are the benchmark's operations in its order."""
    ss = hub.space("nasbench201", channels=4, n_cells=1).search_space()
    assert ss.size == 15_625 == hub.space_info("nasbench201").size_paper
    assert [d.values for d in ss.decisions] == [NB201_OPS] * 6
    assert list(ss) == [f"e{j}_{i}" for j, i in NB201_EDGES]
    assert NB201_OPS == ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")


def test_arch_strings_round_trip_over_the_whole_space() -> None:
    """Every cell converts to a string and back to itself, and strings are distinct."""
    labels = [f"e{j}_{i}" for j, i in NB201_EDGES]
    seen = set()
    for ops in itertools.product(NB201_OPS, repeat=6):
        arch = dict(zip(labels, ops))
        text = to_arch_string(arch)
        assert from_arch_string(text) == arch
        seen.add(text)
    assert len(seen) == 15_625
    assert to_arch_string(from_arch_string(BEST)) == BEST


@pytest.mark.parametrize(
    "bad",
    [
        "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|",
        "|conv~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|none~0|none~1|none~2|",
        "|nor_conv_3x3~1|+|nor_conv_3x3~0|nor_conv_3x3~1|+|none~0|none~1|none~2|",
        None,
    ],
)
def test_malformed_strings_are_refused(bad: object) -> None:
    """A wrong node count, operation or input index is an ArchitectureError quoting the form."""
    with pytest.raises(ArchitectureError, match="op~0"):
        from_arch_string(bad)  # type: ignore[arg-type]


def test_frozen_cells_differ_and_the_all_none_cell_passes_nothing() -> None:
    """The all-none cell's output ignores the input; the all-conv cell's does not."""
    space = hub.space("nasbench201", channels=4, n_cells=1)
    x = torch.randn(2, 3, 8, 8)
    none = nf.freeze(
        space,
        from_arch_string(
            "+".join("|" + "|".join(f"none~{i}" for i in range(j)) + "|" for j in range(1, 4))
        ),
    ).eval()
    best = nf.freeze(space, from_arch_string(BEST)).eval()
    assert best(x).shape == (2, 10)
    assert torch.allclose(none(x)[0], none(x)[1])
    assert not torch.allclose(best(x)[0], best(x)[1])


@pytest.fixture(scope="module")
def tiny_space() -> object:
    return hub.space("nasbench201", channels=4, n_cells=1)


@pytest.mark.parametrize("strategy", ["random", "evolution"])
def test_a_multi_trial_search_runs(tiny_space: object, strategy: str, tmp_path) -> None:
    """Random search and evolution run trials of frozen cells and keep their metrics."""
    exp = multi_trial(tiny_space, strategy, tmp_path / strategy, n_trials=3)
    trials = exp.trials()
    assert len(trials) == 3 and all(t.status == "done" for t in trials)
    assert all(to_arch_string(t.arch) for t in trials)


@pytest.mark.parametrize("algorithm", ["spos", "nasb", "darts"])
def test_one_shot_searches_return_a_cell_with_a_benchmark_string(
    tiny_space: object, algorithm: str
) -> None:
    """SPOS, NASB and DARTS supernets of the space train and return one of its 15,625 cells."""
    result = one_shot(tiny_space, algorithm)
    arch = tiny_space.search_space().validate(result.arch)  # type: ignore[attr-defined]
    assert from_arch_string(to_arch_string(arch)) == arch


README_EXAMPLE = (
    "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|"
    "+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|"
)


def test_a_benchmark_string_is_a_hub_name() -> None:
    """hub.arch and hub.model take a NAS-Bench-201 string: its arch dict, and the cell frozen
    at the benchmark's CIFAR-10 setting (C=16, N=5: 15 cells)."""
    assert hub.arch(README_EXAMPLE) == from_arch_string(README_EXAMPLE)
    info = hub.arch_info(README_EXAMPLE)
    assert (info.space, info.resolution, info.num_classes) == ("nasbench201", 32, 10)
    model = hub.model(README_EXAMPLE)
    cells = [m for m in model.cells if hasattr(m, "edges")]
    assert len(cells) == 15 and model.stem[0].out_channels == 16
    assert model.classifier.out_features == 10
    small = hub.model(README_EXAMPLE, channels=4, n_cells=1).eval()
    assert small(hub.example_input(README_EXAMPLE, 2)).shape == (2, 10)


def test_the_resnet_cell_has_a_name() -> None:
    """The paper's ResNet cell is "nasbench201-resnet": two 3x3 convolutions and a skip."""
    assert to_arch_string(hub.arch("nasbench201-resnet")) == (
        "|nor_conv_3x3~0|+|none~0|nor_conv_3x3~1|+|skip_connect~0|none~1|skip_connect~2|"
    )
    assert "nasbench201-resnet" in hub.archs("nasbench201")


@pytest.mark.parametrize(
    "bad",
    [
        "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|",
        "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|conv~1|none~2|",
        "nor_conv_3x3~0",
    ],
)
def test_a_bad_benchmark_string_is_one_clear_error(bad: str) -> None:
    """A malformed string given as a hub name is one ArchitectureError giving the form."""
    with pytest.raises(ArchitectureError, match=r"expected \|op~0\|\+\|op~0\|op~1\|"):
        hub.arch(bad)
    with pytest.raises(ArchitectureError, match="not a NAS-Bench-201 string|should be op~"):
        hub.model(bad)
