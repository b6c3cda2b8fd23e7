"""The five zero-cost proxies: their defining properties, the registry and determinism."""

import math

import pytest
import torch
from torch import nn

import nasforge as nf
from nasforge.errors import ConfigError
from nasforge.proxies import get_proxy, linearised, list_proxies, naswot, score_arch, synflow
from nasforge.spaces.bench_cell import BenchCellSpace

ALL = ["flops", "grad_norm", "jacob_cov", "naswot", "params", "snip", "synflow"]
LABELS = [f"e{j}_{i}" for j in range(1, 4) for i in range(j)]


def _batch(n: int = 12, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 1, 12, 12, generator=g), torch.randint(0, 10, (n,), generator=g)


def _freeze(space: BenchCellSpace, arch: dict) -> nn.Module:
    torch.manual_seed(3)
    return nf.freeze(space, arch)


def _snapshot(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_registry_names_the_five_and_rejects_unknown_names() -> None:
    """list_proxies names the five and the sizes; get_proxy passes functions, explains typos."""
    assert list_proxies() == ALL
    assert get_proxy(synflow) is synflow and get_proxy("jacob-cov") is get_proxy("jacob_cov")
    with pytest.raises(ConfigError, match="synflow"):
        get_proxy("synflwo")


@pytest.mark.parametrize("name", ALL)
def test_a_proxy_leaves_the_model_untouched_and_is_deterministic(name: str) -> None:
    """Weights, buffers, gradients and mode are as before; the same input gives the same value."""
    space = BenchCellSpace(channels=4)
    arch = dict.fromkeys(LABELS, "conv") | {"e2_1": "pool", "e3_0": "skip_connect"}
    model = _freeze(space, arch)
    model.train()
    x, y = _batch()
    before = _snapshot(model)
    first = get_proxy(name)(model, x, y)
    after = _snapshot(model)
    assert before.keys() == after.keys()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert all(p.grad is None for p in model.parameters())
    assert model.training
    assert get_proxy(name)(model, x, y) == first
    assert math.isfinite(first)


def test_synflow_ignores_input_values_and_linearises_to_positive_weights() -> None:
    """SynFlow depends on the input's shape only; its linearised copy has no negative weight."""
    model = _freeze(BenchCellSpace(channels=4), dict.fromkeys(LABELS, "conv"))
    assert any(bool((p < 0).any()) for p in model.parameters())
    assert all(bool((p >= 0).all()) for p in linearised(model).parameters())
    x1, y1 = _batch(seed=1)
    x2, y2 = _batch(seed=2)
    assert synflow(model, x1, y1) == synflow(model, x2 * 5, y2)
    # the score does depend on the weights: a different init gives another value
    torch.manual_seed(4)
    other = BenchCellSpace(channels=4).freeze(dict.fromkeys(LABELS, "conv"))
    assert synflow(other, x1, y1) != synflow(model, x1, y1)


def test_naswot_grows_with_distinct_activation_patterns() -> None:
    """A ReLU layer whose units split the batch scores higher than one they barely split."""
    x = torch.randn(16, 8, generator=torch.Generator().manual_seed(0))
    y = torch.zeros(16, dtype=torch.long)

    def net(bias: float) -> nn.Module:
        torch.manual_seed(0)
        lin = nn.Linear(8, 64)
        with torch.no_grad():
            lin.bias.fill_(bias)  # a large bias turns every unit on for every input
        return nn.Sequential(lin, nn.ReLU(), nn.Linear(64, 2))

    distinct, alike = naswot(net(0.0), x, y), naswot(net(3.0), x, y)
    assert distinct > alike


@pytest.mark.parametrize("name", ALL)
def test_the_all_none_cell_scores_lowest(name: str) -> None:
    """The architecture whose cells pass nothing scores no higher than any sampled one."""
    space = BenchCellSpace(channels=4)
    x, y = _batch()
    none = score_arch(space, dict.fromkeys(LABELS, "none"), name, x, y)
    search = space.search_space()
    others = [score_arch(space, search.sample(s), name, x, y) for s in range(6)]
    conv = score_arch(space, dict.fromkeys(LABELS, "conv"), name, x, y)
    assert none <= min(others) and none < conv


def test_jacob_cov_scores_minus_inf_when_the_output_has_no_path_from_the_input() -> None:
    """A model whose output ignores its input scores -inf (undefined correlations), no error."""

    class Constant(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.logits = nn.Parameter(torch.zeros(10))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.logits.expand(len(x), 10)

    x, y = _batch()
    assert get_proxy("jacob_cov")(Constant(), x, y) == -math.inf


def test_score_arch_is_seeded_and_keeps_the_global_random_state() -> None:
    """The same seed gives the same score, another seed another; torch's RNG is untouched."""
    space = BenchCellSpace(channels=4)
    arch = dict.fromkeys(LABELS, "conv")
    x, y = _batch()
    state = torch.random.get_rng_state()
    a = score_arch(space, arch, "snip", x, y, seed=0)
    assert torch.equal(state, torch.random.get_rng_state())
    assert a == score_arch(space, arch, "snip", x, y, seed=0)
    assert a != score_arch(space, arch, "snip", x, y, seed=1)


class _LazyHead(nf.ModelSpace):
    def __init__(self) -> None:
        super().__init__()
        self.op = nf.LayerChoice({"a": lambda: nn.Linear(6, 8), "b": lambda: nn.Linear(6, 3)},
                                 label="op")  # fmt: skip
        self.fc = nn.LazyLinear(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.op(x)))


@pytest.mark.parametrize("name", ALL)
def test_score_arch_shapes_lazy_modules_first(name: str) -> None:
    """A frozen model with a lazy layer is scored like any other, seeded the same way."""
    x, y = torch.randn(8, 6), torch.randint(0, 2, (8,))
    for op in ("a", "b"):
        a = score_arch(_LazyHead(), {"op": op}, name, x, y, seed=0)
        assert a == score_arch(_LazyHead(), {"op": op}, name, x, y, seed=0)
        assert not math.isnan(a)
