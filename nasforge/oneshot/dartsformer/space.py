"""The DARTSformer sequence-to-sequence space (§2.5): reversible encoder and decoder searched per
split, as an ordinary nasforge space of labelled choices.

Shape table (``B`` batch, ``S``/``T`` source/target length, ``d`` hidden, ``e`` embedding,
``m`` encoder splits, ``m + 1`` decoder splits, ``s`` searched layers, ``r`` repeats)::

    embed        shared factorised embedding  V×e then e×d, + sinusoidal positions   (B, S, d)
    encoder      r·s reversible layers, m splits of d/m; split k of layer i is the
                 LayerChoice "enc{i}.g{k}" (13 ops), tied across the r repeats        (B, S, d)
    decoder      r·s reversible layers, m + 1 splits of d/(m+1); splits 1..m are
                 LayerChoice "dec{i}.g{k}" (14 ops), split m + 1 is fixed cross-attention
    out          LayerNorm, then logits through the transposed embedding             (B, T, V)

The space has ``13^(s·m) · 14^(s·m)`` architectures (:func:`space_size`); the paper's
``|O|^{s(m+n)}`` counts the decoder's fixed split too. Searched (recorded) stacks backpropagate
by reconstruction; a frozen architecture (``nf.freeze(space, arch)``) is a plain module trained
by ordinary backprop (its stacks have ``reconstruct=False``), as the paper retrains.

Raises (at construction, before any training): SpaceError for a hidden size not divisible by
the encoder's or the decoder's number of splits, a split size not divisible by the heads, a
cross-attention candidate in the encoder, or an unknown op name.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

import nasforge as nf
from nasforge.errors import SpaceError
from nasforge.oneshot.dartsformer.ops import CrossAttn, Wrapped, make_ops, op_names
from nasforge.oneshot.reversible import Context, ReversibleLayer, ReversibleStack

__all__ = [
    "FactorizedEmbedding",
    "Seq2SeqSpace",
    "TransformerSeq2Seq",
    "n_params",
    "space_size",
]


def space_size(n_enc_ops: int, n_dec_ops: int, s: int, m: int) -> int:
    """Returns the exact number of architectures: ``n_enc_ops^(s·m) · n_dec_ops^(s·m)`` (the
    decoder's last split is fixed)."""
    return n_enc_ops ** (s * m) * n_dec_ops ** (s * m)


def n_params(model: nn.Module) -> int:
    """Returns the number of distinct parameters of ``model`` (tied weights counted once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def _positions(t: int, d: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    pos = torch.arange(t, device=device, dtype=torch.float64).unsqueeze(1)
    div = torch.exp(
        torch.arange(0, d, 2, device=device, dtype=torch.float64) * (-math.log(1e4) / d)
    )
    pe = torch.zeros(t, d, device=device, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)[:, : d // 2]
    return pe.to(dtype)


class FactorizedEmbedding(nn.Module):
    """Returns token embeddings ``E[x] P`` (V×e then e×d, §3.2) plus sinusoidal positions;
    :meth:`logits` reuses both matrices transposed (embeddings shared by source, target, output).
    """

    def __init__(self, vocab_size: int, e: int, d: int, dropout: float, pad_id: int = 0) -> None:
        super().__init__()
        self.table = nn.Embedding(vocab_size, e, padding_idx=pad_id)
        nn.init.normal_(self.table.weight, std=e**-0.5)
        with torch.no_grad():
            self.table.weight[pad_id].zero_()
        self.proj = nn.Linear(e, d, bias=False)
        self.drop = nn.Dropout(dropout)
        self.d = d

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.proj(self.table(tokens)) * math.sqrt(self.d)
        return self.drop(x + _positions(tokens.shape[1], self.d, x.device, x.dtype))

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """Returns ``(h P^T) E^T``: scores over the vocabulary."""
        return (h @ self.proj.weight) @ self.table.weight.t()


class _EncoderDecoder(nn.Module):
    """Shared interface: ``encode(src)``, ``decode(tgt_in, memory, src_pad)``, ``forward``."""

    pad_id: int
    embed: FactorizedEmbedding

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns (memory ``(B, S, d)``, source padding mask ``(B, S)``)."""
        raise NotImplementedError

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_pad: torch.Tensor):
        """Returns next-token logits ``(B, T, V)`` for every target prefix position."""
        raise NotImplementedError

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        return self.decode(tgt_in, *self.encode(src))


class Seq2SeqSpace(_EncoderDecoder, nf.ModelSpace):
    """Returns the DARTSformer seq2seq space (see the module docstring).

    Invariants: labels ``enc{i}.g{k}`` (i < s, k < m) and ``dec{i}.g{k}`` (i < s, k < m), each
    tied across the ``repeats`` copies of the searched block; ``search_space().size()`` equals
    :func:`space_size`.

    Raises:
        SpaceError: see the module docstring (the message names the stack).
    """

    def __init__(
        self,
        vocab_size: int,
        d: int = 96,
        e: int = 64,
        n_splits: int = 2,
        s: int = 2,
        repeats: int = 1,
        pool: str = "max",
        heads: int = 8,
        dropout: float = 0.1,
        pad_id: int = 0,
        enc_ops: list[str] | None = None,
        dec_ops: list[str] | None = None,
    ) -> None:
        super().__init__()
        m = n_splits
        if m < 2 or s < 1 or repeats < 1:
            raise SpaceError(
                f"need n_splits >= 2, s >= 1, repeats >= 1; got {n_splits}, {s}, {repeats}"
            )
        for where, n in (("encoder", m), ("decoder", m + 1)):
            if d % n:
                raise SpaceError(
                    f"{where}: hidden size d={d} is not divisible by its {n} splits; use a "
                    f"multiple of {m * (m + 1)} (encoder {m} splits, decoder {m + 1})"
                )
        enc_ops = list(enc_ops) if enc_ops is not None else op_names(decoder=False)
        dec_ops = list(dec_ops) if dec_ops is not None else op_names(decoder=True)
        if "cross_attn" in enc_ops:
            raise SpaceError(
                "encoder: candidate 'cross_attn' is only available to the decoder (there is no "
                "memory to attend to); remove it from enc_ops"
            )
        self.pad_id = pad_id
        self.embed = FactorizedEmbedding(vocab_size, e, d, dropout, pad_id)
        enc_ctx, dec_ctx = Context(), Context()
        ce, cd = d // m, d // (m + 1)
        enc_table = make_ops(enc_ops, ce, d, heads, dropout, False, enc_ctx)
        dec_table = make_ops(dec_ops, cd, d, heads, dropout, True, dec_ctx)
        enc_layers, dec_layers = [], []
        for r in range(repeats):
            for i in range(s):
                enc_layers.append(
                    ReversibleLayer(
                        [nf.LayerChoice(enc_table, label=f"enc{i}.g{k}") for k in range(m)],
                        pool,
                        name=f"encoder.{r * s + i}",
                    )
                )
                ops: list[nn.Module] = [
                    nf.LayerChoice(dec_table, label=f"dec{i}.g{k}") for k in range(m)
                ]
                ops.append(Wrapped(CrossAttn(cd, d, heads, dropout, dec_ctx), cd, dropout))
                dec_layers.append(ReversibleLayer(ops, pool, name=f"decoder.{r * s + i}"))
        self.encoder = ReversibleStack(enc_layers, enc_ctx, name="encoder")
        self.decoder = ReversibleStack(dec_layers, dec_ctx, name="decoder")
        self.enc_norm = nn.LayerNorm(d)
        self.dec_norm = nn.LayerNorm(d)

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns (memory ``(B, S, d)``, source padding mask ``(B, S)``)."""
        pad = src == self.pad_id
        return self.enc_norm(self.encoder(self.embed(src), pad=pad)), pad

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_pad: torch.Tensor):
        """Returns next-token logits ``(B, T, V)`` for every target prefix position."""
        h = self.decoder(
            self.embed(tgt_in), pad=tgt_in == self.pad_id, memory=memory, memory_pad=src_pad
        )
        return self.embed.logits(self.dec_norm(h))


class TransformerSeq2Seq(_EncoderDecoder):
    """Returns a standard Transformer (Vaswani et al. 2017; post-norm, ReLU FFN of 4d, 8 heads)
    with the same shared factorised embedding: the baseline of equal parameter count."""

    def __init__(
        self,
        vocab_size: int,
        d: int,
        e: int = 64,
        layers: int = 2,
        heads: int = 8,
        dropout: float = 0.1,
        pad_id: int = 0,
        ffn: int | None = None,
    ) -> None:
        super().__init__()
        self.pad_id = pad_id
        self.embed = FactorizedEmbedding(vocab_size, e, d, dropout, pad_id)
        f = ffn or 4 * d
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d, heads, f, dropout, batch_first=True),
            layers,
            enable_nested_tensor=False,
        )
        self.decoder = nn.TransformerDecoder(
            nn.TransformerDecoderLayer(d, heads, f, dropout, batch_first=True), layers
        )

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns (memory ``(B, S, d)``, source padding mask ``(B, S)``)."""
        pad = src == self.pad_id
        return self.encoder(self.embed(src), src_key_padding_mask=pad), pad

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_pad: torch.Tensor):
        """Returns next-token logits ``(B, T, V)`` for every target prefix position."""
        t = tgt_in.shape[1]
        causal = torch.ones(t, t, dtype=torch.bool, device=tgt_in.device).triu(1)
        h = self.decoder(
            self.embed(tgt_in),
            memory,
            tgt_mask=causal,
            tgt_key_padding_mask=tgt_in == self.pad_id,
            memory_key_padding_mask=src_pad,
        )
        return self.embed.logits(h)

    @classmethod
    def matching(
        cls, target: int, vocab_size: int, e: int = 64, layers: int = 2, **kw: Any
    ) -> TransformerSeq2Seq:
        """Returns the Transformer whose parameter count is closest to ``target`` (hidden size a
        multiple of the 8 heads, ``layers`` encoder and decoder layers)."""
        best: tuple[int, int] | None = None
        for d in range(8, 2049, 8):
            dummy = cls(vocab_size, d, e, layers, **kw)
            gap = abs(n_params(dummy) - target)
            if best is None or gap < best[0]:
                best = (gap, d)
            elif n_params(dummy) > target:
                break
        assert best is not None
        return cls(vocab_size, best[1], e, layers, **kw)
