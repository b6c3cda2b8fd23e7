"""The candidate operations of the DARTSformer seq2seq space (§2.5), each from a split to a split.

Every op maps ``(B, T, C)`` to ``(B, T, C)`` (``C`` = hidden size / splits). The non-trivial
ones are wrapped ``LayerNorm(X + dropout(o(X)))`` (the paper's substitute for the residual and
normalisation a reversible network cannot have around a layer); Zero and Identity are not.

    name          o(X)                                                   kinds
    conv{w}       Conv1d(C, C, w) over time, ReLU; w in {3, 5, 7, 11}    standard conv w×1
    dyn{w}        Linear+GLU, dynamic conv (Wu et al. 2019), Linear      w in {3, 7, 11, 15}
    self_attn     multi-head self-attention (8 heads)
    cross_attn    multi-head attention to the encoder memory             decoder only
    glu           Linear(C, 2C), GLU (Dauphin et al. 2017)
    ffn           Linear(C, 4C), ReLU, dropout, Linear(4C, C)
    zero          a zero tensor
    identity      X

Decoder ops are causal: convolutions pad on the left only, dynamic-conv windows end at the
current position, self-attention has a causal mask. Ops read the masks and the encoder memory
from the stack's :class:`~nasforge.oneshot.reversible.Context` (``pad``: ``(B, T)`` True at
padding; ``memory`` ``(B, S, d)`` and ``memory_pad`` ``(B, S)``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
from torch import nn
from torch.nn import functional as F

from nasforge.errors import SpaceError
from nasforge.oneshot.reversible import Context

__all__ = [
    "CONV_WIDTHS",
    "DYN_WIDTHS",
    "Wrapped",
    "StdConv",
    "DynConv",
    "SelfAttn",
    "CrossAttn",
    "GLUOp",
    "FFNOp",
    "Zero",
    "op_names",
    "make_ops",
]

CONV_WIDTHS = (3, 5, 7, 11)
DYN_WIDTHS = (3, 7, 11, 15)


def op_names(decoder: bool) -> list[str]:
    """Returns the candidate names in order: 13 for the encoder, 14 for the decoder."""
    names = [f"conv{w}" for w in CONV_WIDTHS] + [f"dyn{w}" for w in DYN_WIDTHS]
    names += ["self_attn"] + (["cross_attn"] if decoder else [])
    return names + ["glu", "ffn", "zero", "identity"]


def _masked(x: torch.Tensor, ctx: Context) -> torch.Tensor:
    """Returns ``x`` with padded positions zeroed, so that no op mixes padding into tokens."""
    pad = ctx.get("pad")
    return x if pad is None else x.masked_fill(pad.unsqueeze(-1), 0.0)


class Wrapped(nn.Module):
    """Returns ``LayerNorm(X + dropout(o(X)))``."""

    def __init__(self, op: nn.Module, c: int, dropout: float) -> None:
        super().__init__()
        self.op = op
        self.drop = nn.Dropout(dropout)
        self.norm = nn.LayerNorm(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x + self.drop(self.op(x)))


class StdConv(nn.Module):
    """Returns ReLU(Conv1d(x)) over time, width ``w``, 'same' (encoder) or causal (decoder)."""

    def __init__(self, c: int, w: int, causal: bool, ctx: Context) -> None:
        super().__init__()
        self.conv = nn.Conv1d(c, c, w)
        self.pad = (w - 1, 0) if causal else ((w - 1) // 2, w // 2)
        self.ctx = ctx

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.pad(_masked(x, self.ctx).transpose(1, 2), self.pad)  # (B, C, T + w - 1)
        return F.relu(self.conv(h)).transpose(1, 2)


class DynConv(nn.Module):
    """Returns the dynamic convolution of Wu et al. (2019): Linear+GLU, then per position a
    softmax-normalised kernel of width ``w`` predicted from the input, shared by the channels of
    each of ``heads`` groups, then Linear."""

    def __init__(self, c: int, w: int, heads: int, causal: bool, ctx: Context) -> None:
        super().__init__()
        self.inp = nn.Linear(c, 2 * c)
        self.kernel = nn.Linear(c, heads * w)
        self.out = nn.Linear(c, c)
        self.w, self.heads = w, heads
        self.pad = (w - 1, 0) if causal else ((w - 1) // 2, w // 2)
        self.ctx = ctx

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        h = _masked(F.glu(self.inp(x), dim=-1), self.ctx)  # (B, T, C)
        k = torch.softmax(self.kernel(x).view(b, t, self.heads, 1, self.w), dim=-1)
        win = F.pad(h.transpose(1, 2), self.pad).unfold(2, self.w, 1)  # (B, C, T, w)
        win = win.permute(0, 2, 1, 3).reshape(b, t, self.heads, c // self.heads, self.w)
        return self.out((win * k).sum(-1).reshape(b, t, c))


class SelfAttn(nn.Module):
    """Returns multi-head self-attention over the split (causal in the decoder)."""

    def __init__(self, c: int, heads: int, dropout: float, causal: bool, ctx: Context) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(c, heads, dropout=dropout, batch_first=True)
        self.causal, self.ctx = causal, ctx

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x.shape[1]
        mask = None
        if self.causal:
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        out, _ = self.attn(
            x, x, x, key_padding_mask=self.ctx.get("pad"), attn_mask=mask, need_weights=False
        )
        return out


class CrossAttn(nn.Module):
    """Returns multi-head attention from the split to the encoder memory (decoder only).

    Raises:
        SpaceError: no memory in the context (the op sits in an encoder).
    """

    def __init__(self, c: int, d_memory: int, heads: int, dropout: float, ctx: Context) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(
            c, heads, dropout=dropout, batch_first=True, kdim=d_memory, vdim=d_memory
        )
        self.ctx = ctx

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mem = self.ctx.get("memory")
        if mem is None:
            raise SpaceError(
                "cross-attention found no encoder memory: it is only available to the decoder; "
                "remove 'cross_attn' from the encoder's candidates"
            )
        out, _ = self.attn(
            x, mem, mem, key_padding_mask=self.ctx.get("memory_pad"), need_weights=False
        )
        return out


class GLUOp(nn.Module):
    """Returns GLU(Linear(C, 2C)(x))."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.lin = nn.Linear(c, 2 * c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.glu(self.lin(x), dim=-1)


class FFNOp(nn.Sequential):
    """Returns Linear(4C, C)(dropout(ReLU(Linear(C, 4C)(x))))."""

    def __init__(self, c: int, dropout: float) -> None:
        super().__init__(nn.Linear(c, 4 * c), nn.ReLU(), nn.Dropout(dropout), nn.Linear(4 * c, c))


class Zero(nn.Module):
    """Returns a zero tensor of the input's shape (G_k = 0: the split passes unchanged)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)


def make_ops(
    names: list[str],
    c: int,
    d_memory: int,
    heads: int,
    dropout: float,
    causal: bool,
    ctx: Context,
) -> dict[str, Callable[[], nn.Module]]:
    """Returns a factory per candidate name (a LayerChoice builds only what it needs).

    Raises:
        SpaceError: an unknown name, or a split size ``c`` not divisible by ``heads``.
    """
    if c % heads:
        raise SpaceError(
            f"split size {c} is not divisible by {heads} attention/dynamic-conv heads; choose a "
            f"hidden size whose per-split size is a multiple of {heads}"
        )

    def wrap(make: Callable[[], nn.Module]) -> Callable[[], nn.Module]:
        return lambda: Wrapped(make(), c, dropout)

    table: dict[str, Callable[[], nn.Module]] = {}
    for w in CONV_WIDTHS:
        table[f"conv{w}"] = wrap(partial(StdConv, c, w, causal, ctx))
    for w in DYN_WIDTHS:
        table[f"dyn{w}"] = wrap(partial(DynConv, c, w, heads, causal, ctx))
    table["self_attn"] = wrap(lambda: SelfAttn(c, heads, dropout, causal, ctx))
    table["cross_attn"] = wrap(lambda: CrossAttn(c, d_memory, heads, dropout, ctx))
    table["glu"] = wrap(lambda: GLUOp(c))
    table["ffn"] = wrap(lambda: FFNOp(c, dropout))
    table["zero"] = Zero
    table["identity"] = nn.Identity
    unknown = [n for n in names if n not in table]
    if unknown:
        raise SpaceError(f"unknown seq2seq op(s) {unknown}; expected names from {list(table)}")
    return {n: table[n] for n in names}
