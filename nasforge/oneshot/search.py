"""``search(space, "darts" | "enas" | "nasb" | "proxylessnas" | "spos", data)``: one
line from a space to an architecture.

The loop is the same for every algorithm; what differs is a method of the algorithm's class
(:class:`~nasforge.oneshot.supernet.Algorithm`): its training step, the architecture it points
to after an epoch, what it does at the end of an epoch (ENAS's controller phase), and how the search
ends (argmax export, SPOS's evolution, ENAS's best of its controller's samples). Adding an
algorithm touches its own module only: it registers itself by name and owns its settings
(:mod:`nasforge.oneshot.algorithms`), nothing here.

Like every path that trains, :func:`search` chooses torch's thread count
(:func:`nasforge.runtime.threads.set_threads`: ``threads=``, else ``NASFORGE_THREADS``, else half
the usable cores) for the search and gives the caller's back afterwards. It shows a line when
it starts and one per epoch (``progress``: a ``rich`` line on a terminal, else ``logging`` at
INFO on logger ``nasforge.oneshot.search``, as :class:`nasforge.run.progress.Progress` does for
every run): the mean training and validation losses, the validation accuracy of the supernet,
elapsed time and ETA, the current argmax architecture. A row of ``SearchResult.history`` holds
those numbers and, for an algorithm that learns them, the architecture weights
(``arch_weights``: label -> each candidate's strength, e.g. softmax of alpha).
``on_epoch(row)`` (if given) receives each row, and ``checkpoint(row, state)`` the
:class:`SearchState` too, whose ``state_dict()`` resumes the search bitwise from that epoch
(weights, architecture parameters, optimizers, schedule, generators).
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from nasforge.errors import DivergenceError, NasforgeError
from nasforge.oneshot import darts, enas, fairnas, fewshot, nasb, op_latency, proxyless, spos  # noqa: F401 - registered
from nasforge.oneshot.algorithms import ALGORITHMS, config_for, get_algorithm, with_settings
from nasforge.oneshot.budget import describe, latency_recipe
from nasforge.oneshot.budgeted import Budgeted, budget_of
from nasforge.oneshot.common import (
    Pass,
    SearchConfig,
    SearchResult,
    Split,
    accuracy,
    n_steps,
    split_data,
    weight_optimizer,
)
from nasforge.oneshot.supernet import Algorithm, Supernet
from nasforge.run.progress import Progress, fmt_time
from nasforge.runtime import sync_bn
from nasforge.runtime.distributed import ONE, Ranks
from nasforge.runtime.threads import threads_for
from nasforge.space import ModelSpace, arch_id
from nasforge.space.search_space import Arch

__all__ = ["ALGORITHMS", "SearchState", "search", "supernet", "get_algorithm", "initial_state"]

logger = logging.getLogger(__name__)


def supernet(space: ModelSpace, algorithm: str | type[Algorithm], example: Any = None) -> Supernet:
    """Returns the supernet of ``space`` for ``algorithm`` (a registered name, e.g. "darts",
    "nasb", "spos", or a class); ``example`` (an input batch) lets it find the nodes of cell
    spaces.

    Raises:
        ConfigError: unknown algorithm.
        SpaceError: see :class:`~nasforge.oneshot.supernet.Supernet`.
    """
    net = Supernet(space, get_algorithm(algorithm))
    if example is not None:
        net.find_nodes(example)
    return net


@dataclass
class SearchState:
    """Returns nothing; everything a search carries from one epoch to the next."""

    net: Supernet
    opt_w: torch.optim.Optimizer
    sched: Any
    opt_a: torch.optim.Optimizer
    g: torch.Generator  # data order
    rng: random.Random  # architecture sampling (SPOS, ENAS)
    epoch: int = 0  # epochs finished
    step: int = 0  # weight steps taken, across epochs
    #: where the current epoch is (its data orders and positions, its losses so far); None at
    #: an epoch's start: what a checkpoint taken inside an epoch resumes from
    cursor: dict[str, Any] | None = None

    def state_dict(self) -> dict[str, Any]:
        """Returns the state as tensors and plain data (``torch.save``-able, and loadable with
        ``weights_only=True``)."""
        version, internal, gauss = self.rng.getstate()
        return {
            "epoch": self.epoch,
            "step": self.step,
            "cursor": self.cursor,
            "net": self.net.state_dict(),
            "opt_w": self.opt_w.state_dict(),
            "sched": self.sched.state_dict(),
            "opt_a": self.opt_a.state_dict(),
            "g": self.g.get_state(),
            "rng": [version, list(internal), gauss],
            "torch_rng": torch.get_rng_state(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restores what :meth:`state_dict` returned (a checkpoint written before steps were
        counted resumes at its epoch's end)."""
        self.epoch = int(state["epoch"])
        self.step = int(state.get("step", 0))
        self.cursor = state.get("cursor")
        self.net.load_state_dict(state["net"])
        self.opt_w.load_state_dict(state["opt_w"])
        self.sched.load_state_dict(state["sched"])
        self.opt_a.load_state_dict(state["opt_a"])
        self.g.set_state(state["g"])
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))
        torch.set_rng_state(state["torch_rng"])


def search(
    space: ModelSpace,
    algorithm: str | type[Algorithm],
    data: Any,
    *,
    epochs: int = 10,
    batch_size: int = 64,
    config: SearchConfig | None = None,
    on_epoch: Callable[[dict[str, Any]], None] | None = None,
    checkpoint: Callable[[dict[str, Any] | None, SearchState], None] | None = None,
    resume_from: Mapping[str, Any] | None = None,
    weights: Mapping[str, torch.Tensor] | None = None,
    threads: int | None = None,
    progress: str = "auto",
    ranks: Ranks = ONE,
    **settings: Any,
) -> SearchResult:
    """Returns the architecture a one-shot search of ``space`` finds on ``data``, the per-epoch
    history and the trained supernet.

    ``data`` is ``(X, y)`` (split evenly into a training half for weights and a validation half
    for architecture choice) or ``{"train": (X, y), "val": (X, y)}``. ``settings`` are the
    loop's :class:`~nasforge.oneshot.common.SearchConfig` fields and the algorithm's own
    (``order="alternate"`` for NASB's Algorithm 2, ``cycles=...`` for SPOS's evolution;
    :func:`~nasforge.oneshot.algorithms.config_for` splits them); ``config`` (a whole
    ``SearchConfig``) replaces ``epochs``, ``batch_size`` and ``settings``. ``resume_from`` is a
    :meth:`SearchState.state_dict` saved by ``checkpoint``: the search goes on after that epoch.
    ``weights`` (a state dict of the space, e.g. a supernet trained by the pipeline) start the
    supernet; with ``epochs=0`` the search goes straight to its finish. ``threads`` is torch's
    thread count during the search (default: :func:`~nasforge.runtime.threads.default_threads`;
    the caller's count is restored after); ``progress`` is ``"auto"`` (a live line on a
    terminal, else INFO log lines), ``"rich"``, ``"log"`` or ``"off"``. ``device="cuda"`` (a
    setting) trains on a GPU: the supernet is built and initialised on the CPU, then it and the
    data move to the device, where the returned supernet stays.

    ``checkpoint(row, state)`` is called after each epoch (``row``: its progress row) and, with
    the setting ``checkpoint_every=K``, every K steps inside an epoch (``row`` None); a state
    saved either way resumes at that step. ``ranks`` (:func:`nasforge.runtime.distributed.join`)
    makes the search data parallel: every rank calls ``search`` with the same arguments, trains
    its shard of each batch of the same path, and the gradients are summed across ranks, so
    every rank holds the same supernet and ends with the same architecture (see
    :mod:`nasforge.oneshot.common`); batch norm normalises by each rank's shard, and its
    running statistics are averaged across ranks after each epoch, unless the setting
    ``sync_bn=True`` makes the gradient steps normalise by the whole batch's statistics
    (:mod:`nasforge.runtime.sync_bn`). ``checkpoint`` and
    ``on_epoch`` are called on every rank (the caller decides which one writes).

    Invariants: the result's ``arch`` is valid for ``space`` (``nf.freeze(space, arch)`` builds
    it); the supernet's weights start from ``cfg.seed`` (every module's ``reset_parameters``),
    so the same seed and thread count give the same result in any process, with or without a
    resume (on the CPU; a GPU's kernels need not be bitwise deterministic).

    Raises:
        ConfigError: unknown algorithm or setting (or a setting of another algorithm),
            malformed data, ``threads`` not a positive int, a ``device`` this machine does not
            have.
        SpaceError: the space cannot be made a supernet (the message names the label).
        DivergenceError: a loss became NaN or infinite.
    """
    with threads_for(threads) as n_threads:
        return _search(space, algorithm, data, epochs, batch_size, config, on_epoch, checkpoint,
                       resume_from, weights, n_threads, progress, settings, ranks)  # fmt: skip


def _search(
    space: ModelSpace,
    algorithm: str | type[Algorithm],
    data: Any,
    epochs: int,
    batch_size: int,
    config: SearchConfig | None,
    on_epoch: Callable[[dict[str, Any]], None] | None,
    checkpoint: Callable[[dict[str, Any] | None, SearchState], None] | None,
    resume_from: Mapping[str, Any] | None,
    weights: Mapping[str, torch.Tensor] | None,
    n_threads: int,
    progress: str,
    settings: dict[str, Any],
    ranks: Ranks = ONE,
) -> SearchResult:
    """Returns :func:`search`'s result once torch's thread count is chosen."""
    algo = get_algorithm(algorithm)
    if config is not None:
        cfg = with_settings(algo, config)
    else:
        cfg = config_for(algo, settings, epochs=epochs, batch_size=batch_size)
    cfg.check(allow_no_epochs=weights is not None)
    algo.check_space(space, cfg)
    split, state = initial_state(space, algo, data, cfg, weights, resume_from, cfg.device)
    state.net.ranks = ranks
    ranks.sync_module(state.net)  # equal already (same seed); rank 0's, whatever a rank did
    if state.net.budget is not None and ranks.distributed:  # rank 0's latency table now
        state.net.budget.forget()
    if ranks.distributed and cfg.sync_bn:
        sync_bn.convert(state.net)
    if resume_from is not None:
        logger.info("%s: resuming after epoch %d of %d (step %d)", algo.name, state.epoch,
                    cfg.epochs, state.step)  # fmt: skip
    shown = Progress(cfg.epochs, None, progress, logger=logger)
    start, first = time.monotonic(), state.epoch
    per_epoch = n_steps(split, cfg) // max(1, cfg.epochs)
    where = f"{n_threads} torch thread(s)" if cfg.device == "cpu" else cfg.device
    where += f" x {ranks.world} ranks" if ranks.distributed else ""
    shown.show(f"{algo.name}: {cfg.epochs - first} epoch(s) of {per_epoch} steps (batch "
               f"{cfg.batch_size}) on {where}", force=True)  # fmt: skip
    history: list[dict[str, Any]] = []
    try:
        while state.epoch < cfg.epochs:
            row = _epoch(algo, state, split, cfg, checkpoint)
            history.append(row)
            elapsed = time.monotonic() - start
            shown.show(_epoch_line(algo.name, row, cfg.epochs, elapsed, first), force=True)
            if checkpoint is not None:
                checkpoint(row, state)
            if on_epoch is not None:
                on_epoch(row)
    finally:
        shown.close()
    arch, evaluated = algo.finish(state.net, split, cfg)
    arch = keep_to_budget(algo, state.net, arch)
    metrics = algo.arch_metrics(state.net, arch)
    budget = budget_of(state.net)
    if budget is not None:  # the pick's sizes beside the budget's limits
        metrics.update(budget.metrics(arch))
    return SearchResult(arch=arch, history=history, supernet=state.net, evaluated=evaluated,
                        metrics=metrics)  # fmt: skip


def keep_to_budget(algo: type[Algorithm], net: Supernet, arch: Arch) -> Arch:
    """Returns the pick within the supernet's budget: projected into it for an algorithm
    whose ``budget_rule`` is ``"project"``, as it is for one that rejects (``arch`` itself
    without a budget).

    Raises:
        NasforgeError: an algorithm that rejects picked an architecture over the budget (a
            defect of that algorithm: its pick is never changed behind its back).
    """
    budget = budget_of(net)
    if budget is None:
        return arch
    if algo.budget_rule == "project":
        return budget.project(net, arch)
    if not budget.fits(arch):
        raise NasforgeError(
            f"{algo.name} rejects architectures over the budget, yet picked {arch_id(arch)} "
            f"with {describe(budget.sizes(arch), budget.budget)}; report this as a bug"
        )
    return arch


def initial_state(
    space: ModelSpace,
    algo: type[Algorithm],
    data: Any,
    cfg: SearchConfig,
    weights: Mapping[str, torch.Tensor] | None = None,
    resume_from: Mapping[str, Any] | None = None,
    device: str | torch.device = "cpu",
) -> tuple[Split, SearchState]:
    """Returns the data split and the search state before the first (or, with
    ``resume_from``, the next) epoch: the supernet built, started from ``weights`` or from
    ``cfg.seed``, on the CPU (so its weights are the same whatever the device), then it and the
    split moved to ``device``; the optimizers and generators seeded; with a ``budget`` the
    supernet holds it (:class:`~nasforge.oneshot.budgeted.Budgeted`), checked feasible.

    Raises:
        ConfigError: no architecture of the space meets the budget.
    """
    torch.manual_seed(cfg.seed)
    split = split_data(data, cfg.seed)
    net = Supernet(space, algo)
    net.find_nodes(split.train[0][: min(2, len(split.train[0]))])
    if weights is not None:
        net.model.load_state_dict(dict(weights))
    else:  # start from the seed, not from whatever generator state built the space
        for m in net.model.modules():
            reset = getattr(m, "reset_parameters", None)
            if callable(reset):
                reset()
    net.to(device)
    split = split.to(device)
    algo.prepare(net, split, cfg)
    if cfg.budget is not None:  # sized on the CPU; infeasible: one error before training
        net.budget = budget_for(net, space, cfg, split.train[0].cpu())
    opt_w, sched = weight_optimizer(net.weights(), cfg, n_steps(split, cfg))
    state = SearchState(
        net,
        opt_w,
        sched,
        algo.arch_optimizer(net.arch_parameters(), cfg),
        torch.Generator().manual_seed(cfg.seed),
        random.Random(cfg.seed),
    )
    if resume_from is not None:
        state.load_state_dict(resume_from)
        if net.budget is not None:  # the latency table the search started with
            net.budget.forget()
    return split, state


def budget_for(net: Supernet, space: ModelSpace, cfg: SearchConfig, example: torch.Tensor
               ) -> Budgeted:  # fmt: skip
    """Returns ``cfg.budget`` applied to ``net``'s space, checked feasible. A latency budget
    reads the supernet's latency table (:mod:`~nasforge.oneshot.op_latency`), attached here:
    ``cfg.budget_latency_table`` when it is a table, else the one the algorithm keeps
    (ProxylessNAS's), else each candidate timed on this machine (as its ``measure`` asks).

    Raises:
        ConfigError: no architecture meets the budget; a bad table; two tables given (the
            budget's and ProxylessNAS's ``latency_table``).
    """
    assert cfg.budget is not None
    latency = None
    if "latency" in cfg.budget:
        how = latency_recipe(cfg.budget_latency_table) or {}  # e.g. onnxruntime, one thread
        measure = partial(proxyless.latency_table, space, example, **how)
        op_latency.attach_for_budget(net, cfg.budget_latency_table, measure)
        latency = partial(op_latency.arch_latency, net)
    budget = Budgeted(space, cfg.budget, example, cfg.budget_weight, latency)
    budget.check()
    return budget


def _epoch_line(name: str, row: dict[str, Any], epochs: int, elapsed: float, first: int) -> str:
    """Returns the one-line summary of an epoch: losses, supernet accuracy, elapsed, ETA, arch
    (``first``: the epochs finished before this call, by a resumed search)."""
    val_loss = "n/a" if row["val_loss"] is None else f"{row['val_loss']:.4f}"
    arch = json.dumps(row["arch"], separators=(",", ":"))
    eta = elapsed / (row["epoch"] - first) * (epochs - row["epoch"])
    return (
        f"{name} epoch {row['epoch']}/{epochs} | train loss {row['train_loss']:.4f} | val loss "
        f"{val_loss} | supernet val acc {row['val_acc']:.4f} | elapsed {fmt_time(elapsed)} | "
        f"ETA {fmt_time(eta)} | arch {row['arch_id']} {arch}"
    )


def _epoch(
    algo: type[Algorithm],
    state: SearchState,
    split: Split,
    cfg: SearchConfig,
    checkpoint: Callable[[dict[str, Any] | None, SearchState], None] | None = None,
) -> dict:
    """Returns the progress row of one epoch of search steps (and advances ``state``), from
    where ``state.cursor`` says the epoch is; every ``cfg.checkpoint_every`` steps inside it
    ``checkpoint(None, state)`` gets the state with its cursor.

    Raises:
        DivergenceError: a loss became NaN or infinite.
    """
    cur = state.cursor or {"train": None, "train_pos": 0, "val": None, "val_pos": 0,
                           "losses_t": [], "losses_v": [], "seconds": 0.0}  # fmt: skip
    t0 = time.perf_counter() - float(cur["seconds"])
    losses_t: list[float] = list(cur["losses_t"])
    losses_v: list[float] = list(cur["losses_v"])
    train = Pass(split.train, cfg.batch_size, state.g, cur["train"], int(cur["train_pos"]))
    val = Pass(split.val, cfg.batch_size, state.g, cur["val"], int(cur["val_pos"]))
    every = cfg.checkpoint_every
    while (train_batch := train.next()) is not None:
        val_batch = None
        if algo.uses_val:
            val_batch = val.next()
            if val_batch is None:  # the validation half ran out: a new pass over it
                val = Pass(split.val, cfg.batch_size, state.g)
                val_batch = val.next()
        lt, lv = algo.step(state.net, state, train_batch, val_batch, cfg)
        if not (math.isfinite(lt) and (lv is None or math.isfinite(lv))):
            raise DivergenceError(
                f"{algo.name}: the loss became {lt if lv is None else (lt, lv)} at epoch "
                f"{state.epoch + 1}, step {len(losses_t) + 1}; lower the learning rate "
                f"(w_lr={cfg.w_lr}, a_lr={cfg.a_lr}) or check the data"
            )
        losses_t.append(lt)
        if lv is not None:
            losses_v.append(lv)
        state.sched.step()
        state.step += 1
        if checkpoint is not None and every and state.step % every == 0 and not train.done:
            (tp, tpos), (vp, vpos) = train.state(), val.state()
            state.cursor = {"train": tp, "train_pos": tpos, "val": vp, "val_pos": vpos,
                            "losses_t": losses_t, "losses_v": losses_v,
                            "seconds": time.perf_counter() - t0}  # fmt: skip
            checkpoint(None, state)
    state.cursor = None
    extra = algo.after_epoch(state.net, state, split, cfg)  # e.g. ENAS's controller phase
    state.net.ranks.average_buffers(state.net)  # batch norm's statistics of every shard
    state.epoch += 1
    row = epoch_row(algo, state, split, losses_t, losses_v, time.perf_counter() - t0)
    return {**row, **extra}


def epoch_row(
    algo: type[Algorithm],
    state: SearchState,
    split: Split,
    losses_t: list[float],
    losses_v: list[float],
    seconds: float,
) -> dict[str, Any]:
    """Returns the progress row of the epoch ``state`` has just finished: mean losses, the
    supernet's validation accuracy, the architecture it points to and, for an algorithm that
    learns them, each candidate's strength per decision (``arch_weights``)."""
    arch = algo.current_arch(state.net)
    row = {
        "epoch": state.epoch,
        "train_loss": sum(losses_t) / max(1, len(losses_t)),
        "val_loss": sum(losses_v) / len(losses_v) if losses_v else None,
        "val_acc": accuracy(state.net, split.val, ranks=state.net.ranks),
        "arch": arch,
        "arch_id": arch_id(arch),
        "seconds": seconds,
    }
    row.update(algo.arch_metrics(state.net, arch))
    weights = state.net.arch_weights()
    if weights:  # e.g. softmax(alpha)
        row["arch_weights"] = weights
    return row
