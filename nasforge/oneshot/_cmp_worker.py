"""The worker side of consecutive model parallel search: one partition of one replica runs the
four phases of every step in its schedule's order, talking to its neighbours through a
transport (threads in one process, or ``torch.distributed`` processes).

Bitwise equality with one device (Algorithm 1). Every weight lives in one partition, so its
gradient is computed exactly as on one device. An architecture parameter is shared by cells in
several partitions; on one device autograd sums its contributions in backward order (the last
cell's first). Here partition k+1 sends its running sum back with the activation gradients, and
partition k injects it as the *first* contribution of its own backward::

      outs ──┐                       backward: g passes to outs; alpha gets the sum S from
      alpha ─┴─> _Inject ─> outs     downstream first, then this partition's own terms
                 (created last, so it runs first in backward)

so the additions happen in the same order as on one device. Gradient clipping uses the global
norm: per-parameter norms are gathered in the one-device parameter order.

Invariants:
    * parameters (A and w) change only after all four phases of a step (Algorithm 1);
    * with one replica, every partition ends each step with the parameters a one-device
      consecutive step computes, bit for bit (same thread count).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from nasforge.errors import DivergenceError, WorkerError
from nasforge.oneshot import nasb
from nasforge.oneshot.cmp_partition import backward, owned_names, run, units
from nasforge.oneshot.cmp_schedule import partition_order
from nasforge.oneshot.common import SearchConfig, Split, apply_arch, batches
from nasforge.oneshot.search import get_algorithm
from nasforge.oneshot.supernet import Algorithm, Supernet

__all__: list[str] = []  # internal: nasforge.oneshot.cmp is the public face

_TAGS = {"F_A": 1, "F_w": 2, "B_A": 3, "B_w": 4, "arch": 5, "total": 6}


@dataclass
class Job:
    """Returns nothing; everything a worker needs (picklable for spawned processes)."""

    space: Any
    # the class, pickled by reference: a spawned worker imports its module, so an algorithm
    # registered in a user's module is found there too
    algorithm: type[Algorithm]
    split: Split
    cfg: SearchConfig
    bounds: list[tuple[int, int]]
    schedule: str
    replicas: int
    init: str  # a full SearchState.state_dict file to start from
    out: str  # folder for epoch slices and errors
    threads: int = 1
    device: str = "cpu"
    profile: tuple[int, int] | None = None  # (warm-up steps, timed steps): time, do not train
    defer_arch_grads: bool = False  # NASB: recompute inactive ops after passing B_A upstream
    # profiling only: (schedule, defer_arch_grads) variants run in turn, step by step, so that
    # they are timed under the same load
    variants: list[tuple[str, bool]] | None = None

    @property
    def m(self) -> int:
        """Returns the number of partitions."""
        return len(self.bounds)


class _Inject(torch.autograd.Function):
    """Identity on the outputs; in backward gives each carried alpha its downstream sum."""

    @staticmethod
    def forward(ctx: Any, n_out: int, carried: Sequence[torch.Tensor], *ts: torch.Tensor) -> Any:
        ctx.carried = tuple(carried)
        return tuple(t.view_as(t) for t in ts[:n_out])

    @staticmethod
    def backward(ctx: Any, *g: Any) -> Any:
        return (None, None, *g, *ctx.carried)


# -- one partition --------------------------------------------------------------------------------


def _slice_opt(opt_state: dict, owned: list[int]) -> dict:
    """Returns the optimizer state of the ``owned`` global parameter indices, renumbered."""
    state = {j: opt_state["state"][g] for j, g in enumerate(owned) if g in opt_state["state"]}
    groups = [{**pg, "params": list(range(len(owned)))} for pg in opt_state["param_groups"]]
    return {"state": state, "param_groups": groups}


class PartitionWorker:
    """Returns nothing; partition ``k`` of replica ``r`` of a model-parallel search."""

    def __init__(self, job: Job, rank: int, transport: Any) -> None:
        self.job, self.rank, self.t = job, rank, transport
        self.m, self.R = job.m, job.replicas
        self.k, self.r = rank % self.m, rank // self.m
        self.order = partition_order(self.m, job.schedule, self.k)
        full = torch.load(job.init, weights_only=True)
        algo = get_algorithm(job.algorithm)
        self.algo = algo
        self.binary = algo.draws_gates
        net = Supernet(job.space, algo)
        net.find_nodes(job.split.train[0][: min(2, len(job.split.train[0]))])
        net.load_state_dict(full["net"])
        self.net = net
        all_units = units(net)
        lo, hi = job.bounds[self.k]
        self.mods = all_units[lo:hi]
        self.keys = owned_names(net, self.mods) | {
            k for k in net.state_dict() if k.startswith("arch_params.")
        }
        inside = {id(p) for mod in self.mods for p in mod.parameters()}
        weights = net.weights()
        self.owned = [i for i, p in enumerate(weights) if id(p) in inside]
        self.params = [weights[i] for i in self.owned]
        self.n_weights = len(weights)
        for i, mod in enumerate(all_units):
            if not lo <= i < hi:
                mod.to("meta")  # this partition keeps only its own weights
        self.device = torch.device(job.device)
        if self.device.type == "cuda" and job.device == "cuda" and torch.cuda.device_count() > 1:
            self.device = torch.device("cuda", rank % torch.cuda.device_count())
        for mod in self.mods:
            mod.to(self.device)
        net.arch_params.to(self.device)
        from nasforge.oneshot.common import arch_optimizer, n_steps, weight_optimizer

        self.opt_w, self.sched = weight_optimizer(self.params, job.cfg, n_steps(job.split, job.cfg))
        self.opt_a = arch_optimizer(net.arch_parameters(), job.cfg)
        self.opt_w.load_state_dict(_slice_opt(full["opt_w"], self.owned))
        self.sched.load_state_dict(full["sched"])
        self.opt_a.load_state_dict(full["opt_a"])
        self.g = torch.Generator()
        self.g.set_state(full["g"])
        self.epoch = int(full["epoch"])
        self.waited = 0.0  # seconds blocked on neighbours (receives, all-reduces, sends)
        self.alphas = net.arch_parameters()
        self.can_defer = algo.defers_arch_grads
        self.deferred = job.defer_arch_grads and self.can_defer
        self.saved: dict[str, Any] = {}
        self._losses: dict[str, torch.Tensor] = {}

    # ranks of the neighbours and groups
    def _peer(self, k: int) -> int:
        return self.r * self.m + k

    def _recv(self, *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            got = self.t.recv(*args)
        finally:
            self.waited += time.perf_counter() - t0
        # threads on several GPUs: a neighbour's tensors live on its device
        return [t if t is None or t.device == self.device else t.to(self.device) for t in got]

    def _allreduce(self, *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self.t.allreduce(*args)
        finally:
            self.waited += time.perf_counter() - t0

    def _shard(self, batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, ...]:
        x, y = batch
        if self.R > 1:
            x, y = torch.tensor_split(x, self.R)[self.r], torch.tensor_split(y, self.R)[self.r]
        return x.to(self.device), y.to(self.device)

    def _loss(self, logits: torch.Tensor, y: torch.Tensor, n: int) -> torch.Tensor:
        if self.R == 1:
            return nn.functional.cross_entropy(logits, y)
        return nn.functional.cross_entropy(logits, y, reduction="sum") / n  # sums to the mean

    def forward(self, phase: str, batch: tuple[torch.Tensor, torch.Tensor]) -> None:
        """Runs this partition's sub-task of forward ``phase`` (F_A or F_w)."""
        x, y = self._shard(batch)
        if self.k == 0:
            state: tuple = (x,)
        else:
            got = self._recv(self.rank, self._peer(self.k - 1), _TAGS[phase])
            state = tuple(t.requires_grad_() for t in got)
        arch = phase == "F_A"
        for a in self.alphas:
            a.requires_grad_(arch)
        try:
            out = run(self.mods, state)
        finally:
            for a in self.alphas:
                a.requires_grad_(True)
        if self.k == self.m - 1:
            out = (self._loss(out[0], y, len(batch[1])),)
            self._losses[phase] = out[0].detach()
        else:
            self.t.send(self.rank, self._peer(self.k + 1), _TAGS[phase], [o.detach() for o in out])
        self.saved[phase] = (state, out)

    def backward(self, phase: str) -> None:
        """Runs this partition's sub-task of backward ``phase`` (B_A or B_w)."""
        state, out = self.saved.pop("F_" + phase[2:])
        last = self.k == self.m - 1
        leaves = [t for t in state if t.requires_grad] if self.k > 0 else []
        if last:
            grads: list = [None]
        else:
            grads = self._recv(self.rank, self._peer(self.k + 1), _TAGS[phase])
        if phase == "B_w":
            if last:
                out[0].backward()
            else:
                backward(out, grads)
            if self.k > 0:
                self.t.send(
                    self.rank, self._peer(self.k - 1), _TAGS[phase], [t.grad for t in state]
                )
            return
        if self.deferred:
            self._backward_arch_deferred(state, out, grads, leaves)
            return
        carried: list = [None] * len(self.alphas)
        if not last:
            carried = self._recv(self.rank, self._peer(self.k + 1), _TAGS["arch"])
        roots, root_grads = list(out), grads
        with_carry = [a for a, c in zip(self.alphas, carried) if c is not None]
        if with_carry:
            roots = list(
                _Inject.apply(len(out), [c for c in carried if c is not None], *out, *with_carry)
            )
        pairs: list[tuple[torch.Tensor, torch.Tensor | None]]
        if last:
            pairs = [(roots[0], None)]
        else:  # an output the next partition does not use has no gradient
            pairs = [(o, g) for o, g in zip(roots, root_grads) if o.requires_grad and g is not None]
            if not pairs:
                pairs = [(roots[0], torch.zeros_like(roots[0]))]  # keep the arch sum flowing
        res = torch.autograd.grad(
            [o for o, _ in pairs],
            [*self.alphas, *leaves],
            [g for _, g in pairs] if not last else None,
            allow_unused=True,
        )
        arch_g, in_g = list(res[: len(self.alphas)]), list(res[len(self.alphas) :])
        if self.k > 0:
            it = iter(in_g)
            back = [next(it) if t.requires_grad else None for t in state]
            self.t.send(self.rank, self._peer(self.k - 1), _TAGS[phase], back)
            self.t.send(self.rank, self._peer(self.k - 1), _TAGS["arch"], arch_g)
        else:
            self.arch_grads = [
                torch.zeros_like(a) if g is None else g for a, g in zip(self.alphas, arch_g)
            ]

    def _defer(self, roots: list[torch.Tensor]) -> list[tuple[int, Any, Any, Any]]:
        """Returns the queue that NASB's Eq. 6 nodes under ``roots`` fill, in backward order,
        with (alpha index, gradient function, g, saved tensors) instead of computing their
        architecture gradient (the recomputation of inactive operations) in backward."""
        queue: list[tuple[int, Any, Any, Any]] = []
        index = {id(a): i for i, a in enumerate(self.alphas)}
        seen: set[int] = set()
        stack: list[torch.autograd.graph.Node | None] = [
            r.grad_fn for r in roots if r.grad_fn is not None
        ]
        while stack:
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            stack.extend(n for n, _ in node.next_functions)
            if isinstance(node, nasb._ArchGrad._backward_cls):
                acc = node.next_functions[0][0]
                if acc is None or id(getattr(acc, "variable", None)) not in index:
                    continue
                i, orig = index[id(acc.variable)], node.fn

                def later(g: Any, saved: Any, i: int = i, orig: Any = orig) -> None:
                    queue.append((i, orig, g, saved))
                    return None  # this alpha gradient comes from the queue

                node.fn = later
        return queue

    def _backward_arch_deferred(self, state: Any, out: Any, grads: list, leaves: list) -> None:
        """Runs B_A with NASB's inactive-operation recomputation deferred: the input gradients
        go upstream first, so every partition recomputes at once; then the architecture
        gradients are folded in one-device order, starting from the downstream sum."""
        last = self.k == self.m - 1
        pairs: list[tuple[torch.Tensor, torch.Tensor | None]]
        if last:
            pairs = [(out[0], None)]
        else:
            pairs = [(o, g) for o, g in zip(out, grads) if o.requires_grad and g is not None]
            if not pairs:
                pairs = [(out[0], torch.zeros_like(out[0]))]
        queue = self._defer([o for o, _ in pairs])
        res = torch.autograd.grad(
            [o for o, _ in pairs],
            [*self.alphas, *leaves],
            [g for _, g in pairs] if not last else None,
            allow_unused=True,
        )
        in_g = list(res[len(self.alphas) :])
        if self.k > 0:
            it = iter(in_g)
            back = [next(it) if t.requires_grad else None for t in state]
            self.t.send(self.rank, self._peer(self.k - 1), _TAGS["B_A"], back)
        with torch.no_grad():
            terms = [(i, fn(g, saved)) for i, fn, g, saved in queue]
        acc: list = [None] * len(self.alphas)
        if not last:
            acc = self._recv(self.rank, self._peer(self.k + 1), _TAGS["arch"])
        for i, c in terms:  # autograd's order: the downstream sum, then each term as it came
            acc[i] = c if acc[i] is None else acc[i] + c
        if self.k > 0:
            self.t.send(self.rank, self._peer(self.k - 1), _TAGS["arch"], acc)
        else:
            self.arch_grads = [
                torch.zeros_like(a) if g is None else g for a, g in zip(self.alphas, acc)
            ]

    def use(self, schedule: str, defer: bool) -> None:
        """Switches this worker's schedule order and deferral (every worker in lockstep)."""
        self.order = partition_order(self.m, schedule, self.k)
        self.deferred = defer and self.can_defer

    def step(self, train: Any, val: Any) -> tuple[float, float]:
        """Returns (train loss, val loss) (NaN on partitions that hold no loss) after one
        consecutive step in this partition's schedule order (in a warm-up epoch: uniform
        gates drawn from the search's generator, as one device draws them, and A kept: F_A
        runs without gradients, for its loss and batch-norm statistics, and B_A not at all)."""
        warm = self.epoch < self.algo.warmup_epochs(self.job.cfg)
        self.algo.draw_gates(self.net, self.g if warm else None)
        for phase in self.order:
            if warm and phase == "F_A":
                with torch.no_grad():
                    self.forward(phase, val)
                del self.saved[phase]
            elif warm and phase == "B_A":
                continue  # every partition skips it alike: no message of it is awaited
            elif phase.startswith("F"):
                self.forward(phase, val if phase == "F_A" else train)
            else:
                self.backward(phase)
        losses = [math.nan, math.nan]
        if self.k == self.m - 1:
            pair = [self._losses["F_w"], self._losses["F_A"]]
            if self.R > 1:  # each replica's loss is its share of the whole batch's mean
                ranks = [j * self.m + self.k for j in range(self.R)]
                pair = self._allreduce(("part", self.k), ranks, self.rank, pair)
            losses = [float(v) for v in pair]
        self._update(keep_arch=warm)
        t0 = time.perf_counter()
        self.t.flush()
        self.waited += time.perf_counter() - t0
        return losses[0], losses[1]

    def _update(self, keep_arch: bool = False) -> None:
        """Applies Algorithm 1's two updates: A with the whole batch's gradient (unless
        ``keep_arch``: a warm-up step, which computed none), w clipped by the global norm."""
        m, R = self.m, self.R
        # architecture gradient: partition 0 holds the total; average replicas; share it
        if not keep_arch:
            if self.k == 0:
                g = self.arch_grads
                if R > 1:
                    g = self._allreduce(("part", 0), [j * m for j in range(R)], self.rank, g)
                for k in range(1, m):
                    self.t.send(self.rank, self._peer(k), _TAGS["total"], g)
            else:
                g = self._recv(self.rank, self._peer(0), _TAGS["total"])
            apply_arch(self.net, self.opt_a, g)
        # weight gradients: sum over replicas (each loss is already a share of the mean)
        present = [p for p in self.params if p.grad is not None]
        if R > 1 and present:
            ranks = [j * m + self.k for j in range(R)]
            summed = self._allreduce(("part", self.k), ranks, self.rank, [p.grad for p in present])
            for p, s in zip(present, summed):
                p.grad = s.clone()
        # the one-device global norm, from per-parameter norms in one-device order
        norms = torch.zeros(self.n_weights, dtype=self.alphas[0].dtype, device=self.device)
        mask = torch.zeros_like(norms)
        idx = [gi for gi, p in zip(self.owned, self.params) if p.grad is not None]
        if present:
            grads = [p.grad for p in present if p.grad is not None]  # all of them: see present
            norms[idx] = torch.stack(torch._foreach_norm(grads))
            mask[idx] = 1.0
        if m > 1:
            ranks = [self.r * m + k for k in range(m)]
            norms, mask = self._allreduce(("rep", self.r), ranks, self.rank, [norms, mask])
        if bool(mask.any()):
            total = torch.linalg.vector_norm(norms[mask.bool()], 2.0)
            nn.utils.clip_grads_with_norm_(present, self.job.cfg.grad_clip, total)
        self.opt_w.step()
        self.opt_w.zero_grad(set_to_none=True)
        self.sched.step()

    # -- epochs ---------------------------------------------------------------------------------
    def run(self) -> None:
        """Runs every remaining epoch; after each, replica 0 writes its slice of the state."""
        cfg, split = self.job.cfg, self.job.split
        if self.job.profile is not None:
            self._profile(*self.job.profile)
            return
        while self.epoch < cfg.epochs:
            lt_all: list[float] = []
            lv_all: list[float] = []
            val_iter = batches(split.val, cfg.batch_size, self.g)
            for i, train_batch in enumerate(batches(split.train, cfg.batch_size, self.g)):
                val_batch = next(val_iter, None)
                if val_batch is None:
                    val_iter = batches(split.val, cfg.batch_size, self.g)
                    val_batch = next(val_iter)
                abort = getattr(self.t, "abort", None)
                if abort is not None and abort.is_set():
                    raise WorkerError("another worker failed; this one stops")
                lt, lv = self.step(train_batch, val_batch)
                if self.k == self.m - 1:
                    lt_all.append(lt)
                    lv_all.append(lv)
                    if not (math.isfinite(lt) and math.isfinite(lv)):
                        raise DivergenceError(
                            f"{self.algo.name}: the loss became {(lt, lv)} at epoch "
                            f"{self.epoch + 1}, step {i + 1}; lower the learning rate (w_lr="
                            f"{cfg.w_lr}, a_lr={cfg.a_lr}) or check the data"
                        )
            self.epoch += 1
            if self.r == 0:
                self._write_slice(lt_all, lv_all)

    def _profile(self, warmup: int, steps: int) -> None:
        """Times ``warmup + steps`` steps and writes, for the timed ones, each step's wall time
        and the time this worker waited on others (no slice: the parameters are thrown away)."""
        cfg, split = self.job.cfg, self.job.split
        variants = self.job.variants or [(self.job.schedule, self.deferred)]
        n = len(variants)
        times: list[list[float]] = [[] for _ in variants]
        waits: list[list[float]] = [[] for _ in variants]
        it = zip(
            batches(split.train, cfg.batch_size, self.g), batches(split.val, cfg.batch_size, self.g)
        )
        for i in range(n * (warmup + steps)):
            self.use(*variants[i % n])
            pair = next(it, None)
            if pair is None:
                it = zip(batches(split.train, cfg.batch_size, self.g),
                         batches(split.val, cfg.batch_size, self.g))  # fmt: skip
                pair = next(it)
            self._sync_device()
            self.waited, t0 = 0.0, time.perf_counter()
            self.step(*pair)
            self._sync_device()
            if i >= n * warmup:
                times[i % n].append(time.perf_counter() - t0)
                waits[i % n].append(self.waited)
        torch.save({"times": times, "waits": waits}, Path(self.job.out) / f"prof{self.rank}.pt")

    def _sync_device(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _write_slice(self, lt: list[float], lv: list[float]) -> None:
        sd = self.net.state_dict()
        piece = {
            "net": {k: sd[k] for k in self.keys},
            "opt_w": self.opt_w.state_dict(),
            "owned": self.owned,
            "opt_a": self.opt_a.state_dict(),
            "sched": self.sched.state_dict(),
            "g": self.g.get_state(),
            "train_losses": lt,
            "val_losses": lv,
        }
        path = Path(self.job.out) / f"e{self.epoch}_k{self.k}.pt"
        tmp = path.with_suffix(".tmp")
        torch.save(piece, tmp)
        tmp.rename(path)  # the parent sees a slice only once it is whole
