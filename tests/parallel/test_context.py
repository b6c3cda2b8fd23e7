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


def test_a_loaded_layer_shares_its_tensors_and_dies_with_its_last_reference() -> None:
    """_with_tensors builds the device copy of a layer around the given tensors (not copies),
    in parameters() order, a shared submodule once; the copy holds no reference cycle, so its
    tensors are freed when it is dropped, without the garbage collector (a cycle kept every
    loaded layer's GPU memory alive until a collection: peak memory rose by a quarter)."""
    import gc
    import weakref

    from torch import nn

    from nasforge.parallel.context import _with_tensors

    shared = nn.Linear(3, 3)
    skeleton = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), shared, shared).to("meta")
    tensors = [torch.randn(p.shape) for p in skeleton.parameters()]
    assert len(tensors) == 4  # the shared Linear counts once
    layer = _with_tensors(skeleton, tensors)
    assert [p.data_ptr() for p in layer.parameters()] == [t.data_ptr() for t in tensors]
    assert layer[2] is layer[3] and layer[0] is not skeleton[0]
    assert skeleton[0].weight.is_meta  # the skeleton is untouched
    x = torch.randn(2, 4)
    assert layer(x).shape == (2, 3)
    alive = weakref.ref(tensors[0])
    gc.disable()
    try:
        del layer, tensors
        assert alive() is None
    finally:
        gc.enable()
