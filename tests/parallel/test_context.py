"""Tests of the context manager on CPU (host as both tiers): budget, hits, write-back."""

from __future__ import annotations

import torch
from torch import nn

from nasforge.parallel.context import TieredLayerCache, sgd_momentum_step


def _layers(n: int) -> dict:
    torch.manual_seed(0)
    return {i: nn.Linear(3, 3) for i in range(n)}


def test_budget_hits_and_evictions() -> None:
    """At most `capacity` layers are resident; re-use hits, a new layer evicts the LRU one."""
    ctx = TieredLayerCache(_layers(4), capacity=2)
    ctx.acquire([0, 1])
    ctx.release([0, 1])
    ctx.acquire([0])  # hit
    ctx.release([0])
    ctx.acquire([2])  # miss, evicts 1 (least recently used)
    ctx.release([2])
    assert set(ctx.dev) == {0, 2}
    s = ctx.stats
    assert (s["hits"], s["misses"], s["evictions"]) == (1, 3, 1)


def test_prefetch_turns_a_miss_into_a_hit() -> None:
    """A predicted layer prefetched before its task is a hit when the task acquires it."""
    ctx = TieredLayerCache(_layers(3), capacity=2)
    ctx.prefetch([1])
    ctx.acquire([1])
    assert ctx.stats["hits"] == 1 and ctx.stats["prefetches"] == 1


def test_eviction_writes_updates_back_bitwise() -> None:
    """An update made on the device copy survives eviction and equals a direct update."""
    ref = _layers(2)
    ctx = TieredLayerCache(_layers(2), capacity=1)
    grads = [torch.full_like(p, 0.5) for p in ref[0].parameters()]
    ctx.update(0, grads, lr=0.1, momentum=0.9)
    ctx.acquire([1])  # evicts layer 0: write-back to the host tier
    ctx.release([1])
    assert 0 not in ctx.dev
    bufs = [torch.zeros_like(p) for p in ref[0].parameters()]
    sgd_momentum_step(list(ref[0].parameters()), grads, bufs, 0.1, 0.9)
    state = ctx.state_dict()
    assert torch.equal(state["0.weight"], ref[0].weight.detach())
    assert torch.equal(ctx.host_bufs[0][0], bufs[0])  # momentum travelled with the layer
