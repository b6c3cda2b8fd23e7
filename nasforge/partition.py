"""The min-max contiguous partition, shared by the two families that split a network across
devices: the pipeline's stages (:mod:`nasforge.parallel.csp`) and consecutive model
parallelism's partitions (:mod:`nasforge.oneshot.cmp_partition`). Pure Python, no torch.
"""

from __future__ import annotations

from collections.abc import Sequence

from nasforge.errors import ScheduleError

__all__ = ["balanced_partition", "check_partition"]


def check_partition(
    n_blocks: int, n_stages: int, blocks: str = "blocks", stages: str = "stages"
) -> None:
    """Returns None when ``n_stages`` stages can split ``n_blocks`` blocks (``blocks`` and
    ``stages`` name them in the message: "choice blocks", "pipeline stages").

    Raises:
        ScheduleError: ``n_stages`` < 1, or more stages than blocks (a stage would be empty).
    """
    if not isinstance(n_stages, int) or isinstance(n_stages, bool) or n_stages < 1:
        raise ScheduleError(f"n_stages must be a positive int, got {n_stages!r}")
    if n_stages > n_blocks:
        raise ScheduleError(
            f"cannot split {n_blocks} {blocks} into {n_stages} {stages}: every stage needs at "
            f"least one block; use at most {n_blocks} {stages} or a deeper network"
        )


def balanced_partition(
    costs: Sequence[float], n_stages: int, blocks: str = "blocks", stages: str = "stages"
) -> tuple[range, ...]:
    """Returns the contiguous split of blocks into stages that minimises the largest stage cost.

    ``costs[b]`` is the measured (forward + backward) time of block b. Dynamic programming over
    prefix sums: ``best[k][j]`` is the lowest largest-stage cost of blocks ``[0, j)`` in ``k``
    stages.

    Invariants: contiguous, covers every block, no stage empty, the largest stage cost is
    optimal; ties go to the split whose last cut is leftmost.

    Raises:
        ScheduleError: see :func:`check_partition`; a negative cost.
    """
    m = len(costs)
    check_partition(m, n_stages, blocks, stages)
    if any(c < 0 for c in costs):
        raise ScheduleError(f"block costs must be >= 0, got {list(costs)!r}")
    prefix = [0.0]
    for c in costs:
        prefix.append(prefix[-1] + float(c))
    inf = float("inf")
    best = [[inf] * (m + 1) for _ in range(n_stages + 1)]
    cut = [[0] * (m + 1) for _ in range(n_stages + 1)]
    best[0][0] = 0.0
    for k in range(1, n_stages + 1):
        for j in range(k, m - (n_stages - k) + 1):
            for i in range(k - 1, j):
                cand = max(best[k - 1][i], prefix[j] - prefix[i])
                if cand < best[k][j]:
                    best[k][j], cut[k][j] = cand, i
    bounds, j = [], m
    for k in range(n_stages, 0, -1):
        i = cut[k][j]
        bounds.append(range(i, j))
        j = i
    return tuple(reversed(bounds))
