"""The NASNet cell family: sizes, the published cells, the output rule, engine runs."""

from __future__ import annotations

import math

import pytest
import torch

import nasforge as nf
from nasforge import hub
from nasforge.errors import ArchitectureError, SpaceError
from nasforge.hub import nasnet as N
from nasforge.hub._cells import NDSSpace

from ._engine import multi_trial, one_shot

FAMILY = ["nasnet", "enas", "amoebanet", "pnas", "darts"]
OPS = {
    "nasnet": N.NASNET_OPS,
    "enas": N.ENAS_OPS,
    "amoebanet": N.AMOEBA_OPS,
    "pnas": N.PNAS_OPS,
    "darts": N.DARTS_OPS,
}


def _slot_size(n_ops: int, n_kinds: int) -> int:
    """Returns the number of architectures of a slot space: node j's 2 slots each pick one of j
    states and one operation; ``n_kinds`` independent cell structures."""
    return math.prod((n_ops * j) ** 2 for j in range(2, 7)) ** n_kinds


def _darts_size() -> int:
    """Returns the number of decisions' combinations of the DARTS space: node j picks 2 of j
    inputs and an operation for each of its j edges (DARTS's alpha per edge)."""
    return math.prod(math.comb(j, 2) * 7**j for j in range(2, 6)) ** 2


@pytest.fixture(scope="module")
def enas() -> nf.ModelSpace:
    return hub.space("enas", n_cells=3, channels=4)


@pytest.fixture(scope="module")
def darts() -> nf.ModelSpace:
    return hub.space("darts", n_cells=3, channels=4)


def test_sizes_are_the_counts_of_their_decisions(enas: nf.ModelSpace, darts: nf.ModelSpace):
    """ENAS's and DARTS's sizes are the exact counts; ENAS's differs from its paper's formula."""
    assert enas.search_space().size == _slot_size(5, 2)
    assert enas.search_space().size != hub.space_info("enas").size_paper
    assert darts.search_space().size == _darts_size()
    assert [d.values for d in darts.search_space().decisions if d.kind == "layer"][0] == OPS[
        "darts"
    ]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["nasnet", "amoebanet", "pnas"])
def test_the_larger_slot_spaces_sizes(name: str) -> None:
    """NASNet and AmoebaNet have 2 cell structures, PNAS one, whose size is its paper's."""
    size = hub.space(name, n_cells=3, channels=4).search_space().size
    assert size == _slot_size(len(OPS[name]), 1 if name == "pnas" else 2)
    if name == "pnas":
        assert size == hub.space_info("pnas").size_paper


@pytest.mark.parametrize("name", hub.archs())
def test_published_cells_freeze_and_run_at_a_tiny_size(name: str) -> None:
    """Every published architecture builds at 3 cells of 4 channels and classifies."""
    if hub.arch_info(name).space not in FAMILY:
        pytest.skip("another family")
    model = hub.model(name, n_cells=3, channels=4).eval()
    out = model(torch.randn(2, 3, 32, 32))
    assert out.shape == (2, hub.arch_info(name).num_classes)


def test_published_cells_are_archs_of_their_spaces(enas: nf.ModelSpace, darts: nf.ModelSpace):
    """The published ENAS and DARTS cells validate against their spaces, and freeze there."""
    for name, space in (("enas", enas), ("darts-v1", darts), ("darts-v2", darts)):
        arch = hub.arch(name)
        assert space.search_space().validate(arch) == arch
        assert nf.freeze(space, arch)(torch.randn(1, 3, 8, 8)).shape == (1, 10)


def test_the_output_is_the_loose_ends_unless_the_release_lists_states() -> None:
    """NASNet-A's loose ends are nodes 2-6 (normal) and 4-6 (reduce); its release's list wins."""
    plain = hub.freeze_direct(N.nasnet, {"n_cells": 3, "channels": 4}, hub.arch("nasnet-a"))
    assert [c.concat for c in plain.cells] == [[2, 3, 4, 5, 6], [4, 5, 6], [4, 5, 6]]
    released = hub.model("nasnet-a-cifar", n_cells=3, channels=4)
    assert [c.concat for c in released.cells] == [[0, 2, 3, 4, 5, 6], [3, 4, 5, 6], [3, 4, 5, 6]]
    assert plain.classifier.in_features == 3 * 16 and released.classifier.in_features == 4 * 16


def test_bad_settings_and_genotypes_are_refused() -> None:
    """Unknown operations, too few cells, bad concat lists and DARTS nodes reading one input
    twice are clear errors."""
    with pytest.raises(SpaceError, match="unknown cell operation"):
        NDSSpace(["conv_9x9"])
    with pytest.raises(SpaceError, match="at least 3 cells"):
        hub.space("darts", n_cells=2)
    with pytest.raises(SpaceError, match="expected states among"):
        hub.freeze_direct(N.nasnet, {"n_cells": 3, "concat": {"normal": [9]}}, hub.arch("nasnet-a"))
    with pytest.raises(ArchitectureError, match="twice"):
        N.genotype_arch(
            {"normal": [(("skip_connect", 0), ("sep_conv_3x3", 0))]}, "darts", N.DARTS_OPS
        )


@pytest.mark.parametrize("strategy", ["random", "evolution"])
def test_a_multi_trial_search_runs(enas: nf.ModelSpace, strategy: str, tmp_path) -> None:
    """Random search and evolution run over ENAS's cells, each trial a frozen network."""
    trials = multi_trial(enas, strategy, tmp_path / strategy, n_trials=2).trials()
    assert len(trials) == 2 and all(t.status == "done" for t in trials)


@pytest.mark.parametrize(
    ("name", "algorithm"),
    [
        ("enas", "nasb"),
        ("darts", "spos"),
        pytest.param("enas", "spos", marks=pytest.mark.slow),
        pytest.param("darts", "nasb", marks=pytest.mark.slow),
    ],
)
def test_supernets_search_the_cells(name: str, algorithm: str) -> None:
    """SPOS and NASB supernets of a slot space (ENAS) and of DARTS's return one of its cells
    (cells of 2 nodes keep the supernets small; the mechanism is the same)."""
    space = hub.space(name, n_cells=3, channels=4, n_nodes=2)
    arch = space.search_space().validate(one_shot(space, algorithm).arch)
    assert nf.freeze(space, arch)(torch.randn(1, 3, 8, 8)).shape == (1, 10)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["nasnet-a-cifar", "pnas-cifar", "darts-v2-cifar"])
def test_cifar_networks_have_their_papers_parameter_counts(name: str) -> None:
    """At the paper's CIFAR setting these cells are within 2% of the paper's parameters."""
    params = sum(p.numel() for p in hub.model(name).parameters())
    assert abs(params / hub.arch_info(name).params_paper - 1) <= 0.02


#: the ImageNet mobile networks: the paper's parameters (verified against each paper's table)
MOBILE = {
    "nasnet-a-mobile": 5.3e6,  # Zoph et al. 2018, Table 3: NASNet-A (4 @ 1056)
    "amoebanet-a-mobile": 5.1e6,  # Real et al. 2019, Table 3: AmoebaNet-A (N=4, F=50)
    "pnasnet-5-mobile": 5.1e6,  # Liu et al. 2018, Table 4: PNASNet-5 (N=3, F=54)
    "darts-v2-mobile": 4.7e6,  # Liu et al. 2019, Table 2: DARTS (second order)
}


@pytest.mark.parametrize("name", sorted(MOBILE))
def test_the_imagenet_mobile_networks_have_their_papers_parameters(name: str) -> None:
    """Each mobile network is built at 224x224 and 1000 classes with the stride-2 stem (8x
    down before the first cell), and its parameters are within 2% of the paper's; AmoebaNet-A
    within 2.5%, its documented exception (amoebanet-stem: the paper leaves the stem out)."""
    info = hub.arch_info(name)
    assert (info.resolution, info.num_classes, info.params_paper) == (224, 1000, MOBILE[name])
    model = hub.model(name)
    strides = [m.stride[0] for m in (*model.stem0, *model.stem1) if isinstance(m, torch.nn.Conv2d)]
    assert strides == [2, 2, 2] and model.classifier.out_features == 1000
    params = sum(p.numel() for p in model.parameters())
    tolerance = 0.025 if info.exception == "amoebanet-stem" else 0.02
    assert abs(params / MOBILE[name] - 1) <= tolerance, params
