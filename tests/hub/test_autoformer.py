"""AutoFormer's spaces: Table 1's candidates, the searched networks, a search."""

from __future__ import annotations

import pytest
import torch

import nasforge as nf
from nasforge import hub
from nasforge.errors import SpaceError
from nasforge.hub.autoformer import AUTOFORMER_SPACES, AutoFormerSpace
from nasforge.oneshot import supernet

from ._mobile import both_searches

TINY = {
    "n_classes": 10, "image_size": 32, "patch": 8, "embed_dims": (16, 24), "heads": (1, 2),
    "depths": (1, 2), "mlp_ratios": (2.0, 3.0),
}  # fmt: skip


def test_table_1_candidates() -> None:
    """The three supernets have Table 1's embedding widths, heads and depths."""
    assert AUTOFORMER_SPACES["tiny"]["embed_dims"] == (192, 216, 240)
    assert AUTOFORMER_SPACES["small"]["heads"] == (5, 6, 7)
    assert AUTOFORMER_SPACES["base"]["depths"] == (14, 15, 16)
    ss = AutoFormerSpace(**TINY).search_space()  # type: ignore[arg-type]
    assert ss.size == 2 * 2 * (2 * 2) ** 2


def test_autoformer_tiny_freezes_with_its_layers() -> None:
    """AutoFormer-T freezes on small images: 13 layers, 3 heads of 64 but 4 in layer 10."""
    space = hub.space("autoformer-tiny", n_classes=10, image_size=32)
    model = nf.freeze(space, hub.arch("autoformer-tiny")).eval()
    assert len(model.layers) == 13
    assert [layer.attn.heads for layer in model.layers].count(4) == 1
    assert model.layers[10].attn.qkv.out_features == 3 * 4 * 64
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)


def test_random_and_evolution_search_run(tmp_path) -> None:
    """A short random and evolution search train every sampled network for one step."""
    both_searches(AutoFormerSpace(**TINY), tmp_path, shape=(3, 32, 32))  # type: ignore[arg-type]


def test_path_supernets_refuse_its_shape_changing_choices() -> None:
    """Every decision changes a width, so a path supernet is refused with the labels named."""
    with pytest.raises(SpaceError, match="embed_dim"):
        supernet(AutoFormerSpace(**TINY), "spos")  # type: ignore[arg-type]
