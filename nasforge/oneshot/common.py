"""The parts every one-shot search shares: configuration, data splits, optimizer steps, results.

Settings follow Appendix C of the NASB paper: weights by momentum SGD (0.9, L2 3e-4, cosine from
0.025 to 0.001), architecture parameters by Adam (3e-4, L2 1e-3, betas (0.5, 0.999)), the
training data split evenly into a training half (weights) and a validation half (architecture).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from nasforge.errors import ConfigError
from nasforge.proxies import get_proxy
from nasforge.runtime.devices import check_device
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
]

Batch = tuple[torch.Tensor, torch.Tensor]
#: what ``SearchConfig.selection`` may name (nasforge/oneshot/selection.py)
SELECTIONS = ("hybrid", "loss", "accuracy")


@dataclass
class SearchConfig:
    """Returns nothing; holds one search's settings (defaults: NASB paper, Appendix C)."""

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
    order: str = "consecutive"  # NASB update order: "consecutive" (Alg. 1) or "alternate" (Alg. 2)
    # SPOS evolution (after supernet training)
    population: int = 20
    cycles: int = 60
    sample_size: int = 5
    bn_batches: int = 4  # training batches used to recalibrate batch norm before each evaluation
    # ENAS (nasforge/oneshot/enas.py): the controller's REINFORCE phase after each epoch
    controller_steps: int = 50  # controller steps (validation batches) per epoch
    controller_lr: float = 3.5e-3  # Adam on the LSTM controller
    entropy_weight: float = 1e-3  # bonus for the entropy of the controller's distribution
    final_samples: int = 20  # architectures drawn from the trained controller for the pick
    # epochs of uniform paths before the architecture moves (ENAS's controller, NASB's A);
    # None: the algorithm's share of ``epochs`` (ENAS 3/4, NASB and NASP 1/2; ``Algorithm.warmup``)
    warmup_epochs: int | None = None
    controller_reward: str = "loss"  # "loss": minus validation cross-entropy; "accuracy"
    controller_batch: int | None = None  # validation examples per reward; None: batch_size
    # how SPOS's and few-shot's evolution and ENAS's pick compare candidates with inherited
    # weights (nasforge/oneshot/selection.py): "hybrid" (supernet loss + zero-cost proxy),
    # "loss" or "accuracy" (the SPOS paper's)
    selection: str = "hybrid"
    selection_proxy: str = "synflow"  # the hybrid's zero-cost proxy (nasforge.proxies)
    # uniform architectures that set the hybrid's scale; its resolution is 1 / this, and too
    # few leave the best candidates tied at the top (docs/oneshot.md has the figures)
    selection_reference: int = 200
    # where the supernet and the data live during the search: "cpu", "cuda" or "cuda:N"
    device: str = "cpu"
    # ProxylessNAS's expected-latency term (nasforge/oneshot/proxyless.py); latencies in ms of
    # the searched operations (the latency table's entries of the chosen candidates, summed)
    latency_target: float | None = None  # None: no latency term (latency is still reported)
    latency_loss: str = "mul"  # "mul": loss * (E[lat] / target) ** w; "add": + w * E[lat] / target
    latency_weight: float = 1.0  # w above
    latency_table: str | dict[str, Any] | None = None  # a JSON file or mapping; None: measured

    def check(self, allow_no_epochs: bool = False) -> None:
        """Raises ConfigError on an impossible setting (``epochs=0`` is allowed only when the
        supernet starts from trained weights), or a ``device`` this machine does not have."""
        if self.epochs < (0 if allow_no_epochs else 1) or self.batch_size < 1:
            raise ConfigError(
                f"epochs and batch_size must be >= 1, got {self.epochs} and {self.batch_size}"
                + ("" if allow_no_epochs else "; epochs=0 needs trained supernet weights")
            )
        if self.order not in ("consecutive", "alternate"):
            raise ConfigError(
                f"order must be 'consecutive' (Algorithm 1) or 'alternate' (Algorithm 2), "
                f"got {self.order!r}"
            )
        check_device(self.device)
        self._check_latency()
        if self.population < 2 or self.sample_size < 1 or self.cycles < 1:
            raise ConfigError(
                f"SPOS evolution needs population >= 2, sample_size >= 1 and cycles >= 1, got "
                f"{self.population}, {self.sample_size} and {self.cycles}"
            )
        if self.controller_steps < 0 or self.final_samples < 1:
            raise ConfigError(
                f"ENAS needs controller_steps >= 0 and final_samples >= 1, got "
                f"{self.controller_steps} and {self.final_samples}"
            )
        self._check_controller()
        self.check_selection()
        if not (self.controller_lr > 0 and self.entropy_weight >= 0):
            raise ConfigError(
                f"ENAS needs controller_lr > 0 and entropy_weight >= 0, got "
                f"{self.controller_lr} and {self.entropy_weight}"
            )

    def _check_controller(self) -> None:
        """Raises ConfigError on a bad ENAS warm-up, reward or reward batch."""
        w, b = self.warmup_epochs, self.controller_batch
        if w is not None and (isinstance(w, bool) or not isinstance(w, int) or w < 0):
            raise ConfigError(
                f"warmup_epochs must be an int >= 0 (epochs of uniform paths before the "
                f"architecture moves: ENAS, NASB) or null for the algorithm's default, got {w!r}"
            )
        if self.controller_reward not in ("loss", "accuracy"):
            raise ConfigError(
                f"controller_reward must be 'loss' (minus the validation cross-entropy) or "
                f"'accuracy', got {self.controller_reward!r}"
            )
        if b is not None and (isinstance(b, bool) or not isinstance(b, int) or b < 1):
            raise ConfigError(
                f"controller_batch must be an int >= 1 (validation examples per reward) or null "
                f"for batch_size, got {b!r}"
            )

    def check_selection(self) -> None:
        """Raises ConfigError on a bad selection, proxy or reference size (also checked by
        :class:`nasforge.oneshot.selection.Selection`, which may get an unchecked config)."""
        if self.selection not in SELECTIONS:
            raise ConfigError(
                f"selection must be one of {list(SELECTIONS)} (how candidates with inherited "
                f"weights are compared), got {self.selection!r}"
            )
        get_proxy(self.selection_proxy)
        r = self.selection_reference
        if isinstance(r, bool) or not isinstance(r, int) or r < 1:
            raise ConfigError(f"selection_reference must be an int >= 1, got {r!r}")

    def _check_latency(self) -> None:
        """Raises ConfigError on a bad setting of the latency term."""
        t = self.latency_target
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or t <= 0):
            raise ConfigError(
                f"latency_target must be a positive number of milliseconds or null, got {t!r}"
            )
        if self.latency_loss not in ("mul", "add"):
            raise ConfigError(
                f"latency_loss must be 'mul' (loss * (E[lat]/target)**w) or 'add' (loss + w * "
                f"E[lat]/target), got {self.latency_loss!r}"
            )
        w = self.latency_weight
        if isinstance(w, bool) or not isinstance(w, (int, float)) or w < 0:
            raise ConfigError(f"latency_weight must be a number >= 0, got {w!r}")
        if not (self.latency_table is None or isinstance(self.latency_table, (str, Mapping))):
            raise ConfigError(
                "latency_table must be the path of a JSON latency table, a mapping "
                f"(module path -> {{candidate: ms}} or candidate -> ms) or null, got "
                f"{type(self.latency_table).__name__}"
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


def arch_grads(net: Any, batch: Batch) -> tuple[float, list[torch.Tensor]]:
    """Returns the loss on ``batch`` and its gradients for the architecture parameters only
    (no weight gradients are accumulated)."""
    x, y = batch
    loss = nn.functional.cross_entropy(net(x), y)
    params = net.arch_parameters()
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return float(loss.detach()), [
        torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)
    ]


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


def weight_grads(net: Any, batch: Batch) -> float:
    """Returns the training loss on ``batch``; accumulates weight gradients only (the
    architecture parameters are held out of the graph for this pass)."""
    x, y = batch
    params = net.arch_parameters()
    for p in params:
        p.requires_grad_(False)
    try:
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
    finally:
        for p in params:
            p.requires_grad_(True)
    return float(loss.detach())


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
