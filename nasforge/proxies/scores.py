"""Zero-cost proxies: one number per architecture, at initialisation, from one batch.

Each proxy is a function ``(model, inputs, targets) -> float`` (higher is better) that scores a
freshly initialised model without training it. All five work on a deep copy, so the model given
is never changed (weights, buffers, gradients and mode stay as they were); dropout is switched
off in the copy, so the same model and batch always give the same number.

    name        paper                                     what it measures
    synflow     Tanaka et al. 2020 (SynFlow); used as a   sum |theta * dR/dtheta| of the net with
                zero-cost proxy by Abdelfattah et al.     every weight made positive, on an
                2021                                      all-ones input (data-free)
    naswot      Mellor et al. 2021 (NAS without           log-determinant of the kernel of ReLU
                training, ICML)                           activation patterns over the batch
    grad_norm   Abdelfattah et al. 2021 (Zero-cost        sum over parameters of ||dL/dtheta||_2
                proxies for lightweight NAS, ICLR)
    snip        Lee et al. 2019 (SNIP, ICLR); as a proxy  sum |theta * dL/dtheta| over conv and
                in Abdelfattah et al. 2021                linear weights
    jacob_cov   Mellor et al. 2020 (NAS without training, -sum(log(v+k) + 1/(v+k)) over the
                arXiv v1)                                 eigenvalues v of the correlation of
                                                          input Jacobians, k = 1e-5

Invariants: a proxy never changes the model it is given; the same model and batch give the same
value; ``synflow`` does not depend on the values of ``inputs`` (only their shape).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

from nasforge.errors import ConfigError

__all__ = [
    "Proxy",
    "register_proxy",
    "get_proxy",
    "list_proxies",
    "synflow",
    "naswot",
    "grad_norm",
    "snip",
    "jacob_cov",
    "linearised",
]

#: A proxy: (model, inputs, targets) -> score, higher is better.
Proxy = Callable[[nn.Module, torch.Tensor, torch.Tensor], float]

#: name -> proxy function, filled by :func:`register_proxy` at import.
_PROXIES: dict[str, Proxy] = {}


def register_proxy(name: str) -> Callable[[Proxy], Proxy]:
    """Returns a decorator that registers a proxy function under ``name``.

    Raises:
        ConfigError: ``name`` is taken by another function.
    """

    def deco(fn: Proxy) -> Proxy:
        owner = _PROXIES.get(name)
        if owner is not None and owner is not fn:
            raise ConfigError(f"proxy name {name!r} is already used by {owner.__qualname__}")
        _PROXIES[name] = fn
        return fn

    return deco


def list_proxies() -> list[str]:
    """Returns the registered proxy names, sorted."""
    return sorted(_PROXIES)


def get_proxy(name_or_fn: str | Proxy) -> Proxy:
    """Returns a proxy function: a callable passes through, a name is looked up.

    Raises:
        ConfigError: an unknown name (the message lists the known ones) or neither a name nor
            a callable.
    """
    if callable(name_or_fn):
        return name_or_fn
    if not isinstance(name_or_fn, str):
        raise ConfigError(f"a proxy is a name or a function, got {type(name_or_fn).__name__}")
    fn = _PROXIES.get(name_or_fn.lower().replace("-", "_"))
    if fn is None:
        raise ConfigError(
            f"unknown proxy {name_or_fn!r}; expected one of {list_proxies()} or a function "
            "(model, inputs, targets) -> float"
        )
    return fn


def _scoring_copy(model: nn.Module, train: bool = True) -> nn.Module:
    """Returns a deep copy of ``model`` in train (or eval) mode with every dropout off, so
    scoring it leaves ``model`` untouched and is deterministic."""
    net = copy.deepcopy(model)
    net.train(train)
    for m in net.modules():
        if isinstance(m, nn.modules.dropout._DropoutNd):
            m.eval()
    net.zero_grad(set_to_none=True)
    return net


def _loss_backward(net: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> None:
    """Runs one forward pass and the cross-entropy loss's backward pass on ``net``."""
    F.cross_entropy(net(inputs), targets).backward()


def linearised(model: nn.Module) -> nn.Module:
    """Returns SynFlow's linearised copy of ``model``: float64, eval mode (batch norms use
    their running statistics), every parameter replaced by its absolute value.

    Invariants: every parameter of the copy is >= 0; ``model`` is unchanged.
    """
    net = _scoring_copy(model, train=False).double()
    with torch.no_grad():
        for p in net.parameters():
            p.abs_()
    return net


@register_proxy("synflow")
def synflow(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> float:
    """Returns the SynFlow score: ``sum |theta * dR/dtheta|`` with ``R`` the sum of the
    linearised network's output on one all-ones input (Tanaka et al. 2020, "Pruning neural
    networks without any data by iteratively conserving synaptic flow", NeurIPS; as a
    zero-cost NAS proxy, Abdelfattah et al. 2021). Uses only the shape of ``inputs``;
    ``targets`` is unused.
    """
    net = linearised(model)
    ones = torch.ones((1, *inputs.shape[1:]), dtype=torch.float64, device=inputs.device)
    net(ones).sum().backward()
    total = sum(
        float((p.detach() * p.grad).abs().sum()) for p in net.parameters() if p.grad is not None
    )
    return total


@register_proxy("naswot")
def naswot(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> float:
    """Returns NASWOT's score, ``log|det K|`` with ``K[i, j]`` the number of ReLU units on
    which inputs ``i`` and ``j`` agree (both active or both inactive), over every
    ``nn.ReLU`` module's output (Mellor et al. 2021, "Neural Architecture Search without
    Training", ICML). A model whose units never tell inputs apart scores ``-inf``; functional
    ``F.relu`` calls are not seen. ``targets`` is unused.
    """
    net = _scoring_copy(model)
    n = len(inputs)
    kernel = torch.zeros(n, n, dtype=torch.float64)

    def hook(module: nn.Module, args: object, out: torch.Tensor) -> None:
        code = (out.detach().reshape(n, -1) > 0).double()
        kernel.add_(code @ code.T + (1 - code) @ (1 - code).T)

    handles = [m.register_forward_hook(hook) for m in net.modules() if isinstance(m, nn.ReLU)]
    try:
        with torch.no_grad():
            net(inputs)
    finally:
        for h in handles:
            h.remove()
    sign, logdet = torch.linalg.slogdet(kernel)
    return float(logdet) if sign > 0 else -math.inf


@register_proxy("grad_norm")
def grad_norm(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> float:
    """Returns the sum over parameters of the L2 norm of the cross-entropy loss's gradient
    on one batch (Abdelfattah et al. 2021, "Zero-Cost Proxies for Lightweight NAS", ICLR)."""
    net = _scoring_copy(model)
    _loss_backward(net, inputs, targets)
    return sum(float(p.grad.norm()) for p in net.parameters() if p.grad is not None)


def _weighted(model: nn.Module) -> list[torch.Tensor]:
    """Returns the weights of the conv and linear layers (the ones SNIP prunes)."""
    return [m.weight for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Conv1d, nn.Linear))]


@register_proxy("snip")
def snip(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> float:
    """Returns SNIP's connection sensitivity summed over every conv and linear weight,
    ``sum |theta * dL/dtheta|`` for the cross-entropy loss on one batch (Lee et al. 2019,
    "SNIP: Single-shot Network Pruning based on Connection Sensitivity", ICLR; as a NAS proxy,
    Abdelfattah et al. 2021)."""
    net = _scoring_copy(model)
    _loss_backward(net, inputs, targets)
    grads = [(w.detach(), w.grad) for w in _weighted(net) if w.grad is not None]
    return sum(float((w * g).abs().sum()) for w, g in grads)


@register_proxy("jacob_cov")
def jacob_cov(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> float:
    """Returns the Jacobian-covariance score ``-sum(log(v + k) + 1 / (v + k))``, ``k = 1e-5``,
    over the eigenvalues ``v`` of the correlation matrix of the per-input Jacobians
    ``d sum(output) / d input`` (Mellor et al. 2020, "Neural Architecture Search without
    Training", arXiv:2006.04647v1). A model whose output ignores its input has undefined
    correlations and scores ``-inf``. ``targets`` is unused.
    """
    net = _scoring_copy(model)
    x = inputs.detach().clone().requires_grad_(True)
    net(x).sum().backward()
    if x.grad is None:  # no path from the input to the output: no Jacobian to correlate
        return -math.inf
    jac = x.grad.reshape(len(x), -1).double()
    if not bool(torch.isfinite(jac).all()) or bool((jac.std(dim=1) == 0).any()):
        return -math.inf
    corr = torch.corrcoef(jac)
    v = torch.linalg.eigvalsh(corr).clamp_min(0.0)
    k = 1e-5
    return float(-(torch.log(v + k) + 1.0 / (v + k)).sum())
