"""The NASPipe runtime on ``torch.distributed`` (§3.1, §4.1, Algorithm 1): one process per
stage, activations forward, gradients backward, each stage updating the layers it owns.

Every stage runs the same loop (Algorithm 1), with the scheduling rule of its policy:

    loop until this stage has run the backward of every subnet:
        poll the neighbours: forward activations from K-1, gradients from K+1
        stage 0 only: admit subnets from the feed (window in flight; bsp: a whole bulk)
        if a backward is ready:  run it (backward first), send the input gradient to K-1,
                                 update the layers (csp/asp: now; bsp: at the bulk's flush)
        elif a forward may run:  csp: Algorithm 2; asp/bsp: oldest arrival
                                 run it and send the activation to K+1 (the last stage
                                 computes the loss and runs the backward at once)
        predictor (Algorithm 3, then the look-ahead: in-flight backwards, subnets not yet
        here) -> prefetch the next tasks' layers into the device cache, as far as it holds

Messages (:mod:`~nasforge.parallel.channels`) have a fixed size per channel; the backward
header carries Algorithm 3's pending backwards upstream. ``RunConfig.mirror`` splits each
subnet by its own balanced partition and keeps the layers' mirrors in step
(:mod:`~nasforge.parallel.mirror`, §4.2).

Reproducibility (Definition 1): the CSP rule orders every layer's READs and WRITEs as
sequential training does; seeds are fixed, deterministic algorithms are enforced and every
process runs one intra-op thread, so CSP training equals :func:`train_sequential` bitwise.

Processes are started and watched by :mod:`nasforge.parallel.launcher`.

Invariants:
    * Under csp, every stage's layer updates and the last stage's losses are those of
      :func:`train_sequential` bitwise, whatever the number of stages and the timing.
"""

from __future__ import annotations

import logging
import math
import os
import queue
import threading
import time
from collections import deque
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from nasforge.errors import DivergenceError
from nasforge.parallel.channels import Receiver, frame
from nasforge.parallel.config import RunConfig, _build_space, _Data, set_determinism
from nasforge.parallel.context import TieredLayerCache
from nasforge.parallel.csp import (
    BySeq,
    FinishedList,
    Subnet,
    Task,
    admissions,
    blocked_by,
    pending_backwards,
    predict,
    schedule,
    static_partition,
)
from nasforge.parallel.mirror import (
    Mirror,
    layer_shapes,
    mirror_blocks,
    shared_layer_costs,
)
from nasforge.parallel.sampler import SubnetFeed, get_sampler
from nasforge.parallel.supernet import layer_table, n_candidates, run_layers

__all__ = ["StageWorker", "check_loss", "train_sequential"]

log = logging.getLogger(__name__)


def _source(cfg: RunConfig, ncand: list[int]) -> Any:
    """Returns the subnet iterator of a run: the explicit list, else the seeded sampler."""
    if cfg.subnets is not None:
        return iter([list(s) for s in cfg.subnets])
    return get_sampler(cfg.sampler, ncand, cfg.seed, cfg.feedback_lag)


def _report(source: Any) -> Any:
    """Returns the loss hook of a sampler that learns from losses, or a no-op."""
    return getattr(source, "report", lambda seq, loss: None)


def _boundary_numels(table: dict, n_blocks: int, x: torch.Tensor) -> list[int]:
    """Returns the per-sample size of block b's output (candidate 0 defines the shape)."""
    out = []
    with torch.no_grad():
        for b in range(n_blocks):
            x = table[(b, 0)](x)
            out.append(x[0].numel())
    return out


def _capacity(cfg: RunConfig, n_layers_stage: int, n_owned: int) -> int:
    if cfg.cache_subnets is None:
        return max(1, n_owned)
    return max(n_layers_stage, int(round(cfg.cache_subnets * n_layers_stage)))


def _depth(capacity: int, n_layers_task: int) -> int:
    """Returns how many subnets ahead a stage looks: enough to fill its cache (the prefetch
    plan cuts the last one where the cache is full)."""
    return -(-capacity // max(1, n_layers_task))


def check_loss(value: float, seq: int, subnet: Any, cfg: RunConfig) -> None:
    """Returns None when ``value`` (the loss of step ``seq``) is finite.

    Called before the step's backward and update, so the weights a run holds when it stops
    are those of the last finite step; the run returns none of them.

    Raises:
        DivergenceError: the loss is NaN or infinite; the message names the step, the subnet
            and the learning rate, and the error carries ``step``, ``subnet`` and ``loss``.
    """
    if not math.isfinite(value):
        err = DivergenceError(
            f"training diverged: the loss of step {seq} (subnet {list(subnet)}) is {value}; "
            f"expected a finite loss with lr={cfg.lr}, momentum={cfg.momentum}; lower the "
            f"learning rate (e.g. lr={cfg.lr / 10:g}) and train again: the run stopped and "
            "returns no weights"
        )
        err.step, err.subnet, err.loss = seq, list(subnet), value  # for a run record's event
        raise err


# -- sequential reference ----------------------------------------------------------------------


def train_sequential(cfg: RunConfig) -> dict[str, Any]:
    """Returns ``{"state", "losses", "stats", "wall"}`` of plain one-process training.

    The reference for Definition 1: subnets in sequence order, one batch each, per-layer SGD
    with momentum, the same context manager (one stage holding every block).

    Raises:
        DivergenceError: a step's loss is NaN or infinite (see :func:`check_loss`); nothing
            is returned.
    """
    set_determinism(cfg.seed)
    space = _build_space(cfg)
    ncand = n_candidates(space)
    table = layer_table(space)
    ctx = TieredLayerCache(table, _capacity(cfg, len(ncand), len(table)), cfg.device)
    depth = _depth(ctx.policy.capacity, len(ncand))
    data = _Data(cfg)
    source = _source(cfg, ncand)
    report = _report(source)
    feed = SubnetFeed(source, ncand, cfg.steps)
    one_stage, view = (range(len(ncand)),), _FeedView(feed)
    losses = []
    t0 = time.perf_counter()
    try:
        for seq in range(cfg.steps):
            subnet = feed.get(seq)
            keys = list(enumerate(subnet))
            mods = ctx.acquire(keys)
            # One stage: nothing is queued behind the running subnet, so the predictor's
            # look-ahead (the next subnets the feed draws) is all it can name.
            ahead = admissions(seq + 1, cfg.steps, depth, feed.lag, low=seq)
            tasks = predict([], FinishedList(), view, 0, one_stage, current=seq, upcoming=ahead)
            ctx.prefetch_tasks([list(enumerate(view[t.seq])) for t in tasks])
            x, y = data.batch(seq)
            loss = F.cross_entropy(run_layers(mods, x.to(ctx.device)), y.to(ctx.device))
            check_loss(loss.item(), seq, subnet, cfg)
            report(seq, loss.item())
            loss.backward()
            ctx.release(keys)
            grads = _take_grads(mods)
            for key, g in zip(keys, grads):
                ctx.update(key, g, cfg.lr, cfg.momentum)
            losses.append(loss.item())
    finally:
        feed.close()
    wall = time.perf_counter() - t0
    return {"state": ctx.state_dict(), "losses": losses, "stats": ctx.stats, "wall": wall}


def _take_grads(mods: list) -> list[list[torch.Tensor]]:
    out = []
    for m in mods:
        out.append([p.grad for p in m.parameters()])
        for p in m.parameters():
            p.grad = None
    return out


# -- one pipeline stage ----------------------------------------------------------------------


class StageWorker:
    """Returns the worker of one process's share of the pipeline; :meth:`run` trains it.

    It owns its stage's blocks (in a :class:`TieredLayerCache`; with ``cfg.mirror`` a mirror of
    every block it may run), the forward queue, the ready backwards, the finished list,
    L_blocked and the Algorithm 1 loop.
    """

    def __init__(self, rank: int, cfg: RunConfig) -> None:
        self.k, self.cfg, self.d = rank, cfg, cfg.n_stages
        self.last = rank == self.d - 1
        space = _build_space(cfg)
        self.ncand = n_candidates(space)
        table = layer_table(space)
        self.partition = static_partition(len(self.ncand), self.d)
        self.data = _Data(cfg)
        source = _source(cfg, self.ncand)
        self.report = _report(source)
        self.loss_of: dict[int, float] = {}  # losses of subnets, passed back with gradients
        self.feed = SubnetFeed(source, self.ncand, cfg.steps)
        self.numel = _boundary_numels(table, len(self.ncand), self.data.batch(0)[0])
        held = self.partition[rank]
        self.mirror: Mirror | None = None
        if cfg.mirror:  # every block this stage may run, activations padded to the widest cut
            held = mirror_blocks(rank, len(self.ncand), self.d)
            group = dist.new_group(backend="gloo")  # bundles: a channel of their own
            x0 = self.data.batch(0)[0]
            costs = shared_layer_costs(cfg.layer_costs, table, self.ncand, x0, group)
            self.mirror = Mirror(rank, self.d, _FeedView(self.feed), costs, layer_shapes(table),
                                 group)  # fmt: skip
        mine = {key: m for key, m in table.items() if key[0] in held}
        cap = max(len(held), _capacity(cfg, len(self.partition[rank]), len(mine)))
        self.device = torch.device(cfg.device)
        self.ctx = TieredLayerCache(mine, cap, self.device)
        self.depth = _depth(cap, len(self.partition[rank]))
        self.arrived_hi = -1  # the highest subnet whose forward reached this stage
        b0, b1 = self.partition[rank].start, self.partition[rank].stop
        cut = max(self.numel[:-1]) if cfg.mirror else 0
        self.in_numel = cfg.batch_size * (cut or self.numel[b0 - 1]) if rank > 0 else 0
        self.out_numel = cfg.batch_size * (cut or self.numel[b1 - 1])
        self.window = cfg.window or self.d
        self.blocked: dict[int, int] = {}  # L_blocked (Alg. 3): pending backward -> precedence
        self.bulk = cfg.bulk or self.d
        self.queue: list[int] = []  # forward tasks ready here, arrival order
        self.acts: dict[int, torch.Tensor] = {}
        self.bwd: deque[int] = deque()
        self.grads_in: dict[int, torch.Tensor] = {}
        self.finished = FinishedList()
        self.inflight: dict[int, tuple] = {}
        self.bulk_grads: dict[tuple[int, int], list[torch.Tensor]] = {}
        self.bulk_seqs: list[int] = []
        self.sends: list[tuple[Any, torch.Tensor]] = []
        self.losses: dict[int, float] = {}
        self.busy = 0.0
        self.admitted = self.done = 0

    # messages --------------------------------------------------------------------------------

    def _send(
        self, seq: int, payload: torch.Tensor, dst: int, size: int, loss: float = 0.0,
        pairs: list[tuple[int, int]] | None = None,
    ) -> None:  # fmt: skip
        slots = 2 * self.window if pairs is not None else 0
        msg = frame(seq, loss, payload, size, pairs or [], slots)
        self.sends.append((dist.isend(msg, dst), msg))
        self.sends = [(w, t) for w, t in self.sends if not w.is_completed()]

    # tasks ---------------------------------------------------------------------------------

    def _blocks(self, seq: int) -> range:
        return self.mirror.partition(seq)[self.k] if self.mirror else self.partition[self.k]

    def _keys(self, seq: int) -> list[tuple[int, int]]:
        sn = self.feed.get(seq)
        return [(b, sn[b]) for b in self._blocks(seq)]

    def _rule(self) -> Any:
        return self.mirror.rule if self.mirror else None

    def _next_bwd(self) -> list[tuple[int, int]]:
        """Returns the (bwd_seq, precedence) pairs to pass upstream (Algorithm 3, §3.3)."""
        subnets, k, part = self._subnets(), self.k, self.partition
        rule = self._rule() or (lambda y, fin: blocked_by(y, fin, subnets, k, part))
        here = {y: p for y in self.queue if (p := rule(y, self.finished)) >= 0}
        ran = lambda p: p in self.inflight or p in self.finished  # noqa: E731
        return pending_backwards(here, self.blocked, self.finished, ran, self.window)

    def _prefetch(self, tasks: list[Task]) -> None:
        if tasks:
            self.ctx.prefetch_tasks([self._keys(t.seq) for t in tasks])

    def _upcoming(self) -> list[int]:
        """Returns the forwards the look-ahead may name, nearest first: those waiting in the
        queue, then the subnets not yet at this stage."""
        nxt = self.admitted if self.k == 0 else self.arrived_hi + 1
        later = admissions(nxt, self.cfg.steps, self.depth, self.feed.lag, self.finished.low)
        return [*self.queue, *later]

    def _forward(self, seq: int) -> None:
        cfg = self.cfg
        if cfg.fail_rank == self.k and cfg.fail_step == seq:
            os._exit(17)  # fault injection (tests): die like a crashed worker would
        keys = self._keys(seq)
        mods = self.ctx.acquire(keys)
        self._prefetch(
            predict(
                self.queue, self.finished, self._subnets(), self.k, self.partition,
                current=seq, pending_backward=list(self.blocked.items()), rule=self._rule(),
                inflight=sorted(self.inflight), upcoming=self._upcoming(),
            )
        )  # fmt: skip
        t0 = time.perf_counter()
        if self.k == 0:
            inp = self.data.batch(seq)[0].to(self.device)
        else:
            n = self.cfg.batch_size * self.numel[self._blocks(seq).start - 1]
            inp = self.acts.pop(seq)[:n].view(self.cfg.batch_size, -1).requires_grad_(True)
        out = run_layers(mods, inp)
        self.ctx.release(keys)
        if self.last:
            y = self.data.batch(seq)[1].to(self.device)
            loss = F.cross_entropy(out, y)
            # The last stage alone sees the loss: it raises, its process exits with a
            # divergence record, and the launcher ends every other stage (launcher._worker).
            check_loss(loss.item(), seq, self.feed.get(seq), cfg)
            self.report(seq, loss.item())
            self.loss_of[seq] = loss.item()
            loss.backward()
            self.losses[seq] = loss.item()
            self.busy += time.perf_counter() - t0
            self._after_backward(seq, inp, mods, keys)
        else:
            self.busy += time.perf_counter() - t0
            self._send(seq, out.detach(), self.k + 1, self.out_numel)
            self.inflight[seq] = (inp, out, mods, keys)

    def _backward(self, seq: int) -> None:
        inp, out, mods, keys = self.inflight.pop(seq)
        # The update right after this backward needs its layers (released since the forward):
        # they head the plan, so the look-ahead never evicts them.
        self._prefetch(
            [Task(seq, self.k, backward=True)]
            + predict(self.queue, self.finished, self._subnets(), self.k, self.partition,
                      backward_of=seq, rule=self._rule(), inflight=sorted(self.inflight),
                      upcoming=self._upcoming())
        )  # fmt: skip
        t0 = time.perf_counter()
        out.backward(self.grads_in.pop(seq)[: out.numel()].view_as(out))
        self.busy += time.perf_counter() - t0
        self._after_backward(seq, inp, mods, keys)

    def _after_backward(self, seq: int, inp: torch.Tensor, mods: list, keys: list) -> None:
        grads = _take_grads(mods)
        if self.k > 0:
            # A stage after the first reads its input with requires_grad, so backward set it.
            assert inp.grad is not None, f"stage {self.k}: no input gradient for subnet {seq}"
            self._send(seq, inp.grad, self.k - 1, self.in_numel, self.loss_of.pop(seq),
                       self._next_bwd())  # fmt: skip
        t0 = time.perf_counter()
        if self.cfg.policy == "bsp":
            for key, g in zip(keys, grads):
                acc = self.bulk_grads.get(key)
                self.bulk_grads[key] = g if acc is None else [a + b for a, b in zip(acc, g)]
            self.bulk_seqs.append(seq)
            bulk_start = seq - seq % self.bulk
            size = min(self.bulk, self.cfg.steps - bulk_start)
            if len(self.bulk_seqs) == size:  # flush: the bulk update (GPipe)
                for key in sorted(self.bulk_grads):
                    self.ctx.update(key, self.bulk_grads[key], self.cfg.lr, self.cfg.momentum)
                for s in sorted(self.bulk_seqs):
                    self.finished.add(s)
                self.bulk_grads, self.bulk_seqs = {}, []
        else:
            for key, g in zip(keys, grads):
                self.ctx.update(key, g, self.cfg.lr, self.cfg.momentum)
            self.finished.add(seq)
            if self.mirror:  # push the WRITE to the other stages' mirrors
                self.mirror.wrote(seq, keys, self.ctx, self.sends)
        self.blocked.pop(seq, None)  # its backward ran here: no longer pending
        self.busy += time.perf_counter() - t0
        self.done += 1

    def _subnets(self) -> BySeq[Subnet]:
        return _FeedView(self.feed)

    def _pick_forward(self) -> int:
        if not self.queue:
            return -1
        if self.cfg.policy == "csp":
            qidx, seq = schedule(
                self.queue, self.finished, self._subnets(), self.k, self.partition, self._rule()
            )
        else:
            qidx, seq = 0, self.queue[0]
        if seq >= 0:
            self.queue.pop(qidx)
        return seq

    def _admit(self) -> None:
        steps = self.cfg.steps
        if self.cfg.policy == "bsp":
            if self.admitted == self.done and self.admitted < steps:
                end = min(steps, self.admitted + self.bulk)
                self.queue.extend(range(self.admitted, end))
                self.admitted = end
            return
        while self.admitted < steps and self.admitted - self.done < self.window:
            self.queue.append(self.admitted)
            self.admitted += 1

    # Algorithm 1 ---------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        """Returns this stage's ``{"state", "losses", "stats", "busy", "wall"}`` after the run
        (plus ``"pushed_bytes"`` and ``"mirror_s"``, the loop's time on bundles, with
        ``cfg.mirror``; ``"state"`` then holds every mirror).

        Raises:
            DivergenceError: (last stage) a step's loss is NaN or infinite.
            RuntimeError: a neighbour's message could not be received (it died).
        """
        steps = self.cfg.steps
        inbox: queue.Queue = queue.Queue()
        threads: list[threading.Thread] = []
        if self.k > 0:
            threads.append(Receiver(self.k - 1, self.in_numel, steps, "fwd", self.device, inbox))
        if not self.last:
            threads.append(
                Receiver(self.k + 1, self.out_numel, steps, "bwd", self.device, inbox,
                          self._on_loss, 2 * self.window)
            )  # fmt: skip
        if self.mirror:
            threads += self.mirror.receivers(steps, inbox)
        for th in threads:
            th.start()
        t0 = time.perf_counter()
        while self.done < steps:
            self._drain(inbox)
            if self.k == 0:
                self._admit()
            if self.bwd:
                self._backward(self.bwd.popleft())
                continue
            seq = self._pick_forward()
            if seq >= 0:
                self._forward(seq)
            else:
                time.sleep(0.0002)  # nothing runnable: an idle (bubble) tick
        for w, _ in self.sends:
            w.wait()
        for th in threads:
            th.join()
        self._drain(inbox)  # bundles of the last WRITEs elsewhere, for this stage's mirrors
        wall = time.perf_counter() - t0
        self.feed.close()
        out = {
            "state": self.ctx.state_dict(),
            "losses": self.losses,
            "stats": self.ctx.stats,
            "busy": self.busy,
            "wall": wall,
        }
        if self.mirror:  # what mirroring cost: bytes of layer state pushed to other stages
            out["pushed_bytes"] = self.mirror.pushed_bytes
            out["mirror_s"] = self.mirror.seconds
        return out

    def _drain(self, inbox: queue.Queue) -> None:
        """Returns None once every message waiting in ``inbox`` is handled."""
        while True:
            try:
                kind, seq, payload, pairs = inbox.get_nowait()
            except queue.Empty:
                return
            if kind == "error":
                raise payload
            if kind == "push":
                assert self.mirror is not None, "only a mirroring stage receives bundles"
                src, keys, data = payload  # as _BundleReceiver puts it
                self.mirror.apply(seq, src, keys, data, self.ctx)
                continue
            if kind == "fwd":
                self.acts[seq] = payload
                self.queue.append(seq)
                self.arrived_hi = max(self.arrived_hi, seq)
            else:
                self.grads_in[seq] = payload
                self.bwd.append(seq)
                for y, p in pairs:  # Alg. 3 lines 10-11: L_blocked gets recv.next_bwd
                    if y not in self.finished:
                        self.blocked[y] = p
            # A task that reached this stage is a sure prediction (the status the
            # neighbour passes, §3.3): start copying its layers while others run.
            self._prefetch([Task(seq, self.k, kind == "bwd")])

    def _on_loss(self, seq: int, loss: float) -> None:
        """Records a loss that came back with a gradient (called by the receiver thread, so a
        sampler waiting for it never waits on this stage's main loop)."""
        self.loss_of[seq] = loss
        self.report(seq, loss)


class _FeedView:
    """Returns subnets by sequence id from a feed, as the mapping Algorithm 2 reads."""

    def __init__(self, feed: SubnetFeed) -> None:
        self.feed = feed

    def __getitem__(self, seq: int) -> tuple[int, ...]:
        return self.feed.get(seq)
