"""Training an elastic supernet: the full network first, then OFA's progressive shrinking or
CompOFA's single phase, with N sampled sub-networks per step and knowledge distillation.

One step of a shrinking phase (CompOFA §5.1, OFA):

    teacher_logits = teacher(x)                       # the full network, frozen after stage 0
    for n in range(n_subnets):                        # N = 4 by default
        set_active(sample_phase(phase))               # a sub-network the phase unlocks
        loss_n = CE(net(x), y) + kd_ratio * KD(net(x), teacher_logits)
        loss_n.backward()                             # gradients accumulate over the N
    optimizer.step()                                  # one update for the N sub-networks

Stages run in order; each gets a fresh SGD optimizer with a cosine schedule over its epochs.
With a run directory, every epoch is recorded in an engine experiment store there (loss, probe
accuracies, the path of a checkpoint holding state dicts only, loadable with
``weights_only=True``; see :mod:`nasforge.ofa.record`); ``train`` given the same directory
resumes after the last recorded epoch. Shuffling and sampling
are seeded per (stage, epoch), so a resumed run follows the same sequence as an unbroken one.

Data parallel (``ranks``: :func:`nasforge.runtime.distributed.join`): every rank runs the same
loop on the same sub-networks (sampled from a generator seeded per (stage, epoch), the same on
every rank, never the global one), its shard of every batch, the distillation loss from the
teacher on that shard, each loss scaled by the rank's share of the batch; the gradients (and
the step's loss) are summed across ranks before the optimizer step, so every rank takes the
same step. Batch norm normalises by each rank's shard and its running statistics are averaged
across ranks after each epoch, or, with ``sync_bn``, by the statistics of the whole batch
(:mod:`nasforge.runtime.sync_bn`, the elastic batch norms' first channels included: then N
ranks with batch B/N train what one process with batch B does, to float rounding). Rank 0
alone records (store, checkpoints) and its resume point reaches the others.
"""

from __future__ import annotations

import copy
import logging
import math
import os
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from nasforge._deprecated import module_getattr
from nasforge.errors import ConfigError, DivergenceError, StopRequested, StoreError
from nasforge.ofa.mobilenet import OFAMobileNetV3, extract, sort_channels
from nasforge.ofa.record import open_run, run_config
from nasforge.ofa.spaces import Stage as _Stage
from nasforge.ofa.spaces import compofa_phases, progressive_phases
from nasforge.run.store import Store
from nasforge.runtime import sync_bn as whole_batch_bn
from nasforge.runtime.distributed import ONE, Ranks
from nasforge.runtime.weights import save_state
from nasforge.weightsharing import accuracy, recalibrate_bn

__all__ = [
    "TrainConfig",
    "training_plan",
    "train",
    "evaluate",
    "recalibrate_bn",
    "SUPERNET_FILE",
]

logger = logging.getLogger(__name__)

SUPERNET_FILE = "artifacts/supernet.pt"


#: ``Stage`` moved to :mod:`nasforge.ofa.spaces` (beside the phases it runs); the old name
#: warns (nasforge._deprecated.MOVED)
__getattr__ = module_getattr(__name__)


@dataclass(frozen=True)
class TrainConfig:
    """Returns nothing; optimisation settings shared by all stages."""

    batch_size: int = 128
    lr: float = 0.05
    momentum: float = 0.9
    weight_decay: float = 3e-5
    n_subnets: int = 4  # sub-networks sampled per step, gradients accumulated
    kd_ratio: float = 1.0  # weight of the distillation loss (0 disables the teacher)
    kd_temperature: float = 1.0
    shrink_lr_scale: float = 0.3  # shrinking stages restart at lr * this (OFA: ~0.03 to 0.4)
    seed: int = 0


def training_plan(
    supernet: OFAMobileNetV3, full_epochs: int, shrink_epochs: int, schedule: str = "auto"
) -> list[_Stage]:
    """Returns the stages: the full network for ``full_epochs``, then ``shrink_epochs`` split as
    evenly as possible over the shrinking phases (``schedule``: ``progressive`` = OFA's phases,
    ``single`` = CompOFA's, ``auto`` = by the space's coupling).

    Raises:
        ConfigError: unknown schedule, or fewer shrink epochs than phases.
    """
    spec = supernet.spec
    if schedule == "auto":
        schedule = "progressive" if spec.coupling == "ofa" else "single"
    if schedule not in ("progressive", "single"):
        raise ConfigError(f"schedule {schedule!r} is not one of auto, progressive, single")
    phases = progressive_phases(spec) if schedule == "progressive" else compofa_phases(spec)
    if shrink_epochs and shrink_epochs < len(phases):
        raise ConfigError(
            f"{shrink_epochs} shrink epochs cannot cover {len(phases)} phases "
            f"({[p.name for p in phases]}); give at least one epoch per phase"
        )
    stages = [_Stage("full", None, full_epochs)] if full_epochs else []
    if shrink_epochs:
        base, extra = divmod(shrink_epochs, len(phases))
        for i, p in enumerate(phases):
            stages.append(_Stage(p.name, p, base + (1 if i < extra else 0)))
    return stages


def _kd_loss(logits: torch.Tensor, teacher: torch.Tensor, temperature: float) -> torch.Tensor:
    t = temperature
    soft = F.softmax(teacher / t, dim=1)
    return F.kl_div(F.log_softmax(logits / t, dim=1), soft, reduction="batchmean") * t * t


def _load(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise StoreError(
            f"the store names checkpoint {path}, but the file is missing; restore it, or start "
            "a new run directory"
        )
    try:
        return torch.load(path, weights_only=True)
    except Exception as exc:  # corrupt or foreign file
        raise StoreError(
            f"cannot read checkpoint {path}: {type(exc).__name__}: {exc}; restore it, or start "
            "a new run directory"
        ) from exc


@torch.no_grad()
def _probe(
    supernet: OFAMobileNetV3,
    probes: Mapping[str, Mapping[str, Any]],
    data: tuple[torch.Tensor, torch.Tensor],
    calibration: torch.Tensor,
    ranks: Ranks = ONE,
) -> dict[str, float]:
    # extraction builds fresh modules, which draws from the global generator: fork it so that
    # probing never changes what training does
    with torch.random.fork_rng(devices=[]):
        accs = {name: evaluate(supernet, dict(a), data, calibration, ranks=ranks)
                for name, a in probes.items()}  # fmt: skip
    return accs


def train(
    supernet: OFAMobileNetV3,
    data: tuple[torch.Tensor, torch.Tensor],
    plan: Sequence[_Stage],
    config: TrainConfig = TrainConfig(),
    directory: str | os.PathLike[str] | None = None,
    progress: Callable[[str, int, int, int, float], None] | None = None,
    probe_data: tuple[torch.Tensor, torch.Tensor] | None = None,
    probes: Mapping[str, Mapping[str, Any]] | None = None,
    run: Mapping[str, Any] | None = None,
    store: Store | None = None,
    should_stop: Callable[[], bool] | None = None,
    ranks: Ranks = ONE,
    sync_bn: bool = False,
) -> list[dict[str, Any]]:
    """Trains ``supernet`` in place through the stages of ``plan``; returns one row per epoch
    (stage, stage_index, epoch, loss, ``acc_<probe>``, checkpoint, seconds).

    ``data`` is ``(images, labels)``. ``progress(stage, epoch, step, n_steps, loss)`` is called
    after every step. With ``probe_data`` the accuracy of each of ``probes`` (name -> arch;
    default the largest and smallest sub-network) is measured after every epoch, batch norm
    recalibrated on the first 256 training images. With ``directory`` the run is recorded in an
    engine experiment there (see :mod:`nasforge.ofa.record`): config, epoch rows, checkpoints,
    final weights; a directory that already holds the run resumes after its last checkpoint.
    ``run`` is free JSON-able data stored with the config (the command line keeps its data
    source there). ``store`` (instead of ``directory``) is the writer store of a run that a
    runner created. ``should_stop`` is asked after every recorded epoch (its checkpoint is
    saved by then): when it says so, training stops there, and a resume goes on from it.

    ``ranks`` (:func:`nasforge.runtime.distributed.join`, or a group the caller joined) makes
    the training data parallel (see the module docstring): every rank calls ``train`` with the
    same supernet, data, plan and config; rank 0 alone opens ``directory`` (or holds
    ``store``), records, and hands its resume point to the others; every rank asks
    ``should_stop`` (which must agree across ranks, as
    :meth:`~nasforge.run.runner.BaseRunner.stop_asked` does) after every epoch. ``sync_bn``
    (several ranks only) normalises batch norm by the whole batch's statistics (the supernet's
    batch norms are converted in place: :func:`nasforge.runtime.sync_bn.convert`). Rank 0
    returns the record's rows, the others the rows of the epochs they trained (without
    ``checkpoint``).

    Invariants: a run resumed from its directory ends with the same weights as an unbroken run
    (same thread count); the teacher is a frozen copy of the full network as it is when the
    first shrinking stage starts (after stage ``full`` in the usual plans); on several ranks,
    every rank holds the same weights after every step.

    Raises:
        ConfigError: empty data, or images and labels of different counts; on a rank other
            than 0, rank 0 could not open the record or read its checkpoint.
        StoreError: the directory holds another experiment, a run with other settings, an
            unreadable database or a missing or unreadable checkpoint.
        StopRequested: ``should_stop`` said so after an epoch (recorded with a store).
    """
    x_all, y_all = data
    if len(x_all) == 0 or len(x_all) != len(y_all):
        raise ConfigError(f"need equal, non-zero numbers of images and labels, got {len(x_all)}")
    own = None
    if store is None and directory is not None and ranks.writer:
        try:
            store = own = open_run(Path(directory), run_config(supernet.spec, plan, config, run))
        except BaseException as exc:  # the other ranks must not wait for a resume point
            ranks.broadcast(("failed", f"{type(exc).__name__}: {exc}"))
            raise
    try:
        rows = _train(supernet, x_all, y_all, plan, config, store, progress, probe_data, probes,
                      should_stop, ranks, sync_bn)  # fmt: skip
    except BaseException as exc:
        if own is not None:  # a run this call opened ends failed, or interrupted by Ctrl-C
            own.end(exc)
        raise
    else:
        if own is not None:
            own.end()
        return rows
    finally:
        if own is not None:
            own.close()


def _resume_point(store: Store | None, ranks: Ranks) -> tuple[list[dict[str, Any]], Any]:
    """Returns (the rows recorded so far, the last checkpoint's state or None): rank 0 reads
    them from ``store`` and every rank gets them.

    Raises:
        StoreError: (rank 0) the checkpoint is missing or unreadable.
        ConfigError: (other ranks) rank 0 could not read it, or could not open the record.
    """
    point: Any = None
    if ranks.writer:
        try:
            logs = store.progress() if store is not None else []
            state = None
            if store is not None and logs:
                state = _load(store.directory / logs[-1]["checkpoint"])
            point = ("start", logs, state)
        except BaseException as exc:
            ranks.broadcast(("failed", f"{type(exc).__name__}: {exc}"))
            raise
    point = ranks.broadcast(point)
    if point[0] == "failed":
        raise ConfigError(f"rank 0 could not start the OFA training: {point[1]}")
    return point[1], point[2]


def _train(
    supernet: OFAMobileNetV3,
    x_all: torch.Tensor,
    y_all: torch.Tensor,
    plan: Sequence[_Stage],
    config: TrainConfig,
    store: Store | None,
    progress: Callable[[str, int, int, int, float], None] | None,
    probe_data: tuple[torch.Tensor, torch.Tensor] | None,
    probes: Mapping[str, Mapping[str, Any]] | None,
    should_stop: Callable[[], bool] | None = None,
    ranks: Ranks = ONE,
    sync_bn: bool = False,
) -> list[dict[str, Any]]:
    space = supernet.search_space()
    if probes is None:
        probes = {"largest": space.largest(), "smallest": space.smallest()}
    teacher: OFAMobileNetV3 | None = None
    done = (0, 0)  # (stage index, epochs finished in it)
    logs, state = _resume_point(store, ranks)
    if store is not None:
        store.set_plan("epochs", sum(s.epochs for s in plan))
    if logs:
        last = logs[-1]
        supernet.load_state_dict(state["model"])
        done = (int(last["stage_index"]), int(last["epoch"]) + 1)
        if state.get("teacher") is not None:
            teacher = copy.deepcopy(supernet)
            teacher.load_state_dict(state["teacher"])
        logger.info("resuming after stage %d epoch %d", *done)
    if not ranks.writer:
        logs = []  # the record's rows are rank 0's to return
    ranks.sync_module(supernet)  # equal already (same seed, same checkpoint); rank 0's anyway
    if sync_bn and ranks.distributed:  # in place: same parameters, buffers and keys
        whole_batch_bn.convert(supernet)
    # on several ranks, every step asks (agreeing) whether to stop, recorded or not
    asks = should_stop is not None and (store is not None or ranks.distributed)
    n_steps = (len(x_all) + config.batch_size - 1) // config.batch_size
    for si, stage in enumerate(plan):
        if si < done[0] or (si == done[0] and done[1] >= stage.epochs):
            continue
        if stage.phase is not None and teacher is None and config.kd_ratio > 0:
            teacher = copy.deepcopy(supernet)  # the full network as trained so far
        if teacher is not None:
            teacher.set_active(space.largest())
            teacher.eval()
        # a restart at the full network's rate undoes much of its training, so shrinking
        # stages restart lower, as OFA's and CompOFA's schedules do
        scale = 1.0 if stage.phase is None else config.shrink_lr_scale
        lr = stage.lr if stage.lr is not None else config.lr * scale
        opt = torch.optim.SGD(supernet.parameters(), lr=lr, momentum=config.momentum,
                              weight_decay=config.weight_decay, nesterov=True)  # fmt: skip
        total = max(1, stage.epochs * n_steps)

        def cosine(s: int, total: int = total) -> float:  # the default binds this stage's total
            return 0.5 * (1 + math.cos(math.pi * min(s, total) / total))

        sched = torch.optim.lr_scheduler.LambdaLR(opt, cosine)
        start = done[1] if si == done[0] else 0
        if start and state is not None:
            opt.load_state_dict(state["optimizer"])
            sched.load_state_dict(state["scheduler"])
        elif stage.phase is not None and stage.phase.sort_channels:
            sort_channels(supernet)
        for epoch in range(start, stage.epochs):
            t0 = time.perf_counter()
            with whole_batch_bn.synced(supernet, ranks):
                loss_sum = _epoch(supernet, teacher, space, stage, si, epoch, x_all, y_all, opt,
                                  sched, config, progress, n_steps, ranks)  # fmt: skip
            ranks.average_buffers(supernet)  # batch norm's statistics of every rank's shards
            row: dict[str, Any] = {"stage": stage.name, "stage_index": si, "epoch": epoch,
                                   "loss": loss_sum / n_steps}  # fmt: skip
            if not math.isfinite(row["loss"]):
                raise DivergenceError(
                    f"OFA training: the loss became {row['loss']} in stage {stage.name!r} epoch "
                    f"{epoch + 1}; lower the learning rate (lr={config.lr}) or check the data"
                )
            if probe_data is not None:
                accs = _probe(supernet, probes, probe_data, x_all[:256], ranks)
                row.update({f"acc_{name}": acc for name, acc in accs.items()})
            logger.info("stage %s epoch %d loss %.4f %s", stage.name, epoch, row["loss"],
                        {k: v for k, v in row.items() if k.startswith("acc_")})  # fmt: skip
            if store is not None:
                rel = f"checkpoints/{si:02d}-{stage.name}-e{epoch + 1:03d}.pt"
                save_state({
                    "model": supernet.state_dict(),
                    "teacher": teacher.state_dict() if teacher is not None else None,
                    "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                }, store.directory / rel)  # fmt: skip
                row["checkpoint"] = rel
                row["seconds"] = time.perf_counter() - t0
                step = sum(s.epochs for s in plan[:si]) + epoch + 1
                store.add_progress(step, row)  # committed after the file: resume point moves
                _drop_superseded(store.directory, logs, plan)
                row = dict(row, step=step)
            logs.append(row)
            if asks and should_stop is not None and should_stop():
                raise StopRequested(f"OFA training stopped on request after stage "
                                    f"{stage.name!r} epoch {epoch + 1}")  # fmt: skip
    supernet.set_active(space.largest())
    if store is not None:
        save_state(supernet.state_dict(), store.directory / SUPERNET_FILE)
        store.add_artifact("supernet", SUPERNET_FILE, "supernet")
    return logs


def _drop_superseded(directory: Path, logs: list[dict[str, Any]], plan: Sequence[_Stage]) -> None:
    # the previous checkpoint is superseded unless it ended its stage (kept: one per phase)
    if not logs:
        return
    prev = logs[-1]
    if int(prev["epoch"]) + 1 < plan[int(prev["stage_index"])].epochs:
        (directory / prev["checkpoint"]).unlink(missing_ok=True)


def _epoch(
    supernet: OFAMobileNetV3,
    teacher: nn.Module | None,
    space: Any,
    stage: _Stage,
    si: int,
    epoch: int,
    x_all: torch.Tensor,
    y_all: torch.Tensor,
    opt: torch.optim.Optimizer,
    sched: Any,
    config: TrainConfig,
    progress: Callable[[str, int, int, int, float], None] | None,
    n_steps: int,
    ranks: Ranks = ONE,
) -> float:
    # the data order and the sub-networks of the epoch come from its own generators, seeded by
    # (seed, stage, epoch): the same on every rank and after a resume, whatever the global one
    seed = config.seed * 1_000_003 + si * 1009 + epoch
    gen = torch.Generator().manual_seed(seed)
    rng = random.Random(seed)
    order = torch.randperm(len(x_all), generator=gen)
    supernet.train()
    loss_sum = 0.0
    share = 1.0  # this rank's share of the batch (its mean loss is scaled by it)
    for step in range(n_steps):
        idx = order[step * config.batch_size : (step + 1) * config.batch_size]
        x, y = x_all[idx], y_all[idx]
        if ranks.distributed:
            share = ranks.share(len(idx))
            x, y = ranks.shard((x, y))
        opt.zero_grad(set_to_none=True)
        if stage.phase is None:
            supernet.set_active(space.largest())
            loss = F.cross_entropy(supernet(x), y)
            if ranks.distributed:
                loss = loss * share
            loss.backward()
            step_loss = float(loss.detach())
        else:
            with torch.no_grad():
                soft = teacher(x) if teacher is not None and config.kd_ratio > 0 else None
            step_loss = 0.0
            for _ in range(config.n_subnets):
                supernet.set_active(space.sample_phase(stage.phase, rng))
                logits = supernet(x)
                loss = F.cross_entropy(logits, y)
                if soft is not None:
                    loss = loss + config.kd_ratio * _kd_loss(logits, soft, config.kd_temperature)
                if ranks.distributed:
                    loss = loss * share
                loss.backward()  # accumulate: one optimizer step for the N sub-networks
                step_loss += float(loss.detach()) / config.n_subnets
        if ranks.distributed:  # every rank: the whole batch's gradient and loss
            (step_loss,) = ranks.all_reduce_grads(supernet.parameters(), step_loss)
        opt.step()
        sched.step()
        loss_sum += step_loss
        if progress is not None:
            progress(stage.name, epoch, step, n_steps, step_loss)
    return loss_sum


@torch.no_grad()
def evaluate(
    supernet: OFAMobileNetV3,
    arch: dict[str, Any],
    data: tuple[torch.Tensor, torch.Tensor],
    calibration: torch.Tensor | None = None,
    batch_size: int = 500,
    ranks: Ranks = ONE,
) -> float:
    """Returns the top-1 accuracy of ``arch``'s extracted sub-network on ``data``, after batch-norm
    recalibration on ``calibration`` images when given (on the extracted copy: the supernet's
    weights and statistics are not modified; ``arch`` becomes its active configuration). On
    several ``ranks`` (every rank calling it alike) each rank scores its shard of ``data``."""
    model = extract(supernet, arch)
    if calibration is not None:
        recalibrate_bn(model, calibration)
    return accuracy(model, data, batch_size, ranks=ranks)
