"""Operator batching across models (Retiarii §4.2, §7.2.2): trials whose models share a frozen
prefix run that prefix once per batch and train their trainable parts together.

The prefix is found, not declared: :func:`describe` turns each top-level module of a frozen
model into a :class:`~nasforge.engine.crossmodel.policy.ChildRecord` (frozen per the freeze
record: no parameter requires a gradient; its decisions from the mutation history; a digest of
its weights), and :func:`~nasforge.engine.crossmodel.policy.shared_prefix` decides. The
trainable suffixes are then trained

    vmap   stacked per group of identical structure (``torch.func.stack_module_state``,
           ``functional_call`` under ``vmap``): one batched kernel per operator for the group
    loop   one after the other on the shared prefix output

Each model's loss is its own mean loss, and the summed loss's gradient with respect to one
model's (stacked) weights is that model's gradient, so an element-wise optimizer (SGD, Adam)
over the stacked weights takes each model's own steps.

Invariants: every model's gradients, weights and metrics equal those of training it alone on
the same batches (to float rounding); a model whose forward is not its top-level modules in
order is refused with a MergeError (the engine then trains the models one by one).
"""

from __future__ import annotations

import copy
import hashlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from nasforge.engine.crossmodel.policy import ChildRecord, shared_prefix
from nasforge.errors import NasforgeError

__all__ = ["MergeError", "describe", "MergedModels", "find_prefix"]

log = logging.getLogger(__name__)

_STATEFUL = (nn.modules.batchnorm._BatchNorm, nn.Dropout)


class MergeError(NasforgeError, RuntimeError):
    """Raised when models cannot be merged; the engine falls back to training them alone."""


def _digest(module: nn.Module) -> str:
    h = hashlib.sha1(repr(module).encode())
    for name, t in list(module.named_parameters()) + list(module.named_buffers()):
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def describe(model: nn.Module) -> list[ChildRecord]:
    """Returns one plain record per top-level module of ``model``, in order: frozen, stateful,
    a digest of structure and values, and the decisions (from its mutation history, when it
    has one) that sit inside the module."""
    history = model.__dict__.get("_nf_history") or []
    out = []
    for name, child in model.named_children():
        params = list(child.parameters())
        stateful = any(
            isinstance(m, _STATEFUL) and m.training and not (isinstance(m, nn.Dropout) and m.p == 0)
            for m in child.modules()
        )
        decisions = tuple(
            (h.label, repr(h.value))
            for h in history
            if h.where == name or h.where.startswith(name + ".")
        )
        out.append(
            ChildRecord(
                name,
                frozen=all(not p.requires_grad for p in params),
                stateful=stateful,
                fingerprint=_digest(child),
                decisions=decisions,
            )
        )
    return out


def find_prefix(models: Sequence[nn.Module]) -> int:
    """Returns how many leading top-level modules the models share frozen (see the policy)."""
    return shared_prefix([describe(m) for m in models])


def _split(model: nn.Module, k: int) -> tuple[nn.Sequential, nn.Sequential]:
    children = list(model.children())
    return nn.Sequential(*children[:k]), nn.Sequential(*children[k:])


class _Group:
    """The suffixes of one structure, stacked (vmap) or kept apart (loop)."""

    def __init__(self, index: list[int], suffixes: list[nn.Module], stacked: bool) -> None:
        self.index, self.suffixes, self.stacked = index, suffixes, stacked and len(index) > 1
        if self.stacked:
            from torch.func import stack_module_state

            self.params, self.buffers = stack_module_state(suffixes)
            self.base = copy.deepcopy(suffixes[0]).to("meta")

    def parameters(self) -> list[torch.Tensor]:
        if self.stacked:
            return [p for p in self.params.values() if p.requires_grad]
        return [p for s in self.suffixes for p in s.parameters() if p.requires_grad]

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        """Returns ``[len(index), batch, ...]`` outputs of the group's suffixes."""
        if not self.stacked:
            return torch.stack([s(feats) for s in self.suffixes])
        from torch.func import functional_call, vmap

        def one(p: dict[str, Any], b: dict[str, Any], x: torch.Tensor) -> torch.Tensor:
            return functional_call(self.base, (p, b), (x,))

        return vmap(one, in_dims=(0, 0, None))(self.params, self.buffers, feats)

    def unstack(self) -> None:
        """Copies the stacked weights back into the group's own modules."""
        if not self.stacked:
            return
        with torch.no_grad():
            for i, s in enumerate(self.suffixes):
                for n, t in list(s.named_parameters()) + list(s.named_buffers()):
                    src = self.params[n] if n in self.params else self.buffers[n]
                    t.copy_(src[i])


class MergedModels:
    """Returns, from :meth:`step`, each model's loss on a batch after one merged training step
    of ``models`` over their shared frozen prefix.

    ``make_optimizer(params)`` builds one element-wise optimizer over all trainable weights;
    ``mode`` is ``vmap`` (suffixes of one structure stacked) or ``loop``. ``example`` is a
    batch on which each model's forward is checked to be its top-level modules in order.

    Raises:
        MergeError: fewer than two models, no shared frozen prefix, or a forward that is not
            the composition of the top-level modules (the message names the model).
    """

    def __init__(
        self,
        models: Sequence[nn.Module],
        make_optimizer: Callable[[list[torch.Tensor]], torch.optim.Optimizer],
        example: torch.Tensor,
        mode: str = "vmap",
        loss_fn: Callable[..., torch.Tensor] = nn.functional.cross_entropy,
    ) -> None:
        if len(models) < 2:
            raise MergeError(f"merging needs at least 2 models, got {len(models)}")
        if mode not in ("vmap", "loop"):
            raise MergeError(f"mode {mode!r} is not 'vmap' or 'loop'")
        k = find_prefix(models)
        if k == 0:
            raise MergeError("the models share no frozen prefix (see describe())")
        self.models, self.k, self.mode, self.loss_fn = list(models), k, mode, loss_fn
        self.prefix, _ = _split(models[0], k)
        suffixes = [_split(m, k)[1] for m in models]
        with torch.no_grad():
            feats = self.prefix(example)
            for i, (m, s) in enumerate(zip(models, suffixes)):
                was = m.training
                m.eval()
                ok = torch.allclose(m(example), s(feats), rtol=1e-5, atol=1e-6)
                m.train(was)
                if not ok:
                    raise MergeError(
                        f"model {i} ({type(m).__name__}): its forward is not its top-level "
                        "modules in order, so its frozen prefix cannot be run apart"
                    )
        by_shape: dict[str, list[int]] = {}
        for i, s in enumerate(suffixes):
            sig = repr(s) + repr([tuple(p.shape) for p in s.parameters()])
            by_shape.setdefault(sig, []).append(i)
        self.groups = [
            _Group(idx, [suffixes[i] for i in idx], mode == "vmap") for idx in by_shape.values()
        ]
        self.opt = make_optimizer([p for g in self.groups for p in g.parameters()])
        log.info(
            "merged %d models: %d shared frozen modules, %d group(s), %s",
            len(models),
            k,
            len(self.groups),
            mode,
        )

    def outputs(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Returns each model's output on ``x`` (prefix computed once)."""
        with torch.no_grad():
            feats = self.prefix(x)
        out: list[torch.Tensor] = [torch.empty(0)] * len(self.models)
        for g in self.groups:
            y = g.forward(feats)
            for j, i in enumerate(g.index):
                out[i] = y[j]
        return out

    def step(self, x: torch.Tensor, y: torch.Tensor) -> list[float]:
        """Returns each model's loss on ``(x, y)`` before one optimizer step of all of them."""
        for g in self.groups:
            for s in g.suffixes:
                s.train()
        outs = self.outputs(x)
        losses = [self.loss_fn(o, y) for o in outs]
        self.opt.zero_grad(set_to_none=True)
        torch.stack(losses).sum().backward()
        self.opt.step()
        return [float(v.detach()) for v in losses]

    @torch.no_grad()
    def correct(self, x: torch.Tensor, y: torch.Tensor, batch_size: int = 512) -> list[int]:
        """Returns how many of ``(x, y)`` each model classifies right, in eval mode."""
        for g in self.groups:
            for s in g.suffixes:
                s.eval()
        correct = [0] * len(self.models)
        for i in range(0, len(x), batch_size):
            outs = self.outputs(x[i : i + batch_size])
            yy = y[i : i + batch_size]
            for j, o in enumerate(outs):
                correct[j] += int((o.argmax(-1) == yy).sum())
        return correct

    def accuracy(self, x: torch.Tensor, y: torch.Tensor, batch_size: int = 512) -> list[float]:
        """Returns each model's top-1 accuracy on ``(x, y)`` in eval mode."""
        return [c / max(1, len(x)) for c in self.correct(x, y, batch_size)]

    def unstack(self) -> list[nn.Module]:
        """Returns the models, their weights updated from the merged training."""
        for g in self.groups:
            g.unstack()
        return self.models
