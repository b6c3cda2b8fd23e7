"""MnasNet's factorized hierarchical space: its size, MnasNet-A1, searches and supernets."""

from __future__ import annotations

import pytest
import torch

import nasforge as nf
from nasforge import hub
from nasforge.hub.mnasnet import MNASNET_OPS, MnasNetSpace

from ._mobile import both_searches, both_supernets


def test_size_is_432_per_block_over_seven_blocks() -> None:
    """Each block has 16 ops × 3 skips × 3 widths × 3 depths = 432 choices, as §3.2 counts."""
    space = MnasNetSpace(n_classes=10, width_mult=0.25)
    ss = space.search_space()
    assert ss.size == 432**7 == hub.space_info("mnasnet").size_paper
    assert ss["b3.op"].values == MNASNET_OPS and len(MNASNET_OPS) == 16
    assert ss["b0.depth"].values == (1, 2, 3) and ss["b4.depth"].values == (2, 3, 4)


def test_a1_freezes_and_its_layers_follow_the_paper() -> None:
    """MnasNet-A1 freezes at a tiny width: 7 blocks of 1, 2, 3, 4, 2, 3, 1 layers."""
    space = MnasNetSpace(n_classes=10, width_mult=0.25)
    model = nf.freeze(space, hub.arch("mnasnet-a1")).eval()
    assert [len(block) for block in model.blocks] == [1, 2, 3, 4, 2, 3, 1]
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)


def test_random_and_evolution_search_run(tmp_path) -> None:
    """A short random and evolution search train every sampled MnasNet for one step."""
    both_searches(MnasNetSpace(n_classes=10, width_mult=0.1), tmp_path)


@pytest.mark.slow
def test_spos_and_nasb_supernets_of_the_fixed_width_space() -> None:
    """With one filter multiplier the shapes are fixed: SPOS and NASB build and search it."""
    space = MnasNetSpace(n_classes=3, width_mult=0.1, filter_multipliers=(1.0,))
    both_supernets(space, 3, classes=3)
