"""Causal synchronous parallel (CSP) scheduling of subnets in a pipeline (NASPipe, §3).

Pure: no torch. The runtime (:mod:`nasforge.parallel.runtime`) and the discrete-event simulator
(:mod:`nasforge.parallel.simulator`) both call these functions, so the rule that makes parallel
supernet training bitwise equal to sequential training lives here once.

Terms (the paper's, §3 "Preliminaries"):

    m      number of choice blocks b_0 .. b_{m-1}
    n      candidate layers per block
    D      number of pipeline stages (one process / device each)
    SN_y   the subnet with sequence id y: one candidate index per block, a tuple of m ints
    l      a layer, written (block, candidate)
    P_y^K  the layers of SN_y that stage K runs (its "partition")

A *task* is the forward (READ of P_y^K's parameters) or the backward (WRITE: gradient plus
optimizer step) of one partition. Definition 2 (dependency preservation): if x < y and SN_x and
SN_y share a layer l, every access of SN_y to l waits until SN_x's WRITE of l is done. Hence the
per-layer order of reads and writes equals that of training SN_0, SN_1, ... one at a time, which
is what makes the result independent of D and of timing (Definition 1).

A timetable (D = 2, subnets 0..3, one time unit per task; the last stage runs a subnet's
backward right after its forward). Subnet 2 shares a stage-0 layer with subnet 0, so F2 on
stage 0 waits for B0 there; subnet 3 shares nothing with 2 and overtakes it::

    time   0    1    2    3    4    5    6    7    8    9
    K=0    F0   F1   F3   B0   F2   B1   .    B3   .    B2
    K=1    .    F0   B0   F1   B1   F3   B3   F2   B2   .

``F3`` runs before ``F2`` on stage 0: a later subnet may run early when it depends on nothing
unfinished; that reordering is where CSP gains over a flush (BSP) and still keeps the order
sequential training gives each layer.

Invariants:
    * :func:`schedule` returns a forward task only if no earlier unfinished subnet shares a
      layer with that task's partition (Algorithm 2); backward tasks are never blocked and the
      caller runs them first.
    * The subnet with the lowest unfinished sequence id is never blocked, so a CSP pipeline
      cannot deadlock.
    * :class:`FinishedList` keeps only ids above its low-water mark (§3.2 elimination); the
      answer of ``x in finished`` never changes by eliminating.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from nasforge.errors import ArchitectureError
from nasforge.partition import balanced_partition, check_partition

__all__ = [
    "Layer",
    "Subnet",
    "BySeq",
    "Task",
    "FinishedList",
    "static_partition",
    "balanced_partition",
    "check_partition",
    "stage_of_blocks",
    "stage_layers",
    "subnet_layers",
    "check_subnet",
    "schedule",
    "predict",
    "admissions",
    "pending_backwards",
    "subnet_partition",
    "blocked_by_mirrored",
]

#: A layer of the supernet: (block index, candidate index).
Layer = tuple[int, int]
#: A subnet: the chosen candidate index of every block, in block order.
Subnet = tuple[int, ...]
#: A block-to-stage partition: stage K runs the blocks in ``partition[K]`` (contiguous ranges).
Partition = Sequence[range]

_T_co = TypeVar("_T_co", covariant=True)


class BySeq(Protocol[_T_co]):
    """Returns an item by subnet sequence id: a list, a dict, or a lazy view over a feed.

    The scheduler only indexes by the ids it is given, so a view that draws subnets on demand
    works as well as a list of all of them.
    """

    def __getitem__(self, seq: int, /) -> _T_co: ...


#: A blocking rule: ``rule(seq, finished)`` returns the earlier subnet that blocks ``seq``'s
#: forward here, or -1 (default: :func:`blocked_by`; with mirroring a closure over
#: :func:`blocked_by_mirrored`). ``finished`` is this stage's (possibly pretend) finished list.
BlockRule = Callable[[int, "FinishedList"], int]


@dataclass(frozen=True, order=True)
class Task:
    """A unit of pipeline work: the forward or backward of subnet ``seq`` on ``stage``."""

    seq: int
    stage: int
    backward: bool = False

    def __str__(self) -> str:
        return f"{'B' if self.backward else 'F'}{self.seq}@{self.stage}"


# --------------------------------------------------------------------------------------------
# Partitioning: which blocks each stage runs.
# --------------------------------------------------------------------------------------------


def static_partition(n_blocks: int, n_stages: int) -> tuple[range, ...]:
    """Returns ``n_stages`` contiguous block ranges whose sizes differ by at most one.

    The documented first mode of §4.2 ("a partition based on the choice block hierarchy"): every
    layer of block b lives on one stage for every subnet, so no layer is ever mirrored.

    Invariants: the ranges cover ``range(n_blocks)`` in order; earlier stages get the extra block.

    Raises:
        ScheduleError: see :func:`check_partition`.
    """
    check_partition(n_blocks, n_stages, "choice blocks", "pipeline stages")
    base, extra = divmod(n_blocks, n_stages)
    out, start = [], 0
    for k in range(n_stages):
        size = base + (1 if k < extra else 0)
        out.append(range(start, start + size))
        start += size
    return tuple(out)


def stage_of_blocks(partition: Partition) -> list[int]:
    """Returns ``owner`` with ``owner[b]`` the stage that runs block b."""
    owner: list[int] = []
    for k, blocks in enumerate(partition):
        owner.extend([k] * len(blocks))
    return owner


def stage_layers(subnet: Subnet, partition: Partition, stage: int) -> frozenset[Layer]:
    """Returns P^K: the layers of ``subnet`` that ``stage`` runs."""
    return frozenset((b, subnet[b]) for b in partition[stage])


def subnet_layers(subnet: Subnet) -> frozenset[Layer]:
    """Returns every layer of ``subnet``."""
    return frozenset(enumerate(subnet))


def check_subnet(subnet: Sequence[int], n_candidates: Sequence[int], seq: int = -1) -> Subnet:
    """Returns ``subnet`` as a tuple after checking it names an existing candidate per block.

    Raises:
        ArchitectureError: wrong number of blocks, or a candidate index out of range.
    """
    if len(subnet) != len(n_candidates):
        raise ArchitectureError(
            f"subnet {seq} has {len(subnet)} choices, expected one per block "
            f"({len(n_candidates)}); sample it from the supernet's search space"
        )
    for b, (c, n) in enumerate(zip(subnet, n_candidates)):
        if not isinstance(c, int) or not 0 <= c < n:
            raise ArchitectureError(
                f"subnet {seq} names candidate {c!r} in block {b}, which has candidates "
                f"0..{n - 1}; fix the sampler or the space"
            )
    return tuple(subnet)


# --------------------------------------------------------------------------------------------
# The finished list and Algorithm 2.
# --------------------------------------------------------------------------------------------


class FinishedList:
    """Returns membership of finished sequence ids, stored compactly (§3.2 elimination).

    Ids below :attr:`low` are all finished and are not stored; :attr:`above` holds the
    finished ids past the first gap. Algorithm 2's loop over earlier subnets starts at ``low``,
    so its cost tracks the number of subnets in flight, not the length of the run.

    ``low`` starts a list whose ids below it are finished already: a run resumed at step
    ``low`` (:mod:`nasforge.parallel.segments`) never asks about the steps trained before.

    Invariants: ``low`` never decreases; ``low not in above``; every id in ``above`` > ``low``.
    """

    def __init__(self, low: int = 0) -> None:
        self.low = low
        self.above: set[int] = set()

    def add(self, seq: int) -> None:
        """Returns None; marks ``seq`` finished and advances the low-water mark past it."""
        assert seq not in self, f"subnet {seq} finished twice"
        self.above.add(seq)
        while self.low in self.above:
            self.above.remove(self.low)
            self.low += 1

    def __contains__(self, seq: object) -> bool:
        return isinstance(seq, int) and (0 <= seq < self.low or seq in self.above)

    def __len__(self) -> int:
        return self.low + len(self.above)

    def copy(self) -> FinishedList:
        """Returns an independent copy (the predictor adds a pretend-finished id to one)."""
        out = FinishedList()
        out.low, out.above = self.low, set(self.above)
        return out


def blocked_by(
    seq: int,
    finished: FinishedList,
    subnets: BySeq[Subnet],
    stage: int,
    partition: Partition,
) -> int:
    """Returns the lowest earlier unfinished subnet sharing a layer with P_seq^stage, or -1."""
    mine = stage_layers(subnets[seq], partition, stage)
    for wval in range(finished.low, seq):  # §3.2: ids below low are finished, skip them
        if wval in finished:
            continue
        # Compare with the whole earlier subnet (Algorithm 2 line 8), not just its P^stage: with
        # mirroring a layer may run on another stage for another subnet.
        other = subnets[wval]
        if any(other[b] == c for b, c in mine):
            return wval
    return -1


def schedule(
    queue: Sequence[int],
    finished: FinishedList,
    subnets: BySeq[Subnet],
    stage: int,
    partition: Partition,
    rule: BlockRule | None = None,
) -> tuple[int, int]:
    """Returns ``(qidx, seq)`` of the first runnable forward task in ``queue``, or ``(-1, -1)``.

    Algorithm 2: scan the queue in order; a forward of ``seq`` is runnable when no subnet with a
    lower id that is not yet finished *on this stage* shares a layer with P_seq^stage. ``rule``
    replaces that test (layer mirroring passes Definition 2 over per-subnet partitions).

    Invariants: pure (reads only); the lowest unfinished id present in ``queue`` is runnable.
    """
    for qidx, qual in enumerate(queue):
        if rule is not None:
            blocker = rule(qual, finished)
        else:
            blocker = blocked_by(qual, finished, subnets, stage, partition)
        if blocker < 0:
            return qidx, qual
    return -1, -1


def predict(
    queue: Sequence[int],
    finished: FinishedList,
    subnets: BySeq[Subnet],
    stage: int,
    partition: Partition,
    *,
    backward_of: int | None = None,
    current: int | None = None,
    pending_backward: Sequence[tuple[int, int]] = (),
    rule: BlockRule | None = None,
    inflight: Sequence[int] = (),
    upcoming: Sequence[int] = (),
) -> list[Task]:
    """Returns the tasks to prefetch before the next task runs, nearest first (Algorithm 3,
    then the look-ahead).

    * Before a backward of ``backward_of``: pretend it finished (a copy of ``finished``) and
      re-run :func:`schedule`; the forward it unblocks is likely next (Alg. 3 lines 4-9).
    * Before a forward of ``current`` (already popped from ``queue``): any pending backward
      ``(bwd_seq, precedence)`` whose blocking forward is ``current`` will follow it
      (lines 13-15), and :func:`schedule` names the next forward (lines 16-18).
      ``pending_backward`` is the stage's L_blocked, as :func:`pending_backwards` builds it.
    * Then the look-ahead: the backwards of the ``inflight`` subnets (forwarded here, backward
      not yet run: their update needs the layers again), then the forwards of ``upcoming``
      subnets, which have not reached the stage yet (:func:`admissions`). At one stage the
      queue is empty whenever a forward runs, so this is the only prediction there is.

    ``rule`` is :func:`schedule`'s blocking rule (layer mirroring passes its own).

    Invariants: pure; the result names no task of ``current`` or ``backward_of``'s backward,
    no finished subnet, and no task twice.
    """
    out: list[Task] = []
    if backward_of is not None:
        pretend = finished.copy()
        if backward_of not in pretend:
            pretend.add(backward_of)
        _, fwd = schedule(queue, pretend, subnets, stage, partition, rule)
        if fwd >= 0:
            out.append(Task(fwd, stage))
    else:
        for bwd_seq, precedence in pending_backward:
            if precedence == current and bwd_seq not in finished:
                out.append(Task(bwd_seq, stage, backward=True))
        _, fwd = schedule(queue, finished, subnets, stage, partition, rule)
        if fwd >= 0:
            out.append(Task(fwd, stage))
    ahead = [Task(s, stage, backward=True) for s in inflight]
    ahead += [Task(s, stage) for s in upcoming]
    for task in ahead:
        mine = task.seq in (current, backward_of)
        if not mine and task.seq not in finished and task not in out:
            out.append(task)
    return out


def admissions(
    next_seq: int, n_steps: int, depth: int, lag: int | None = None, low: int = 0
) -> range:
    """Returns the sequence ids a stage may predict beyond what reached it: up to ``depth``
    subnets from ``next_seq``, none past the run's ``n_steps``.

    With a sampler that learns from losses (``lag``: it draws subnet q after the loss of
    q - lag is told), none whose draw waits on a loss this stage has not seen: every subnet
    below ``low`` finished here, so its loss is known, and q <= low + lag - 1 can be drawn now.
    Predicting further would stall the stage on its own future losses.

    Invariants: pure; the range is empty or starts at ``next_seq``; its length is at most
    ``depth``.
    """
    stop = min(n_steps, next_seq + max(0, depth))
    if lag is not None:
        stop = min(stop, low + lag)
    return range(next_seq, max(next_seq, stop))


def pending_backwards(
    blocked_here: Mapping[int, int],
    carried: Mapping[int, int],
    finished: FinishedList,
    forwarded: Callable[[int], bool],
    limit: int,
) -> list[tuple[int, int]]:
    """Returns the ``(bwd_seq, precedence)`` pairs a stage sends upstream with a backward
    message (Algorithm 3's ``recv.next_bwd``, §3.3), lowest ``bwd_seq`` first, at most ``limit``.

    ``blocked_here`` maps each forward waiting in this stage's queue to the subnet blocking it
    (:func:`blocked_by` or the mirrored rule): its backward is pending until that precedence
    finishes here. ``carried`` is this stage's L_blocked, the pairs that came from downstream.
    A pair is still relevant upstream while its backward has not run here (``bwd_seq`` not in
    ``finished``) and its precedence's forward has not run here (``forwarded(p)`` false): a
    forward runs upstream before it runs here, so once it ran here no stage upstream will run
    it again and the pair can prefetch nothing there. A pair from this stage's own queue wins
    over a carried pair for the same backward (it is the newer news).

    Invariants: pure; no two pairs share a ``bwd_seq``; ``precedence < bwd_seq`` in every pair;
    the length is at most ``limit``.
    """
    merged = {**carried, **blocked_here}
    out = [
        (y, p)
        for y, p in sorted(merged.items())
        if 0 <= p < y and y not in finished and not forwarded(p)
    ]
    return out[: max(0, limit)]


# --------------------------------------------------------------------------------------------
# Layer mirroring (§4.2): a per-subnet balanced partition.
# --------------------------------------------------------------------------------------------


def subnet_partition(
    subnet: Subnet, layer_cost: Callable[[Layer], float], n_stages: int
) -> tuple[range, ...]:
    """Returns the balanced partition of one subnet from its own layers' costs.

    Different subnets then place the same layer on different stages; each such stage holds a
    mirror of the layer and a WRITE is pushed to the mirrors (§4.2).
    """
    return balanced_partition(
        [layer_cost(layer) for layer in enumerate(subnet)], n_stages, "layers", "pipeline stages"
    )


def blocked_by_mirrored(
    seq: int,
    stage: int,
    subnets: BySeq[Subnet],
    partitions: BySeq[Partition],
    written: Callable[[int, int], bool],
    low: int = 0,
) -> int:
    """Returns the lowest earlier subnet whose WRITE of a layer P_seq^stage reads is not done,
    or -1 (Definition 2 when partitions differ per subnet).

    ``written(x, k)`` tells whether subnet x's backward on stage k (which WRITEs the layers x
    placed there, then pushes them to the mirrors) has finished; ``low`` is a sequence id
    below which every subnet is finished everywhere (the §3.2 elimination, globally).
    """
    mine = stage_layers(subnets[seq], partitions[seq], stage)
    for x in range(low, seq):
        other, owner = subnets[x], None
        for b, c in mine:
            if other[b] != c:
                continue
            owner = owner or stage_of_blocks(partitions[x])
            if not written(x, owner[b]):
                return x
    return -1
