"""Layer mirroring in the real pipeline (NASPipe §4.2): each subnet split across the stages by
its own balanced partition, a mirror of a layer on every stage that may run it, and every
WRITE pushed to the other mirrors before a later subnet reads the layer there.

Opt-in with ``RunConfig(mirror=True)`` (policy ``csp``). Per subnet x, stage K runs the blocks
``subnet_partition(SN_x, cost, D)[K]``, where ``cost`` is one table every process holds
(``RunConfig.layer_costs``, else measured once on rank 0 and broadcast), so every process
computes the same partitions. Which stage runs block b then changes with the subnet::

    D = 2, m = 4            SN_x = (0, 2, 1, 0)         SN_y = (1, 2, 0, 0)
    stage 0 runs blocks     0, 1                        0, 1, 2
    stage 1 runs blocks     2, 3                        3
    layer (1, 2): WRITEn by x on stage 0 -> pushed to stage 1's mirror (it may run block 1)

Stage h holds a mirror of every candidate of the blocks some contiguous partition with no
empty stage can give it (:func:`mirror_blocks`). After stage k's backward of subnet x updates
its layers, k sends every other stage h one *bundle*: the keys x wrote on k that h mirrors,
then their parameters and momentum buffers (h gets an empty bundle when it mirrors none of
them, so h can count x's bundles). Bundles travel over a gloo group of their own, so they
never mix with the neighbours' activation and gradient channels.

The forward of y on stage s waits (Definition 2, :func:`blocked_by_mirrored`) until, for every
earlier subnet x sharing a layer with y's layers on s, x's WRITE at the stage x ran that layer
on has *arrived* at s: done locally (s itself) or its bundle applied. Bundles from different
stages may arrive out of order; each mirror keeps the sequence id of the WRITE it holds and
ignores an older one, which is enough because a bundle carries the layer's whole state.

Invariants:
    * A layer's every mirror holds the same values once every bundle has been applied, and the
      values a subnet reads on any stage are those sequential training reads (CSP stays
      bitwise equal to :func:`~nasforge.parallel.runtime.train_sequential`).
    * Every stage sends exactly one bundle per subnet to every other stage.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.distributed as dist

from nasforge.errors import ConfigError
from nasforge.parallel.cache import Key
from nasforge.parallel.csp import (
    BySeq,
    FinishedList,
    Layer,
    Subnet,
    blocked_by_mirrored,
    subnet_partition,
)

__all__ = [
    "Mirror",
    "mirror_blocks",
    "measure_layer_costs",
    "check_layer_costs",
    "shared_layer_costs",
    "layer_shapes",
]


def mirror_blocks(stage: int, n_blocks: int, n_stages: int) -> range:
    """Returns the blocks ``stage`` may run under some contiguous partition of ``n_blocks``
    blocks into ``n_stages`` non-empty stages: it has ``stage`` stages before it and
    ``n_stages - 1 - stage`` after it, each needing a block."""
    return range(stage, n_blocks - (n_stages - 1 - stage))


def check_layer_costs(costs: Any, n_candidates: Sequence[int]) -> list[list[float]]:
    """Returns ``costs`` as ``cost[b][c]`` floats after checking its shape and signs.

    Raises:
        ConfigError: not one list per block with one cost per candidate, or a negative or
            non-finite cost.
    """
    shape = [len(row) for row in costs] if isinstance(costs, (list, tuple)) else None
    if shape != list(n_candidates):
        raise ConfigError(
            f"RunConfig.layer_costs must hold one cost per candidate of each block, shape "
            f"{list(n_candidates)}, got shape {shape}; give cost[b][c] of every layer or None "
            "to measure them"
        )
    out = [[float(c) for c in row] for row in costs]
    bad = [(b, c) for b, row in enumerate(out) for c, v in enumerate(row) if not 0 <= v < 1e300]
    if bad:
        raise ConfigError(
            f"RunConfig.layer_costs must be finite and >= 0; layers {bad[:3]} are not; "
            "fix those entries"
        )
    return out


def measure_layer_costs(
    table: Mapping[Layer, torch.nn.Module], n_candidates: Sequence[int], x: torch.Tensor
) -> list[list[float]]:
    """Returns ``cost[b][c]``: the median forward + backward seconds of layer (b, c) on ``x``
    (the input of block b computed through candidate 0 of the blocks before), over 3 runs.

    Each layer is timed on a copy, so the supernet's parameters and gradients stay untouched.
    """
    costs: list[list[float]] = []
    for b, n in enumerate(n_candidates):
        row = []
        for c in range(n):
            mod = copy.deepcopy(table[(b, c)])
            runs = []
            for _ in range(3):
                inp = x.detach().requires_grad_(True)
                t0 = time.perf_counter()
                mod(inp).sum().backward()
                runs.append(time.perf_counter() - t0)
            row.append(sorted(runs)[1])
        costs.append(row)
        with torch.no_grad():
            x = table[(b, 0)](x)
    return costs


def shared_layer_costs(
    given: Any,
    table: Mapping[Layer, torch.nn.Module],
    n_candidates: Sequence[int],
    x: torch.Tensor,
    group: Any,
) -> list[list[float]]:
    """Returns the cost table every process of the run uses: ``given``, else rank 0's
    measurement broadcast over ``group`` (timings differ per process; partitions must not)."""
    if given is not None:
        return check_layer_costs(given, n_candidates)
    flat = torch.zeros(sum(n_candidates), dtype=torch.float64)
    if dist.get_rank() == 0:
        flat = torch.tensor(
            [v for row in measure_layer_costs(table, n_candidates, x) for v in row],
            dtype=torch.float64,
        )
    dist.broadcast(flat, 0, group=group)
    out, i = [], 0
    for n in n_candidates:
        out.append(flat[i : i + n].tolist())
        i += n
    return out


class Mirror:
    """Returns one stage's side of layer mirroring: per-subnet partitions, the mirrored
    blocking rule, bundles out after a WRITE and bundles in.

    ``subnets`` maps a sequence id to its subnet; ``shapes`` gives each layer's parameter
    shapes (the same in every process, so a bundle needs no size header). ``start``: the
    steps trained before this launch (a resumed segment), complete everywhere.
    """

    def __init__(
        self,
        rank: int,
        n_stages: int,
        subnets: BySeq[Subnet],
        costs: list[list[float]],
        shapes: Mapping[Layer, list[torch.Size]],
        group: Any,
        start: int = 0,
    ) -> None:
        self.k, self.d, self.subnets, self.costs, self.group = rank, n_stages, subnets, costs, group
        self.n_blocks = len(costs)
        self.keys = sorted(shapes)
        self.index = {key: i for i, key in enumerate(self.keys)}
        self.shapes = dict(shapes)
        self.numel = {key: 2 * sum(s.numel() for s in sh) for key, sh in shapes.items()}
        self.holds = [mirror_blocks(h, self.n_blocks, n_stages) for h in range(n_stages)]
        self.version: dict[Layer, int] = {}  # sequence id of the WRITE each mirror holds
        self.arrived: set[tuple[int, int]] = set()  # (subnet, stage) bundles applied here
        self._count: dict[int, int] = {}
        self._local: set[int] = set()
        self.complete = FinishedList(start)  # subnets whose every WRITE has arrived here
        self._parts: dict[int, tuple[range, ...]] = {}
        self.pushed_bytes = 0
        self.seconds = 0.0  # main-loop time spent sending and applying bundles

    # partitions and the blocking rule ---------------------------------------------------------

    def partition(self, seq: int) -> tuple[range, ...]:
        """Returns subnet ``seq``'s balanced partition (cached; identical in every process)."""
        part = self._parts.get(seq)
        if part is None:
            sn = self.subnets[seq]
            part = subnet_partition(sn, lambda layer: self.costs[layer[0]][layer[1]], self.d)
            self._parts[seq] = part
        return part

    def rule(self, seq: int, finished: FinishedList) -> int:
        """Returns the earlier subnet whose WRITE ``seq``'s forward here still waits for, or -1.

        ``finished`` is this stage's (possibly pretend) list of local backwards: a WRITE made
        here has arrived here once its backward finished.
        """

        def arrived(x: int, stage: int) -> bool:
            if stage == self.k:
                return x in finished
            return x in self.complete or (x, stage) in self.arrived

        return blocked_by_mirrored(
            seq, self.k, self.subnets, _Parts(self), arrived, self.complete.low
        )

    # bundles ----------------------------------------------------------------------------------

    def wrote(self, seq: int, keys: Sequence[Layer], ctx: Any, sends: list) -> None:
        """Returns None; records subnet ``seq``'s local WRITE of ``keys`` and sends every other
        stage its bundle (asynchronously; the handles and tensors go to ``sends``)."""
        t0 = time.perf_counter()
        for key in keys:
            self.version[key] = seq
        self._local.add(seq)
        self._maybe_complete(seq)
        for h in range(self.d):
            if h == self.k:
                continue
            mine = [key for key in keys if key[0] in self.holds[h]]
            head = torch.full((2 + self.n_blocks,), -1, dtype=torch.int64)
            head[0], head[1] = seq, len(mine)
            for i, key in enumerate(mine):
                head[2 + i] = self.index[key]
            sends.append((dist.isend(head, h, group=self.group), head))
            if mine:
                state = [t for key in mine for t in ctx.layer_state(key)]
                payload = torch.cat([t.detach().to("cpu").flatten() for t in state])
                self.pushed_bytes += payload.numel() * 4
                sends.append((dist.isend(payload, h, group=self.group), payload))
        self.seconds += time.perf_counter() - t0

    def apply(self, seq: int, src: int, keys: list[Layer], payload: torch.Tensor, ctx: Any) -> None:
        """Returns None; loads the layers of stage ``src``'s bundle of subnet ``seq`` into this
        stage's mirrors, skipping a layer whose mirror already holds a later WRITE."""
        t0 = time.perf_counter()
        offset = 0
        for key in keys:
            shapes = self.shapes[key] * 2  # parameters, then momentum buffers of the same shapes
            tensors = []
            for shape in shapes:
                n = shape.numel()
                tensors.append(payload[offset : offset + n].view(shape))
                offset += n
            if self.version.get(key, -1) < seq:
                ctx.load_layer_state(key, tensors)
                self.version[key] = seq
        self.arrived.add((seq, src))
        self._count[seq] = self._count.get(seq, 0) + 1
        self._maybe_complete(seq)
        self.seconds += time.perf_counter() - t0

    def _maybe_complete(self, seq: int) -> None:
        if seq in self._local and self._count.get(seq, 0) == self.d - 1:
            self.complete.add(seq)
            self._local.discard(seq)
            self._count.pop(seq, None)
            self.arrived = {(x, k) for x, k in self.arrived if x != seq}

    def receivers(self, n: int, inbox: Any) -> list[threading.Thread]:
        """Returns one (unstarted) receiving thread per other stage, each taking ``n`` bundles."""
        return [_BundleReceiver(self, src, n, inbox) for src in range(self.d) if src != self.k]


class _Parts:
    """Returns partitions by sequence id, as :func:`blocked_by_mirrored` reads them."""

    def __init__(self, mirror: Mirror) -> None:
        self.mirror = mirror

    def __getitem__(self, seq: int) -> tuple[range, ...]:
        return self.mirror.partition(seq)


class _BundleReceiver(threading.Thread):
    """Receives ``n`` bundles from stage ``src`` into the inbox as ``("push", seq, data)``."""

    def __init__(self, mirror: Mirror, src: int, n: int, inbox: Any) -> None:
        super().__init__(daemon=True)
        self.mirror, self.src, self.n, self.inbox = mirror, src, n, inbox

    def run(self) -> None:
        m = self.mirror
        try:
            for _ in range(self.n):
                head = torch.empty(2 + m.n_blocks, dtype=torch.int64)
                dist.recv(head, self.src, group=m.group)
                seq, count = int(head[0]), int(head[1])
                keys = [m.keys[int(i)] for i in head[2 : 2 + count]]
                payload = torch.empty(sum(m.numel[key] for key in keys), dtype=torch.float32)
                if keys:
                    dist.recv(payload, self.src, group=m.group)
                self.inbox.put(("push", seq, (self.src, keys, payload), None))
        except BaseException as exc:  # the stage's main loop re-raises it
            self.inbox.put(("error", -1, exc, None))


def layer_shapes(table: Mapping[Key, torch.nn.Module]) -> dict[Key, list[torch.Size]]:
    """Returns each layer's parameter shapes, in ``parameters()`` order."""
    return {key: [p.shape for p in mod.parameters()] for key, mod in table.items()}
