"""The parts every one-shot search shares: configuration, data splits, optimizer steps, results.

Settings follow Appendix C of the NASB paper: weights by momentum SGD (0.9, L2 3e-4, cosine from
0.025 to 0.001), architecture parameters by Adam (3e-4, L2 1e-3, betas (0.5, 0.999)), the
training data split evenly into a training half (weights) and a validation half (architecture).

Data parallel: the gradient steps below read the supernet's ``ranks``
(:class:`nasforge.runtime.distributed.Ranks`; one process unless the search runs on several
ranks). Each rank computes its shard of every batch, its mean loss scaled by its share of the
batch, and the gradients are summed across ranks (with the loss, in one collective) before any
optimizer step: every rank then holds the gradient of the whole batch's mean and takes the same
step, so the replicas stay equal, and one process with batch B computes what N ranks with
batch B/N do, up to the order of float sums.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from nasforge.errors import ConfigError
from nasforge.oneshot.budget import check_budget, latency_recipe
from nasforge.oneshot.budgeted import resource_penalty
from nasforge.runtime.devices import check_device
from nasforge.runtime.distributed import ONE, Ranks
from nasforge.runtime.sync_bn import synced
from nasforge.space.search_space import Arch
from nasforge.weightsharing import accuracy, follow_path
from nasforge.weightsharing import recalibrate_bn as ws_recalibrate_bn

__all__ = [
    "SearchConfig",
    "SearchResult",
    "Split",
    "split_data",
    "batches",
    "weight_optimizer",
    "arch_optimizer",
    "arch_step",
    "weight_step",
    "accuracy",
    "activate",
    "recalibrate_bn",
    "inherited",
    "frozen_bn_stats",
    "check_optional_int",
    "ranks_of",
    "sharded_loss",
]

Batch = tuple[torch.Tensor, torch.Tensor]


@dataclass
class SearchConfig:
    """Returns nothing; holds the settings of the search loop that every algorithm uses
    (defaults: NASB paper, Appendix C) and, as ``algo``, the algorithm's own settings.

    ``algo`` is an instance of the algorithm's ``settings_class`` (e.g.
    :class:`~nasforge.oneshot.spos.SposSettings`); None means its defaults, filled in by
    :func:`~nasforge.oneshot.algorithms.config_for`, which also builds the whole config from one
    flat mapping of settings (a run file's ``strategy`` section).
    """

    epochs: int = 10
    batch_size: int = 64
    w_lr: float = 0.025  # SGD initial learning rate of the weights
    w_lr_min: float = 0.001  # cosine floor
    w_momentum: float = 0.9
    w_weight_decay: float = 3e-4
    a_lr: float = 3e-4  # Adam on the architecture parameters
    a_weight_decay: float = 1e-3
    a_betas: tuple[float, float] = (0.5, 0.999)
    grad_clip: float = 5.0
    seed: int = 0
    bn_batches: int = 4  # training batches used to recalibrate batch norm before each evaluation
    # where the supernet and the data live during the search: "cpu", "cuda" or "cuda:N"
    device: str = "cpu"
    # steps between checkpoints inside an epoch (0: at each epoch's end only); a run's resume,
    # a stop and a restart of a data-parallel job go on from the last one
    checkpoint_every: int = 0
    # on several ranks: batch norm normalises by the whole batch's statistics in the gradient
    # steps (nasforge/runtime/sync_bn.py), not by each rank's shard's
    sync_bn: bool = False
    # a hard budget for the architecture found: {params: N}, {flops: N}, {latency: ms} or
    # several (the sizes of nasforge.proxies.size; latency by the supernet's latency table,
    # nasforge/oneshot/op_latency.py); sampling searches propose none over it, gradient
    # searches are penalised towards it and project their pick into it
    # (nasforge/oneshot/budgeted.py)
    budget: dict[str, float] | None = None
    # a latency budget's table (a JSON file or mapping op_latency.load_table reads); None or
    # {measure: {runtime: onnxruntime, threads: 1, ...}}: each candidate timed on this machine
    # when the search starts (rank 0's on several ranks, kept in the checkpoints so a resume
    # uses the same)
    budget_latency_table: str | dict[str, Any] | None = None
    budget_weight: float = 1.0  # the resource penalty's weight (gradient searches, ENAS)
    # the algorithm's own settings (its ``settings_class``); None: its defaults
    algo: Any = None

    def check(self, allow_no_epochs: bool = False) -> None:
        """Raises ConfigError on an impossible setting of the loop (``epochs=0`` is allowed only
        when the supernet starts from trained weights) or of ``algo`` (its own ``check``), or a
        ``device`` this machine does not have, or a malformed ``budget``."""
        if self.epochs < (0 if allow_no_epochs else 1) or self.batch_size < 1:
            raise ConfigError(
                f"epochs and batch_size must be >= 1, got {self.epochs} and {self.batch_size}"
                + ("" if allow_no_epochs else "; epochs=0 needs trained supernet weights")
            )
        check_device(self.device)
        c = self.checkpoint_every
        if isinstance(c, bool) or not isinstance(c, int) or c < 0:
            raise ConfigError(
                f"checkpoint_every must be an int >= 0 (steps between checkpoints inside an "
                f"epoch; 0: at each epoch's end), got {c!r}"
            )
        check_budget(self.budget)
        t = self.budget_latency_table
        if t is not None and not isinstance(t, (str, Mapping)):
            raise ConfigError(
                "budget_latency_table must be a JSON file or a mapping of milliseconds, got "
                f"{t!r:.80}"
            )
        latency_recipe(t)
        if t is not None and "latency" not in (self.budget or {}):
            raise ConfigError(
                "budget_latency_table is the table of a latency budget; give budget: {latency: ms}"
            )
        w = self.budget_weight
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not w >= 0:
            raise ConfigError(
                f"budget_weight must be a number >= 0 (the resource penalty's weight), got {w!r}"
            )
        if self.algo is not None:
            self.algo.check()


def check_optional_int(name: str, value: Any, minimum: int, meaning: str, none: str) -> None:
    """Raises ConfigError unless ``value`` (the setting ``name``: ``meaning``) is an int of at
    least ``minimum`` or None (which means ``none``); the one check of such settings."""
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int) or value < minimum
    ):
        raise ConfigError(
            f"{name} must be an int >= {minimum} ({meaning}) or null for {none}, got {value!r}"
        )


@dataclass
class SearchResult:
    """Returns nothing; the outcome of a one-shot search: the architecture found (an arch dict
    ``nf.freeze`` accepts), one history row per epoch, the trained supernet, and every
    architecture scored on the way (SPOS's evolution: architecture, validation accuracy)."""

    arch: Arch
    history: list[dict[str, Any]] = field(default_factory=list)
    supernet: nn.Module | None = None
    evaluated: list[tuple[Arch, float]] = field(default_factory=list)
    #: figures of ``arch`` beyond accuracy that the algorithm knows (ProxylessNAS: latency)
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass
class Split:
    """Returns nothing; the training half (weights) and validation half (architecture)."""

    train: Batch
    val: Batch

    def to(self, device: str | torch.device) -> Split:
        """Returns the split with every tensor on ``device`` (itself when already there)."""
        return Split(
            (self.train[0].to(device), self.train[1].to(device)),
            (self.val[0].to(device), self.val[1].to(device)),
        )


def split_data(data: Any, seed: int) -> Split:
    """Returns the train/val split of ``data``: ``(X, y)`` (split evenly at random) or a mapping
    with ``train`` and ``val`` pairs.

    Raises:
        ConfigError: ``data`` is neither form, or the halves would be empty.
    """
    if isinstance(data, Mapping) and "train" in data and "val" in data:
        return Split(_pair(data["train"]), _pair(data["val"]))
    x, y = _pair(data)
    if len(x) < 2:
        raise ConfigError(f"one-shot search needs at least 2 examples to split, got {len(x)}")
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(len(x), generator=g)
    half = len(x) // 2
    return Split((x[perm[:half]], y[perm[:half]]), (x[perm[half:]], y[perm[half:]]))


def _pair(data: Any) -> Batch:
    if (
        isinstance(data, (tuple, list))
        and len(data) == 2
        and all(isinstance(t, torch.Tensor) for t in data)
        and len(data[0]) == len(data[1])
    ):
        return data[0], data[1]
    raise ConfigError(
        "data must be a pair (X, y) of tensors of equal length, or a dict with 'train' and 'val' "
        f"pairs; got {type(data).__name__}"
    )


def batches(data: Batch, batch_size: int, g: torch.Generator) -> Iterator[Batch]:
    """Yields shuffled batches covering ``data`` once (the last one may be smaller)."""
    x, y = data
    perm = torch.randperm(len(x), generator=g)
    for i in range(0, len(x), batch_size):
        idx = perm[i : i + batch_size]
        yield x[idx], y[idx]


class Pass:
    """Returns batches of one shuffled pass over ``data`` from :meth:`next`, as
    :func:`batches` yields them (the order drawn from ``g`` at the first batch, not before),
    and says where it is (:meth:`state`), so that a checkpoint taken inside an epoch resumes
    at the same batch of the same order."""

    def __init__(
        self,
        data: Batch,
        batch_size: int,
        g: torch.Generator,
        perm: torch.Tensor | None = None,
        pos: int = 0,
    ) -> None:
        self.data, self.batch_size, self.g = data, batch_size, g
        self.perm, self.pos = perm, pos

    @property
    def done(self) -> bool:
        """Returns whether every batch of the pass was taken."""
        return self.perm is not None and self.pos >= len(self.data[0])

    def next(self) -> Batch | None:
        """Returns the next batch, or None when the pass is over."""
        x, y = self.data
        if self.perm is None:
            self.perm = torch.randperm(len(x), generator=self.g)
        if self.pos >= len(x):
            return None
        idx = self.perm[self.pos : self.pos + self.batch_size]
        self.pos += self.batch_size
        return x[idx], y[idx]

    def state(self) -> tuple[torch.Tensor | None, int]:
        """Returns (the pass's order, or None before its first batch; batches taken, in rows)."""
        return self.perm, self.pos


def weight_optimizer(
    weights: list[nn.Parameter], cfg: SearchConfig, steps: int
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    """Returns momentum SGD on the weights and its cosine schedule over ``steps`` steps."""
    opt = torch.optim.SGD(
        weights, lr=cfg.w_lr, momentum=cfg.w_momentum, weight_decay=cfg.w_weight_decay
    )
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(1, steps), eta_min=cfg.w_lr_min)
    return opt, sched


def arch_optimizer(params: list[nn.Parameter], cfg: SearchConfig) -> torch.optim.Optimizer:
    """Returns Adam on the architecture parameters."""
    return torch.optim.Adam(params, lr=cfg.a_lr, betas=cfg.a_betas, weight_decay=cfg.a_weight_decay)


def ranks_of(net: Any) -> Ranks:
    """Returns the ranks a supernet trains on (its ``ranks``; one process by default)."""
    return getattr(net, "ranks", ONE)


def sharded_loss(net: Any, batch: Batch) -> tuple[torch.Tensor, float]:
    """Returns (this rank's loss on its shard of ``batch`` scaled by its share, the share):
    the ranks' values sum to the mean cross-entropy of the whole batch (one process: the mean
    itself, share 1)."""
    ranks = ranks_of(net)
    if not ranks.distributed:
        x, y = batch
        return nn.functional.cross_entropy(net(x), y), 1.0
    share = ranks.share(len(batch[0]))
    x, y = ranks.shard(batch)
    with synced(net, ranks):  # batch norm made synchronisable (sync_bn) spans the ranks here
        out = net(x)
    return nn.functional.cross_entropy(out, y) * share, share


def arch_grads(net: Any, batch: Batch) -> tuple[float, list[torch.Tensor]]:
    """Returns the loss on ``batch`` and its gradients for the architecture parameters only
    (no weight gradients are accumulated), the gradients with the resource penalty of the
    supernet's budget when it has one (:mod:`nasforge.oneshot.budgeted`); on several ranks,
    the whole batch's, summed across ranks."""
    loss, share = sharded_loss(net, batch)
    params = net.arch_parameters()
    penalty = resource_penalty(net, share)  # a budget's: towards it, on the rank's share
    total = loss if penalty is None else loss + penalty
    grads = torch.autograd.grad(total, params, allow_unused=True)
    out = [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)]
    (value,) = ranks_of(net).all_reduce_tensors(out, float(loss.detach()))
    return value, out


def apply_arch(net: Any, opt: torch.optim.Optimizer, grads: list[torch.Tensor]) -> None:
    """Takes one optimizer step of the architecture parameters with ``grads``."""
    for p, g in zip(net.arch_parameters(), grads):
        p.grad = g
    opt.step()
    opt.zero_grad(set_to_none=True)


def arch_step(net: Any, opt: torch.optim.Optimizer, batch: Batch) -> float:
    """Returns the validation loss after one architecture-parameter step on ``batch``."""
    loss, grads = arch_grads(net, batch)
    apply_arch(net, opt, grads)
    return loss


def weight_grads(net: Any, batch: Batch, reduce: bool = True) -> float:
    """Returns the training loss on ``batch``; accumulates weight gradients only (the
    architecture parameters are held out of the graph for this pass); on several ranks, the
    whole batch's, summed across ranks. ``reduce=False`` leaves both this rank's own (loss
    and gradients), for a step that accumulates several passes and then sums them across
    ranks once (:func:`reduce_weight_grads`): summing after each pass would sum the earlier
    passes' gradients again."""
    params = net.arch_parameters()
    for p in params:
        p.requires_grad_(False)
    try:
        loss, _ = sharded_loss(net, batch)
        loss.backward()
    finally:
        for p in params:
            p.requires_grad_(True)
    return reduce_weight_grads(net, float(loss.detach())) if reduce else float(loss.detach())


def reduce_weight_grads(net: Any, loss: float) -> float:
    """Returns ``loss`` summed across ranks after summing the weight gradients accumulated on
    each rank across ranks, in place (one process: ``loss``, gradients unchanged)."""
    (value,) = ranks_of(net).all_reduce_grads(net.weights(), loss)
    return value


def apply_weights(net: Any, opt: torch.optim.Optimizer, cfg: SearchConfig) -> None:
    """Clips the weight gradients and takes one optimizer step."""
    nn.utils.clip_grad_norm_(net.weights(), cfg.grad_clip)
    opt.step()
    opt.zero_grad(set_to_none=True)


def weight_step(net: Any, opt: torch.optim.Optimizer, batch: Batch, cfg: SearchConfig) -> float:
    """Returns the training loss after one weight step on ``batch``."""
    loss = weight_grads(net, batch)
    apply_weights(net, opt, cfg)
    return loss


def n_steps(split: Split, cfg: SearchConfig) -> int:
    """Returns the number of weight steps of the whole search."""
    return cfg.epochs * math.ceil(len(split.train[0]) / cfg.batch_size)


def activate(net: Any, arch: Mapping[str, Any]) -> None:
    """Makes the single-path supernet ``net`` compute the path of ``arch`` (the one walk of
    :func:`nasforge.weightsharing.follow_path`)."""
    follow_path(net.model, arch)


def recalibrate_bn(net: nn.Module, data: Batch, batch_size: int, n_batches: int, seed: int) -> None:
    """Re-estimates every batch norm's statistics of ``net`` (through the active path) from
    the first ``n_batches`` of ``data`` shuffled with ``seed`` (see
    :func:`nasforge.weightsharing.recalibrate_bn`)."""
    g = torch.Generator().manual_seed(seed)
    images = (x for i, (x, _) in zip(range(n_batches), batches(data, batch_size, g)))
    ws_recalibrate_bn(net, images)


def inherited(
    net: Any, arch: Mapping[str, Any], split: Split, cfg: SearchConfig
) -> tuple[Any, float]:
    """Returns the frozen model of ``arch`` with the trained supernet ``net``'s weights
    (``net.extract``), batch norm recalibrated on ``cfg.bn_batches`` training batches, and its
    accuracy on ``split.val``: how a trained supernet scores one candidate."""
    model = net.extract(arch)  # from the (sub-)supernet that holds it
    recalibrate_bn(model, split.train, cfg.batch_size, cfg.bn_batches, cfg.seed)
    return model, accuracy(model, split.val)


@contextmanager
def frozen_bn_stats(module: nn.Module) -> Iterator[None]:
    """Runs a block in which batch-norm layers normalise by batch statistics (train mode) but do
    not update their running statistics; used to recompute ops on the fly in backward."""
    saved: list[tuple[nn.modules.batchnorm._BatchNorm, float | None, torch.Tensor]] = []
    for m in module.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats:
            # track_running_stats registers the counter buffer, so it is a tensor here
            assert m.num_batches_tracked is not None
            saved.append((m, m.momentum, m.num_batches_tracked.clone()))
            m.momentum = 0.0  # running = running * (1 - 0) + 0 * batch: unchanged
    try:
        yield
    finally:
        for m, momentum, n in saved:
            m.momentum = momentum
            assert m.num_batches_tracked is not None
            m.num_batches_tracked.copy_(n)
