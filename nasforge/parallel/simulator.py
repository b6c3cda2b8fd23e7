"""Discrete-event simulation of a subnet pipeline under CSP, BSP and ASP (NASPipe §3, §5).

Pure: no torch. Each stage is one worker running one task at a time; a task's time is the
sum of its layers' profiled forward or backward costs, plus the stall of loading layers that
the device cache does not hold. The simulation answers, for spaces far too large for this
machine: throughput, bubble ratio (idle share of stage-time), cache hit rate, and the per-layer
trace of parameter READs and WRITEs that the reproducibility property is about.

Policies (all run backward tasks first; a stage never runs two tasks at once):

    csp   forward allowed by :func:`nasforge.parallel.csp.schedule` (Algorithm 2), up to
          ``window`` subnets admitted at stage 0; WRITE right after each backward.
    asp   PipeDream-like: forwards in arrival order, no dependency wait, same window;
          WRITE right after each backward (later subnets may have READ the old value).
    bsp   GPipe-like: bulks of ``bulk`` subnets; the next bulk is admitted after a flush (all
          of the bulk's backwards done); each stage WRITEs the bulk's layers when its last
          backward of the bulk is done (reads inside a bulk see the pre-bulk value).

Cache (only for ``csp`` unless ``cache_for_all``): per stage, a :class:`LayerCache` of
``cache_subnets`` x (blocks of that stage) layers. Before a task starts, Algorithm 3's
predictor names the next tasks; their layers are copied on the stage's copy engine (one at a
time, ``swap`` cost each) while the current task computes. A needed layer that is absent is a
miss and is loaded synchronously; one still in flight is a miss that waits for its copy.

Invariants:
    * Every (stage, subnet) forward and backward runs exactly once; the result is a pure
      function of the inputs (ties break by stage then sequence id).
    * Under ``csp`` the per-layer READ/WRITE order equals :func:`sequential_trace`'s.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from nasforge.errors import ConfigError
from nasforge.parallel.cache import LayerCache
from nasforge.parallel.csp import (
    FinishedList,
    Layer,
    Subnet,
    Task,
    blocked_by_mirrored,
    predict,
    schedule,
    stage_layers,
)

__all__ = [
    "SimResult",
    "simulate",
    "sequential_trace",
    "layer_orders",
    "bubble_floor",
    "POLICIES",
]

POLICIES = ("csp", "bsp", "asp")

#: A trace event: (layer, subnet sequence id, "R" for a forward READ or "W" for a WRITE).
Access = tuple[Layer, int, str]


@dataclass
class SimResult:
    """Returns nothing; holds one simulated run's figures."""

    policy: str
    n_stages: int
    n_subnets: int
    makespan: float  # time from the first task start to the last task end
    busy: list[float]  # compute time per stage (stalls waiting for layers count as idle)
    cache_hits: int = 0
    cache_misses: int = 0
    trace: list[Access] = field(default_factory=list)
    batch: int = 1  # samples per subnet (training step); costs were given at this batch

    @property
    def samples_per_time(self) -> float:
        """Returns samples per unit of time: throughput x batch (compare at equal memory)."""
        return self.throughput * self.batch

    @property
    def throughput(self) -> float:
        """Returns subnets (training steps) per unit of time."""
        return self.n_subnets / self.makespan if self.makespan else 0.0

    @property
    def bubble_ratio(self) -> float:
        """Returns the idle share of all stages' time: 1 - sum(busy) / (D * makespan)."""
        return 1.0 - sum(self.busy) / (self.n_stages * self.makespan) if self.makespan else 0.0

    @property
    def cache_hit_rate(self) -> float | None:
        """Returns the share of layer accesses served from the device cache (None: no cache)."""
        total = self.cache_hits + self.cache_misses
        return self.cache_hits / total if total else None


def sequential_trace(subnets: Sequence[Subnet]) -> list[Access]:
    """Returns the READ/WRITE trace of training ``subnets`` one at a time, in order."""
    out: list[Access] = []
    for seq, sn in enumerate(subnets):
        out.extend(((b, c), seq, "R") for b, c in enumerate(sn))
        out.extend(((b, c), seq, "W") for b, c in enumerate(sn))
    return out


def layer_orders(trace: Sequence[Access]) -> dict[Layer, list[tuple[int, str]]]:
    """Returns, per layer, its accesses in trace order: the object reproducibility compares."""
    out: dict[Layer, list[tuple[int, str]]] = {}
    for layer, seq, kind in trace:
        out.setdefault(layer, []).append((seq, kind))
    return out


@dataclass
class _Stage:
    fwd_queue: list[int] = field(default_factory=list)  # arrived forwards, arrival order
    bwd_ready: list[int] = field(default_factory=list)  # arrived backwards, arrival order
    finished: FinishedList = field(default_factory=FinishedList)
    forwarded: list[int] = field(default_factory=list)  # forwarded here, backward pending
    bulk_done: list[int] = field(default_factory=list)  # bsp: backwards done in this bulk
    cache: LayerCache[Layer] | None = None
    ready_at: dict[Layer, float] = field(default_factory=dict)  # when a copy lands
    copy_free: float = 0.0
    #: a task started and its end event not yet taken. Events come in time order, so once it
    #: is False the last task has ended; and at the instant it ends another event may come
    #: first, before which the stage must not start its next task (the last one's layers are
    #: still pinned)
    running: bool = False


def _check(policy: str, n_stages: int, subnets: Sequence[Subnet], window: int) -> None:
    if policy not in POLICIES:
        raise ConfigError(f"policy must be one of {POLICIES}, got {policy!r}")
    if window < 1:
        raise ConfigError(f"window must be >= 1 subnet in flight, got {window!r}")
    if not subnets:
        raise ConfigError("simulate needs at least one subnet")


def simulate(
    subnets: Sequence[Subnet],
    partition: Sequence[range],
    fwd: Sequence[Sequence[float]],
    bwd: Sequence[Sequence[float]],
    policy: str = "csp",
    *,
    window: int | None = None,
    bulk: int | None = None,
    swap: Sequence[Sequence[float]] | None = None,
    cache_subnets: float | None = 3.0,
    cache_for_all: bool = False,
    comm: float = 0.0,
    record_trace: bool = False,
    lookahead: bool = True,
    per_subnet: Sequence[Sequence[range]] | None = None,
    batch: int = 1,
) -> SimResult:
    """Returns the simulated run of ``subnets`` through a ``len(partition)``-stage pipeline.

    ``fwd[b][c]``, ``bwd[b][c]`` and ``swap[b][c]`` are layer (b, c)'s forward, backward and
    host-to-device copy times; ``comm`` is the stage-to-stage transfer time. ``window``
    (default D) bounds subnets in flight for csp/asp; ``bulk`` (default D) is bsp's flush size.
    ``cache_subnets=None`` or ``swap=None`` means the whole supernet stays on the device.
    ``per_subnet`` gives each subnet its own partition (layer mirroring, §4.2; ``partition``
    then only sizes the caches): csp then waits on the stage where the earlier subnet WRITEs
    the shared layer (:func:`blocked_by_mirrored`); pushing a WRITE to mirrors is free here.
    ``batch`` is only recorded (the costs are for that batch); see
    :attr:`SimResult.samples_per_time`.

    Raises:
        ConfigError: unknown policy, a window < 1, no subnets.
    """
    n_stages = len(partition)
    window = window or n_stages
    _check(policy, n_stages, subnets, window)
    sim = _Simulation(
        subnets, partition, fwd, bwd, policy, window, bulk or n_stages, swap, comm,
        record_trace, lookahead, per_subnet, batch,
    )  # fmt: skip
    use_cache = swap is not None and cache_subnets is not None
    if use_cache and (policy == "csp" or cache_for_all):
        assert cache_subnets is not None  # use_cache implies it
        sim.give_caches(cache_subnets)
    return sim.run()


class _Simulation:
    """Returns, from :meth:`run`, one simulated run: the stages, the event queue and the
    admission state of :func:`simulate`, with one method per step of the event loop."""

    def __init__(
        self,
        subnets: Sequence[Subnet],
        partition: Sequence[range],
        fwd: Sequence[Sequence[float]],
        bwd: Sequence[Sequence[float]],
        policy: str,
        window: int,
        bulk: int,
        swap: Sequence[Sequence[float]] | None,
        comm: float,
        record_trace: bool,
        lookahead: bool,
        per_subnet: Sequence[Sequence[range]] | None,
        batch: int,
    ) -> None:
        self.subnets, self.partition, self.policy = subnets, partition, policy
        self.window, self.bulk, self.swap, self.comm = window, bulk, swap, comm
        self.record_trace, self.lookahead, self.per_subnet = record_trace, lookahead, per_subnet
        self.n_stages = n = len(partition)
        self.stages = [_Stage() for _ in range(n)]
        self.res = SimResult(policy, n, len(subnets), 0.0, [0.0] * n, batch=batch)
        self.parts = per_subnet or [partition] * len(subnets)
        self.layers = [
            [stage_layers(sn, self.parts[i], k) for k in range(n)] for i, sn in enumerate(subnets)
        ]
        self.written: set[tuple[int, int]] = set()  # (subnet, stage) backwards done (mirrors)
        self.global_done = FinishedList()
        self.cost_f = [[sum(fwd[b][c] for b, c in ls) for ls in per] for per in self.layers]
        self.cost_b = [[sum(bwd[b][c] for b, c in ls) for ls in per] for per in self.layers]
        self.events: list[tuple[float, int, int, str, int]] = []  # (time, order, stage, kind, seq)
        self.order = 0
        self.admitted = 0  # subnets handed to stage 0
        self.done = 0  # subnets whose stage-0 backward finished
        self.bulk_end = 0  # bsp: subnets up to here belong to admitted bulks

    def give_caches(self, cache_subnets: float) -> None:
        """Gives each stage a layer cache of ``cache_subnets`` stage slices."""
        for k, st in enumerate(self.stages):
            # Room for cache_subnets stage slices, and at least the largest task (mirroring
            # can give one subnet's stage more layers than the static slice).
            biggest = max(len(p[k]) for p in (self.per_subnet or [self.partition]))
            cap = max(biggest, int(round(cache_subnets * len(self.partition[k]))), 1)
            st.cache = LayerCache(cap)

    def push(self, t: float, k: int, kind: str, seq: int) -> None:
        heapq.heappush(self.events, (t, self.order, k, kind, seq))
        self.order += 1

    def admit(self, now: float) -> None:
        n = len(self.subnets)
        if self.policy == "bsp":
            if self.admitted == self.done and self.admitted < n:  # flush done: next bulk
                self.bulk_end = min(n, self.admitted + self.bulk)
                while self.admitted < self.bulk_end:
                    self.stages[0].fwd_queue.append(self.admitted)
                    self.admitted += 1
            return
        while self.admitted < n and self.admitted - self.done < self.window:
            self.stages[0].fwd_queue.append(self.admitted)
            self.admitted += 1

    def stall_for(self, st: _Stage, task_layers: Iterable[Layer], now: float) -> float:
        """Returns when the task's layers are all resident, counting hits and misses."""
        if st.cache is None:
            return now
        swap, res = self.swap, self.res
        assert swap is not None  # a stage has a cache only when swap costs are given
        ready = now
        for layer in sorted(task_layers):
            hit, evicted = st.cache.access(layer)
            for e in evicted:
                st.ready_at.pop(e, None)
            landed = st.ready_at.get(layer, now)
            if hit and landed <= now:
                res.cache_hits += 1
                continue
            res.cache_misses += 1
            if hit:  # prefetch still in flight: wait for it
                ready = max(ready, landed)
            else:  # synchronous load on the copy engine
                start = max(st.copy_free, now)
                st.copy_free = start + swap[layer[0]][layer[1]]
                st.ready_at[layer] = st.copy_free
                ready = max(ready, st.copy_free)
        return ready

    def prefetch(self, st: _Stage, k: int, tasks: list[Task], now: float) -> None:
        if st.cache is None:
            return
        swap = self.swap
        assert swap is not None  # a stage has a cache only when swap costs are given
        want = [layer for t in tasks for layer in sorted(self.layers[t.seq][k])]
        loaded, evicted = st.cache.prefetch(want)
        for e in evicted:
            st.ready_at.pop(e, None)
        for layer in loaded:
            start = max(st.copy_free, now)
            st.copy_free = start + swap[layer[0]][layer[1]]
            st.ready_at[layer] = st.copy_free

    def next_task(self, k: int) -> tuple[int, bool, list[Task]]:
        """Returns (subnet, whether a backward, the predicted next tasks) of the task stage
        ``k`` runs next, or subnet -1 when none may run."""
        st, subnets, partition = self.stages[k], self.subnets, self.partition
        if st.bwd_ready:
            seq = st.bwd_ready.pop(0)
            tasks = predict(st.fwd_queue, st.finished, subnets, k, partition, backward_of=seq)
            return seq, True, tasks
        if self.policy == "csp" and self.per_subnet is not None:
            qidx, seq = _pick_mirrored(
                st.fwd_queue, k, subnets, self.parts, self.written, self.global_done
            )
        elif self.policy == "csp":
            qidx, seq = schedule(st.fwd_queue, st.finished, subnets, k, partition)
        else:
            qidx, seq = (0, st.fwd_queue[0]) if st.fwd_queue else (-1, -1)
        if seq < 0:
            return -1, False, []
        st.fwd_queue.pop(qidx)
        pending = [(x, seq) for x in st.forwarded[:1]]
        tasks = predict(
            st.fwd_queue, st.finished, subnets, k, partition,
            current=seq, pending_backward=pending,
        )  # fmt: skip
        return seq, False, tasks

    def try_start(self, k: int, now: float) -> None:
        st = self.stages[k]
        if st.running:
            return
        seq, backward, tasks = self.next_task(k)
        if seq < 0:
            return
        task_layers = self.layers[seq][k]
        begin = self.stall_for(st, task_layers, now)
        self.prefetch(st, k, tasks, now)
        # The status passed between stages (§3.3): a task starting here is the next one of its
        # kind to reach the neighbour, which starts copying its layers now.
        if backward and k > 0:
            self.prefetch(self.stages[k - 1], k - 1, [Task(seq, k - 1, True)], now)
        if not backward and k + 1 < self.n_stages and self.lookahead:
            self.prefetch(self.stages[k + 1], k + 1, [Task(seq, k + 1)], now)
        dur = self.cost_b[seq][k] if backward else self.cost_f[seq][k]
        end = begin + dur
        self.res.busy[k] += dur
        st.running = True
        if self.record_trace and not backward:
            self.res.trace.extend((layer, seq, "R") for layer in sorted(task_layers))
        self.push(end, k, "bdone" if backward else "fdone", seq)

    def write(self, k: int, seqs: Sequence[int]) -> None:
        if self.record_trace:
            for s in seqs:
                self.res.trace.extend((layer, s, "W") for layer in sorted(self.layers[s][k]))

    def backward_done(self, k: int, seq: int, now: float) -> None:
        """Takes the end of subnet ``seq``'s backward on stage ``k``: its WRITEs (bsp: at the
        flush), the backward's hand-off to stage ``k - 1``, or at stage 0 the next admission."""
        st = self.stages[k]
        st.forwarded.remove(seq)
        if st.cache is not None:
            st.cache.release(self.layers[seq][k])
        if self.policy == "bsp":
            st.bulk_done.append(seq)
            if len(st.bulk_done) == _bulk_size(self.bulk_end, self.bulk):  # this stage flushes
                self.write(k, sorted(st.bulk_done))
                for s in sorted(st.bulk_done):
                    st.finished.add(s)
                st.bulk_done = []
        else:
            self.write(k, [seq])
            st.finished.add(seq)
        self.written.add((seq, k))
        if k > 0:
            self.push(now + self.comm, k - 1, "bwd", seq)
        else:
            self.done += 1
            self.global_done.add(seq)
            self.admit(now)

    def run(self) -> SimResult:
        """Returns the result after running the event loop until every subnet is done."""
        self.admit(0.0)
        for k in range(self.n_stages):
            self.try_start(k, 0.0)
        now = 0.0
        while self.events:
            now, _, k, kind, seq = heapq.heappop(self.events)
            st = self.stages[k]
            if kind == "fwd":
                st.fwd_queue.append(seq)
            elif kind == "bwd":
                st.bwd_ready.append(seq)
            if kind in ("fdone", "bdone"):
                st.running = False
            if kind == "fdone":
                st.forwarded.append(seq)
                if k + 1 < self.n_stages:
                    self.push(now + self.comm, k + 1, "fwd", seq)
                else:
                    st.bwd_ready.append(seq)  # the loss is here: backward is ready at once
            elif kind == "bdone":
                self.backward_done(k, seq, now)
            if kind == "fdone" and st.cache is not None:
                st.cache.release(self.layers[seq][k])  # Alg. 1 line 24: evictable after forward
            for j in range(self.n_stages):
                self.try_start(j, now)
        self.res.makespan = now
        n = len(self.subnets)
        assert self.done == n, f"simulation stalled with {self.done}/{n} subnets done"
        return self.res


def _pick_mirrored(
    queue: Sequence[int],
    k: int,
    subnets: Sequence[Subnet],
    parts: Sequence[Sequence[range]],
    written: set[tuple[int, int]],
    done: FinishedList,
) -> tuple[int, int]:
    """Returns the first forward in ``queue`` that mirror-mode CSP lets run, or (-1, -1)."""
    for qidx, seq in enumerate(queue):
        check = blocked_by_mirrored(
            seq, k, subnets, parts, lambda x, j: (x, j) in written, done.low
        )
        if check < 0:
            return qidx, seq
    return -1, -1


def _bulk_size(bulk_end: int, bulk: int) -> int:
    """Returns the size of the bulk ending at ``bulk_end`` (the last bulk may be short)."""
    return bulk if bulk_end % bulk == 0 else bulk_end % bulk


def bubble_floor(
    subnets: Sequence[Subnet],
    partition: Sequence[range],
    fwd: Sequence[Sequence[float]],
    bwd: Sequence[Sequence[float]],
    *,
    per_layer: bool = False,
) -> float:
    """Returns the lowest bubble ratio any schedule keeping Definition 2 can reach here.

    Relaxes everything but the dependencies: stages may run any number of tasks at once and
    links are free. A forward of subnet y on stage K starts after y's forward on K - 1 and
    after the backward on K of the last earlier subnet sharing a layer there; backwards follow
    the forward chain back. With ``per_layer`` the dependency is per layer instead: y's forward
    of layer l starts once the last earlier subnet's backward has passed l (a schedule that
    checks dependencies per layer, not per stage). The makespan is then at least this critical
    path and at least the busiest stage's work, so::

        bubble >= 1 - total work / (D x max(critical path, busiest stage))

    Invariants: a csp :func:`simulate` run of the same inputs has ``bubble_ratio`` >= this
    (for ``per_layer`` as well, since per-stage checks are stricter).
    """
    d = len(partition)
    blocks = [list(r) for r in partition]
    work = [0.0] * d
    done_at: dict[Layer, float] = {}  # when the last WRITE of a layer is done
    end = 0.0
    for sn in subnets:
        f = [sum(fwd[b][sn[b]] for b in bl) for bl in blocks]
        g = [sum(bwd[b][sn[b]] for b in bl) for bl in blocks]
        for k in range(d):
            work[k] += f[k] + g[k]
        t = 0.0
        if per_layer:
            for b in range(len(sn)):
                t = max(t, done_at.get((b, sn[b]), 0.0)) + fwd[b][sn[b]]
            for b in reversed(range(len(sn))):
                t += bwd[b][sn[b]]
                done_at[(b, sn[b])] = t
        else:
            for k in range(d):
                t = max([t] + [done_at.get((b, sn[b]), 0.0) for b in blocks[k]]) + f[k]
            for k in reversed(range(d)):
                t += g[k]
                for b in blocks[k]:
                    done_at[(b, sn[b])] = t
        end = max(end, t)
    span = max(end, max(work))
    return 1.0 - sum(work) / (d * span) if span else 0.0
