"""SPOS's ShuffleNetV2 space: its 4^20 size, the searched network, searches and supernets."""

from __future__ import annotations

import torch

import nasforge as nf
from nasforge import hub
from nasforge.hub.spos import SPOS_OPS, SposSpace

from ._mobile import both_searches, both_supernets

TINY = {"widths": (16, 24, 32, 48), "stem": 8, "features": 32}


def test_size_is_four_blocks_over_20_layers() -> None:
    """20 layers of 4 choice blocks: 4^20, the size the paper states."""
    ss = SposSpace(n_classes=10, **TINY).search_space()
    assert ss.size == 4**20 == hub.space_info("spos").size_paper
    assert [d.values for d in ss.decisions] == [SPOS_OPS] * 20


def test_searched_network_freezes_and_its_shuffle_units_keep_shapes() -> None:
    """The searched network freezes at tiny widths; each stage halves the side."""
    model = nf.freeze(SposSpace(n_classes=10, **TINY), hub.arch("spos")).eval()
    x = torch.randn(2, 3, 32, 32)
    assert model.layers[:4](model.stem(x)).shape == (2, 16, 8, 8)
    assert model(x).shape == (2, 10)


def test_random_and_evolution_search_run(tmp_path) -> None:
    """A short random and evolution search train every sampled network for one step."""
    both_searches(SposSpace(n_classes=10, **TINY), tmp_path)


def test_spos_and_nasb_supernets() -> None:
    """SPOS (the paper's own method) and NASB build supernets of the space and search it."""
    both_supernets(SposSpace(n_classes=3, **TINY), 3, classes=3)
