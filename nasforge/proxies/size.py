"""The trivial proxies: an architecture's size, as a number that ranks it (bigger first).

    params   the model's parameter count
    flops    multiply-accumulates of one example's forward pass through its convolutions and
             linear layers (a kernel's MACs per output element, a linear layer's weights),
             in eval mode: what the ranking benchmark counts (``benchmarks/_ranking_common.py``)

Both are registered proxies (``get_proxy("params")``), so a search that takes a proxy takes
them; :func:`arch_size` gives both of one architecture at once, for a baseline beside a
supernet's scores (:mod:`nasforge.run.agreement`) or a budget. On MNIST-1D, parameter count
and FLOPs rank stand-alone accuracy about as well as a supernet does (docs/oneshot.md, "How
well does the supernet rank?"), which is why they are the baseline every one-shot score is
set against.

Invariants: neither changes the model it is given, nor depends on the batch's values or size.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from nasforge.proxies.scores import register_proxy
from nasforge.space import freeze

__all__ = ["params", "flops", "arch_size", "SIZES"]

#: the size measures :func:`arch_size` returns, in order
SIZES = ("params", "flops")

_COUNTED = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear)


@register_proxy("params")
def params(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> float:
    """Returns the number of parameters of ``model`` (``inputs`` and ``targets`` unused)."""
    return float(sum(p.numel() for p in model.parameters()))


@register_proxy("flops")
def flops(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> float:
    """Returns the multiply-accumulates of one example (``inputs[:1]``) through ``model``'s
    convolutions and linear layers, in eval mode without gradients (``targets`` unused); the
    model's mode is put back."""
    total = [0]

    def hook(mod: nn.Module, _inp: Any, out: torch.Tensor) -> None:
        w = mod.weight
        assert isinstance(w, torch.Tensor)
        if isinstance(mod, nn.Linear):  # its weights per output vector
            total[0] += w.numel() * (out[0].numel() // w.shape[0])
        else:  # one kernel's MACs per output element
            total[0] += out[0].numel() * (w.numel() // w.shape[0])

    handles = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, _COUNTED)]
    was = model.training
    try:
        model.eval()
        with torch.no_grad():
            model(inputs[:1])
    finally:
        for h in handles:
            h.remove()
        model.train(was)
    return float(total[0])


def arch_size(space: Any, arch: Mapping[str, Any], example: torch.Tensor) -> dict[str, float]:
    """Returns ``{"params": ..., "flops": ...}`` of ``arch`` frozen from ``space``
    (``example``: a batch whose first item sets the input shape); the global random state is
    left as it was.

    Raises:
        ArchitectureError: ``arch`` is not in ``space``.
    """
    with torch.random.fork_rng(devices=[]):
        model = freeze(space, arch)
    empty = torch.zeros(0, dtype=torch.long)
    macs = flops(model, example, empty)  # first: a forward pass shapes lazy modules
    return {"params": params(model, example, empty), "flops": macs}
