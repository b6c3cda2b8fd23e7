"""DARTS mixed ops: gradients against finite differences, the search step's optimizers."""

from __future__ import annotations

import torch

from nasforge.oneshot import supernet
from nasforge.oneshot.common import SearchConfig, arch_optimizer

from ._spaces import tiny_cell_space


def _loss(net: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(net(x), y)


def test_darts_gradients_match_finite_differences() -> None:
    """Every architecture gradient and sampled weight gradients equal central differences."""
    space = tiny_cell_space()
    x = torch.randn(4, 1, 8, 8, dtype=torch.float64)
    y = torch.tensor([0, 1, 2, 1])
    net = supernet(space, "darts", example=x[:2].float()).double()
    with torch.no_grad():
        for p in net.arch_parameters():
            p.copy_(torch.randn_like(p))
    net.train()
    _loss(net, x, y).backward()
    eps = 1e-6
    params = list(net.arch_parameters()) + [net.model.stem[0].weight]
    for p in params:
        flat = p.data.view(-1)
        idx = range(flat.numel()) if p.numel() < 20 else range(0, flat.numel(), 3)
        for i in idx:
            old = float(flat[i])
            with torch.no_grad():
                flat[i] = old + eps
                hi = float(_loss(net, x, y))
                flat[i] = old - eps
                lo = float(_loss(net, x, y))
                flat[i] = old
            num = (hi - lo) / (2 * eps)
            # a node's own InputChoice parameter is unused (its edges carry the weights)
            grad = 0.0 if p.grad is None else float(p.grad.view(-1)[i])
            assert abs(num - grad) < 1e-6 + 1e-5 * abs(num)


def test_arch_optimizer_settings() -> None:
    """Alpha is trained by Adam with lr 3e-4, weight decay 1e-3 and betas (0.5, 0.999)."""
    opt = arch_optimizer([torch.nn.Parameter(torch.zeros(3))], SearchConfig())
    group = opt.param_groups[0]
    assert isinstance(opt, torch.optim.Adam)
    assert (group["lr"], group["weight_decay"], group["betas"]) == (3e-4, 1e-3, (0.5, 0.999))
