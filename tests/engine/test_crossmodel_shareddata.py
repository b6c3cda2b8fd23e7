"""Shared data: one producer, identical batches in identical order, and a slow or dead consumer
neither blocks nor corrupts the others."""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
from typing import Any

import pytest
import torch

from nasforge.engine.crossmodel.shareddata import (
    DataSpec,
    SharedFeed,
    make_batch,
    register_pipeline,
)
from nasforge.errors import ConfigError


def _load() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    return torch.randn(96, 1, 6, 6, generator=g), torch.randint(10, (96,), generator=g)


def _noise(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    return x + torch.randn(x.shape, generator=g)


register_pipeline("toy", "noise", _load, _noise)
SPEC = DataSpec("toy", "noise", 8, seed=5)
N = 30  # batches: more than two epochs of 12


#: how long a paused consumer waits to be released, and the test for a consumer to finish,
#: before either counts as blocked: a guard against a hang, far above what either needs
BLOCKED = 60.0


def _check(
    feed: SharedFeed,
    i: int,
    pause_at: int | None = None,
    release: Any = None,
    die_at: int | None = None,
) -> int:
    """Returns how many batches consumer ``i`` read from shared memory; asserts each is exact.
    At batch ``pause_at`` it waits until ``release`` is set (exit code 4 if never)."""
    consumer = feed.consumer(i)
    for b, (x, y) in enumerate(consumer):
        if b == die_at:
            os._exit(0)
        if b == pause_at and release is not None and not release.wait(BLOCKED):
            os._exit(4)  # never released: the other consumer was blocked behind this one
        ex, ey = make_batch(SPEC, b)
        assert torch.equal(x, ex) and torch.equal(y, ey), f"batch {b} differs"
    return consumer.n_shared


def _child(
    feed: SharedFeed, i: int, pause_at: int | None, release: Any, die_at: int | None
) -> None:
    torch.set_num_threads(1)
    try:
        _check(feed, i, pause_at, release, die_at)
    except AssertionError:
        os._exit(3)
    os._exit(0)


def _run(pause_at: int | None = None, die_at: int | None = None) -> tuple[int, int]:
    """Returns (batches consumer 0 read shared, consumer 1's exit code); consumer 1 runs in a
    forked process, paused at ``pause_at`` until consumer 0 has read every batch."""
    feed = SharedFeed(SPEC, 2, N, slots=4, lag_timeout=0.3)
    ctx = mp.get_context("fork")
    release = ctx.Event()
    child = ctx.Process(target=_child, args=(feed, 1, pause_at, release, die_at))
    child.start()
    try:
        n_shared = _check(feed, 0)
        release.set()  # consumer 0 is done: only now may the paused one go on
        child.join(BLOCKED)
        return n_shared, child.exitcode
    finally:
        if child.is_alive():
            child.kill()
            child.join()
        feed.close()


def test_batches_are_the_spec_batches_in_order() -> None:
    """Both consumers get exactly make_batch(spec, b) for every b, mostly from shared memory."""
    n_shared, code = _run()
    assert code == 0
    assert n_shared > N // 2


def test_a_slow_consumer_does_not_block_the_other() -> None:
    """A consumer paused at batch 2 until the other has read all its batches is detached; the
    other finishes first (else the paused one is never released: exit 4), both exact."""
    n_shared, code = _run(pause_at=2)
    assert code == 0  # released, and its batches exact too (computed locally after detaching)
    assert n_shared == N


def test_a_dead_consumer_does_not_block_or_corrupt_the_other() -> None:
    """A consumer that dies at batch 3 is detached; the other gets every batch exactly."""
    n_shared, code = _run(die_at=3)
    assert code == 0  # os._exit(0) at death
    assert n_shared == N


def _die_before_reading(feed: SharedFeed) -> None:
    feed.pids[1] = os.getpid()  # as the engine registers a trial's process when it starts it
    os._exit(0)


def test_a_consumer_that_dies_before_reading_does_not_block() -> None:
    """A trial that dies before its first batch is detached at once, not after the start
    timeout (here an hour, so only its death can detach it); the other consumer reads every
    batch shared and exact."""
    feed = SharedFeed(SPEC, 2, N, slots=4, lag_timeout=0.3, start_timeout=3600.0)
    child = mp.get_context("fork").Process(target=_die_before_reading, args=(feed,))
    child.start()
    child.join()
    got: list[int] = []
    reader = threading.Thread(target=lambda: got.append(_check(feed, 0)), daemon=True)
    try:
        reader.start()
        reader.join(BLOCKED)
        assert not reader.is_alive(), "the dead consumer blocked the other"
        assert got == [N] and bool(feed.detached[1])
    finally:
        feed.close()  # the producer gone, a blocked reader detaches and ends


def test_batches_are_deterministic_and_spec_checked() -> None:
    """The same spec and index give the same batch; an unknown pipeline is a ConfigError."""
    a, b = make_batch(SPEC, 13), make_batch(SPEC, 13)
    assert torch.equal(a[0], b[0]) and not torch.equal(a[0], make_batch(SPEC, 14)[0])
    with pytest.raises(ConfigError, match="register_pipeline"):
        make_batch(DataSpec("nope", "none", 4), 0)
