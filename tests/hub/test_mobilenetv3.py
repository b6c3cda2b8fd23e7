"""MobileNetV3 through once-for-all's space: sizes, MobileNetV3-Large, searches, the supernet."""

from __future__ import annotations

import torch

import nasforge as nf
from nasforge import hub
from nasforge.ofa.mobilenet import OFAMobileNetV3, extract

from ._mobile import both_searches


def test_the_hub_space_is_once_for_alls_and_has_its_size() -> None:
    """The hub's space is nasforge.ofa's own class; sizes are OFA's and CompOFA's counts."""
    space = hub.space("mobilenetv3", n_classes=10, width_mult=0.25)
    assert type(space) is OFAMobileNetV3
    assert space.search_space().size == (9**2 + 9**3 + 9**4) ** 5
    assert space.search_space().size == hub.space_info("mobilenetv3").size_paper
    assert hub.space("compofa", n_classes=10, width_mult=0.25).search_space().size == 243


def test_mobilenetv3_large_freezes() -> None:
    """MobileNetV3-Large freezes at a tiny width: depths 2, 3, 4, 2, 3."""
    space = hub.space("mobilenetv3", n_classes=10, width_mult=0.25)
    model = nf.freeze(space, hub.arch("mobilenetv3-large")).eval()
    assert [len(stage) for stage in model.stages] == [2, 3, 4, 2, 3]
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)


def test_random_and_evolution_search_run(tmp_path) -> None:
    """A short random and evolution search train every sampled network for one step."""
    both_searches(hub.space("mobilenetv3", n_classes=10, width_mult=0.25), tmp_path)


def test_the_elastic_supernet_runs_any_sampled_path() -> None:
    """The space is its own single-path supernet: an active path's output equals the frozen
    network's with the weights extracted."""
    supernet = hub.space("compofa", n_classes=10, width_mult=0.25).eval()
    x = torch.randn(2, 3, 32, 32)
    for seed in range(2):
        arch = supernet.set_active(supernet.search_space().sample(seed))
        torch.testing.assert_close(extract(supernet, arch).eval()(x), supernet(x))
