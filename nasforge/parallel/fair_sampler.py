"""Strict-fairness subnet sampling (FairNAS): per block, candidates without replacement.

Pure: no torch. Uniform SPOS sampling draws every block's candidate independently, so two
subnets a few steps apart often share a layer (for NLP.c1, 48 blocks x 72 candidates: 49 % of
pairs), and CSP must then wait for the earlier subnet's backward (Definition 2). Strict
fairness (Chu et al., FairNAS, ICCV'21) draws each block's candidates as a shuffled bag: every
candidate once per round, in a fresh random order each round::

    block 0, 3 candidates:  2 0 1 | 1 2 0 | 0 1 2 | ...     (rounds of 3 subnets)
    block 1, 4 candidates:  3 1 0 2 | 2 0 3 1 | ...          (rounds of 4)

so subnets within one round share no layer of that block, and every candidate is trained
equally often. The rule is the space's own (:func:`nasforge.space.search_space.fair_rounds`,
which one-shot FairNAS steps by too). Each subnet is still one training step, in sequence
order, so CSP keeps the result bitwise equal to sequential training of this same sequence;
only the *sequence* differs from uniform sampling (FairNAS itself also sums a round's
gradients into one update, as :mod:`nasforge.oneshot.fairnas` does; not done here).

Invariants:
    * Same ``n_candidates`` and ``seed`` give the same sequence.
    * For block b with n_b candidates, subnets ``k*n_b .. (k+1)*n_b - 1`` use every candidate
      of b exactly once.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

from nasforge.errors import ConfigError
from nasforge.parallel.csp import Subnet
from nasforge.space.search_space import fair_rounds

__all__ = ["FairSampler", "fair_subnets"]


class FairSampler:
    """Returns an endless iterator of strictly fair subnets (same interface as
    :class:`nasforge.parallel.sampler.UniformSampler`).

    Raises:
        ConfigError: a block with fewer than one candidate.
    """

    def __init__(self, n_candidates: Sequence[int], seed: int = 0) -> None:
        if not n_candidates or min(n_candidates) < 1:
            raise ConfigError(
                f"every block needs at least one candidate, got n_candidates={list(n_candidates)}"
            )
        self.n_candidates = list(n_candidates)
        self.rng = random.Random(seed)

    def __iter__(self) -> Iterator[Subnet]:
        return fair_rounds(self.n_candidates, self.rng)  # the space's one rule of fairness


def fair_subnets(n_candidates: Sequence[int], count: int, seed: int = 0) -> list[Subnet]:
    """Returns the first ``count`` subnets of ``FairSampler(n_candidates, seed)``."""
    it = iter(FairSampler(n_candidates, seed))
    return [next(it) for _ in range(count)]
