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


def _useless_favourite(toy: torch.nn.Module) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    """Returns a DARTS supernet of ``toy`` whose layer ``e1`` gives the larger weight to a
    candidate computing zeros, and data labelled by the supernet itself."""
    x = torch.randn(64, 1, 6, 6)
    net = supernet(toy, "darts", example=x[:2])
    for m in net.mixed():
        if m.label == "e1":
            zero = m.candidates()[m.names.index("conv3")]
            with torch.no_grad():
                zero.weight.zero_()
                zero.bias.zero_()
                m.arch().copy_(torch.tensor([0.5, 0.0]))  # conv3 0.62, conv1 0.38
    net.eval()
    with torch.no_grad():
        net.model.fc.bias -= net(x).mean(0)  # every class predicted somewhere
        y = net(x).argmax(-1)
    return net, x, y


def test_perturbation_pick_keeps_the_candidate_the_supernet_needs(toy: torch.nn.Module) -> None:
    """Argmax keeps the stronger but all-zero candidate; perturbation keeps the one whose
    removal changes the supernet's predictions."""
    from nasforge.oneshot.darts import perturbation_arch

    net, x, y = _useless_favourite(toy)
    assert net.export()["e1"] == "conv3"
    assert perturbation_arch(net, (x, y))["e1"] == "conv1"
    assert all(getattr(m, "removed", None) is None for m in net.mixed())  # nothing left out


def test_darts_pick_setting() -> None:
    """``pick`` reaches DARTS's settings, and an unknown value is refused with the choices."""
    import pytest

    from nasforge.errors import ConfigError
    from nasforge.oneshot import config_for

    assert config_for("darts", {"pick": "perturbation"}).algo.pick == "perturbation"
    assert config_for("darts", {}).algo.pick == "argmax"
    with pytest.raises(ConfigError, match="pick must be 'argmax'.*got 'best'"):
        config_for("darts", {"pick": "best"}).check()
