"""FBNet's space: its 9^22 size, FBNet-A/B/C, searches and supernets."""

from __future__ import annotations

import pytest
import torch

import nasforge as nf
from nasforge import hub
from nasforge.hub.fbnet import FBNET_OPS, FBNetSpace

from ._mobile import both_searches, both_supernets


def test_size_is_nine_blocks_over_22_layers() -> None:
    """22 layers of Table 2's 9 candidate blocks: 9^22, the size the paper states."""
    ss = FBNetSpace(n_classes=10, width_mult=0.1).search_space()
    assert ss.size == 9**22 == hub.space_info("fbnet").size_paper
    assert [d.values for d in ss.decisions] == [FBNET_OPS] * 22


@pytest.mark.parametrize("name", ["fbnet-a", "fbnet-b", "fbnet-c"])
def test_published_networks_freeze(name: str) -> None:
    """FBNet-A/B/C freeze at a tiny width; a skip that changes the shape is a 1×1 conv."""
    model = nf.freeze(FBNetSpace(n_classes=10, width_mult=0.1), hub.arch(name)).eval()
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)


def test_random_and_evolution_search_run(tmp_path) -> None:
    """A short random and evolution search train every sampled network for one step."""
    both_searches(FBNetSpace(n_classes=10, width_mult=0.1), tmp_path)


@pytest.mark.slow
def test_spos_and_nasb_supernets() -> None:
    """SPOS and NASB build supernets of the space and search it."""
    both_supernets(FBNetSpace(n_classes=3, width_mult=0.1), 3, classes=3)


def test_released_fbnet_a_and_c_have_the_papers_parameters() -> None:
    """FBNet-A (with the released 1504-channel head) and FBNet-C, built at 224×224 and 1000
    classes, have the parameters of the paper's Table 3 within 2% (counted without a forward)."""
    for name, paper in (("fbnet-a", 4.3e6), ("fbnet-c", 5.5e6)):
        params = sum(p.numel() for p in hub.model(name).parameters())
        assert abs(params / paper - 1) < 0.02, (name, params)
    assert hub.arch_info("fbnet-a").space_kwargs["last_channels"] == 1504
