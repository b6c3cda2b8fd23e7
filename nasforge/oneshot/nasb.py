"""NASB: binary neural architecture search (the NASB-CMP paper, section 2.3, Algorithms 1-2).

The real-valued architecture matrix A is binarised per node into G: among the entries of all
candidates of the node's incoming edges, the ``k`` largest are 1 (active), the rest 0, where
``k`` is the number of inputs the node keeps (``n_chosen`` of its InputChoice: 2 in the DARTS
cell). Generalised to any ModelSpace: a LayerChoice that feeds no InputChoice is a node with one
edge and ``k = 1``; an InputChoice over other tensors binarises its own entries with
``k = n_chosen``; a Repeat keeps its single largest depth entry.

Only active operations enter the autograd graph. Every entry of A, active or not, still gets the
gradient of Eq. 6, ``dL/dA_ek = <dL/dm_e, o_k(n)>``, from :class:`_ArchGrad`::

      alpha_e ─┐                      backward: grad alpha_e[k] = sum(g * o_k(x))
      m_e ─────┼─> _ArchGrad ─> m_e   (identity forward; g passes straight to m_e)
      x ───────┘  (saved: a node output that exists anyway; no gradient through this path)

where ``o_k(x)`` is the active output when known and is otherwise recomputed on the fly in
backward under ``no_grad`` (batch-norm running statistics left untouched). An edge with no
active op outputs a stride-0 zero tensor, so that its entries still receive ``dL/dm_e``.

Update orders: ``consecutive`` (Algorithm 1: F_A, B_A, F_w, B_w all with G_t, both updates after
all four) and ``alternate`` (Algorithm 2: A updated first, then w with G_{t+1}).

:class:`NaspLayer` is the dense reference (NASP): every candidate in the graph, multiplied by the
straight-through mask G; its architecture gradients equal NASB's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import torch

from nasforge.errors import ConfigError
from nasforge.oneshot.algorithms import register_algorithm
from nasforge.oneshot.common import (
    SearchConfig,
    apply_arch,
    apply_weights,
    arch_grads,
    arch_step,
    check_optional_int,
    frozen_bn_stats,
    ranks_of,
    sharded_loss,
    weight_grads,
    weight_step,
)
from nasforge.oneshot.mixed import Host
from nasforge.oneshot.supernet import (
    Algorithm,
    MixedInput,
    MixedLayer,
    MixedRepeat,
    Supernet,
)

__all__ = [
    "Nasb",
    "Nasp",
    "NasbSettings",
    "NasbLayer",
    "NasbInput",
    "NasbRepeat",
    "NaspLayer",
    "NaspInput",
    "NaspRepeat",
    "binarize",
    "nasb_step",
]

Recompute = Callable[[torch.Tensor, Sequence[torch.Tensor]], torch.Tensor]


class _ArchGrad(torch.autograd.Function):
    """Identity on ``out``; gives ``alpha`` the gradient <g, o_k> of every entry (Eq. 6)."""

    @staticmethod
    def forward(
        ctx: Any, alpha: torch.Tensor, out: torch.Tensor, fn: Recompute, *saved: Any
    ) -> Any:
        ctx.fn = fn
        ctx.save_for_backward(*saved)
        return out.view_as(out)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> Any:
        saved = ctx.saved_tensors
        grad_alpha = ctx.fn(g, saved) if ctx.needs_input_grad[0] else None
        return (grad_alpha, g, None, *([None] * len(saved)))


def _topk_mask(a: torch.Tensor, k: int, uniform: torch.Generator | None = None) -> list[int]:
    scores = a.detach() if uniform is None else torch.rand(a.shape, generator=uniform)
    return sorted(torch.topk(scores, min(k, a.numel())).indices.tolist())


def binarize(net: Supernet, uniform: torch.Generator | None = None) -> None:
    """Sets G from A on every binary mixed op: per node the ``k`` largest entries over its edges'
    candidates, per lone layer the largest, per input/depth choice its ``n_chosen``/1 largest.
    With ``uniform`` (a warm-up step), random scores drawn from it take A's place: every op is
    as likely to be active, whatever A holds."""
    for m in net.mixed():
        if isinstance(m, NasbInput):
            if m.edges:
                sizes = [len(e.names) for e in m.edges]
                flat = torch.cat([e.arch().detach() for e in m.edges])
                top = _topk_mask(flat, m.n_chosen, uniform)
                start = 0
                for e, n in zip(m.edges, sizes):
                    # the supernet was built by a NASB/NASP algorithm: its edges are binary ops
                    assert isinstance(e, (NasbLayer, NaspLayer)), type(e).__name__
                    e.active = [i - start for i in top if start <= i < start + n]
                    start += n
            else:
                m.active = _topk_mask(m.arch(), m.n_chosen, uniform)
        elif isinstance(m, (NasbLayer, NaspLayer)) and m.node is None:
            m.active = _topk_mask(m.arch(), 1, uniform)
        elif isinstance(m, NasbRepeat):
            m.active = _topk_mask(m.arch(), 1, uniform)
    net._binarized = True


def _ensure(host: Host) -> None:
    net = cast(Supernet, host)  # a NASB mixed op lives in a NASB supernet
    if not net._binarized:
        binarize(net)


class NasbLayer(MixedLayer):
    """Returns the sum of the active candidates' outputs; inactive ones only in backward."""

    active: list[int] = []

    def mixed_forward(self, *args: torch.Tensor) -> torch.Tensor:
        _ensure(self.net)
        outs = [self.candidates()[k](*args) for k in self.active]
        if outs:
            out = outs[0]
            for o in outs[1:]:
                out = out + o
        else:
            out = self.zeros(args[0])
        alpha = self.arch()
        if not alpha.requires_grad:
            return out
        n_args = len(args)
        known = {self.active[0]: n_args} if len(outs) == 1 else {}
        saved = (*args, out) if known else args
        cands = self.candidates()

        def fn(g: torch.Tensor, saved: Sequence[torch.Tensor]) -> torch.Tensor:
            inputs = saved[:n_args]
            grad = torch.zeros_like(alpha)
            with torch.no_grad():
                for k, cand in enumerate(cands):
                    if k in known:
                        o = saved[known[k]]
                    else:
                        with frozen_bn_stats(cand):
                            o = cand(*inputs)
                    grad[k] = (g * o).sum()
            return grad

        return _ArchGrad.apply(alpha, out, fn, *saved)


class NasbInput(MixedInput):
    """Returns the reduction of a node's edges, or of the active inputs of an InputChoice."""

    active: list[int] = []

    def mixed_forward(self, inputs: list[torch.Tensor]) -> torch.Tensor:
        _ensure(self.net)
        if self.edges:  # each edge already carries its binary gate
            return self.reduce(list(inputs), self.n_chosen)
        out = self.reduce([inputs[i] for i in self.active], len(self.active))
        alpha = self.arch()
        if not alpha.requires_grad:
            return out
        scale = 1.0 / len(self.active) if self.reduction == "mean" else 1.0

        def fn(g: torch.Tensor, saved: Sequence[torch.Tensor]) -> torch.Tensor:
            return torch.stack([(g * x).sum() * scale for x in saved])

        return _ArchGrad.apply(alpha, out, fn, *inputs)


class NasbRepeat(MixedRepeat):
    """Returns the output after the active depth; deeper outputs are recomputed in backward."""

    active: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _ensure(self.net)
        d = self.values[self.active[0]]
        outs = self.outputs(x, d)
        out = outs[d]
        alpha = self.arch()
        if not alpha.requires_grad:
            return out
        known = [v for v in self.values if v <= d]
        blocks = self.blocks()
        values = self.values

        def fn(g: torch.Tensor, saved: Sequence[torch.Tensor]) -> torch.Tensor:
            have = dict(zip(known, saved))
            grad = torch.zeros_like(alpha)
            with torch.no_grad():
                y, depth = have[d], d
                for v in sorted(values):
                    if v not in have:
                        for block in blocks[depth:v]:
                            with frozen_bn_stats(block):
                                y = block(y)
                        depth, have[v] = v, y
                for i, v in enumerate(values):
                    grad[i] = (g * have[v]).sum()
            return grad

        return _ArchGrad.apply(alpha, out, fn, *(outs[v] for v in known))


class NaspLayer(MixedLayer):
    """Returns sum_k G_k o_k(x) with every candidate in the graph and G straight-through (the
    dense binary mixed op of NASP; the reference NASB's gradients are tested against)."""

    active: list[int] = []

    def mixed_forward(self, *args: torch.Tensor) -> torch.Tensor:
        _ensure(self.net)
        gate = _gate(self.arch(), self.active)
        out = None
        for k, cand in enumerate(self.candidates()):
            y = gate[k] * cand(*args)
            out = y if out is None else out + y
        assert out is not None
        return out


def _gate(alpha: torch.Tensor, active: list[int]) -> torch.Tensor:
    """Returns the binary mask G with a straight-through gradient to A (dL/dA := dL/dG)."""
    hard = torch.zeros_like(alpha)
    hard[active] = 1.0
    return hard + alpha - alpha.detach()


class NaspInput(NasbInput):
    """Returns sum_i G_i x_i with every input in the graph (dense reference of NasbInput)."""

    def mixed_forward(self, inputs: list[torch.Tensor]) -> torch.Tensor:
        _ensure(self.net)
        if self.edges:
            return self.reduce(list(inputs), self.n_chosen)
        gate = _gate(self.arch(), self.active)
        return self.reduce([gate[i] * x for i, x in enumerate(inputs)], len(self.active))


class NaspRepeat(NasbRepeat):
    """Returns sum_d G_d y_d with every depth computed in the graph (dense reference)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _ensure(self.net)
        gate = _gate(self.arch(), self.active)
        outs = self.outputs(x, max(self.depths))
        return sum(gate[i] * outs[d] for i, d in enumerate(self.values))


@dataclass
class NasbSettings:
    """Returns nothing; the settings of NASB and NASP."""

    order: str = "consecutive"  # update order: "consecutive" (Alg. 1) or "alternate" (Alg. 2)
    # epochs of uniform gates before A moves; None: half of ``epochs`` (``Nasb.warmup``)
    warmup_epochs: int | None = None

    def check(self) -> None:
        """Raises ConfigError on an unknown order or a bad warm-up."""
        if self.order not in ("consecutive", "alternate"):
            raise ConfigError(
                f"order must be 'consecutive' (Algorithm 1) or 'alternate' (Algorithm 2), "
                f"got {self.order!r}"
            )
        check_optional_int("warmup_epochs", self.warmup_epochs, 0,
                           "epochs of uniform paths before the architecture moves: ENAS, NASB",
                           "the algorithm's default")  # fmt: skip


@register_algorithm
class Nasb(Algorithm):
    """The NASB binary mixed ops; a step follows the setting ``order`` (Algorithm 1 or 2)."""

    name = "nasb"
    settings_class = NasbSettings
    layer: type[MixedLayer] = NasbLayer  # Nasp swaps in NaspLayer, a sibling class
    input = NasbInput
    repeat = NasbRepeat
    draws_gates = True
    defers_arch_grads = True
    # half the epochs train uniform binary paths while A waits: without it, only the ops A's
    # initial argmax activates are trained, and A learns from the others' untrained outputs
    # (docs/oneshot.md, "NASB", measures the warm-up's share)
    warmup = 0.5

    @classmethod
    def draw_gates(cls, net: Supernet, uniform: torch.Generator | None = None) -> None:
        """Draws the binary gates G from A, or uniformly from ``uniform`` (:func:`binarize`)."""
        binarize(net, uniform)

    @staticmethod
    def strength(a: torch.Tensor) -> torch.Tensor:
        """Returns A itself: NASB binarises A directly, so export ranks raw entries."""
        return a

    @classmethod
    def step(
        cls, net: Supernet, state: Any, train: Any, val: Any, cfg: SearchConfig
    ) -> tuple[float, float | None]:
        """Returns (train loss, val loss) of one NASB step (a warm-up step in the first
        :meth:`warmup_epochs`: uniform gates drawn from the search's generator, A kept)."""
        warm = state.g if state.epoch < cls.warmup_epochs(cfg) else None
        return nasb_step(net, state.opt_w, state.opt_a, train, val, cfg, warm)

    @classmethod
    def current_arch(cls, net: Supernet) -> Any:
        """Returns the argmax architecture, after binarising G so the supernet computes it."""
        binarize(net)
        return net.export()

    @classmethod
    def parallel_problem(cls, cfg: Any) -> str:
        """Returns why ``order='alternate'`` cannot run model-parallel ("" for Algorithm 1)."""
        if cfg.algo.order == "consecutive":
            return ""
        return (
            f"model parallel search runs Algorithm 1 (order='consecutive'), got order="
            f"{cfg.algo.order!r}: CMP overlaps F_A with F_w, which needs both to use G_t"
        )


@register_algorithm
class Nasp(Nasb):
    """NASB's binarisation with dense (NASP) layers: every candidate kept in the graph."""

    name = "nasp"
    layer = NaspLayer
    input = NaspInput
    repeat = NaspRepeat
    defers_arch_grads = False  # dense layers: the gradient needs every candidate's output now


def nasb_step(
    net: Supernet,
    opt_w: torch.optim.Optimizer,
    opt_a: torch.optim.Optimizer,
    train_batch: tuple[torch.Tensor, torch.Tensor],
    val_batch: tuple[torch.Tensor, torch.Tensor],
    cfg: SearchConfig,
    uniform: torch.Generator | None = None,
) -> tuple[float, float]:
    """Returns (train loss, val loss) of one NASB step in ``cfg.algo.order``.

    consecutive (Algorithm 1): G_t; F_A, B_A on val; F_w, B_w on train; then update A and w.
    alternate (Algorithm 2): G_t; update A on val; G_{t+1}; update w on train.

    With ``uniform`` (a warm-up step) G is drawn uniformly from it and A is not updated: the
    validation pass runs without gradients (its batch-norm statistics still move, as they do
    in model-parallel search, which stays bitwise equal), then the weight step.
    """
    binarize(net, uniform)
    if uniform is not None:
        with torch.no_grad():
            shard_loss, _ = sharded_loss(net, val_batch)  # this rank's shard (one process: all)
            (val_loss,) = ranks_of(net).all_reduce_tensors([], float(shard_loss))
        train_loss = weight_grads(net, train_batch)
        apply_weights(net, opt_w, cfg)
    elif cfg.algo.order == "consecutive":
        val_loss, grads = arch_grads(net, val_batch)
        train_loss = weight_grads(net, train_batch)
        apply_arch(net, opt_a, grads)
        apply_weights(net, opt_w, cfg)
    else:
        val_loss = arch_step(net, opt_a, val_batch)
        binarize(net)
        train_loss = weight_step(net, opt_w, train_batch, cfg)
    return train_loss, val_loss
