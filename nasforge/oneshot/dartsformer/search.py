"""DARTSformer search (Algorithm 2): alternate weight and architecture updates of an
encoder-decoder supernet whose reversible stacks backpropagate by reconstruction.

    while budget left:
        θ ← Adam step on L_train (label-smoothed CE), architecture parameters held out
        α ← Adam step on L_val, weights held out
    arch = argmax per decision (Eq. 2; ``Supernet.export``)

A search can stop and go on: every ``checkpoint_every`` steps (and at the end) it hands
``checkpoint`` its whole state (supernet, both optimizers, schedule, step, RNG, loss sums,
seconds spent) as tensors and plain data; ``rev_search(..., state=that)`` goes on from there.
The data position is the step: batch ``i`` of the cycled ``train``/``val`` streams feeds step
``i``, so a resumed search skips the batches already used.

Randomness: what a step draws (dropout's masks, replayed by the reversible stacks'
reconstruction) comes from the search's own generator (:class:`Draws`), seeded with the
search's seed and saved in every checkpoint: it seeds torch's global generator for each step
and the caller's global state is given back after, so that state neither feeds nor sees the
search's draws.

Data parallel (``ranks``: :func:`nasforge.runtime.distributed.join`): every rank calls
``rev_search`` with the same space, data, settings and resume state. Each takes its rows of
every batch (:meth:`~nasforge.runtime.distributed.Ranks.shard`); the loss is a mean over the
target tokens that are not padding, so a rank's loss is scaled by its share of the batch's
*tokens* (:func:`token_share`), not of its sentences, and the ranks' gradients sum to the
gradient of the whole batch's mean. Each half-step's gradients (and its loss) are summed
across ranks in one collective before its optimizer step, so every rank takes the same steps
and ends with the same supernet and architecture. Without dropout, one process with batch B
computes what N ranks with batch B/N do, up to the order of float sums; with dropout, each
rank draws its shard's masks from the step's seed instead of taking its rows of the whole
batch's masks (a valid search, not bitwise one process's).

Works with any one-shot algorithm of :data:`nasforge.oneshot.ALGORITHMS` whose mixed ops fit a
LayerChoice ("darts": softmax mix, "nasb": binary gates re-drawn before each step). Settings
follow §3.2: Adam (0.9, 0.98) on θ with the inverse-square-root schedule, Adam at 3e-4 with
weight decay 1e-3 on α, label smoothing 0.1.

Invariants: the returned architecture is valid for the space; the same seed and thread count
give the same result (given the same number of steps), with or without a stop and a resume
from a checkpoint in between.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from nasforge.data.translation import PAD
from nasforge.errors import ConfigError, DivergenceError, StopRequested
from nasforge.oneshot.darts import Darts
from nasforge.oneshot.nasb import Nasb
from nasforge.oneshot.reversible import set_reconstruct
from nasforge.oneshot.supernet import Supernet
from nasforge.runtime.devices import check_device
from nasforge.runtime.distributed import ONE, Ranks
from nasforge.space import ModelSpace

__all__ = [
    "Draws",
    "RevSearchConfig",
    "RevSearchResult",
    "inverse_sqrt",
    "rev_search",
    "rev_step",
    "token_share",
]

logger = logging.getLogger(__name__)

Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
_ALGOS = {"darts": Darts, "nasb": Nasb}


@dataclass
class RevSearchConfig:
    """Returns nothing; the settings of one DARTSformer search (§3.2 defaults)."""

    algorithm: str = "darts"  # "darts" or "nasb"
    reconstruct: bool = True  # False: ordinary backprop through the same supernet
    w_lr: float = 5e-4
    warmup: int = 200
    a_lr: float = 3e-4
    a_weight_decay: float = 1e-3
    label_smoothing: float = 0.1
    grad_clip: float = 1.0
    max_steps: int = 10**9
    time_budget_s: float = 60.0
    log_every: int = 20
    checkpoint_every: int = 0  # steps between states handed to ``checkpoint`` (0: only the end)
    seed: int = 0
    device: str = "cpu"  # where the supernet lives; batches must be there too

    def check(self) -> None:
        """Raises ConfigError on an unknown algorithm, a non-positive budget, or a device
        this machine does not have."""
        check_device(self.device, "the DARTSformer search's device")
        if self.algorithm not in _ALGOS:
            raise ConfigError(
                f"reversible search algorithm {self.algorithm!r} unknown; expected one of "
                f"{sorted(_ALGOS)}"
            )
        if self.max_steps < 1 or self.time_budget_s <= 0 or self.log_every < 1:
            raise ConfigError(
                f"max_steps, time_budget_s and log_every must be positive, got "
                f"{self.max_steps}, {self.time_budget_s} and {self.log_every}"
            )
        if self.checkpoint_every < 0:
            raise ConfigError(
                f"checkpoint_every must be >= 0 (0: only at the end), got {self.checkpoint_every}"
            )


@dataclass
class RevSearchResult:
    """Returns nothing; the architecture found, the logged rows and the trained supernet."""

    arch: dict[str, Any]
    history: list[dict[str, Any]]
    supernet: Supernet
    steps: int = 0  # search steps taken (one weight and one architecture update each)


def inverse_sqrt(opt: torch.optim.Optimizer, lr: float, warmup: int) -> Any:
    """Returns the Vaswani et al. schedule of ``opt`` (whose base rate is ``lr``): linear
    warm-up over ``warmup`` steps, then decay as ``sqrt(warmup / step)``."""
    w = max(1, warmup)
    return torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / w, math.sqrt(w / (s + 1)))
    )


def token_share(ranks: Ranks, tgt_out: torch.Tensor) -> float:
    """Returns this rank's share of the target tokens that are not padding in the whole batch
    whose targets are ``tgt_out``: its rows' tokens over the batch's (1 for one process;
    ``1 / world`` when the batch has fewer rows than ranks and each takes all of it). A mean
    over a shard's tokens times this share sums, over the ranks, to the whole batch's mean."""
    if not ranks.distributed:
        return 1.0
    n = len(tgt_out)
    if n < ranks.world:
        return 1.0 / ranks.world
    start, stop = ranks.bounds(n)
    total = int((tgt_out != PAD).sum())
    return int((tgt_out[start:stop] != PAD).sum()) / total if total else 0.0


def _loss(net: nn.Module, batch: Batch, smoothing: float, ranks: Ranks = ONE) -> torch.Tensor:
    """Returns the token-averaged, label-smoothed loss of ``net`` on this rank's shard of
    ``batch``, scaled by its share of the batch's tokens (the whole batch's mean for one
    process)."""
    share = token_share(ranks, batch[2])
    src, tgt_in, tgt_out = ranks.shard(batch)
    logits = net(src, tgt_in)
    loss = nn.functional.cross_entropy(
        logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD, label_smoothing=smoothing
    )
    return loss * share if ranks.distributed else loss


def _held_out(params: list[nn.Parameter]) -> Any:
    class _Ctx:
        def __enter__(self) -> None:
            for p in params:
                p.requires_grad_(False)

        def __exit__(self, *exc: Any) -> None:
            for p in params:
                p.requires_grad_(True)

    return _Ctx()


def rev_step(
    net: Supernet,
    opts: tuple[torch.optim.Optimizer, torch.optim.Optimizer, Any],
    train_batch: Batch,
    val_batch: Batch,
    cfg: RevSearchConfig,
    *,
    ranks: Ranks = ONE,
) -> tuple[float, float]:
    """Returns (train loss, val loss) of one search step: θ on ``train_batch`` (architecture
    parameters held out), then α on ``val_batch`` (weights held out); NASB gates re-drawn
    before each half. On several ``ranks``, each computes its shard of both batches and each
    half's gradients are summed across ranks, with its loss, in one collective before its
    optimizer step (the losses returned are the whole batches', the same on every rank)."""
    opt_w, opt_a, sched = opts
    net.algorithm.draw_gates(net)
    with _held_out(net.arch_parameters()):
        loss_t = _loss(net, train_batch, cfg.label_smoothing, ranks)
        opt_w.zero_grad(set_to_none=True)
        loss_t.backward()
    (lt,) = ranks.all_reduce_grads(net.weights(), float(loss_t.detach()))
    nn.utils.clip_grad_norm_(net.weights(), cfg.grad_clip)
    opt_w.step()
    sched.step()
    net.algorithm.draw_gates(net)
    with _held_out(net.weights()):
        loss_v = _loss(net, val_batch, cfg.label_smoothing, ranks)
        opt_a.zero_grad(set_to_none=True)
        loss_v.backward()
    (lv,) = ranks.all_reduce_grads(net.arch_parameters(), float(loss_v.detach()))
    opt_a.step()
    return lt, lv


class Draws:
    """Returns nothing; the search's own random state for what a step draws through torch's
    global generator (dropout, replayed by the reversible reconstruction): a generator seeded
    with the search's seed that gives each step a seed of its own. :meth:`use` seeds torch's
    global generator (and the search's GPU's) with it for the step and gives the caller's
    global state back after.

    Invariants: the same seed gives the same draws whatever the global generator held before;
    every rank of a data-parallel search takes the same step seeds (one per step, however many
    numbers its shard then draws), so its state is the same on every rank at every step.
    """

    def __init__(self, seed: int, device: str | torch.device) -> None:
        self.g = torch.Generator().manual_seed(seed)
        self.device = torch.device(device)

    @contextmanager
    def use(self) -> Iterator[None]:
        """Runs the block (one step) with torch's global generators seeded by the next step
        seed; restores the global states the caller had."""
        seed = int(torch.randint(2**62, (1,), generator=self.g))
        gpu = [self.device] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=gpu):
            torch.default_generator.manual_seed(seed)
            if gpu:
                index = self.device.index
                index = torch.cuda.current_device() if index is None else index
                torch.cuda.default_generators[index].manual_seed(seed)
            yield

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Returns the state as tensors (``rng``: the step seeds' generator)."""
        return {"rng": self.g.get_state()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restores what :meth:`state_dict` returned."""
        self.g.set_state(state["rng"])


def _state(
    net: Supernet, opts: tuple, draws: Draws, step: int, sums: list[float], elapsed: float
) -> dict:
    """Returns everything a search needs to go on after ``step`` (tensors and plain data; the
    tensors are the live ones: save or copy them before the next step)."""
    return {
        "supernet": net.state_dict(),
        "opt_w": opts[0].state_dict(),
        "opt_a": opts[1].state_dict(),
        "sched": opts[2].state_dict(),
        "step": step,
        "sums": list(sums),
        "elapsed_s": elapsed,
        **draws.state_dict(),
    }


def _load_state(net: Supernet, opts: tuple, draws: Draws, state: Mapping[str, Any]) -> None:
    """Returns nothing; puts the supernet, optimizers, schedule and draws back as ``state``."""
    net.load_state_dict(state["supernet"])
    for opt, key in zip(opts, ("opt_w", "opt_a", "sched")):
        opt.load_state_dict(state[key])
    draws.load_state_dict(state)


def _cycle(make: Callable[[int], Iterable[Batch]]) -> Iterator[Batch]:
    epoch = 0
    while True:
        yield from make(epoch)
        epoch += 1


def rev_search(
    space: ModelSpace,
    train: Callable[[int], Iterable[Batch]],
    val: Callable[[int], Iterable[Batch]],
    cfg: RevSearchConfig | None = None,
    on_step: Callable[[dict[str, Any]], None] | None = None,
    checkpoint: Callable[[dict[str, Any]], None] | None = None,
    state: Mapping[str, Any] | None = None,
    should_stop: Callable[[], bool] | None = None,
    ranks: Ranks = ONE,
) -> RevSearchResult:
    """Returns the architecture a DARTSformer search of ``space`` finds with weights trained on
    ``train(epoch)`` batches and architecture parameters on ``val(epoch)`` batches
    (``(src, tgt_in, tgt_out)`` each), until ``cfg.max_steps`` or ``cfg.time_budget_s``
    (seconds spent before a resume count). ``checkpoint`` receives the search's state every
    ``cfg.checkpoint_every`` steps and after the last; ``state`` (one such) resumes from it.
    ``should_stop`` is asked after every step: when it says so, the state goes to
    ``checkpoint`` and the search stops (a resume from that state goes on bitwise).

    ``ranks`` makes the search data parallel (see the module docstring): every rank calls it
    with the same arguments (each its own ``on_step`` and ``checkpoint``: the caller decides
    which rank writes); the time budget is decided by agreement (the first rank over it stops
    every rank at the same step), and ``should_stop`` must answer alike on every rank, as
    :meth:`~nasforge.run.runner.BaseRunner.stop_asked` does.

    Raises:
        ConfigError: an unknown algorithm or budget.
        StopRequested: ``should_stop`` said so (after the state was handed to ``checkpoint``).
        DivergenceError: a loss became NaN or infinite (the message names the step).
        SpaceError: the space cannot be made a supernet, or a candidate fails the reversible
            checks (raised by the first forward, before any update).
    """
    cfg = cfg or RevSearchConfig()
    cfg.check()
    torch.manual_seed(cfg.seed)
    net = Supernet(space, _ALGOS[cfg.algorithm]).to(cfg.device)
    draws = Draws(cfg.seed, cfg.device)  # the same on every rank
    net.ranks = ranks
    ranks.sync_module(net)  # equal already (same seed); rank 0's, whatever a rank did
    set_reconstruct(net, cfg.reconstruct)
    opt_w = torch.optim.Adam(net.weights(), lr=cfg.w_lr, betas=(0.9, 0.98), eps=1e-9)
    opt_a = torch.optim.Adam(
        net.arch_parameters(), lr=cfg.a_lr, betas=(0.9, 0.98), weight_decay=cfg.a_weight_decay
    )
    opts = (opt_w, opt_a, inverse_sqrt(opt_w, cfg.w_lr, cfg.warmup))
    net.train()
    history: list[dict[str, Any]] = []
    tr, va = _cycle(train), _cycle(val)
    sums, step, spent = [0.0, 0.0], 0, 0.0
    if state is not None:
        _load_state(net, opts, draws, state)
        sums, step, spent = list(state["sums"]), int(state["step"]), float(state["elapsed_s"])
        for _ in range(step):  # the data position: one batch of each stream per step
            next(tr), next(va)
    saved = step
    t0 = time.perf_counter() - spent
    timed = math.isfinite(cfg.time_budget_s)  # alike on every rank: all ask, or none

    def save() -> None:
        if checkpoint is not None:
            checkpoint(_state(net, opts, draws, step, sums, time.perf_counter() - t0))

    while step < cfg.max_steps:
        if timed and ranks.agree(time.perf_counter() - t0 >= cfg.time_budget_s):
            break
        with draws.use():
            lt, lv = rev_step(net, opts, next(tr), next(va), cfg, ranks=ranks)
        step += 1
        if not (math.isfinite(lt) and math.isfinite(lv)):
            raise DivergenceError(
                f"search step {step}: loss {lt} (weights) / {lv} (architecture) is not finite; "
                f"lower w_lr ({cfg.w_lr}) or a_lr ({cfg.a_lr}), or lengthen the warm-up"
            )
        sums[0] += lt
        sums[1] += lv
        if step % cfg.log_every == 0:
            row = {
                "step": step,
                "train_loss": sums[0] / cfg.log_every,
                "val_loss": sums[1] / cfg.log_every,
                "elapsed_s": round(time.perf_counter() - t0, 2),
                "arch": net.export(),
                "arch_weights": net.arch_weights(),  # each candidate's strength per decision
            }
            sums = [0.0, 0.0]
            history.append(row)
            logger.info(
                "search step %d train %.3f val %.3f", step, row["train_loss"], row["val_loss"]
            )
            if on_step is not None:
                on_step(row)
        if cfg.checkpoint_every and step % cfg.checkpoint_every == 0:
            save()
            saved = step
        if should_stop is not None and should_stop():
            if step != saved:
                save()
            raise StopRequested(f"the search stopped on request after step {step}")
    if step != saved:
        save()
    return RevSearchResult(net.export(), history, net, step)
