"""ENAS: efficient neural architecture search by parameter sharing (Pham et al. 2018).

An LSTM controller proposes architectures of the space, one decision after another (its choice
at decision ``d`` is the next input of the LSTM), and the single-path supernet (SPOS's path ops,
:mod:`nasforge.weightsharing`) computes whatever it proposes. Training alternates two phases
per epoch, as the paper does, after a warm-up::

    warm-up      the first ``warmup_epochs`` epochs (default: 3/4 of ``epochs``) train uniform
                 paths (SPOS's rule) and the controller waits; its phase first runs after the
                 last warm-up epoch
    weights      every training batch: sample arch ~ pi, train its path (momentum SGD)
    controller   ``controller_steps`` validation batches of ``controller_batch`` examples:
                 sample arch ~ pi, reward R = minus its cross-entropy on the batch
                 (``controller_reward: loss``; ``accuracy`` is the paper's) with shared weights
                 and batch statistics, then Adam on -(A * log pi(arch) + entropy_weight * H(pi))
                 A = R's advantage over a moving-average baseline
                 (:class:`~nasforge.strategy.base.RewardBaseline`, the ``rl`` strategy's)
    pick         ``final_samples`` architectures sampled from the trained controller, each
                 scored once on the whole validation split with inherited weights (batch norm
                 recalibrated on training batches) and compared by ``selection``, as SPOS's
                 evolution compares them (:mod:`nasforge.oneshot.selection`: by default the
                 hybrid of supernet loss and a zero-cost proxy); the best wins
    budget       with the loop's ``budget``, a path or a pick over it is drawn again
                 (:mod:`nasforge.oneshot.budgeted`), and the controller's reward of a sample
                 over it loses ``budget_weight`` times its excess, so it learns to stay within

Why the warm-up and the loss: a controller that steers from the first step locks on to cells
of 1x1 convolutions, pooling and skips, whose paths give a stable accuracy while the shared
3-wide convolutions are still undertrained; the longer the uniform warm-up, the longer those
deeper paths train before the controller steers. A supernet scored by validation loss ranks
architectures better than by accuracy, and a loss separates cells that one batch's accuracy
ties. docs/oneshot.md ("ENAS") has the measurements behind these defaults.

The controller's logits are ``tanh_constant * tanh(l / temperature)`` (2.5 and 5, the paper's
values), which bounds how sure it can become. Decisions are sampled by inverting each
categorical's distribution with ``state.rng`` (the search's ``random.Random``), so a
checkpoint (the controller's weights, its baseline, the generators) resumes bitwise.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from nasforge.errors import ConfigError
from nasforge.oneshot.algorithms import register_algorithm
from nasforge.oneshot.budgeted import budget_of, draw
from nasforge.oneshot.common import (
    Batch,
    activate,
    batches,
    check_optional_int,
    frozen_bn_stats,
    ranks_of,
    weight_step,
)
from nasforge.oneshot.selection import Selection, SelectionSettings, pick
from nasforge.oneshot.selection import check as check_selection
from nasforge.oneshot.spos import SposInput, SposLayer, SposRepeat
from nasforge.oneshot.supernet import Algorithm, Supernet
from nasforge.space.search_space import Arch, SearchSpace
from nasforge.strategy.base import RewardBaseline

__all__ = ["Enas", "EnasSettings", "Controller"]

logger = logging.getLogger(__name__)

#: the paper's squashing of the controller's logits: tanh_constant * tanh(l / temperature)
TANH_CONSTANT, TEMPERATURE = 2.5, 5.0


class Controller(nn.Module):
    """Returns nothing when called; an LSTM policy over a space's decisions, taken in space
    order: at decision ``d`` the LSTM's output feeds ``d``'s softmax head, and the embedding of
    the candidate chosen feeds the next step (the first step gets a learned start vector).

    Invariants: a sample lies inside the space; the same ``rng`` state and weights give the
    same sample; the baseline's statistics travel in the state dict (``extra_state``).
    """

    def __init__(self, space: SearchSpace, hidden: int = 64, baseline_decay: float = 0.99) -> None:
        super().__init__()
        self.space = space
        sizes = [len(d) for d in space.decisions]
        self.start = nn.Parameter(torch.zeros(1, hidden))
        self.lstm = nn.LSTMCell(hidden, hidden)
        self.heads = nn.ModuleList(nn.Linear(hidden, n) for n in sizes)
        self.embeds = nn.ModuleList(nn.Embedding(n, hidden) for n in sizes)
        for p in self.parameters():  # the paper's initialisation
            nn.init.uniform_(p, -0.1, 0.1)
        self.baseline = RewardBaseline(baseline_decay)

    def get_extra_state(self) -> torch.Tensor:
        """Returns the baseline's statistics as one float64 tensor (saved with the weights,
        which hold only tensors)."""
        return torch.tensor(list(self.baseline.state().values()), dtype=torch.float64)

    def set_extra_state(self, state: Any) -> None:
        """Restores the baseline's statistics from :meth:`get_extra_state`'s tensor."""
        keys = self.baseline.state().keys()
        self.baseline.load_state(dict(zip(keys, state.tolist())))

    def _walk(
        self, choose: Any
    ) -> tuple[list[int], torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        """Returns (positions, summed log-probability, summed entropy, each decision's
        probabilities) of one pass, ``choose(i, probabilities)`` picking decision ``i``."""
        x, hc = self.start, None
        positions: list[int] = []
        probs: list[torch.Tensor] = []
        log_p = entropy = self.start.new_zeros(())
        for i, (head, embed) in enumerate(zip(self.heads, self.embeds)):
            hc = self.lstm(x, hc)
            logp = torch.log_softmax(TANH_CONSTANT * torch.tanh(head(hc[0])[0] / TEMPERATURE), 0)
            p = logp.exp()
            k = int(choose(i, p.detach()))
            positions.append(k)
            probs.append(p.detach())
            log_p = log_p + logp[k]
            entropy = entropy - (p * logp).sum()
            x = embed(torch.tensor([k], device=x.device))
        return positions, log_p, entropy, probs

    def sample(self, rng: random.Random | None) -> tuple[list[int], torch.Tensor, torch.Tensor]:
        """Returns (candidate positions, their summed log-probability, the summed entropy of
        each decision's distribution): drawn with ``rng``, or the most likely candidate at
        each step when ``rng`` is None."""
        if rng is None:
            positions, log_p, entropy, _ = self._walk(lambda i, p: torch.argmax(p))
        else:
            positions, log_p, entropy, _ = self._walk(lambda i, p: _draw(p.tolist(), rng.random()))
        return positions, log_p, entropy

    def arch(self, rng: random.Random | None) -> Arch:
        """Returns an architecture drawn with ``rng`` (None: the most likely at each step),
        computed without gradients."""
        with torch.no_grad():
            return self.space.from_index(self.sample(rng)[0])

    def strengths(self) -> dict[str, list[float]]:
        """Returns label -> the probability of each candidate along the most likely path."""
        with torch.no_grad():
            probs = self._walk(lambda i, p: torch.argmax(p))[3]
        return {
            d.label: [round(float(v), 6) for v in p] for d, p in zip(self.space.decisions, probs)
        }


def _draw(probs: list[float], u: float) -> int:
    """Returns the position whose cumulative probability first exceeds ``u``."""
    acc = 0.0
    for k, p in enumerate(probs):
        acc += p
        if u < acc:
            return k
    return len(probs) - 1


def _reward(net: Supernet, batch: Batch, kind: str) -> float:
    """Returns the reward of the active path on ``batch``: its accuracy (``kind`` "accuracy",
    the paper's) or minus its mean cross-entropy ("loss"), batch norm by batch statistics
    (train mode) and its running statistics untouched."""
    ranks = ranks_of(net)
    net.train()
    if ranks.distributed:  # this rank's shard; the sums over every rank's shard
        x, y = ranks.shard(batch)
        with torch.no_grad(), frozen_bn_stats(net):
            out = net(x)
            right = float((out.argmax(-1) == y).sum())
            loss = float(nn.functional.cross_entropy(out, y, reduction="sum"))
        right, loss, n = ranks.all_reduce_tensors([], right, loss, float(len(y)))
        return right / n if kind == "accuracy" else -loss / n
    x, y = batch
    with torch.no_grad(), frozen_bn_stats(net):
        out = net(x)
        if kind == "accuracy":
            return float((out.argmax(-1) == y).float().mean())
        return -float(nn.functional.cross_entropy(out, y))


@dataclass
class EnasSettings(SelectionSettings):
    """Returns nothing; the settings of ENAS: its controller's phase after each epoch, its
    final pick (selection's settings included) and its warm-up."""

    controller_steps: int = 50  # controller steps (validation batches) per epoch
    controller_lr: float = 3.5e-3  # Adam on the LSTM controller
    entropy_weight: float = 1e-3  # bonus for the entropy of the controller's distribution
    final_samples: int = 20  # architectures drawn from the trained controller for the pick
    # epochs of uniform paths before the controller moves; None: 3/4 of ``epochs``
    warmup_epochs: int | None = None
    controller_reward: str = "loss"  # "loss": minus validation cross-entropy; "accuracy"
    controller_batch: int | None = None  # validation examples per reward; None: batch_size

    def check(self) -> None:
        """Raises ConfigError on a bad selection setting, controller phase, reward or warm-up."""
        super().check()
        if self.controller_steps < 0 or self.final_samples < 1:
            raise ConfigError(
                f"ENAS needs controller_steps >= 0 and final_samples >= 1, got "
                f"{self.controller_steps} and {self.final_samples}"
            )
        if not (self.controller_lr > 0 and self.entropy_weight >= 0):
            raise ConfigError(
                f"ENAS needs controller_lr > 0 and entropy_weight >= 0, got "
                f"{self.controller_lr} and {self.entropy_weight}"
            )
        check_optional_int("warmup_epochs", self.warmup_epochs, 0,
                           "epochs of uniform paths before the architecture moves: ENAS, NASB",
                           "the algorithm's default")  # fmt: skip
        if self.controller_reward not in ("loss", "accuracy"):
            raise ConfigError(
                f"controller_reward must be 'loss' (minus the validation cross-entropy) or "
                f"'accuracy', got {self.controller_reward!r}"
            )
        check_optional_int("controller_batch", self.controller_batch, 1,
                           "validation examples per reward", "batch_size")  # fmt: skip


@register_algorithm
class Enas(Algorithm):
    """The single-path mixed ops, sampled by an LSTM controller that learns by REINFORCE on
    validation loss or accuracy after a warm-up of uniform paths (see the module docstring)."""

    name = "enas"
    settings_class = EnasSettings
    uses_val = False  # the controller phase reads the validation split itself
    warmup = 0.75  # of the epochs (see the module docstring)
    learns_arch = True
    budget_rule = "reject"
    layer = SposLayer
    input = SposInput
    repeat = SposRepeat

    @classmethod
    def policy(cls, net: Supernet) -> nn.Module | None:
        """Returns the controller of ``net``'s space."""
        return Controller(net.space.search_space())

    @classmethod
    def arch_optimizer(cls, params: list[nn.Parameter], cfg: Any) -> torch.optim.Optimizer:
        """Returns Adam on the controller (``controller_lr``; no weight decay)."""
        return torch.optim.Adam(params, lr=cfg.algo.controller_lr)

    @staticmethod
    def _controller(net: Supernet) -> Controller:
        assert isinstance(net.policy, Controller), "an ENAS supernet holds its controller"
        return net.policy

    @classmethod
    def step(
        cls, net: Supernet, state: Any, train: Batch, val: Any, cfg: Any
    ) -> tuple[float, float | None]:
        """Returns (train loss, None) after one weight step of a path the controller drew (a
        uniform one during the warm-up epochs)."""
        if state.epoch < cls.warmup_epochs(cfg):
            ss = net.space.search_space()
            activate(net, draw(net, lambda: ss.sample(state.rng)))
        else:  # drawn again while over the budget, if any
            ctrl = cls._controller(net)
            activate(net, draw(net, lambda: ctrl.arch(state.rng)))
        return weight_step(net, state.opt_w, train, cfg), None

    @classmethod
    def after_epoch(cls, net: Supernet, state: Any, split: Any, cfg: Any) -> dict[str, Any]:
        """Returns the controller phase's mean reward and entropy, after ``controller_steps``
        REINFORCE steps on validation batches (none before the warm-up's last epoch ends:
        reward None, the untrained controller's entropy)."""
        ctrl = cls._controller(net)
        if state.epoch + 1 < cls.warmup_epochs(cfg):
            with torch.no_grad():
                return {"reward": None, "entropy": float(ctrl.sample(None)[2])}
        rewards: list[float] = []
        entropies: list[float] = []
        s: EnasSettings = cfg.algo
        size = s.controller_batch or cfg.batch_size
        val_iter = batches(split.val, size, state.g)
        budget = budget_of(net)
        for _ in range(s.controller_steps):
            batch = next(val_iter, None)
            if batch is None:
                val_iter = batches(split.val, size, state.g)
                batch = next(val_iter)
            positions, log_p, entropy = ctrl.sample(state.rng)
            arch = ctrl.space.from_index(positions)
            activate(net, arch)
            reward = _reward(net, batch, s.controller_reward)
            if budget is not None:  # over the budget: penalised, so the controller learns it
                reward -= budget.penalty_of(arch)
            advantage = ctrl.baseline.advantage(reward)
            loss = -(advantage * log_p + s.entropy_weight * entropy)
            loss.backward()
            state.opt_a.step()
            state.opt_a.zero_grad(set_to_none=True)
            rewards.append(reward)
            entropies.append(float(entropy.detach()))
        ranks_of(net).sync_module(ctrl)  # the same controller on every rank, whatever the floats
        n = max(1, len(rewards))
        return {"reward": sum(rewards) / n, "entropy": sum(entropies) / n}

    @classmethod
    def prepare(cls, net: Supernet, split: Any, cfg: Any) -> None:
        """Checks, before training, that the final pick's selection can score the space."""
        check_selection(net.space, split.train, cfg)

    @classmethod
    def current_arch(cls, net: Supernet) -> Arch:
        """Returns the controller's most likely architecture, activated."""
        arch = cls._controller(net).arch(None)
        activate(net, arch)
        return arch

    @classmethod
    def finish(cls, net: Supernet, split: Any, cfg: Any) -> tuple[Arch, list[tuple[Arch, float]]]:
        """Returns the best of ``final_samples`` architectures drawn from the controller,
        compared by ``selection`` (:mod:`nasforge.oneshot.selection`: inherited weights,
        recalibrated batch norm, the whole validation split), and every distinct sample with
        its validation accuracy."""
        ctrl = cls._controller(net)
        rng = random.Random(cfg.seed)
        samples = [draw(net, lambda: ctrl.arch(rng)) for _ in range(cfg.algo.final_samples)]
        sel = Selection(net.space, lambda arch: net, split.train, split.val, cfg)
        best, history = pick(sel, samples)
        n, acc = len(history), sel.inherited(best)[0]
        logger.info("enas: %d distinct of %d samples scored, best by %s: val acc %.4f",
                    n, cfg.algo.final_samples, cfg.algo.selection, acc)  # fmt: skip
        return best, history
