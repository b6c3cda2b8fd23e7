"""Reversible stacks: inverse, reconstructed gradients against ordinary autograd, memory, errors."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import nasforge as nf
from nasforge.errors import SpaceError
from nasforge.oneshot import Supernet
from nasforge.oneshot.darts import Darts
from nasforge.oneshot.nasb import Nasb, NasbLayer, binarize
from nasforge.oneshot.peak_memory import peak_saved_bytes
from nasforge.oneshot.reversible import (
    Context,
    ReversibleLayer,
    ReversibleStack,
    set_reconstruct,
)


class Op(nn.Module):
    """Linear, activation, dropout; adds the mean of the context memory when there is one."""

    def __init__(self, c: int, act: nn.Module, p: float, ctx: Context | None = None) -> None:
        super().__init__()
        self.lin, self.act, self.drop, self.ctx = nn.Linear(c, c), act, nn.Dropout(p), ctx

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        out = self.drop(self.act(self.lin(h)))
        mem = self.ctx.get("memory") if self.ctx is not None else None
        return out if mem is None else out + mem.mean(1, keepdim=True)[..., : h.shape[-1]]


class Toy(nf.ModelSpace):
    """A reversible stack of ``depth`` layers of ``n`` searched splits over a linear embedding."""

    def __init__(self, d: int = 12, n: int = 3, depth: int = 3, p: float = 0.2) -> None:
        super().__init__()
        c, ctx = d // n, Context()

        def choice(i: int, k: int) -> nf.LayerChoice:
            ops = {
                "tanh": Op(c, nn.Tanh(), p, ctx),
                "gelu": Op(c, nn.GELU(), p, ctx),
                "id": nn.Identity(),
            }
            return nf.LayerChoice(ops, label=f"l{i}.g{k}")

        layers = [ReversibleLayer([choice(i, k) for k in range(n)]) for i in range(depth)]
        self.emb = nn.Linear(5, d)
        self.stack = ReversibleStack(layers, ctx)
        self.head = nn.Linear(d, 1)

    def forward(self, x: torch.Tensor, mem: torch.Tensor) -> torch.Tensor:
        return self.head(self.stack(self.emb(x), memory=mem)).sum()


def _grads(net: Supernet, algo: type, x: torch.Tensor, mem: torch.Tensor, rec: bool) -> list:
    set_reconstruct(net, rec)
    net.zero_grad(set_to_none=True)
    mem.grad = None
    torch.manual_seed(1)  # the same dropout masks for both runs
    if algo is Nasb:
        binarize(net)
    net(x, mem).backward()
    params = list(net.weights()) + list(net.arch_parameters())
    return [None if p.grad is None else p.grad.clone() for p in params] + [mem.grad.clone()]


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 1e-5)])
def test_darts_reconstructed_gradients_equal_autograd(dtype: torch.dtype, tol: float) -> None:
    """Reversible DARTS gives every weight, alpha and the memory autograd's gradient (dropout)."""
    net = Supernet(Toy(p=0.2), Darts).to(dtype)
    x = torch.randn(4, 7, 5, dtype=dtype)
    mem = torch.randn(4, 3, 12, dtype=dtype, requires_grad=True)
    rev, ref = _grads(net, Darts, x, mem, True), _grads(net, Darts, x, mem, False)
    assert all(g is not None for g in ref)
    for a, b in zip(rev, ref):
        assert _rel(a, b) < tol


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 1e-5)])
@pytest.mark.parametrize("p", [0.0, 0.2])
def test_nasb_reconstructed_gradients_equal_autograd(
    dtype: torch.dtype, tol: float, p: float
) -> None:
    """Reversible NASB: weights and architecture entries match ordinary NASB (dropout on/off)."""
    net = Supernet(Toy(p=p), Nasb).to(dtype)
    with torch.no_grad():
        for a in net.arch_parameters():
            a.copy_(torch.randn_like(a))
    x = torch.randn(4, 7, 5, dtype=dtype)
    mem = torch.randn(4, 3, 12, dtype=dtype, requires_grad=True)
    rev, ref = _grads(net, Nasb, x, mem, True), _grads(net, Nasb, x, mem, False)
    for a, b in zip(rev, ref):
        assert (a is None) == (b is None)
        if a is not None:
            assert _rel(a, b) < tol
    assert any(isinstance(m, NasbLayer) for m in net.mixed())


def test_reconstructed_inputs_equal_forward_inputs() -> None:
    """The inputs rebuilt during backward equal the layer inputs of the forward (dropout on)."""
    torch.set_default_dtype(torch.float64)
    try:
        net = Supernet(Toy(depth=4, p=0.3), Darts)
    finally:
        torch.set_default_dtype(torch.float32)
    stack = net.model.stack
    seen: dict[int, torch.Tensor] = {}
    rebuilt: dict[int, torch.Tensor] = {}
    for i, layer in enumerate(stack.layers):
        layer.register_forward_pre_hook(lambda m, a, i=i: seen.__setitem__(i, a[0].clone()))
    stack.on_reconstruct = lambda i, x: rebuilt.__setitem__(i, x.clone())
    net(torch.randn(3, 6, 5, dtype=torch.float64), torch.randn(3, 2, 12)).backward()
    assert sorted(rebuilt) == [0, 1, 2, 3]
    for i in range(4):
        assert _rel(rebuilt[i], seen[i]) < 1e-12


@pytest.mark.parametrize("n", [2, 3, 5])
def test_layer_inverse(n: int) -> None:
    """inverse(layer(x)) == x for any number of splits, max and avg pooling."""
    for pool in ("max", "avg"):
        ops = [nn.Sequential(nn.Linear(4, 4), nn.Tanh()) for _ in range(n)]
        layer = ReversibleLayer(ops, pool).double()
        x = torch.randn(2, 3, 4 * n, dtype=torch.float64)
        assert torch.allclose(layer.inverse(layer(x)), x, atol=1e-12)


def test_only_top_output_saved_memory_flat_in_depth() -> None:
    """Peak saved bytes of reversible DARTS do not grow with depth; ordinary DARTS's do."""
    peaks = {}
    for depth in (2, 8):
        for rec in (True, False):
            net = Supernet(Toy(d=24, depth=depth), Darts)
            set_reconstruct(net, rec)
            x, mem = torch.randn(8, 16, 5), torch.randn(8, 2, 24)
            peaks[depth, rec] = peak_saved_bytes(
                lambda net=net, x=x, mem=mem: net(x, mem).backward(), net.parameters()
            )
    assert peaks[8, True] <= 1.2 * peaks[2, True]
    assert peaks[8, False] > 3 * peaks[2, False]
    assert peaks[8, True] < 0.5 * peaks[8, False]


def test_bad_input_errors_name_the_layer() -> None:
    """Indivisible hidden size, wrong output shape, a non-invertible layer, an in-place op."""
    layer = ReversibleLayer([nn.Identity(), nn.Identity(), nn.Identity()], name="enc.0")
    with pytest.raises(SpaceError, match="enc.0.*10 is not divisible by its 3"):
        layer(torch.randn(1, 2, 10))
    stack = ReversibleStack([ReversibleLayer([nn.Linear(4, 4), nn.Linear(4, 3)])], name="dec")
    with pytest.raises(SpaceError, match=r"dec\.0', split 2.*differs from its split"):
        stack(torch.randn(1, 2, 8))
    with pytest.raises(SpaceError, match="layer 1 is a Linear, which has no inverse"):
        ReversibleStack([ReversibleLayer([nn.Identity(), nn.Identity()]), nn.Linear(4, 4)])
    inplace = ReversibleStack([ReversibleLayer([nn.ReLU(inplace=True), nn.Identity()])])
    with pytest.raises(SpaceError, match="in place"):
        inplace(torch.randn(1, 2, 8))
    with pytest.raises(SpaceError, match="n >= 2"):
        ReversibleLayer([nn.Identity()])


class Classifier(nf.ModelSpace):
    """A reversible classifier space for the generic one-shot search loop."""

    def __init__(self, d: int = 8, depth: int = 3) -> None:
        super().__init__()
        c = d // 2

        def g(i: int, k: int) -> nf.LayerChoice:
            ops = {"lin": nn.Linear(c, c), "tanh": nn.Sequential(nn.Linear(c, c), nn.Tanh())}
            return nf.LayerChoice(ops, label=f"c{i}.g{k}")

        self.inp = nn.Linear(4, d)
        self.stack = ReversibleStack([ReversibleLayer([g(i, 0), g(i, 1)]) for i in range(depth)])
        self.out = nn.Linear(d, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.stack(self.inp(x)))


def test_autograd_grad_for_arch_only_and_generic_search_loop() -> None:
    """torch.autograd.grad on the architecture alone works; nasforge.oneshot.search runs."""
    from nasforge.oneshot import search

    net = Supernet(Classifier(), Darts).double()
    x, y = torch.randn(10, 4, dtype=torch.float64), torch.randint(0, 3, (10,))
    grads = {}
    for rec in (True, False):
        set_reconstruct(net, rec)
        loss = nn.functional.cross_entropy(net(x), y)
        grads[rec] = torch.autograd.grad(loss, net.arch_parameters())
    for a, b in zip(grads[True], grads[False]):
        assert _rel(a, b) < 1e-10
    result = search(
        Classifier(), "nasb", (torch.randn(64, 4), torch.randint(0, 3, (64,))), epochs=1
    )
    assert set(result.arch) == {f"c{i}.g{k}" for i in range(3) for k in range(2)}


def test_peak_counts_tensors_saved_during_reconstruction() -> None:
    """The peak includes the recomputed G_k graphs of backward, beyond what forward saves."""
    net = Supernet(Toy(d=24, depth=4), Darts)
    x, mem = torch.randn(8, 16, 5), torch.randn(8, 2, 24)
    net(x, mem)  # probe once
    forward_only = peak_saved_bytes(lambda: net(x, mem), net.parameters())
    whole_step = peak_saved_bytes(lambda: net(x, mem).backward(), net.parameters())
    assert whole_step > 2 * forward_only
