"""Supernet conversion, node discovery, export and weight inheritance."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import nasforge as nf
from nasforge.errors import SpaceError
from nasforge.oneshot import activate, inherit_weights, supernet
from nasforge.oneshot.supernet import MixedInput, MixedLayer, MixedRepeat

from ._spaces import ToySpace

ALGOS = ["darts", "nasb", "nasp", "proxylessnas", "spos"]


@pytest.mark.parametrize("algo", ALGOS)
def test_conversion_leaves_space_unchanged(toy: ToySpace, algo: str) -> None:
    """Converting keeps the recorded space intact: its choices still refuse forward."""
    net = supernet(toy, algo, example=torch.randn(2, 1, 8, 8))
    assert isinstance(toy.e0, nf.LayerChoice) and isinstance(toy.blocks, nf.Repeat)
    with pytest.raises(SpaceError):
        toy(torch.randn(2, 1, 8, 8))
    kinds = {
        base
        for m in net.mixed()
        for base in (MixedLayer, MixedInput, MixedRepeat)
        if isinstance(m, base)
    }
    assert (
        kinds == {MixedLayer, MixedInput, MixedRepeat} and len(net.mixed()) == 7
    )  # e0 e1 node depth + 3 blocks
    assert net(torch.randn(2, 1, 8, 8)).shape == (2, 3)


@pytest.mark.parametrize("algo", ["darts", "nasb", "nasp"])
def test_export_freezes(toy: ToySpace, algo: str) -> None:
    """The exported arch is valid for the space and freezes to a runnable model."""
    net = supernet(toy, algo, example=torch.randn(2, 1, 8, 8))
    with torch.no_grad():
        for p in net.arch_parameters():
            p.copy_(torch.randn_like(p))
    arch = net.export()
    assert toy.search_space().validate(arch) == arch
    assert nf.freeze(toy, arch)(torch.randn(2, 1, 8, 8)).shape == (2, 3)


def test_export_follows_parameters(toy: ToySpace) -> None:
    """Export takes the argmax layer, the strongest edge and the argmax depth."""
    net = supernet(toy, "darts", example=torch.randn(2, 1, 8, 8))
    a = {lb: net.arch_params[k] for lb, k in net.key_of.items()}
    with torch.no_grad():
        a["e0"].copy_(torch.tensor([0.0, 0.0, 5.0]))  # pool
        a["e1"].copy_(torch.tensor([1.0, 0.0]))
        a["depth"].copy_(torch.tensor([0.0, 0.0, 3.0]))
    arch = net.export()
    assert arch["e0"] == "pool" and arch["node"] == 0 and arch["depth"] == 3


def test_nodes_found(toy: ToySpace, tiny_cell: nn.Module) -> None:
    """An InputChoice fed by LayerChoices becomes a node with those edges, in input order."""
    net = supernet(toy, "nasb", example=torch.randn(2, 1, 8, 8))
    node = next(m for m in net.mixed() if isinstance(m, MixedInput))
    assert [e.label for e in node.edges] == ["e0", "e1"]
    cell = supernet(tiny_cell, "nasb", example=torch.randn(2, 1, 8, 8))
    nodes = [m for m in cell.mixed() if isinstance(m, MixedInput)]
    assert len(nodes) == 3 * 2 and all(len(n.edges) == n.n_candidates for n in nodes)


def test_darts_depth_mixture(toy: ToySpace) -> None:
    """DARTS mixes Repeat depths: the weighted sum of the outputs after each candidate depth."""
    net = supernet(toy, "darts")
    rep = net.model.blocks
    x = torch.randn(2, 4, 8, 8)
    w = torch.softmax(rep.arch(), 0)
    y, outs = x, []
    for b in rep.blocks():
        y = b(y)
        outs.append(y)
    expected = w[0] * outs[0] + w[1] * outs[1] + w[2] * outs[2]
    torch.testing.assert_close(rep(x), expected)


def test_value_choice_is_refused() -> None:
    """A shape-changing value choice gives a SpaceError naming its label."""

    class Wide(nf.ModelSpace):
        def __init__(self) -> None:
            super().__init__()
            c = nf.choice([4, 8], label="width")
            self.conv = nn.Conv2d(1, c, 3)

    with pytest.raises(SpaceError, match="width"):
        supernet(Wide(), "darts")


def test_derived_depth_is_refused() -> None:
    """A Repeat whose depth is an expression gives a SpaceError saying how to fix it."""

    class Derived(nf.ModelSpace):
        def __init__(self) -> None:
            super().__init__()
            d = nf.choice([1, 2], label="d")
            self.op = nf.LayerChoice([nn.Identity(), nn.ReLU()], label="op")
            self.rep = nf.Repeat(nn.Identity(), d * 2)

    with pytest.raises(SpaceError, match="depth"):
        supernet(Derived(), "darts")


def test_concat_input_choice_is_refused() -> None:
    """An InputChoice that concatenates several chosen inputs cannot be mixed."""

    class Cat(nf.ModelSpace):
        def __init__(self) -> None:
            super().__init__()
            self.pick = nf.InputChoice(3, n_chosen=2, reduction="concat", label="pick")

    with pytest.raises(SpaceError, match="pick"):
        supernet(Cat(), "nasb")


def test_unknown_algorithm() -> None:
    """An unknown algorithm name is a ConfigError listing the known ones."""
    with pytest.raises(nf.errors.ConfigError, match="darts"):
        supernet(ToySpace(), "no_such_algorithm")


@pytest.mark.parametrize("space_name", ["toy", "tiny_cell"])
def test_spos_inheritance_matches_supernet(space_name: str, request: pytest.FixtureRequest) -> None:
    """A frozen model with inherited weights computes what the supernet computes on that path."""
    space = request.getfixturevalue(space_name)
    x = torch.randn(4, 1, 8, 8)
    net = supernet(space, "spos", example=x[:2])
    for seed in range(3):
        arch = space.search_space().sample(seed)
        activate(net, arch)
        net.train()
        net(x)  # move batch-norm statistics away from their defaults
        net.eval()
        model = inherit_weights(net, arch).eval()
        torch.testing.assert_close(model(x), net(x))


def test_a_candidate_called_skip_mixes_and_a_reserved_name_is_one_clear_error() -> None:
    """A candidate named ``skip`` (a skip connection) is mixed by every algorithm; a name
    the mixed op itself uses is a SpaceError naming the candidate."""
    import nasforge as nf
    from nasforge.errors import SpaceError
    from nasforge.oneshot import supernet as make

    class Net(nf.ModelSpace):
        def __init__(self, other: str = "skip") -> None:
            super().__init__()
            self.op = nf.LayerChoice({"lin": lambda: nn.Linear(4, 4), other: nn.Identity},
                                     label="op")  # fmt: skip
            self.fc = nn.Linear(4, 2)

        def forward(self, x):
            return self.fc(self.op(x))

    for algorithm in ("darts", "nasb", "spos", "proxylessnas", "enas"):
        net = make(Net(), algorithm)
        assert net(torch.randn(3, 4)).shape == (3, 2)
    with pytest.raises(SpaceError, match="candidate name .arch."):
        make(Net("arch"), "spos")
