"""Shared setup of the reversible-search benchmarks: one seq2seq space, one batch, one step."""

from __future__ import annotations

import torch

from nasforge.oneshot.darts import Darts
from nasforge.oneshot.dartsformer import RevSearchConfig, inverse_sqrt, rev_step
from nasforge.oneshot.dartsformer.space import Seq2SeqSpace
from nasforge.oneshot.nasb import Nasb
from nasforge.oneshot.reversible import set_reconstruct
from nasforge.oneshot.supernet import Supernet

#: method -> (algorithm, reconstruct)
METHODS = {
    "reversible_darts": (Darts, True),
    "reversible_nasb": (Nasb, True),
    "darts": (Darts, False),
}

Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def batch(vocab: int, b: int, t: int, seed: int, device: str = "cpu") -> Batch:
    """Returns a fixed token batch ``(src, tgt_in, tgt_out)`` (memory depends on shapes only)."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, vocab, (b, t), generator=g)
    tgt = torch.randint(4, vocab, (b, t + 1), generator=g)
    return src.to(device), tgt[:, :-1].to(device), tgt[:, 1:].to(device)


def make(method: str, depth: int, d: int, vocab: int, e: int = 64, seed: int = 0, device="cpu"):
    """Returns (supernet, optimizers, config) for ``method`` with ``depth`` searched layers in
    the encoder and in the decoder (2/3 splits, max pooling, dropout 0.1), on ``device``."""
    torch.manual_seed(seed)
    algo, rec = METHODS[method]
    space = Seq2SeqSpace(vocab, d=d, e=e, n_splits=2, s=depth, repeats=1).to(device)
    net = Supernet(space, algo).to(device)
    set_reconstruct(net, rec)
    cfg = RevSearchConfig(algorithm=algo.name, reconstruct=rec)
    opt_w = torch.optim.Adam(net.weights(), lr=cfg.w_lr, betas=(0.9, 0.98))
    opt_a = torch.optim.Adam(net.arch_parameters(), lr=cfg.a_lr, weight_decay=cfg.a_weight_decay)
    return net, (opt_w, opt_a, inverse_sqrt(opt_w, cfg.w_lr, cfg.warmup)), cfg


def step(net: Supernet, opts, cfg: RevSearchConfig, train: Batch, val: Batch) -> None:
    """Runs one search step (weights on ``train``, architecture on ``val``)."""
    rev_step(net, opts, train, val, cfg)
