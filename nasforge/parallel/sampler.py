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
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from nasforge.errors import ConfigError
from nasforge.parallel.csp import Subnet, check_subnet
from nasforge.parallel.fair_sampler import FairSampler

__all__ = ["UniformSampler", "StrategyFeed", "evolution_feed", "SubnetFeed", "get_sampler"]


class UniformSampler:
    """Returns an endless iterator of subnets, one uniform candidate per block (SPOS)."""

    def __init__(self, n_candidates: Sequence[int], seed: int = 0) -> None:
        self.n_candidates = list(n_candidates)
        self.rng = random.Random(seed)

    def __iter__(self) -> Iterator[Subnet]:
        while True:
            yield tuple(self.rng.randrange(n) for n in self.n_candidates)


class StrategyFeed:
    """Returns an endless iterator of subnets asked from an ask/tell strategy, with fitness
    feedback at a fixed lag: the loss of subnet ``s`` is told (as ``-loss``) before subnet
    ``s + lag`` is asked, in sequence order.

    A pipeline cannot wait for a subnet's loss before starting the next one, but it never has
    more than ``lag`` subnets in flight (the window, or the bulk), so when any stage needs
    subnet ``q`` the losses of every subnet up to ``q - lag`` have reached it. Every process
    therefore replays the same asks and tells and draws the same sequence; the sequential
    reference uses the same lag and draws it too.

    ``report(seq, loss)`` hands in a loss (from any thread); the iterator waits for the losses
    it needs.

    Invariants: the same strategy, seed, lag and losses give the same subnets; a tell always
    follows its ask; a non-finite loss is told as a failure (None).
    """

    def __init__(
        self, strategy: Any, n_candidates: Sequence[int], lag: int, timeout: float = 600.0
    ) -> None:
        from nasforge.space.search_space import Decision, SearchSpace

        if not isinstance(lag, int) or lag < 1:
            raise ConfigError(f"the feedback lag must be an int >= 1, got {lag!r}")
        self.labels = [f"block{b}" for b in range(len(n_candidates))]
        space = SearchSpace(
            [Decision(lb, "layer", tuple(range(n))) for lb, n in zip(self.labels, n_candidates)]
        )
        strategy.setup(space)
        self.strategy, self.lag, self.timeout = strategy, lag, timeout
        self._losses: dict[int, float] = {}
        self._ready = threading.Condition()

    def report(self, seq: int, loss: float) -> None:
        """Records the training loss of subnet ``seq`` (thread-safe)."""
        with self._ready:
            self._losses[seq] = float(loss)
            self._ready.notify_all()

    def _loss(self, seq: int) -> float:
        with self._ready:
            if not self._ready.wait_for(lambda: seq in self._losses, self.timeout):
                raise ConfigError(
                    f"the loss of subnet {seq} did not arrive in {self.timeout} s; the pipeline "
                    f"keeps more than lag={self.lag} subnets in flight"
                )
            return self._losses[seq]

    def __iter__(self) -> Iterator[Subnet]:
        asked: dict[int, Any] = {}
        seq = told = 0
        while True:
            while told <= seq - self.lag:
                loss = self._loss(told)
                fitness = -loss if loss == loss and abs(loss) != float("inf") else None
                self.strategy.tell(asked.pop(told), fitness)
                told += 1
            arch = self.strategy.ask()
            asked[seq] = arch
            seq += 1
            yield tuple(arch[lb] for lb in self.labels)


def evolution_feed(n_candidates: Sequence[int], seed: int = 0, lag: int = 8) -> StrategyFeed:
    """Returns the ``evolution`` sampler: the engine's regularized evolution (population 8,
    tournament 3) fed each subnet's loss ``lag`` subnets later."""
    from nasforge.strategy import RegularizedEvolution

    return StrategyFeed(RegularizedEvolution(8, 3, seed), n_candidates, lag)


#: name -> factory (n_candidates, seed, feedback lag) -> an iterable of subnets
_SAMPLERS: dict[str, Callable[[Sequence[int], int, int], Any]] = {
    "uniform": lambda n, seed, lag: UniformSampler(n, seed),
    "evolution": lambda n, seed, lag: evolution_feed(n, seed, lag),
    "fair": lambda n, seed, lag: FairSampler(n, seed),
}


def get_sampler(name: str, n_candidates: Sequence[int], seed: int, lag: int = 8) -> Any:
    """Returns a fresh sampler (an iterable of subnets; a :class:`StrategyFeed` also takes
    ``report(seq, loss)``) of the named kind; ``lag`` is the feedback lag of the samplers
    that learn from losses.

    Raises:
        ConfigError: unknown sampler name.
    """
    if name not in _SAMPLERS:
        raise ConfigError(f"sampler must be one of {sorted(_SAMPLERS)}, got {name!r}")
    return _SAMPLERS[name](n_candidates, seed, lag)


class SubnetFeed:
    """Returns ``(seq, subnet)`` pairs from a producer thread through a bounded queue.

    The producer validates each subnet (:func:`check_subnet`) and stops after ``total``.
    :meth:`get` returns the subnet of a sequence id, retrieving in order as needed.

    ``start`` resumes a run: the source's first ``start`` subnets (trained before) are drawn
    and dropped, so the feed yields ``start, start + 1, ...`` exactly as a feed from 0 would
    (a source that learns from losses must have been told those steps' losses first).

    Raises (from :meth:`get`):
        ArchitectureError: the source produced a subnet naming a missing candidate.
    """

    def __init__(
        self,
        source: Iterable[Sequence[int]],
        n_candidates: Sequence[int],
        total: int,
        maxsize: int = 16,
        start: int = 0,
    ) -> None:
        if total < 0 or maxsize < 1 or not 0 <= start <= total:
            raise ConfigError(
                f"need total >= 0, maxsize >= 1 and 0 <= start <= total, got total={total}, "
                f"maxsize={maxsize}, start={start}"
            )
        #: the source's feedback lag (it draws subnet q after the loss of q - lag), or None
        self.lag: int | None = getattr(source, "lag", None)
        self._q: queue.Queue = queue.Queue(maxsize)
        self._got: dict[int, Subnet] = {}
        self._start = self._next = start
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._produce, args=(iter(source), list(n_candidates), total), daemon=True
        )
        self._thread.start()

    def _produce(self, source: Iterator[Sequence[int]], n_cand: list[int], total: int) -> None:
        try:
            for _ in range(self._start):  # trained before a resume: drawn, not yielded
                next(source)
            for seq in range(self._start, total):
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
        """Returns the subnet with sequence id ``seq`` (``seq >= start``)."""
        assert seq >= self._start, f"subnet {seq} was trained before this feed's start"
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
