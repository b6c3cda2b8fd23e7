"""Subnet producers for pipeline training: seeded samplers behind a bounded queue (NASPipe §3.2,
"retrieved from the algorithm frontend in a producer-consumer manner").

Pure: no torch. A producer thread puts ``(seq, subnet)`` pairs into a bounded queue; the
consumer (a pipeline stage) takes them in sequence order. The same seed gives the same
sequence in every process, so stages need not ship subnets to each other.

Invariants:
    * :class:`SubnetFeed` yields sequence ids 0, 1, 2, ... with no gap or repeat.
    * ``UniformSampler(n, seed)`` gives the same subnets for the same ``n`` and ``seed``.
"""

from __future__ import annotations

import queue
import random
import threading
from collections.abc import Callable, Iterator, Sequence

from nasforge.errors import ConfigError
from nasforge.parallel.csp import Subnet, check_subnet
from nasforge.parallel.fair_sampler import FairSampler

__all__ = ["UniformSampler", "EvolutionSampler", "SubnetFeed", "get_sampler"]


class UniformSampler:
    """Returns an endless iterator of subnets, one uniform candidate per block (SPOS)."""

    def __init__(self, n_candidates: Sequence[int], seed: int = 0) -> None:
        self.n_candidates = list(n_candidates)
        self.rng = random.Random(seed)

    def __iter__(self) -> Iterator[Subnet]:
        while True:
            yield tuple(self.rng.randrange(n) for n in self.n_candidates)


class EvolutionSampler:
    """Returns an endless iterator of subnets from seeded regularised-evolution-style mutation.

    Without fitness feedback (a pipeline cannot wait for it without breaking the stream), each
    child mutates one block of a parent drawn from a sliding population of the last
    ``population`` subnets, as the exploration of §5's evolution strategy does between
    selections; it is deterministic for a seed.
    """

    def __init__(self, n_candidates: Sequence[int], seed: int = 0, population: int = 8) -> None:
        self.n_candidates = list(n_candidates)
        self.rng = random.Random(seed)
        self.population = population

    def __iter__(self) -> Iterator[Subnet]:
        pop: list[Subnet] = []
        while True:
            if len(pop) < self.population:
                child = tuple(self.rng.randrange(n) for n in self.n_candidates)
            else:
                parent = list(pop[self.rng.randrange(len(pop))])
                b = self.rng.randrange(len(parent))
                parent[b] = self.rng.randrange(self.n_candidates[b])
                child = tuple(parent)
                pop.pop(0)
            pop.append(child)
            yield child


_SAMPLERS: dict[str, Callable[..., object]] = {
    "uniform": UniformSampler,
    "evolution": EvolutionSampler,
    "fair": FairSampler,
}


def get_sampler(name: str, n_candidates: Sequence[int], seed: int) -> Iterator[Subnet]:
    """Returns a fresh subnet iterator of the named sampler.

    Raises:
        ConfigError: unknown sampler name.
    """
    if name not in _SAMPLERS:
        raise ConfigError(f"sampler must be one of {sorted(_SAMPLERS)}, got {name!r}")
    return iter(_SAMPLERS[name](n_candidates, seed))  # type: ignore[call-overload]


class SubnetFeed:
    """Returns ``(seq, subnet)`` pairs from a producer thread through a bounded queue.

    The producer validates each subnet (:func:`check_subnet`) and stops after ``total``.
    :meth:`get` returns the subnet of a sequence id, retrieving in order as needed.

    Raises (from :meth:`get`):
        ArchitectureError: the source produced a subnet naming a missing candidate.
    """

    def __init__(
        self,
        source: Iterator[Sequence[int]],
        n_candidates: Sequence[int],
        total: int,
        maxsize: int = 16,
    ) -> None:
        if total < 0 or maxsize < 1:
            raise ConfigError(f"need total >= 0 and maxsize >= 1, got {total}, {maxsize}")
        self._q: queue.Queue = queue.Queue(maxsize)
        self._got: dict[int, Subnet] = {}
        self._next = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._produce, args=(source, list(n_candidates), total), daemon=True
        )
        self._thread.start()

    def _produce(self, source: Iterator[Sequence[int]], n_cand: list[int], total: int) -> None:
        try:
            for seq in range(total):
                item: object = (seq, check_subnet(list(next(source)), n_cand, seq))
                while not self._stop.is_set():
                    try:
                        self._q.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
        except Exception as exc:  # handed to the consumer, which raises it
            self._q.put(("error", exc))

    def get(self, seq: int, timeout: float = 60.0) -> Subnet:
        """Returns the subnet with sequence id ``seq``."""
        while seq not in self._got:
            item = self._q.get(timeout=timeout)
            if item[0] == "error":
                raise item[1]
            got_seq, subnet = item
            assert got_seq == self._next, f"feed out of order: {got_seq} != {self._next}"
            self._got[got_seq] = subnet
            self._next += 1
        return self._got[seq]

    def close(self) -> None:
        """Returns None; stops the producer thread."""
        self._stop.set()
