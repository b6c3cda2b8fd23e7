"""Tests of mutators on a plain base model."""

import pytest
import torch
from torch import fx, nn

import nasforge as nf
from nasforge.errors import ArchitectureError, SpaceError
from nasforge.spaces import DigitsBase, digits_mutated_space
from nasforge.spaces.cnn import ConvBNReLU
from tests.handwritten import HandMutated, n_params


def test_three_mutators_declare_their_decisions() -> None:
    """Operator, input and insert mutators each add labelled decisions."""
    ss = digits_mutated_space().search_space()
    assert list(ss) == ["op/conv1", "op/conv2", "skip", "insert/down"]
    assert [d.kind for d in ss.decisions] == ["layer", "layer", "input", "layer"]
    assert ss.size == 3 * 3 * 2 * 3


def test_every_architecture_matches_handwritten() -> None:
    """Each of the 54 architectures freezes to the hand-written network's parameters and runs."""
    space = digits_mutated_space()
    x = torch.randn(3, 1, 8, 8)
    for arch in space.search_space().grid():
        model = nf.freeze(space, arch)
        assert isinstance(model, fx.GraphModule)
        assert n_params(model) == n_params(HandMutated(arch)), arch
        model(x).sum().backward()


def test_base_model_is_untouched_and_history_recorded() -> None:
    """Freezing never edits the base model; the frozen model records its mutations."""
    base = DigitsBase()
    before = {k: v.clone() for k, v in base.state_dict().items()}
    space = nf.MutatedSpace(
        base, [nf.InsertMutator("conv1", {"drop": lambda: nn.Dropout()})], leaves=(ConvBNReLU,)
    )
    model = nf.freeze(space, {"insert/conv1": "drop"})
    assert all(torch.equal(before[k], v) for k, v in base.state_dict().items())
    assert [(m.label, m.value) for m in nf.mutation_history(model)] == [("insert/conv1", "drop")]
    assert torch.jit.script(model) is not None


def test_custom_mutator_with_primitives() -> None:
    """A user mutator deletes a node and creates one, choosing its operator."""

    class SwapAct(nf.Mutator):
        def mutate(self, graph: nf.space.MutableGraph) -> None:
            for node in graph.nodes(nn.ReLU):
                act = self.choose({"relu": nn.ReLU, "gelu": nn.GELU}, label=f"act/{node.name}")
                new = graph.create_node(act(), node.args, f"act_{node.name}")
                node.replace_all_uses_with(new)
                graph.delete_node(node)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.act, self.fc2 = nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2)

        def forward(self, x):
            return self.fc2(self.act(self.fc1(x)))

    space = nf.MutatedSpace(Net(), [SwapAct()])
    assert space.search_space()["act/act"].values == ("relu", "gelu")
    model = nf.freeze(space, {"act/act": "gelu"})
    assert any(isinstance(m, nn.GELU) for m in model.modules())
    assert not any(isinstance(m, nn.ReLU) for m in model.modules())
    assert model(torch.randn(2, 4)).shape == (2, 2)


def test_mutator_errors_are_clear() -> None:
    """No match, an untraceable model and a bad architecture give nasforge errors."""
    with pytest.raises(SpaceError, match="matches no"):
        nf.MutatedSpace(DigitsBase(), [nf.OperatorMutator(nn.LSTM, {"a": nn.Identity()})])

    class Dynamic(nn.Module):
        def forward(self, x):
            return x if x.sum() > 0 else -x

    with pytest.raises(SpaceError, match="cannot trace"):  # graph mutators need a graph
        nf.MutatedSpace(Dynamic(), [nf.InsertMutator("*", {"none": None})])
    space = digits_mutated_space()
    with pytest.raises(ArchitectureError, match="'skip'"):
        nf.freeze(space, {**space.search_space().default(), "skip": 5})
    with pytest.raises(SpaceError, match="not a model"):
        space(torch.randn(1, 1, 8, 8))


def test_space_moves_and_casts_like_a_module() -> None:
    """``.to``/``.double`` on a MutatedSpace cast its weights (nn.Module's ``_apply`` is not
    shadowed by the mutator machinery), and the space still freezes afterwards."""
    base = DigitsBase()
    space = nf.MutatedSpace(
        base, [nf.InsertMutator("conv1", {"drop": lambda: nn.Dropout()})], leaves=(ConvBNReLU,)
    )
    assert space.double() is space
    assert all(p.dtype == torch.float64 for p in space.parameters())
    model = nf.freeze(space, {"insert/conv1": "drop"})
    assert all(p.dtype == torch.float64 for p in model.parameters())


def test_operator_mutator_refuses_a_candidate_that_is_no_module() -> None:
    """An OperatorMutator candidate of None is refused when frozen, naming the candidate,
    instead of leaving a graph that calls None."""

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc, self.act = nn.Linear(4, 4), nn.ReLU()

        def forward(self, x):
            return self.act(self.fc(x))

    space = nf.MutatedSpace(Net(), [nf.OperatorMutator(nn.ReLU, {"id": nn.Identity(), "no": None})])
    assert nf.freeze(space, {"op/act": "id"})(torch.randn(2, 4)).shape == (2, 4)
    with pytest.raises(SpaceError, match="candidate None gives no module"):
        nf.freeze(space, {"op/act": "no"})


class _RMSNorm(nn.Module):
    """An RMSNorm written out, as Llama's is: torch.fx traces through it into several ops."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


class _NormedNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.norm = _RMSNorm(4)

    def forward(self, x):
        return self.norm(self.fc(x))


def test_a_glob_matching_ops_inside_a_module_names_the_module_and_leaves():
    """A glob that selects the inner operations of an RMSNorm (not the module) is refused
    with the module's path and class and the fix (leaves=); with leaves= the norm is one
    module call and the insertion goes after it."""
    insert = nf.InsertMutator("norm", {"none": None, "relu": nn.ReLU})
    with pytest.raises(SpaceError) as info:
        nf.MutatedSpace(_NormedNet(), [insert])
    text = str(info.value)
    assert "operations inside module 'norm' (_RMSNorm)" in text
    assert "leaves=[_RMSNorm]" in text and "nf.ModuleMutator('norm', ...)" in text
    space = nf.MutatedSpace(_NormedNet(), [insert], leaves=[_RMSNorm])
    assert list(space.search_space()) == ["insert/norm"]
    model = nf.freeze(space, {"insert/norm": "relu"})
    assert (model(torch.randn(3, 4)) >= 0).all()
