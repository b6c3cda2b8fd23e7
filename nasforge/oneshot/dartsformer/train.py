"""Training, decoding and BLEU for encoder-decoder models (a frozen seq2seq architecture or the
standard Transformer baseline): ordinary backprop, greedy and beam decoding.

A model has ``encode(src) -> (memory, src_pad)`` and ``decode(tgt_in, memory, src_pad) ->
logits`` (see :mod:`nasforge.oneshot.dartsformer.space`). Decoding re-runs the decoder on the
whole prefix at each step (no incremental cache: the multi-split decoder has none), which is
fine at the sentence lengths of the toy data.

Invariants: training reports one row per logged step through ``on_step`` and stops at the step
or time budget, whichever comes first; decoding is deterministic (eval mode).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from nasforge.data.translation import BOS, EOS, PAD, Bpe, bleu
from nasforge.oneshot.dartsformer.search import inverse_sqrt

__all__ = [
    "TrainConfig",
    "beam_search",
    "greedy_decode",
    "seq2seq_loss",
    "train_seq2seq",
    "translate_bleu",
]

logger = logging.getLogger(__name__)

Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def seq2seq_loss(model: nn.Module, batch: Batch, label_smoothing: float = 0.1) -> torch.Tensor:
    """Returns the label-smoothed cross entropy of ``model`` on ``(src, tgt_in, tgt_out)``,
    padding ignored."""
    src, tgt_in, tgt_out = batch
    logits = model(src, tgt_in)
    return F.cross_entropy(
        logits.flatten(0, 1),
        tgt_out.flatten(),
        ignore_index=PAD,
        label_smoothing=label_smoothing,
    )


@dataclass
class TrainConfig:
    """Returns nothing; ordinary training settings (Adam 0.9/0.98, inverse-sqrt schedule)."""

    lr: float = 1e-3
    warmup: int = 200
    label_smoothing: float = 0.1
    grad_clip: float = 1.0
    max_steps: int = 10**9
    time_budget_s: float = 60.0
    log_every: int = 50
    seed: int = 0


def train_seq2seq(
    model: nn.Module,
    batches: Callable[[int], Iterable[Batch]],
    cfg: TrainConfig,
    on_step: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Returns the logged rows of training ``model`` by ordinary backprop on ``batches(epoch)``
    until ``cfg.max_steps`` or ``cfg.time_budget_s``; each row goes to ``on_step`` too."""
    torch.manual_seed(cfg.seed)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, betas=(0.9, 0.98), eps=1e-9)
    sched = inverse_sqrt(opt, cfg.lr, cfg.warmup)
    model.train()
    rows: list[dict[str, Any]] = []
    step, t0, epoch, total = 0, time.perf_counter(), 0, 0.0
    while step < cfg.max_steps and time.perf_counter() - t0 < cfg.time_budget_s:
        for batch in batches(epoch):
            loss = seq2seq_loss(model, batch, cfg.label_smoothing)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            sched.step()
            step += 1
            total += float(loss.detach())
            if step % cfg.log_every == 0:
                row = {"step": step, "epoch": epoch, "loss": total / cfg.log_every}
                row["elapsed_s"] = round(time.perf_counter() - t0, 2)
                rows.append(row)
                total = 0.0
                logger.info("train %s", row)
                if on_step is not None:
                    on_step(row)
            if step >= cfg.max_steps or time.perf_counter() - t0 >= cfg.time_budget_s:
                break
        epoch += 1
    return rows


@torch.no_grad()
def greedy_decode(model: Any, src: torch.Tensor, max_len: int | None = None) -> list[list[int]]:
    """Returns the greedy translation ids of each source row (EOS excluded); at most
    ``1.2·len + 10`` tokens per row (the paper's limit) unless ``max_len`` is given."""
    model.eval()
    memory, src_pad = model.encode(src)
    limit = max_len or int(1.2 * src.shape[1] + 10)
    ys = torch.full((src.shape[0], 1), BOS, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for _ in range(limit):
        nxt = model.decode(ys, memory, src_pad)[:, -1].argmax(-1)
        nxt = nxt.masked_fill(done, PAD)
        ys = torch.cat([ys, nxt[:, None]], 1)
        done |= nxt == EOS
        if bool(done.all()):
            break
    out = []
    for row in ys[:, 1:].tolist():
        out.append(row[: row.index(EOS)] if EOS in row else row)
    return out


@torch.no_grad()
def beam_search(
    model: Any,
    src: torch.Tensor,
    beam: int = 5,
    len_penalty: float = 0.6,
    max_len: int | None = None,
) -> list[list[int]]:
    """Returns the best beam of each source row, scored by log-probability over
    ``length**len_penalty`` (EOS excluded)."""
    model.eval()
    out: list[list[int]] = []
    for i in range(src.shape[0]):
        row = src[i : i + 1]
        row = row[:, : int((row != PAD).sum())] if bool((row != PAD).any()) else row
        memory, src_pad = model.encode(row)
        limit = max_len or int(1.2 * row.shape[1] + 10)
        beams: list[tuple[float, list[int]]] = [(0.0, [BOS])]
        finished: list[tuple[float, list[int]]] = []
        for _ in range(limit):
            ys = torch.tensor([b[1] for b in beams], dtype=torch.long, device=src.device)
            mem = memory.expand(len(beams), -1, -1)
            pad = src_pad.expand(len(beams), -1)
            logp = torch.log_softmax(model.decode(ys, mem, pad)[:, -1].float(), -1)
            top = torch.topk(logp, beam, dim=-1)
            cands = []
            for b, (score, seq) in enumerate(beams):
                for lp, tok in zip(top.values[b].tolist(), top.indices[b].tolist()):
                    cands.append((score + lp, [*seq, tok]))
            cands.sort(key=lambda c: -c[0])
            beams = []
            for score, seq in cands:
                if seq[-1] == EOS:
                    finished.append((score / (len(seq) - 1) ** len_penalty, seq[1:-1]))
                else:
                    beams.append((score, seq))
                if len(beams) == beam:
                    break
            if len(finished) >= beam or not beams:
                break
        if not finished:
            finished = [(s / max(1, len(q) - 1) ** len_penalty, q[1:]) for s, q in beams]
        out.append(max(finished, key=lambda f: f[0])[1])
    return out


def translate_bleu(
    model: Any,
    bpe: Bpe,
    sources: Sequence[str],
    references: Sequence[str],
    beam: int = 1,
    batch_size: int = 64,
    len_penalty: float = 0.6,
) -> tuple[float, list[str]]:
    """Returns (sacrebleu corpus BLEU, hypotheses) of translating ``sources``: greedy for
    ``beam == 1``, else beam search."""
    ids = bpe.encode(sources)
    hyps: list[str] = []
    for i in range(0, len(ids), batch_size):
        chunk = [r[:200] or [3] for r in ids[i : i + batch_size]]
        src = torch.full((len(chunk), max(map(len, chunk))), PAD, dtype=torch.long)
        for j, r in enumerate(chunk):
            src[j, : len(r)] = torch.tensor(r)
        src = src.to(next(model.parameters()).device)
        out = greedy_decode(model, src) if beam == 1 else beam_search(model, src, beam, len_penalty)
        hyps += bpe.decode(out)
    return bleu(hyps, references), hyps
