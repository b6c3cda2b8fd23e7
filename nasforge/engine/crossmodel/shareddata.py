"""A shared data pipeline (Retiarii §4.2, common sub-expression elimination of the input
prefix): concurrent trials whose evaluators declare the same :class:`DataSpec` read batches
that one producer process loaded and preprocessed once, through shared memory.

Batch ``b`` of a spec is a pure function of the spec and ``b`` (:func:`make_batch`): epoch
``b // batches_per_epoch`` shuffles with the seed and the epoch, and preprocessing draws its
randomness from the seed and ``b``. So a consumer that cannot get a batch from the producer
computes the very same batch itself, and the producer never waits on one consumer for long.

Protocol (``slots`` ring buffers of shared tensors, a shared ``seq`` per slot, a ``cursor`` per
consumer, one condition variable):

    producer   for batch b into slot b % slots: wait until every attached consumer's cursor is
               past b - slots; a consumer still behind after ``lag_timeout`` seconds
               (``start_timeout`` while it has read nothing yet: a trial builds its model
               first), or whose process is dead, is *detached*; then seq = -1, write, seq = b,
               notify
    consumer   wait until seq >= b (or detached, or the producer is gone); copy the slot if
               seq == b; check seq is still b (a seqlock: an overwrite during the copy is
               seen); advance the cursor. Any miss detaches it and it computes its batches
               itself from then on

Invariants: every consumer gets, for each b, exactly ``make_batch(spec, b)`` (bitwise), in
order, whatever the other consumers do; a slow consumer delays the producer by at most
``lag_timeout`` (``start_timeout`` before its first batch) once, and is then skipped; a dead
one is skipped as soon as the producer next waits for it.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

import torch

from nasforge.errors import ConfigError
from nasforge.runtime.deathsig import die_with_parent

__all__ = [
    "DataSpec",
    "register_pipeline",
    "make_batch",
    "SharedFeed",
    "Consumer",
    "local_batches",
    "batches",
    "install",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DataSpec:
    """Returns nothing; what makes two trials' batches the same: plain, hashable data."""

    dataset: str  # a registered pipeline's dataset name, e.g. "mnist"
    preprocessing: str  # its preprocessing name, e.g. "augment"
    batch_size: int
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Returns the spec as a plain dict (for the run record)."""
        return asdict(self)


#: (dataset, preprocessing) -> (load() -> (x, y) tensors, preprocess(x, generator) -> x)
_PIPELINES: dict[tuple[str, str], tuple[Callable[[], Any], Callable[..., torch.Tensor]]] = {}
_LOADED: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}


def register_pipeline(
    dataset: str,
    preprocessing: str,
    load: Callable[[], tuple[torch.Tensor, torch.Tensor]],
    preprocess: Callable[[torch.Tensor, torch.Generator], torch.Tensor],
) -> None:
    """Registers how to load ``dataset`` and apply ``preprocessing`` to one batch (with the
    given generator as its only source of randomness)."""
    _PIPELINES[(dataset, preprocessing)] = (load, preprocess)


def _data(spec: DataSpec) -> tuple[tuple[torch.Tensor, torch.Tensor], Callable[..., Any]]:
    key = (spec.dataset, spec.preprocessing)
    if key not in _PIPELINES:
        raise ConfigError(
            f"no data pipeline {key!r}; registered: {sorted(_PIPELINES)}; add one with "
            "register_pipeline(dataset, preprocessing, load, preprocess)"
        )
    load, preprocess = _PIPELINES[key]
    if spec.dataset not in _LOADED:
        _LOADED[spec.dataset] = load()
    return _LOADED[spec.dataset], preprocess


def make_batch(spec: DataSpec, b: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns batch ``b`` of ``spec``: examples of epoch ``b // batches_per_epoch`` shuffled
    with the seed, preprocessed with randomness drawn from the seed and ``b``.

    Raises:
        ConfigError: no pipeline is registered for the spec's dataset and preprocessing.
    """
    (x, y), preprocess = _data(spec)
    per_epoch = len(x) // spec.batch_size
    epoch, i = divmod(b, per_epoch)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(spec.seed + epoch))
    idx = order[i * spec.batch_size : (i + 1) * spec.batch_size]
    g = torch.Generator().manual_seed(spec.seed * 1_000_003 + b)
    return preprocess(x[idx], g), y[idx]


def local_batches(spec: DataSpec, n: int, start: int = 0) -> Iterator[tuple[Any, Any]]:
    """Yields batches ``start .. n-1`` of ``spec`` computed in this process."""
    for b in range(start, n):
        yield make_batch(spec, b)


class SharedFeed:
    """Returns consumers (:meth:`consumer`) of ``n_batches`` batches of ``spec`` produced once,
    by a forked producer process, for ``n_consumers`` trials.

    Invariants: see the module docstring. :meth:`close` ends the producer; the feed leaves no
    process behind.
    """

    def __init__(
        self,
        spec: DataSpec,
        n_consumers: int,
        n_batches: int,
        slots: int = 8,
        lag_timeout: float = 2.0,
        attached: int | None = None,
        start_timeout: float = 30.0,
    ) -> None:
        if n_consumers < 1 or n_batches < 1 or slots < 1:
            raise ConfigError(
                f"a feed needs n_consumers, n_batches and slots >= 1, got "
                f"{n_consumers}, {n_batches}, {slots}"
            )
        self.spec, self.n_consumers, self.n_batches = spec, n_consumers, n_batches
        self.slots, self.lag_timeout, self.start_timeout = slots, lag_timeout, start_timeout
        x, y = make_batch(spec, 0)  # shapes (and the dataset loaded before the fork)
        self.x = torch.empty((slots, *x.shape), dtype=x.dtype).share_memory_()
        self.y = torch.empty((slots, *y.shape), dtype=y.dtype).share_memory_()
        self.seq = torch.full((slots,), -1, dtype=torch.int64).share_memory_()
        self.cursor = torch.zeros(n_consumers, dtype=torch.int64).share_memory_()
        self.detached = torch.zeros(n_consumers, dtype=torch.bool).share_memory_()
        n_on = n_consumers if attached is None else attached
        self.detached[n_on:] = True  # free places, for claim()
        self._claimed = n_on
        self.started = torch.full((1,), -1, dtype=torch.int64).share_memory_()
        self.pids = torch.zeros(n_consumers, dtype=torch.int64).share_memory_()
        ctx = mp.get_context("fork")
        self.cond = ctx.Condition()
        self._proc = ctx.Process(target=self._produce, daemon=True)
        self._proc.start()
        self.producer_pid = int(self._proc.pid or 0)

    # -- producer --------------------------------------------------------------------------
    def _alive(self, i: int) -> bool:
        pid = int(self.pids[i])
        return True if pid == 0 else _pid_alive(pid)  # 0: its process is not known yet

    def _laggards(self, b: int) -> list[int]:
        """Returns the attached consumers not yet done with the slot of batch ``b``; detaches
        dead consumers on the way (call with the condition held)."""
        out = []
        for i in range(self.n_consumers):
            if self.detached[i]:
                continue
            if not self._alive(i):
                self.detached[i] = True
                log.warning("shared data: consumer %d died; detached", i)
            elif int(self.cursor[i]) <= b - self.slots:
                out.append(i)
        return out

    def _wait_for_slot(self, b: int) -> None:
        """Waits until the slot of batch ``b`` is free, detaching consumers that are too late
        (call with the condition held)."""
        t0 = time.monotonic()
        while laggards := self._laggards(b):
            waited = time.monotonic() - t0
            for i in laggards:
                limit = self.lag_timeout if int(self.cursor[i]) > 0 else self.start_timeout
                if waited >= limit:
                    self.detached[i] = True
                    log.warning("shared data: consumer %d fell behind; detached", i)
            self.cond.wait(0.05)

    def _produce(self) -> None:
        die_with_parent()  # forked from the engine: never outlive it
        torch.set_num_threads(1)
        for b in range(self.n_batches):
            x, y = make_batch(self.spec, b)
            slot = b % self.slots
            with self.cond:
                self._wait_for_slot(b)
                if bool(self.detached.all()):
                    return
                self.seq[slot] = -1
                self.started[0] = b
            self.x[slot].copy_(x)
            self.y[slot].copy_(y)
            with self.cond:
                self.seq[slot] = b
                self.cond.notify_all()

    # -- consumers -------------------------------------------------------------------------
    def claim(self) -> int | None:
        """Returns a free consumer place attached from batch 0 (call in the feed's creator),
        or None when none is left, the producer is done, or batch 0 has left the ring."""
        with self.cond:
            ok = (
                self._claimed < self.n_consumers
                and self._proc.is_alive()
                and int(self.started[0]) < self.slots
                and not bool(self.detached[: self._claimed].all() and self._claimed > 0)
            )
            if not ok:
                return None
            i = self._claimed
            self._claimed += 1
            self.cursor[i] = 0
            self.pids[i] = 0
            self.detached[i] = False
            return i

    def consumer(self, i: int) -> Consumer:
        """Returns the reader of consumer ``i`` (call in the consumer's process)."""
        return Consumer(self, i)

    def close(self) -> None:
        """Stops the producer and waits for it."""
        if self._proc.is_alive():
            self._proc.kill()
        self._proc.join()


class Consumer:
    """Returns batches ``0 .. n_batches-1`` of the feed's spec when iterated."""

    def __init__(self, feed: SharedFeed, i: int) -> None:
        self.feed, self.i = feed, i
        self.n_shared = self.n_local = 0

    def _detach(self) -> None:
        with self.feed.cond:
            self.feed.detached[self.i] = True
            self.feed.cond.notify_all()

    def get(self, b: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns batch ``b`` (from shared memory, or computed here once detached)."""
        f, slot = self.feed, b % self.feed.slots
        if not bool(f.detached[self.i]):
            with f.cond:
                ok = False  # a later batch in the slot: this one was missed
                while not (ok := int(f.seq[slot]) >= b or bool(f.detached[self.i])):
                    if not _pid_alive(f.producer_pid):
                        break
                    f.cond.wait(0.5)
                ok = ok and not bool(f.detached[self.i]) and int(f.seq[slot]) == b
            if ok:
                x, y = f.x[slot].clone(), f.y[slot].clone()
                with f.cond:
                    ok = int(f.seq[slot]) == b and not bool(f.detached[self.i])
                    if ok:
                        f.cursor[self.i] = b + 1
                        f.cond.notify_all()
                if ok:
                    self.n_shared += 1
                    return x, y
            self._detach()
            log.info("shared data: consumer %d computes its batches from %d on", self.i, b)
        self.n_local += 1
        return make_batch(f.spec, b)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        self.feed.pids[self.i] = os.getpid()
        for b in range(self.feed.n_batches):
            yield self.get(b)
        with self.feed.cond:  # done: never wait for this consumer again
            self.feed.detached[self.i] = True
            self.feed.cond.notify_all()


def _pid_alive(pid: int) -> bool:
    """Returns whether process ``pid`` runs (an exited one not yet reaped counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return True


_INSTALLED: list[Consumer] = []  # the consumer the engine gave this trial process, if any


def install(consumer: Consumer | None) -> None:
    """Makes :func:`batches` of this process read ``consumer``'s feed (None: read nothing
    shared); the engine calls it in a trial's process before the evaluator runs."""
    _INSTALLED[:] = [] if consumer is None else [consumer]


def batches(spec: DataSpec, n: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Yields batches ``0 .. n-1`` of ``spec``: from the shared feed the engine installed for
    this trial when it has the same spec and enough batches, else computed here. An
    evaluator that declares ``data_spec`` reads its training batches through this.

    Invariants: the batches are ``make_batch(spec, b)`` either way; stopping early detaches
    the consumer, so the producer never waits for it.
    """
    feed = _INSTALLED[0].feed if _INSTALLED else None
    if feed is None or feed.spec != spec or feed.n_batches < n:
        yield from local_batches(spec, n)
        return
    consumer = _INSTALLED[0]
    consumer.feed.pids[consumer.i] = os.getpid()
    try:
        for b in range(n):
            yield consumer.get(b)
    finally:
        consumer._detach()
