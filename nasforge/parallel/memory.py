"""Device memory per pipeline stage, and the largest batch each policy fits in a budget.

Pure: no torch. NASPipe's speed-up over GPipe comes mostly from memory (§5.1, Table 2): the
supernet lives in host memory and each device caches about three subnets' layers, so the same
device holds a 1.3-6x larger batch than GPipe, which keeps its whole partition of the supernet
resident. This module turns that into arithmetic the simulator and benchmarks share.

One stage's device memory, in bytes, for a batch of ``B`` samples::

    used(B) = fixed + B * per_sample

    fixed       parameters resident on the device, each with its gradient and optimizer state
                (``1 + state_factor`` bytes per parameter byte):
                  bsp (GPipe)      every candidate of every block the stage owns
                  asp (PipeDream)  the same, plus ``in_flight - 1`` stashed weight versions of
                                   one subnet's stage slice (weights only)
                  csp (NASPipe)    the layer cache: ``capacity`` layers (about 3 subnets' stage
                                   slices), counted as the largest layers the stage owns
    per_sample  activations of the subnets in flight on the stage:
                  with recomputation   in_flight x stage-input bytes
                                       + one subnet's full stage activations (the recompute)
                  without              in_flight x full stage activations
    in_flight   bulk size for bsp (all forwards of a bulk precede its backwards); the window
                for csp and asp (a stage never holds more subnets than are admitted)

The paper enables recomputation for every system but PipeDream (§4.2); so does
:data:`RECOMPUTE`. Layer sizes are worst cases over candidates (``max`` per block), so a batch
from :func:`policy_batch` fits whichever subnets arrive.

Invariants:
    * ``used(max_batch) <= budget`` and ``used(max_batch + 1) > budget`` when ``max_batch > 0``.
    * For the same stage, csp's resident parameters never exceed bsp's (the cache holds a subset
      of the stage's layers).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from nasforge.errors import ConfigError

__all__ = [
    "RECOMPUTE",
    "StageMemory",
    "cache_capacity",
    "in_flight",
    "stage_memory",
    "max_batch",
    "policy_batch",
]

#: Activation recomputation per policy, as in the paper's evaluation (all but PipeDream).
RECOMPUTE: Mapping[str, bool] = {"csp": True, "bsp": True, "asp": False}

#: ``table[b][c]``: one number per layer (block b, candidate c).
Table = Sequence[Sequence[float]]


@dataclass(frozen=True)
class StageMemory:
    """Returns nothing; one stage's device memory as ``fixed + batch * per_sample`` bytes."""

    fixed: float  # parameters + gradients + optimizer state (+ stashed weights) on the device
    per_sample: float  # activation bytes per sample in the batch
    params: float  # the parameter bytes alone, without gradient and optimizer state

    def used(self, batch: int) -> float:
        """Returns the bytes the stage uses at ``batch`` samples per subnet."""
        return self.fixed + batch * self.per_sample


def cache_capacity(n_blocks: int, cache_subnets: float) -> int:
    """Returns the layer-cache size in layers: ``cache_subnets`` stage slices, at least one.

    The same rule as the simulator's :class:`~nasforge.parallel.cache.LayerCache` budget.
    """
    return max(n_blocks, int(round(cache_subnets * n_blocks)), 1)


def in_flight(policy: str, window: int, bulk: int) -> int:
    """Returns how many subnets' activations one stage may hold at once under ``policy``."""
    return bulk if policy == "bsp" else window


def stage_memory(
    policy: str,
    blocks: Sequence[int],
    param_bytes: Table,
    act_bytes: Table,
    io_bytes: Table,
    *,
    window: int,
    bulk: int,
    state_factor: float = 2.0,
    cache_subnets: float = 3.0,
    recompute: bool | None = None,
) -> StageMemory:
    """Returns the memory of the stage that owns ``blocks`` under ``policy``.

    ``param_bytes[b][c]`` is layer (b, c)'s parameter bytes; ``act_bytes[b][c]`` the bytes it
    saves for backward per sample (without recomputation); ``io_bytes[b][c]`` its output bytes
    per sample (the next layer's input). ``state_factor`` is gradient plus optimizer-state bytes
    per parameter byte (2 for SGD with momentum, 3 for Adam). ``recompute`` defaults to
    :data:`RECOMPUTE`.

    Raises:
        ConfigError: unknown policy, no blocks, a window or bulk < 1, a negative size.
    """
    if policy not in RECOMPUTE:
        raise ConfigError(f"policy must be one of {tuple(RECOMPUTE)}, got {policy!r}")
    if not blocks:
        raise ConfigError("a stage needs at least one block; use at most n_blocks stages")
    if window < 1 or bulk < 1:
        raise ConfigError(f"window and bulk must be >= 1, got window={window!r}, bulk={bulk!r}")
    if state_factor < 0 or cache_subnets <= 0:
        raise ConfigError(
            f"state_factor must be >= 0 and cache_subnets > 0, got {state_factor!r}, "
            f"{cache_subnets!r}"
        )
    for name, table in (("param_bytes", param_bytes), ("act_bytes", act_bytes)):
        if any(x < 0 for b in blocks for x in table[b]):
            raise ConfigError(f"{name} must be >= 0 for every layer of blocks {list(blocks)}")
    recompute = RECOMPUTE[policy] if recompute is None else recompute
    flight = in_flight(policy, window, bulk)
    per_layer_state = 1.0 + state_factor
    slice_params = sum(max(param_bytes[b]) for b in blocks)  # the largest subnet slice
    if policy == "csp":
        cap = cache_capacity(len(blocks), cache_subnets)
        sizes = sorted((x for b in blocks for x in param_bytes[b]), reverse=True)
        params = float(sum(sizes[:cap]))
        fixed = params * per_layer_state
    else:
        params = float(sum(sum(param_bytes[b]) for b in blocks))
        fixed = params * per_layer_state
        if policy == "asp":  # PipeDream's weight stashing: one version per extra subnet
            fixed += (flight - 1) * slice_params
    full_acts = sum(max(act_bytes[b]) for b in blocks)
    stage_input = max(io_bytes[blocks[0] - 1]) if blocks[0] > 0 else max(io_bytes[blocks[0]])
    if recompute:
        per_sample = flight * stage_input + full_acts
    else:
        per_sample = flight * full_acts
    return StageMemory(fixed=fixed, per_sample=float(per_sample), params=params)


def max_batch(budget: float, mem: StageMemory, multiple_of: int = 1) -> int:
    """Returns the largest batch (a multiple of ``multiple_of``) with ``mem.used(batch) <=
    budget``, or 0 when even the parameters do not fit (the policy cannot run).

    Raises:
        ConfigError: a budget <= 0 or ``multiple_of`` < 1.
    """
    if budget <= 0 or multiple_of < 1:
        raise ConfigError(
            f"budget must be > 0 bytes and multiple_of >= 1, got {budget!r}, {multiple_of!r}"
        )
    room = budget - mem.fixed
    if room < 0:
        return 0
    if mem.per_sample <= 0:
        raise ConfigError("per-sample activation bytes must be > 0 to bound the batch")
    batch = int(math.floor(room / mem.per_sample))
    return batch - batch % multiple_of


def policy_batch(
    policy: str,
    partition: Sequence[range],
    param_bytes: Table,
    act_bytes: Table,
    io_bytes: Table,
    budget: float,
    *,
    window: int | None = None,
    bulk: int | None = None,
    multiple_of: int = 1,
    state_factor: float = 2.0,
    cache_subnets: float = 3.0,
    recompute: bool | None = None,
) -> tuple[int, list[StageMemory]]:
    """Returns ``(batch, per-stage memory)``: the largest batch every stage of ``partition``
    fits in ``budget`` bytes under ``policy`` (0: the policy does not fit at all).

    ``window`` and ``bulk`` default to the number of stages, as in the simulator;
    ``state_factor``, ``cache_subnets`` and ``recompute`` go to :func:`stage_memory`.

    Raises:
        ConfigError: see :func:`stage_memory` and :func:`max_batch`.
    """
    d = len(partition)
    mems = [
        stage_memory(
            policy,
            list(blocks),
            param_bytes,
            act_bytes,
            io_bytes,
            window=window or d,
            bulk=bulk or d,
            state_factor=state_factor,
            cache_subnets=cache_subnets,
            recompute=recompute,
        )  # fmt: skip
        for blocks in partition
    ]
    return min(max_batch(budget, m, multiple_of) for m in mems), mems
