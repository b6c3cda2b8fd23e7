"""ProxylessNAS's space: its size, the three published networks, searches and supernets."""

from __future__ import annotations

import pytest
import torch

import nasforge as nf
from nasforge import hub
from nasforge.hub.proxylessnas import PROXYLESS_OPS, ProxylessNASSpace

from ._mobile import both_searches, both_supernets

TINY = (8, 8, 8, 8, 8, 8, 16, 16, 32)


def test_size_six_ops_on_first_layers_seven_elsewhere() -> None:
    """21 layers: 6 stage-first layers of 6 inverted residuals, 15 others with zero too."""
    ss = ProxylessNASSpace(n_classes=10, widths=TINY).search_space()
    assert ss.size == 6**6 * 7**15
    assert ss["s1.0"].values == PROXYLESS_OPS and ss["s1.1"].values == (*PROXYLESS_OPS, "zero")


@pytest.mark.parametrize("name", ["proxylessnas-gpu", "proxylessnas-cpu", "proxylessnas-mobile"])
def test_published_networks_freeze(name: str) -> None:
    """Each published network freezes on a tiny backbone; its zero layers are skipped."""
    arch = hub.arch(name)
    model = nf.freeze(ProxylessNASSpace(n_classes=10, widths=TINY), arch).eval()
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    n_zero = sum(v == "zero" for v in arch.values())
    assert sum(type(m).__name__ == "Zero" for m in model.modules()) == n_zero


def test_random_and_evolution_search_run(tmp_path) -> None:
    """A short random and evolution search train every sampled network for one step."""
    both_searches(ProxylessNASSpace(n_classes=10, widths=TINY), tmp_path)


def test_spos_and_nasb_supernets() -> None:
    """SPOS and NASB build supernets of the space (zero is a candidate) and search it."""
    both_supernets(ProxylessNASSpace(n_classes=3, widths=TINY), 3, classes=3)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, params",
    [("proxylessnas-mobile", 4_080_512), ("proxylessnas-gpu", 7_119_848),
     ("proxylessnas-cpu", 4_361_648)],
)  # fmt: skip
def test_published_networks_have_the_reference_parameter_counts(name: str, params: int) -> None:
    """At the paper's setting each network has exactly the parameters of the reference
    implementation's published configuration (the paper gives none)."""
    assert hub.profile(hub.model(name), hub.example_input(name)).params == params
