"""NASB binary mixed ops: Eq. 6 gradients against the dense masked version, memory, orders."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from nasforge.errors import ConfigError
from nasforge.oneshot import config_for, search, supernet
from nasforge.oneshot.common import weight_optimizer
from nasforge.oneshot.memory import saved_bytes
from nasforge.oneshot.nasb import NasbLayer, binarize, nasb_step
from nasforge.oneshot.search import get_algorithm, initial_state

from ._spaces import ToySpace, tiny_cell_space


def _pair(
    space: nn.Module, x: torch.Tensor, same_edge: bool = False
) -> tuple[nn.Module, nn.Module]:
    binary = supernet(space, "nasb", example=x[:2].float()).double()
    dense = supernet(space, "nasp", example=x[:2].float()).double()
    with torch.no_grad():
        for p in binary.arch_parameters():
            p.copy_(torch.randn_like(p))
        if same_edge:  # both active entries of every node on its first edge
            for m in binary.mixed():
                if isinstance(m, NasbLayer) and m.node is not None and m.node.edges[0] is m:
                    m.arch()[:2] += 10.0
    dense.load_state_dict(binary.state_dict())
    binarize(binary)
    binarize(dense)
    return binary, dense


@pytest.mark.parametrize(
    "make, same_edge",
    [(tiny_cell_space, False), (tiny_cell_space, True), (ToySpace, False)],
    ids=["cell", "cell-two-ops-one-edge", "toy"],
)
def test_arch_gradient_equals_dense_masked(make: object, same_edge: bool) -> None:
    """Every entry's gradient (active or not) equals autograd on sum_k G_k o_k (Eq. 6)."""
    x = torch.randn(4, 1, 8, 8, dtype=torch.float64)
    y = torch.tensor([0, 1, 2, 1])
    binary, dense = _pair(make(), x, same_edge)  # type: ignore[operator]
    if same_edge:
        assert any(isinstance(m, NasbLayer) and len(m.active) == 2 for m in binary.mixed())
    losses = []
    for net in (binary, dense):
        net.train()
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        losses.append(float(loss.detach()))
    assert losses[0] == pytest.approx(losses[1], rel=1e-12)
    n_inactive = 0
    for pb, pd in zip(binary.arch_parameters(), dense.arch_parameters()):
        gb = torch.zeros_like(pb) if pb.grad is None else pb.grad
        gd = torch.zeros_like(pd) if pd.grad is None else pd.grad
        torch.testing.assert_close(gb, gd, rtol=1e-9, atol=1e-12)
        n_inactive += int((gb != 0).sum())
    assert n_inactive > len(binary.arch_parameters())  # inactive entries got gradients too
    for (name, wb), wd in zip(binary.named_parameters(), dense.parameters()):
        if name.startswith("model.") and wb.grad is not None:
            torch.testing.assert_close(wb.grad, wd.grad, rtol=1e-9, atol=1e-12)


def test_only_active_ops_run_forward_and_bn_stats_kept() -> None:
    """Inactive candidates do not run in forward, and recomputing them in backward leaves their
    batch-norm running statistics untouched."""
    space = tiny_cell_space()
    x = torch.randn(4, 1, 8, 8)
    net = supernet(space, "nasb", example=x[:2])
    binarize(net)
    ran: set[int] = set()
    hooks = [
        c.register_forward_hook(lambda m, i, o: ran.add(id(m)))
        for m in net.mixed()
        if isinstance(m, NasbLayer)
        for c in m.candidates()
    ]
    before = {k: v.clone() for k, v in net.state_dict().items() if "running" in k}
    out = net(x)
    active = {
        id(m.candidates()[k]) for m in net.mixed() if isinstance(m, NasbLayer) for k in m.active
    }
    assert ran == active
    ran.clear()
    out.sum().backward()
    assert ran - active  # inactive ops were computed on the fly in backward
    after = net.state_dict()
    for m in net.mixed():
        if isinstance(m, NasbLayer):
            for k, c in enumerate(m.candidates()):
                if k in m.active:
                    continue
                for name, b in c.named_buffers():
                    if "running" in name:
                        assert torch.equal(b, before[_key(net, b)])
    for h in hooks:
        h.remove()
    assert after


def _key(net: nn.Module, buf: torch.Tensor) -> str:
    return next(k for k, v in net.state_dict().items() if v.data_ptr() == buf.data_ptr())


class _Flip(torch.optim.Optimizer):
    """An 'optimizer' that reverses every architecture vector: G always changes after a step."""

    def __init__(self, params: list[nn.Parameter]) -> None:
        super().__init__(params, {})

    @torch.no_grad()
    def step(self, closure: object = None) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                p.copy_(p.flip(0))


@pytest.mark.parametrize("order", ["consecutive", "alternate"])
def test_update_orders(order: str) -> None:
    """Algorithm 1 trains w with G_t; Algorithm 2 trains w with G_{t+1} (after the A step)."""
    x = torch.randn(8, 1, 8, 8)
    y = torch.randint(0, 3, (8,))
    net = supernet(ToySpace(), "nasb", example=x[:2])
    cfg = config_for("nasb", order=order)
    opt_w, _ = weight_optimizer(net.weights(), cfg, 10)
    layer = net.model.blocks._modules["0"].op  # block 0 runs at every depth
    with torch.no_grad():
        layer.arch().copy_(torch.tensor([0.01, 0.0]))
    binarize(net)
    g_t = list(layer.active)
    seen: list[int] = []
    hooks = [
        c.register_forward_hook(lambda m, i, o, k=k: seen.append(k))
        for k, c in enumerate(layer.candidates())
    ]
    nasb_step(net, opt_w, _Flip(net.arch_parameters()), (x, y), (x, y), cfg)
    for h in hooks:
        h.remove()
    g_next = list(layer.active) if order == "alternate" else [1 - g_t[0]]
    assert g_t != g_next
    # the last forward call of a step is F_w (B_w recomputes nothing: A is held out)
    assert seen[-1] == (g_t[0] if order == "consecutive" else g_next[0])
    assert bool(layer.arch()[1] > layer.arch()[0])  # A was updated in both orders


def test_nasb_saves_less_than_dense() -> None:
    """NASB keeps only active ops in the graph: far fewer bytes saved than the dense version."""
    space = tiny_cell_space()
    x = torch.randn(8, 1, 8, 8)
    y = torch.randint(0, 3, (8,))
    nasb = supernet(space, "nasb", example=x[:2])
    nasp = supernet(space, "nasp", example=x[:2])
    assert saved_bytes(nasb, x, y) < 0.6 * saved_bytes(nasp, x, y)


def test_a_warm_up_step_draws_uniform_gates_and_keeps_a() -> None:
    """A warm-up step (gates from a generator) activates every candidate of an edge over a
    few draws whatever A prefers, trains the weights, and leaves A as it was; the same
    generator state draws the same gates."""
    x = torch.randn(8, 1, 8, 8)
    y = torch.randint(0, 3, (8,))
    net = supernet(ToySpace(), "nasb", example=x[:2])
    cfg = config_for("nasb")
    opt_w, _ = weight_optimizer(net.weights(), cfg, 10)
    layers = [m for m in net.mixed() if isinstance(m, NasbLayer) and m.node is None]
    with torch.no_grad():
        for m in layers:
            m.arch().copy_(torch.arange(len(m.names), dtype=m.arch().dtype))  # A wants the last
    a0 = [a.detach().clone() for a in net.arch_parameters()]
    w0 = [p.detach().clone() for p in net.weights()]
    g = torch.Generator().manual_seed(0)
    seen: set[int] = set()
    for _ in range(40):
        nasb_step(net, opt_w, _Flip(net.arch_parameters()), (x, y), (x, y), cfg, uniform=g)
        seen.update(layers[0].active)
    assert seen == set(range(len(layers[0].names)))
    assert all(torch.equal(a, b) for a, b in zip(a0, net.arch_parameters()))
    assert not all(torch.equal(a, b) for a, b in zip(w0, net.weights()))
    binarize(net)  # without a generator: A's argmax again
    assert all(m.active == [len(m.names) - 1] for m in layers)
    state = g.get_state()
    binarize(net, g)
    first = [list(m.active) for m in layers]
    g.set_state(state)
    binarize(net, g)
    assert first == [list(m.active) for m in layers]


def test_nasb_warms_up_half_the_epochs_by_default_and_only_enas_and_nasb_warm_up() -> None:
    """NASB's default warm-up is half the epochs (ENAS's 3/4); warmup_epochs overrides it; an
    algorithm without a warm-up refuses the setting before any training."""

    nasb, enas = get_algorithm("nasb"), get_algorithm("enas")
    assert nasb.warmup_epochs(config_for("nasb", epochs=10)) == 5
    assert nasb.warmup_epochs(config_for("nasb", epochs=10, warmup_epochs=0)) == 0
    assert enas.warmup_epochs(config_for("enas", epochs=10)) == 7
    assert get_algorithm("darts").warmup_epochs(config_for("darts", epochs=10)) == 0
    x, y = torch.randn(16, 1, 8, 8), torch.randint(0, 3, (16,))
    with pytest.raises(
        ConfigError, match="'warmup_epochs' is a setting of enas, nasb, nasp, not darts"
    ):
        search(tiny_cell_space(), "darts", (x, y), epochs=1, warmup_epochs=1, progress="off")


def test_a_search_keeps_a_through_its_warm_up_epochs() -> None:
    """With warmup_epochs equal to epochs, A ends where the search started it; with one
    warm-up epoch of two, it moves in the second."""
    x, y = torch.randn(32, 1, 8, 8), torch.randint(0, 3, (32,))
    kw = {"epochs": 2, "batch_size": 16, "seed": 1}
    cfg = config_for("nasb", **kw)
    _, state = initial_state(tiny_cell_space(), get_algorithm("nasb"), (x, y), cfg, None, None)
    start = [a.detach().clone() for a in state.net.arch_parameters()]
    for warm, kept in [(2, True), (1, False)]:
        res = search(tiny_cell_space(), "nasb", (x, y), warmup_epochs=warm, progress="off", **kw)
        same = [torch.equal(a, b) for a, b in zip(start, res.supernet.arch_parameters())]
        assert all(same) if kept else not any(same), warm
