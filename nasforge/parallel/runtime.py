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

Segments (:mod:`nasforge.parallel.segments`): a run may start from a training state at step
``start`` (``init``) and drains at every multiple of ``RunConfig.checkpoint_every``, where each
stage writes its part of the state there (stage 0 admits no later subnet before its own last
backward of the segment, so that part holds exactly the steps before the boundary).

Processes are started and watched by :mod:`nasforge.parallel.launcher`.

Invariants:
    * Under csp, every stage's layer updates and the last stage's losses are those of
      :func:`train_sequential` bitwise, whatever the number of stages and the timing, and
      whatever the segments the run is trained in.
"""

from __future__ import annotations

import logging
import math
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
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
from nasforge.parallel.segments import make_part, next_boundary, write_part
from nasforge.parallel.supernet import layer_table, n_candidates, run_layers

__all__ = ["StageWorker", "check_loss", "train_sequential"]

log = logging.getLogger(__name__)


def _source(cfg: RunConfig, ncand: list[int], history: Sequence[float] = ()) -> Any:
    """Returns the subnet iterator of a run: the explicit list, else the seeded sampler; a
    sampler that learns from losses is told ``history`` (the losses of the steps trained
    before a resume), so it draws again what it drew then (the feed drops those subnets)."""
    if cfg.subnets is not None:
        return iter([list(s) for s in cfg.subnets])
    source = get_sampler(cfg.sampler, ncand, cfg.seed, cfg.feedback_lag)
    report = _report(source)
    for seq, loss in enumerate(history):
        report(seq, loss)
    return source


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


def train_sequential(
    cfg: RunConfig,
    init: Mapping[str, Any] | None = None,
    on_part: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Returns ``{"state", "momentum", "losses", "stats", "wall", "step"}`` of plain
    one-process training (``losses``: of the steps this call trained, in order).

    The reference for Definition 1: subnets in sequence order, one batch each, per-layer SGD
    with momentum, the same context manager (one stage holding every block).

    ``init`` is a training state (:mod:`nasforge.parallel.segments`, checked by the caller)
    to start from: steps ``init["step"] .. cfg.steps - 1`` are trained. ``on_part(part)`` is
    called at every segment boundary before ``cfg.steps`` with the state's part there; the
    time it takes is not loop time.

    Raises:
        DivergenceError: a step's loss is NaN or infinite (see :func:`check_loss`); nothing
            is returned.
    """
    set_determinism(cfg.seed)
    space = _build_space(cfg)
    ncand = n_candidates(space)
    table = layer_table(space)
    ctx = TieredLayerCache(table, _capacity(cfg, len(ncand), len(table)), cfg.device)
    start = 0
    if init is not None:
        ctx.load_state_dict(init["weights"], init["momentum"])
        start = init["step"]
    depth = _depth(ctx.policy.capacity, len(ncand))
    data = _Data(cfg)
    source = _source(cfg, ncand, () if init is None else init["losses"])
    report = _report(source)
    feed = SubnetFeed(source, ncand, cfg.steps, start=start)
    one_stage, view = (range(len(ncand)),), _FeedView(feed)
    losses: dict[int, float] = {}
    boundary = next_boundary(start, cfg.steps, cfg.checkpoint_every)
    aside = 0.0  # seconds in on_part: the caller's checkpointing, not training
    t0 = time.perf_counter()
    try:
        for seq in range(start, cfg.steps):
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
            losses[seq] = loss.item()
            if seq + 1 == boundary < cfg.steps:
                boundary = next_boundary(boundary, cfg.steps, cfg.checkpoint_every)
                if on_part is not None:
                    t1 = time.perf_counter()
                    wall = t1 - t0 - aside
                    on_part(make_part(seq + 1, ctx, losses, wall, wall))
                    aside += time.perf_counter() - t1
    finally:
        feed.close()
    wall = time.perf_counter() - t0 - aside
    out = make_part(cfg.steps, ctx, losses, wall, wall)
    out["losses"] = [losses[s] for s in range(start, cfg.steps)]
    return out


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

    ``init``: a training state to start from (its step's subnets on); ``parts_dir``: where
    the stage writes its part of each segment boundary (None: nowhere).
    """

    def __init__(
        self,
        rank: int,
        cfg: RunConfig,
        init: Mapping[str, Any] | None = None,
        parts_dir: str | Path | None = None,
    ) -> None:
        self.k, self.cfg, self.d = rank, cfg, cfg.n_stages
        self.last = rank == self.d - 1
        space = _build_space(cfg)
        self.ncand = n_candidates(space)
        table = layer_table(space)
        self.partition = static_partition(len(self.ncand), self.d)
        self.data = _Data(cfg)
        self.start = 0 if init is None else int(init["step"])
        source = _source(cfg, self.ncand, () if init is None else init["losses"])
        self.report = _report(source)
        self.loss_of: dict[int, float] = {}  # losses of subnets, passed back with gradients
        self.feed = SubnetFeed(source, self.ncand, cfg.steps, start=self.start)
        self.numel = _boundary_numels(table, len(self.ncand), self.data.batch(0)[0])
        held = self.partition[rank]
        self.mirror: Mirror | None = None
        if cfg.mirror:  # every block this stage may run, activations padded to the widest cut
            held = mirror_blocks(rank, len(self.ncand), self.d)
            group = dist.new_group(backend="gloo")  # bundles: a channel of their own
            x0 = self.data.batch(0)[0]
            # the table an earlier segment measured: every segment splits subnets alike
            given = cfg.layer_costs
            if given is None and init is not None:
                given = init.get("layer_costs")
            costs = shared_layer_costs(given, table, self.ncand, x0, group)
            self.mirror = Mirror(rank, self.d, _FeedView(self.feed), costs, layer_shapes(table),
                                 group, self.start)  # fmt: skip
        mine = {key: m for key, m in table.items() if key[0] in held}
        cap = max(len(held), _capacity(cfg, len(self.partition[rank]), len(mine)))
        self.device = torch.device(cfg.device)
        self.ctx = TieredLayerCache(mine, cap, self.device)
        if init is not None:
            self.ctx.load_state_dict(init["weights"], init["momentum"])
        self.parts_dir = parts_dir
        self.boundary = next_boundary(self.start, cfg.steps, cfg.checkpoint_every)
        self.t0 = time.perf_counter()  # the loop's start (reset by run)
        self.depth = _depth(cap, len(self.partition[rank]))
        self.arrived_hi = self.start - 1  # the highest subnet whose forward reached this stage
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
        self.finished = FinishedList(self.start)
        self.inflight: dict[int, tuple] = {}
        self.bulk_grads: dict[tuple[int, int], list[torch.Tensor]] = {}
        self.bulk_seqs: list[int] = []
        self.sends: list[tuple[Any, torch.Tensor]] = []
        self.losses: dict[int, float] = {}
        self.busy = 0.0
        self.admitted = self.done = self.start  # done: the steps whose backward ran here

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
        if self.done == self.boundary < self.cfg.steps:
            self._boundary_reached()

    def _boundary_reached(self) -> None:
        """Returns None after writing this stage's part of the state at the boundary it just
        reached (every backward before it ran here, none after it: the drain) and moving on
        to the next boundary, which lets stage 0 admit the next segment."""
        if self.parts_dir is not None:
            versions = self.mirror.version if self.mirror else None
            costs = self.mirror.costs if self.mirror else None
            part = make_part(self.done, self.ctx, self.losses, self.busy,
                         time.perf_counter() - self.t0, versions, costs)  # fmt: skip
            write_part(self.parts_dir, self.k, part)
        self.boundary = next_boundary(self.done, self.cfg.steps, self.cfg.checkpoint_every)

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
        steps = min(self.cfg.steps, self.boundary)  # a segment drains before the next one
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
        """Returns this stage's part of the training state after the run (see
        :func:`~nasforge.parallel.segments.merge_parts`: ``"state"``, ``"momentum"``,
        ``"losses"``, ``"stats"``, ``"busy"``, ``"wall"``, ...; plus ``"pushed_bytes"`` and
        ``"mirror_s"``, the loop's time on bundles, with ``cfg.mirror``; ``"state"`` then holds
        every mirror).

        Raises:
            DivergenceError: (last stage) a step's loss is NaN or infinite.
            RuntimeError: a neighbour's message could not be received (it died).
        """
        steps = self.cfg.steps
        n = steps - self.start  # messages each channel carries in this launch
        inbox: queue.Queue = queue.Queue()
        threads: list[threading.Thread] = []
        if self.k > 0:
            threads.append(Receiver(self.k - 1, self.in_numel, n, "fwd", self.device, inbox))
        if not self.last:
            threads.append(
                Receiver(self.k + 1, self.out_numel, n, "bwd", self.device, inbox,
                          self._on_loss, 2 * self.window)
            )  # fmt: skip
        if self.mirror:
            threads += self.mirror.receivers(n, inbox)
        for th in threads:
            th.start()
        t0 = self.t0 = time.perf_counter()
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
        out = make_part(steps, self.ctx, self.losses, self.busy, wall)
        if self.mirror:  # every bundle is applied: the mirrors agree, no version is needed
            out["layer_costs"] = (
                self.mirror.costs
            )  # what mirroring cost: bytes of layer state pushed to other stages
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
