"""Module-level mutators: swapping submodules of an unmodified model without a graph."""

import copy
import pickle

import pytest
import torch
from torch import nn

import nasforge as nf
from nasforge.errors import ArchitectureError, SpaceError
from nasforge.run.refs import from_ref, to_ref


class Block(nn.Module):
    def __init__(self, d: int = 8, hidden: int = 16) -> None:
        super().__init__()
        self.up, self.act, self.down = nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, d)

    def forward(self, x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        if x.shape[-1] == 0:  # shape-dependent Python: torch.fx cannot trace it, export can
            return x
        return x + scale * self.down(self.act(self.up(x)))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] == 0:  # shape-dependent Python: torch.fx cannot trace it, export can
            return x
        for b in self.blocks:
            x = b(x, scale=0.5)
        return self.head(x)


def hidden_width(old: Block, width: int) -> Block:
    return Block(old.up.in_features, width)


def wrap_dropout(old: nn.Module) -> nn.Module:
    return nn.Sequential(old, nn.Dropout(0.0))


class NetSpace(nf.MutatedSpace):
    def __init__(self, widths: list[int]) -> None:
        super().__init__(Net(), [nf.ModuleMutator(Block, widths, factory=hidden_width)])


def test_type_glob_and_predicate_select_sites() -> None:
    """A type, a qualified-name glob and a predicate each give one labelled decision per site."""
    acts = {"relu": None, "gelu": nn.GELU(), "wrapped": wrap_dropout}
    space = nf.MutatedSpace(
        Net(),
        [
            nf.ModuleMutator(Block, [16, 32], factory=hidden_width, label="width"),
            nf.ModuleMutator("blocks.*.act", acts, label="act"),
            nf.ModuleMutator(lambda name, m: name == "head", {"same": None}, label="head"),
        ],
    )
    labels = list(space.search_space())
    assert labels == [
        "width/blocks.0",
        "width/blocks.1",
        "act/blocks.0.act",
        "act/blocks.1.act",
        "head/head",
    ]
    assert all(d.kind == "layer" for d in space.search_space().decisions)
    arch = {**space.search_space().default(), "width/blocks.1": 32, "act/blocks.0.act": "gelu"}
    arch["act/blocks.1.act"] = "wrapped"
    model = nf.freeze(space, arch)
    assert type(model) is Net  # the base model's own class, modules swapped
    assert model.blocks[1].up.out_features == 32 and model.blocks[0].up.out_features == 16
    assert isinstance(model.blocks[0].act, nn.GELU)
    assert isinstance(model.blocks[1].act, nn.Sequential)
    assert model(torch.randn(4, 8)).shape == (4, 3)
    assert [m.value for m in nf.mutation_history(model)] == list(arch.values())


def test_base_model_is_never_modified() -> None:
    """Freezing copies the base model; its modules and weights stay as they were."""
    base = Net()
    before = copy.deepcopy(base.state_dict())
    space = nf.MutatedSpace(base, [nf.ModuleMutator(Block, [4], factory=hidden_width)])
    model = nf.freeze(space, space.search_space().default())
    assert base.blocks[0].up.out_features == 16 and model.blocks[0].up.out_features == 4
    assert all(torch.equal(before[k], v) for k, v in base.state_dict().items())


def test_tie_makes_one_decision() -> None:
    """``tie=True`` labels every site with one decision."""
    space = nf.MutatedSpace(
        Net(), [nf.ModuleMutator(Block, [4, 8], factory=hidden_width, label="w", tie=True)]
    )
    assert list(space.search_space()) == ["w"]
    model = nf.freeze(space, {"w": 8})
    assert [b.up.out_features for b in model.blocks] == [8, 8]


def test_errors_name_the_problem() -> None:
    """No match, a bad value, a factory with non-plain values and an untraceable graph space
    give nasforge errors that say what to do."""
    with pytest.raises(SpaceError, match="selects no submodule"):
        nf.MutatedSpace(Net(), [nf.ModuleMutator(nn.LSTM, {"a": nn.Identity()})])
    with pytest.raises(SpaceError, match="plain values"):
        nf.ModuleMutator(Block, [nn.ReLU()], factory=hidden_width)
    space = nf.MutatedSpace(Net(), [nf.ModuleMutator(Block, [4], factory=hidden_width)])
    with pytest.raises(ArchitectureError):
        nf.freeze(space, {"module/blocks.0": 5, "module/blocks.1": 4})
    with pytest.raises(SpaceError, match="torch.fx cannot trace.*example_inputs.*ModuleMutator"):
        nf.MutatedSpace(Net(), [nf.InsertMutator("head", {"none": None})])


def test_graph_mutators_fall_back_to_torch_export() -> None:
    """With example inputs, an untraceable model is captured by torch.export; module-level and
    graph decisions combine, and globs match the module that computed a node."""
    x = torch.randn(2, 8)
    space = nf.MutatedSpace(
        Net(),
        [
            nf.ModuleMutator(Block, [4, 8], factory=hidden_width, tie=True, label="w"),
            nf.InsertMutator("head", {"none": None, "tanh": nn.Tanh}),
        ],
        example_inputs=(x,),
    )
    assert space.capture == "export"
    labels = list(space.search_space())
    assert labels[0] == "w" and len(labels) == 2 and labels[1].startswith("insert/")
    model = nf.freeze(space, {"w": 8, labels[1]: "tanh"})
    y = model(x)
    assert y.shape == (2, 3) and float(y.detach().abs().max()) <= 1.0  # the tanh after the head
    assert pickle.loads(pickle.dumps(space)).search_space() == space.search_space()
    graph_only = nf.MutatedSpace(Net(), [nf.InsertMutator("head", {"tanh": nn.Tanh})], (), (x,))
    clone = pickle.loads(pickle.dumps(graph_only))  # the exported graph is captured again
    frozen = nf.freeze(clone, {lb: "tanh" for lb in clone.search_space()})
    assert float(frozen(x).detach().abs().max()) <= 1.0


def test_subclass_records_its_arguments_and_pickles() -> None:
    """A MutatedSpace subclass is rebuilt from its reference; spaces pickle for spawned
    workers."""
    space = NetSpace([4, 8])
    again = from_ref(to_ref(space))
    assert again.search_space() == space.search_space()
    clone = pickle.loads(pickle.dumps(space))
    arch = space.search_space().sample(0)
    torch.manual_seed(0)
    a = nf.freeze(clone, arch)
    assert type(a) is Net


def test_supernet_tree_holds_every_candidate() -> None:
    """Each module-level site becomes a LayerChoice of all its candidates, labelled as the
    space's decision."""
    space = NetSpace([4, 8])
    tree = space.supernet_tree()
    site = tree.blocks[0]
    assert isinstance(site, nf.LayerChoice) and site.names == [4, 8]
    assert site.candidate(8).up.out_features == 8
    assert site.label == "module/blocks.0"
