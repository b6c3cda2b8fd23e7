"""Multi-split reversible layers and backpropagation with reconstruction (DARTSformer, §2.2-2.4).

A layer splits its input along the hidden (last) dimension into ``n >= 2`` equal parts and
computes, for k = 1..n (Eq. 3),

    Y_k = X_k + G_k(H_k),   H_k = Pool(X_{>k}, Y_{<k})                    (Eq. 5)

where ``Pool`` reduces its ``n - 1`` inputs element-wise (max or mean) to one split and ``G_k``
is any module from a split to a split: a fixed op, a ``LayerChoice`` of a space, or the mixed op
a one-shot algorithm put in its place (DARTS, NASB, ...). Because ``G_k`` never sees ``X_k``, the
input is rebuilt from the output for k = n..1 (Eq. 4): ``X_k = Y_k - G_k(H_k)``.

:class:`ReversibleStack` runs a sequence of such layers as ONE autograd function
(:class:`_Reconstruct`, Algorithm 1 applied layer after layer)::

    forward  (no_grad)   x ─> L1 ─> L2 ─> ... ─> Ln ─> y        saved: y, context tensors
    backward             y, dy ─> Ln⁻¹ ─> ... ─> L1⁻¹ ─> dx    per split k = n..1:
                           recompute g_k = G_k(H_k) under enable_grad (RNG state replayed),
                           autograd.grad(g_k, [H_k's inputs, θ_k, α_k, context], grad Y_k),
                           X_k = Y_k - g_k; the graph of g_k is freed before split k-1

so only the top output (and the context, e.g. the encoder memory a decoder attends to) is held
for backward, whatever the depth. Weights, architecture parameters and context tensors are
explicit inputs of the function, so their gradients come back through ordinary autograd (both
``loss.backward()`` and ``torch.autograd.grad`` work). Mixed ops that use their own autograd
function (NASB's ``_ArchGrad``) run unchanged inside the recomputation.

Randomness: before each ``G_k`` the forward keeps the RNG state (CPU, and CUDA for a CUDA
input); the recomputation restores it, so dropout draws the same masks (as RevNet code does).
Batch-norm running statistics are not updated twice (``frozen_bn_stats``).

Ops reach extra tensors (attention masks, the encoder memory) through a shared
:class:`Context` rather than arguments, so every ``G_k`` takes exactly one tensor.

Invariants: ``layer.inverse(layer(x)) == x`` up to rounding for any G (same RNG); the
reconstructed backward gives the gradients of ordinary autograd through the same layers.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast

import torch
from torch import nn

from nasforge.errors import SpaceError
from nasforge.oneshot.common import frozen_bn_stats
from nasforge.oneshot.supernet import MixedLayer
from nasforge.space.context import Recording, current

__all__ = [
    "Context",
    "Pool",
    "ReversibleLayer",
    "ReversibleStack",
    "set_reconstruct",
]

logger = logging.getLogger(__name__)

RngState = tuple[torch.Tensor, torch.Tensor | None]

# Per-module caches of module walks, keyed weakly so that a copy of a model starts afresh.
_FOUND: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_PARAM_IDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_HAS_BN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class Context:
    """Returns nothing; holds the named extra tensors of one stack call (masks, memory), read by
    the ops of the stack with :meth:`get`.

    Invariants: ops read the tensors of the current call; during a reconstructed backward the
    tensors that need a gradient are replaced by leaves whose gradients the stack collects.
    """

    def __init__(self) -> None:
        self.tensors: dict[str, torch.Tensor | None] = {}

    def get(self, name: str) -> torch.Tensor | None:
        """Returns the tensor called ``name`` of the current call, or None."""
        return self.tensors.get(name)

    def __deepcopy__(self, memo: dict[int, Any]) -> Context:
        return Context()  # tensors belong to one call, never to a copy of the model

    def __getstate__(self) -> dict[str, Any]:
        return {"tensors": {}}  # nor to a pickled model


class Pool(nn.Module):
    """Returns the element-wise max or mean of the ``n - 1`` split tensors of Eq. 5."""

    def __init__(self, mode: str = "max") -> None:
        super().__init__()
        if mode not in ("max", "avg"):
            raise SpaceError(f"pooling must be 'max' or 'avg' (Eq. 5), got {mode!r}")
        self.mode = mode

    def forward(self, parts: list[torch.Tensor]) -> torch.Tensor:
        if len(parts) == 1:
            return parts[0]
        stacked = torch.stack(parts, 0)
        return stacked.amax(0) if self.mode == "max" else stacked.mean(0)

    def extra_repr(self) -> str:
        return self.mode


def _rng_state(x: torch.Tensor) -> RngState:
    cuda = torch.cuda.get_rng_state(x.device) if x.is_cuda else None
    return torch.get_rng_state(), cuda


@contextmanager
def _replay(state: RngState, x: torch.Tensor) -> Iterator[None]:
    devices = [x.device] if x.is_cuda else []
    with torch.random.fork_rng(devices=devices):
        torch.set_rng_state(state[0])
        if state[1] is not None:
            torch.cuda.set_rng_state(state[1], x.device)
        yield


def _candidates(op: nn.Module) -> list[tuple[str, nn.Module]]:
    """Returns the separately runnable candidates of an op: a mixed op's, or the op itself."""
    if isinstance(op, MixedLayer):
        return [(str(n), m) for n, m in zip(op.names, op.candidates())]
    return [("", op)]


def _op_name(op: nn.Module) -> str:
    label = getattr(op, "label", None)
    return f" (decision {label!r})" if label else ""


class ReversibleLayer(nn.Module):
    """Returns ``[Y_1, ..., Y_n]`` of Eq. 3 for input ``[X_1, ..., X_n]``; :meth:`inverse` gives
    the input back (Eq. 4).

    ``ops[k]`` is ``G_{k+1}`` after the pooling: a module from a split to a split.

    Raises:
        SpaceError: fewer than 2 ops, an unknown pooling, or (at run time) a hidden size not
            divisible by the number of splits, or an op whose output shape is not its split's.
    """

    def __init__(self, ops: Sequence[nn.Module], pool: str = "max", name: str = "") -> None:
        super().__init__()
        if len(ops) < 2:
            raise SpaceError(
                f"reversible layer {name!r} has {len(ops)} split op(s); a multi-split reversible "
                "layer needs n >= 2 (one G_k per split)"
            )
        self.ops = nn.ModuleList(ops)
        self.pool = Pool(pool)
        self.name = name

    @property
    def n_splits(self) -> int:
        """Returns the number of splits ``n``."""
        return len(self.ops)

    def split(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Returns the ``n`` equal splits of ``x`` along its last dimension.

        Raises:
            SpaceError: the last dimension is not divisible by ``n``.
        """
        d = x.shape[-1]
        if d % self.n_splits:
            raise SpaceError(
                f"reversible layer {self.name!r}: hidden size {d} is not divisible by its "
                f"{self.n_splits} splits; use a hidden size that is a multiple of {self.n_splits}"
            )
        return list(x.chunk(self.n_splits, -1))

    def g(self, k: int, xs: Sequence[torch.Tensor], ys: Sequence[torch.Tensor]) -> torch.Tensor:
        """Returns ``G_k(Pool(X_{>k}, Y_{<k}))`` (0-based ``k``)."""
        return self.ops[k](self.pool([*ys[:k], *xs[k + 1 :]]))

    def forward(self, x: torch.Tensor, rng: list[RngState] | None = None) -> torch.Tensor:
        xs = self.split(x)
        ys: list[torch.Tensor] = []
        for k in range(self.n_splits):
            if rng is not None:
                rng.append(_rng_state(x))
            ys.append(xs[k] + self.g(k, xs, ys))
        return torch.cat(ys, -1)

    def inverse(self, y: torch.Tensor, rng: Sequence[RngState] | None = None) -> torch.Tensor:
        """Returns the input ``x`` with ``self(x) == y`` (Eq. 4); ``rng`` replays the states a
        recording forward kept, so that dropout inside the ops matches."""
        ys = self.split(y)
        xs: list[torch.Tensor] = list(ys)
        for k in reversed(range(self.n_splits)):
            if rng is None:
                xs[k] = ys[k] - self.g(k, xs, ys)
            else:
                with _replay(rng[k], y):
                    xs[k] = ys[k] - self.g(k, xs, ys)
        return torch.cat(xs, -1)

    def probe(self, x: torch.Tensor) -> None:
        """Checks every candidate of every op on ``x`` (shape, no in-place change of its input)
        without touching RNG, gradients or batch-norm statistics.

        Raises:
            SpaceError: a candidate returns another shape than its split, or changes its input
                in place (the input could not be rebuilt from the output).
        """
        xs = self.split(x)
        with torch.no_grad(), torch.random.fork_rng(devices=[x.device] if x.is_cuda else []):
            for k, op in enumerate(self.ops):
                h = self.pool([*xs[:k], *xs[k + 1 :]])
                for cname, cand in _candidates(op):
                    before = h.clone()
                    what = f"reversible layer {self.name!r}, split {k + 1}{_op_name(op)}"
                    what += f", candidate {cname!r}" if cname else ""
                    try:
                        with frozen_bn_stats(cand):
                            out = cand(h)
                    except Exception as exc:
                        raise SpaceError(f"{what}: fails on its split input: {exc}") from exc
                    if not isinstance(out, torch.Tensor) or out.shape != h.shape:
                        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out)
                        raise SpaceError(
                            f"{what}: output shape {got} differs from its split "
                            f"{tuple(h.shape)}; every G_k must map a split to a split (Eq. 5)"
                        )
                    if not torch.equal(before, h):
                        raise SpaceError(
                            f"{what}: changes its input in place, so the layer input cannot be "
                            "rebuilt from its output; use out-of-place ops (inplace=False)"
                        )


def _grad_params(stack: ReversibleStack) -> list[torch.Tensor]:
    """Returns the tensors the function differentiates: the stack's parameters and the
    architecture parameters of its mixed ops (held by their supernet), deduplicated, those that
    require a gradient now. The module walk is done once per stack."""
    found = _FOUND.get(stack)
    if found is None:
        mixed = [m for m in stack.modules() if isinstance(m, MixedLayer)]
        found = _FOUND[stack] = (list(stack.parameters()), mixed)
    own, mixed = found
    seen: dict[int, torch.Tensor] = {id(p): p for p in own}
    for m in mixed:
        a = m.arch()
        seen.setdefault(id(a), a)
    return [p for p in seen.values() if p.requires_grad]


class ReversibleStack(nn.Module):
    """Returns the output of ``layers`` applied in order; with ``reconstruct`` on (and a
    gradient needed) backward rebuilds each layer's input instead of storing it.

    ``reconstruct`` defaults to on inside a recorded space (search) and off in a frozen model
    (retraining uses ordinary backprop, as the paper does); :func:`set_reconstruct` switches it.
    ``context`` is shared with the ops that read extra tensors; call the stack as
    ``stack(x, memory=..., pad=...)``.

    Invariants: gradients equal those of ordinary autograd through the same layers; only the
    top output and the context tensors are saved for backward.

    Raises:
        SpaceError: a layer is not a :class:`ReversibleLayer` (it could not be inverted), or a
            candidate fails :meth:`ReversibleLayer.probe` on the first input of a shape.
    """

    def __init__(
        self,
        layers: Sequence[nn.Module],
        context: Context | None = None,
        reconstruct: bool | None = None,
        name: str = "stack",
    ) -> None:
        super().__init__()
        for i, layer in enumerate(layers):
            if not isinstance(layer, ReversibleLayer):
                raise SpaceError(
                    f"reversible stack {name!r}: layer {i} is a {type(layer).__name__}, which "
                    "has no inverse; only ReversibleLayer (Y_k = X_k + G_k(...)) can be placed in "
                    "a reversible stack: wrap the op as a G_k of a ReversibleLayer instead"
                )
            if not layer.name:
                layer.name = f"{name}.{i}"
        self.layers = nn.ModuleList(layers)
        self.context = context if context is not None else Context()
        self.reconstruct = isinstance(current(), Recording) if reconstruct is None else reconstruct
        self.name = name
        self._probed: set[tuple[int, ...]] = set()  # hidden sizes already probed
        #: Called with (layer index, reconstructed input) during a reconstructed backward.
        self.on_reconstruct: Callable[[int, torch.Tensor], None] | None = None

    def reversible_layers(self) -> list[ReversibleLayer]:
        """Returns the layers in order, as ReversibleLayers (the constructor refuses others)."""
        return [cast(ReversibleLayer, layer) for layer in self.layers]

    def probe(self, x: torch.Tensor, **context: torch.Tensor | None) -> None:
        """Checks every candidate of every layer on ``x`` (see :meth:`ReversibleLayer.probe`).

        Raises:
            SpaceError: as :meth:`ReversibleLayer.probe`, naming the layer.
        """
        self.context.tensors = dict(context)
        try:
            with torch.no_grad():
                for layer in self.reversible_layers():
                    layer.probe(x)
                    with torch.random.fork_rng(devices=[x.device] if x.is_cuda else []):
                        with frozen_bn_stats(layer):
                            x = layer(x)
        finally:
            self.context.tensors = {}

    def forward(self, x: torch.Tensor, **context: torch.Tensor | None) -> torch.Tensor:
        key = (x.shape[-1],)  # shapes only depend on the hidden size
        if key not in self._probed:
            self.probe(x, **context)
            self._probed.add(key)
        if not (self.reconstruct and torch.is_grad_enabled()):
            # kept after the call: ops recomputed later in backward (NASB's inactive
            # candidates) still read this call's context
            self.context.tensors = dict(context)
            for layer in self.layers:
                x = layer(x)
            return x
        names = [k for k, v in context.items() if v is not None]
        ctx_tensors = [context[k] for k in names]
        params = _grad_params(self)
        return _Reconstruct.apply(self, names, len(ctx_tensors), x, *ctx_tensors, *params)

    def inverse(self, y: torch.Tensor, **context: torch.Tensor | None) -> torch.Tensor:
        """Returns the stack input that gives ``y`` (no RNG replay: use in eval mode)."""
        self.context.tensors = dict(context)
        try:
            for layer in reversed(self.reversible_layers()):
                y = layer.inverse(y)
        finally:
            self.context.tensors = {}
        return y


def set_reconstruct(model: nn.Module, on: bool) -> int:
    """Returns how many reversible stacks of ``model`` now have reconstruction ``on`` (off:
    ordinary autograd through the same layers, e.g. plain DARTS for comparison)."""
    n = 0
    for m in model.modules():
        if isinstance(m, ReversibleStack):
            m.reconstruct = on
            n += 1
    return n


class _Reconstruct(torch.autograd.Function):
    """The whole stack as one function; backward is Algorithm 1 applied from the top layer down.

    Inputs: (stack, context names, number of context tensors, x, *context, *params).
    """

    @staticmethod
    def forward(ctx: Any, stack: ReversibleStack, names: list[str], n_ctx: int, x: Any, *rest: Any):
        context = dict(zip(names, rest[:n_ctx]))
        stack.context.tensors = context
        states: list[list[RngState]] = []
        try:
            with torch.no_grad():
                for layer in stack.layers:
                    states.append([])
                    x = layer(x, rng=states[-1])
        finally:
            stack.context.tensors = {}
        ctx.stack, ctx.names, ctx.n_ctx, ctx.states = stack, names, n_ctx, states
        ctx.save_for_backward(x, *rest[:n_ctx])
        return x

    @staticmethod
    def backward(ctx: Any, grad_y: torch.Tensor) -> Any:
        stack: ReversibleStack = ctx.stack
        y, *ctx_in = ctx.saved_tensors
        need = ctx.needs_input_grad
        n_ctx = ctx.n_ctx
        params = _grad_params(stack)
        # context leaves: gradients into e.g. the encoder memory are collected across layers
        leaves = [t.detach().requires_grad_(bool(need[4 + i])) for i, t in enumerate(ctx_in)]
        grad_ctx: list[torch.Tensor | None] = [None] * n_ctx
        grad_p: dict[int, torch.Tensor] = {}
        stack.context.tensors = dict(zip(ctx.names, leaves))
        try:
            y = y.detach()
            layers = stack.reversible_layers()
            for i in reversed(range(len(layers))):
                layer = layers[i]
                own = _param_ids(layer)
                wrt = [p for p in params if id(p) in own or id(p) not in _param_ids(stack)]
                y, grad_y = _layer_backward(
                    layer, y, grad_y, ctx.states[i], leaves, wrt, grad_ctx, grad_p
                )
                if stack.on_reconstruct is not None:
                    stack.on_reconstruct(i, y)
        finally:
            stack.context.tensors = {}
        out_p = [grad_p.get(id(p)) for p in params]
        return (None, None, None, grad_y, *grad_ctx, *out_p)


def _param_ids(module: nn.Module) -> set[int]:
    """Returns the ids of the parameters of ``module`` (computed once per module)."""
    ids = _PARAM_IDS.get(module)
    if ids is None:
        ids = _PARAM_IDS[module] = {id(q) for q in module.parameters()}
    return ids


def _has_bn(module: nn.Module) -> bool:
    """Returns whether ``module`` holds a batch-norm layer (computed once per module)."""
    has = _HAS_BN.get(module)
    if has is None:
        has = _HAS_BN[module] = any(
            isinstance(m, nn.modules.batchnorm._BatchNorm) for m in module.modules()
        )
    return has


def _add(store: Any, key: Any, g: torch.Tensor | None) -> None:
    if g is None:
        return
    store[key] = g if store[key] is None else store[key] + g


def _layer_backward(
    layer: ReversibleLayer,
    y: torch.Tensor,
    grad_y: torch.Tensor,
    states: list[RngState],
    leaves: list[torch.Tensor],
    wrt: list[torch.Tensor],
    grad_ctx: list[torch.Tensor | None],
    grad_p: dict[int, torch.Tensor],
) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns (X, dX) of one layer from (Y, dY) (Algorithm 1); adds the gradients of ``wrt``
    (weights, architecture parameters) to ``grad_p`` and of the context leaves to ``grad_ctx``.
    """
    n = layer.n_splits
    ys = layer.split(y)
    gys: list[torch.Tensor | None] = list(layer.split(grad_y))  # grad_k of Algorithm 1
    xs: list[torch.Tensor] = list(ys)  # filled from the top split down
    gxs: list[torch.Tensor | None] = [None] * n
    ctx_need = [t for t in leaves if t.requires_grad]
    for k in reversed(range(n)):
        # inputs of G_k: Y_{<k} and the already rebuilt X_{>k}, as fresh leaves
        ins = [t.detach().requires_grad_(True) for t in (*ys[:k], *xs[k + 1 :])]
        op = layer.ops[k]
        with torch.enable_grad(), _replay(states[k], y):
            if _has_bn(op):
                with frozen_bn_stats(op):  # running statistics were updated in forward
                    g = op(layer.pool(ins))
            else:
                g = op(layer.pool(ins))
        targets = ins + wrt + ctx_need
        grads: tuple[torch.Tensor | None, ...]  # allow_unused: None for a target G_k ignores
        if g.requires_grad:
            grads = torch.autograd.grad(g, targets, gys[k], allow_unused=True)
        else:  # a constant G_k (the zero op): no gradient flows through it
            grads = (None,) * len(targets)
        for j in range(k):  # into grad Y_j, j < k
            _add(gys, j, grads[j])
        for j in range(k + 1, n):  # into grad X_j, j > k
            _add(gxs, j, grads[j - 1])  # X_j sits at position k + (j - k - 1)
        off = len(ins)
        for p, gp in zip(wrt, grads[off : off + len(wrt)]):
            if gp is not None:
                grad_p[id(p)] = gp if id(p) not in grad_p else grad_p[id(p)] + gp
        off += len(wrt)
        ci = 0
        for i, t in enumerate(leaves):
            if t.requires_grad:
                _add(grad_ctx, i, grads[off + ci])
                ci += 1
        xs[k] = ys[k] - g.detach()  # Eq. 4
        _add(gxs, k, gys[k])  # the direct path Y_k = X_k + ...
        del g, grads, ins
    gx = [t if t is not None else torch.zeros_like(xs[i]) for i, t in enumerate(gxs)]
    return torch.cat(xs, -1), torch.cat(gx, -1)
