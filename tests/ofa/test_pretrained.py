"""Tests of loading published once-for-all supernets: equivalence with the ``ofa`` package's own
network (random weights, fixed seed) and strict, named failures."""

from __future__ import annotations

import random

import pytest
import torch

from nasforge.errors import StoreError
from nasforge.ofa.mobilenet import extract
from nasforge.ofa.pretrained import load_pretrained, ofa_to_nasforge_key
from nasforge.ofa.published import from_ofa_arch, published_spec
from tests.ofa._ofa_ref import require_ofa
from tests.ofa._synthetic import ofa_layout_state


def _ofa_supernet(width: float) -> torch.nn.Module:
    """Returns the ofa package's MobileNetV3 supernet with random weights and statistics."""
    from ofa.imagenet_classification.elastic_nn.networks import OFAMobileNetV3 as RefNet

    torch.manual_seed(0)
    net = RefNet(n_classes=10, width_mult=width, ks_list=[3, 5, 7],
                 expand_ratio_list=[3, 4, 6], depth_list=[2, 3, 4])  # fmt: skip
    with torch.no_grad():  # non-trivial transforms and BN statistics exercise every mapping
        for name, t in net.state_dict().items():
            if name.endswith("_matrix"):
                t.add_(0.05 * torch.randn_like(t))
            elif name.endswith("running_var"):
                t.uniform_(0.5, 2.0)
            elif name.endswith(("running_mean", ".bias")):
                t.normal_(0.0, 0.1)
            elif name.endswith("bn.weight") or ".bn.bn.weight" in name:
                t.uniform_(0.5, 1.5)
    return net.eval()


def _legacy_layout(state: dict) -> dict:
    """Returns ``state`` with the older ``.mobile_inverted_conv.`` names."""
    return {k.replace(".conv.", ".mobile_inverted_conv.", 1) if k.startswith("blocks.") else k: v
            for k, v in state.items()}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("width, legacy", [(1.0, False), (1.2, True)])
def test_published_supernet_matches_ofa(tmp_path, width, legacy):
    """Supernet and extracted sub-network equal ofa's outputs for random sub-networks."""
    require_ofa()
    ref = _ofa_supernet(width)
    state = ref.state_dict()
    if legacy:
        state = _legacy_layout(state)
    path = tmp_path / f"ofa_mbv3_d234_e346_k357_w{width}"
    torch.save({"state_dict": state}, path)
    spec = published_spec(width_mult=width, n_classes=10, resolutions=(128, 160, 192))
    net = load_pretrained(path, spec).eval()
    space = net.search_space()
    rng = random.Random(0)
    for trial in range(3):
        ks = [rng.choice([3, 5, 7]) for _ in range(20)]
        es = [rng.choice([3, 4, 6]) for _ in range(20)]
        ds = [rng.choice([2, 3, 4]) for _ in range(5)]
        side = (128, 160, 192)[trial]
        ref.set_active_subnet(ks=ks, e=es, d=ds)
        arch = from_ofa_arch(space, {"ks": ks, "e": es, "d": ds, "r": [side]})
        x = torch.randn(2, 3, side, side)
        with torch.no_grad():
            want = ref(x)
            sub_ref = ref.get_active_subnet(preserve_weight=True).eval()
            net.set_active(arch)
            got = net(x)
            sub = extract(net, arch).eval()
            got_sub = sub(x)
            want_sub = sub_ref(x)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(got_sub, want, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(want_sub, want, rtol=1e-4, atol=1e-4)


def test_key_mapping_covers_both_layouts():
    """Both key layouts and the nested dynamic names map to the same nasforge tensor."""
    new = "blocks.5.conv.depth_conv.se.fc.reduce.weight"
    old = "blocks.5.mobile_inverted_conv.depth_conv.se.fc.reduce.weight"
    want = "stages.1.0.se.reduce.weight"
    assert ofa_to_nasforge_key(new, 4) == ofa_to_nasforge_key(old, 4) == want
    assert ofa_to_nasforge_key("blocks.4.conv.depth_conv.conv.7to5_matrix", 4) == (
        "stages.0.3.dw_conv.transforms.7to5"
    )
    assert ofa_to_nasforge_key("blocks.1.conv.point_linear.bn.bn.running_var", 4) == (
        "stages.0.0.project_bn.running_var"
    )
    assert ofa_to_nasforge_key("blocks.1.conv.point_linear.bn.running_var", 4) == (
        "stages.0.0.project_bn.running_var"
    )
    assert ofa_to_nasforge_key("blocks.0.conv.depth_conv.conv.weight", 4) == "first.dw_conv.weight"
    assert ofa_to_nasforge_key("classifier.linear.weight", 4) == "head.classifier.weight"
    assert ofa_to_nasforge_key("blocks.1.conv.mystery.weight", 4) is None


def test_load_is_strict_and_names_the_first_mismatch(tmp_path):
    """A wrong shape, an unknown tensor and a missing tensor each raise StoreError naming it."""
    state = ofa_layout_state()
    good = tmp_path / "ofa_mbv3_d234_e346_k357_w1.0"
    torch.save({"state_dict": state}, good)
    net = load_pretrained(good)
    assert net.spec.width_mult == 1.0 and net.spec.n_classes == 10 and net.spec.has_se(1)

    bad = dict(state)
    bad["blocks.6.conv.point_linear.conv.conv.weight"] = torch.zeros(40, 100, 1, 1)
    torch.save(bad, tmp_path / "shape.pth")
    with pytest.raises(StoreError, match=r"blocks\.6\.conv\.point_linear.*\(40, 100, 1, 1\)"):
        load_pretrained(tmp_path / "shape.pth", net.spec)

    extra = dict(state, **{"blocks.3.conv.depth_conv.attention.weight": torch.zeros(1)})
    torch.save(extra, tmp_path / "extra.pth")
    with pytest.raises(StoreError, match="attention"):
        load_pretrained(tmp_path / "extra.pth", net.spec)

    missing = {k: v for k, v in state.items() if "blocks.20.conv.depth_conv.se" not in k}
    torch.save(missing, tmp_path / "missing.pth")
    with pytest.raises(StoreError, match=r"stages\.4\.3\.se"):
        load_pretrained(tmp_path / "missing.pth", net.spec)

    with pytest.raises(StoreError, match="no checkpoint"):
        load_pretrained(tmp_path / "absent.pth")


def test_width_is_read_off_an_unnamed_file(tmp_path):
    """Without a net id in the file name, the width comes from the tensors (w1.2 here)."""
    torch.save({"state_dict": ofa_layout_state(1.2)}, tmp_path / "supernet.pth")
    net = load_pretrained(tmp_path / "supernet.pth")
    assert net.spec.width_mult == 1.2 and net.spec.ch(net.spec.stem_channels) == 24


def test_se_layer_sorts_channels_and_builds_from_its_shape():
    """Sorting hidden channels keeps an SE layer's function; a table shape with SE builds."""
    from nasforge.ofa.latency import layer_shapes
    from nasforge.ofa.layers import DynamicMBConv
    from nasforge.ofa.mobilenet import build_layer
    from nasforge.ofa.spaces import OFASearchSpace

    layer = DynamicMBConv(16, 16, 6, 5, 1, True, se=True).eval()
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(0.1 * torch.randn_like(p))
    x = torch.randn(2, 16, 8, 8)
    with torch.no_grad():
        before = layer(x)
        layer.sort_channels()
        after = layer(x)
    torch.testing.assert_close(after, before, rtol=1e-5, atol=1e-5)
    space = OFASearchSpace(published_spec(1.0, resolutions=(160,)))
    shape = next(s for s in layer_shapes(space, space.largest()) if s.se)
    built = build_layer(shape).eval()
    assert built.se.reduce.weight.shape == (shape.se, shape.mid, 1, 1)
    with torch.no_grad():
        out = built(torch.randn(1, shape.cin, shape.side, shape.side))
    assert out.shape == (1, shape.cout, shape.side_out, shape.side_out)
