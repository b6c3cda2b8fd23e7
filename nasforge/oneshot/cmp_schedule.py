"""Schedules of one bilevel search step over M consecutive partitions (NASB-CMP, §2.2), and a
discrete-event simulation of them. Pure: no torch.

A step has four phases (the paper's notation)::

    F_A  forward on a validation batch (for the architecture A)    partition 0 -> M-1
    B_A  its backward                                               partition M-1 -> 0
    F_w  forward on a training batch (for the weights w)            partition 0 -> M-1
    B_w  its backward                                               partition M-1 -> 0

Each phase splits into M sub-tasks, one per partition. A schedule says which sub-task each
partition runs at each tick of a unit-time clock (as torchgpipe's ``clock_cycles``); the runtime
only uses the *order* of sub-tasks per partition (:func:`partition_order`) and lets data
dependencies do the waiting. Timetables for M = 3 (columns: ticks; rows: partitions)::

    mp    0: FA .  .  .  .  BA FW .  .  .  .  BW          4M = 12 ticks
          1: .  FA .  .  BA .  .  FW .  .  BW .
          2: .  .  FA BA .  .  .  .  FW BW .  .

    cmp   0: FA FW .  .  .  .  BW BA                      2M + 2 = 8 ticks
          1: .  FA FW .  BW BA .  .
          2: .  .  FA FW BW BA .  .

CMP issues F_A and F_w back to back, then B_w and B_A (Algorithm 1: parameters are updated only
after all four phases, so both forwards use A_t, w_t and G_t). With equal unit costs the ratio of
step times is Eq. 4: ``(2M + 2) / 4M = 1 - (M - 1) / 2M``.

The module imports nothing but :mod:`nasforge.errors` (no torch), so the schedule logic can be
read and tested alone. :func:`balanced_partition` is the min-max partition the pipeline
package uses too (:mod:`nasforge.partition`), re-exported here.

Invariants:
    * every schedule emits each (partition, phase) exactly once, in dependency order: a forward
      sub-task after the same phase on the partition before, a backward after the same phase on
      the partition after (and on the last partition after its forward);
    * :func:`simulate` is a pure function of its inputs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from nasforge.errors import ScheduleError
from nasforge.partition import balanced_partition

__all__ = [
    "PHASES",
    "SCHEDULES",
    "clock_cycles",
    "partition_order",
    "theory_ratio",
    "SimStep",
    "simulate",
    "check_schedule",
    "balanced_partition",
]

#: The four phases of a bilevel step, in the order of a single-device consecutive step.
PHASES = ("F_A", "B_A", "F_w", "B_w")
#: Schedules the runtime knows.
SCHEDULES = ("mp", "cmp")

Cell = tuple[int, str]  # (partition, phase)


def _check_m(m: int) -> None:
    if not isinstance(m, int) or isinstance(m, bool) or m < 1:
        raise ScheduleError(f"the number of partitions must be an int >= 1, got {m!r}")


def clock_cycles(m: int, schedule: str) -> list[list[Cell]]:
    """Returns, per tick, the (partition, phase) sub-tasks that run at that tick.

    Raises:
        ScheduleError: ``m < 1`` or an unknown schedule.
    """
    _check_m(m)
    if schedule == "mp":
        ticks: list[list[Cell]] = []
        for phase in PHASES:
            parts = range(m) if phase.startswith("F") else range(m - 1, -1, -1)
            ticks.extend([[(k, phase)] for k in parts])
        return ticks
    if schedule == "cmp":
        out: list[list[Cell]] = [[] for _ in range(2 * m + 2)]
        for k in range(m):
            out[k].append((k, "F_A"))
            out[k + 1].append((k, "F_w"))
            back = m + 1 + (m - 1 - k)  # the last partition starts backward right after F_w
            out[back].append((k, "B_w"))
            out[back + 1].append((k, "B_A"))
        return out
    raise ScheduleError(f"unknown schedule {schedule!r}; expected one of {list(SCHEDULES)}")


def partition_order(m: int, schedule: str, k: int, deferred: bool = False) -> list[str]:
    """Returns the phases partition ``k`` runs, in its order, under ``schedule``; ``deferred``
    splits NASB's B_A into the pass that sends gradients upstream (``B_A``) and the local
    recomputation of inactive operations for Eq. 6 (``R_A``), run right after it.

    Raises:
        ScheduleError: see :func:`clock_cycles`; ``k`` outside ``[0, m)``.
    """
    if not 0 <= k < m:
        raise ScheduleError(f"partition {k!r} is outside [0, {m})")
    order = [phase for tick in clock_cycles(m, schedule) for (p, phase) in tick if p == k]
    if deferred:
        order.insert(order.index("B_A") + 1, "R_A")
    return order


def theory_ratio(m: int) -> float:
    """Returns Eq. 4, CMP time over MP time with equal unit costs: ``1 - (m - 1) / (2m)``."""
    _check_m(m)
    return 1.0 - (m - 1) / (2 * m)


def _deps(m: int, k: int, phase: str) -> list[Cell]:
    """Returns the sub-tasks that must finish before (k, phase) can start."""
    if phase == "R_A":  # local: needs only this partition's B_A pass
        return [(k, "B_A")]
    forward = "F_" + phase[2:]
    if phase.startswith("F"):
        return [(k - 1, phase)] if k > 0 else []
    if k == m - 1:
        return [(k, forward)]
    return [(k + 1, phase)]


def check_schedule(m: int, orders: Sequence[Sequence[str]]) -> None:
    """Returns None when per-partition ``orders`` run every sub-task once without deadlock.

    Raises:
        ScheduleError: a sub-task is missing or repeated, or the orders deadlock.
    """
    if len(orders) != m:
        raise ScheduleError(f"{len(orders)} partition orders for {m} partitions")
    for k, order in enumerate(orders):
        if sorted(p for p in order if p != "R_A") != sorted(PHASES):
            raise ScheduleError(f"partition {k} runs {list(order)}, expected each of {PHASES}")
    simulate({(k, p): 1.0 for k in range(m) for p in (*PHASES, "R_A")}, orders)


@dataclass(frozen=True)
class SimStep:
    """Returns nothing; one simulated step: its time, and per partition the busy time, the idle
    fraction and each sub-task's (start, end)."""

    time: float
    busy: tuple[float, ...]
    spans: Mapping[Cell, tuple[float, float]]

    @property
    def idle_fraction(self) -> tuple[float, ...]:
        """Returns, per partition, the share of the step it spends waiting."""
        return tuple(1.0 - b / self.time if self.time > 0 else 0.0 for b in self.busy)


def simulate(
    costs: Mapping[Cell, float],
    orders: Sequence[Sequence[str]],
    *,
    comm: float = 0.0,
    sync: Sequence[float] | None = None,
) -> SimStep:
    """Returns the simulated step of partitions running ``orders`` (from :func:`partition_order`)
    with ``costs[(k, phase)]`` per sub-task, ``comm`` per message between partitions, and
    ``sync[k]`` (data parallel: the gradient all-reduce of partition k's replicas) after its
    last sub-task.

    Each partition runs one sub-task at a time in its order; a sub-task starts when the partition
    is free and its dependency (see the module docstring) has finished (plus ``comm`` when the
    dependency ran on another partition).

    Raises:
        ScheduleError: a cost is missing or negative, or the orders deadlock.
    """
    m = len(orders)
    for cell in ((k, p) for k in range(m) for p in orders[k]):
        if costs.get(cell, -1.0) < 0:
            raise ScheduleError(f"no non-negative cost for sub-task {cell}; got {costs.get(cell)}")
    free = [0.0] * m
    busy = [0.0] * m
    nxt = [0] * m
    end: dict[Cell, float] = {}
    spans: dict[Cell, tuple[float, float]] = {}
    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for k in range(m):
            while nxt[k] < len(orders[k]):
                phase = orders[k][nxt[k]]
                deps = _deps(m, k, phase)
                if any(d not in end for d in deps):
                    break
                ready = max([end[d] + (comm if d[0] != k else 0.0) for d in deps], default=0.0)
                start = max(free[k], ready)
                cost = costs[(k, phase)]
                free[k] = end[(k, phase)] = start + cost
                spans[(k, phase)] = (start, start + cost)
                busy[k] += cost
                nxt[k] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            stuck = {k: orders[k][nxt[k]] for k in range(m) if nxt[k] < len(orders[k])}
            raise ScheduleError(f"the partition orders deadlock; waiting sub-tasks: {stuck}")
    if sync is not None:
        for k in range(m):
            free[k] += sync[k]
            busy[k] += sync[k]
    return SimStep(max(free, default=0.0), tuple(busy), spans)
