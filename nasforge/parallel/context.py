"""Context management (NASPipe §3.3, §4.2): the whole supernet in host memory, a budgeted
device cache of layers, prefetch of predicted layers, write-back on eviction, hit statistics.

Which layers are resident, and which predicted layers to prefetch, is decided by the pure
:mod:`nasforge.parallel.cache` (:class:`~nasforge.parallel.cache.LayerCache`,
:func:`~nasforge.parallel.cache.prefetch_plan`); this module moves the tensors. Each layer
carries its optimizer state (momentum buffers), which travels with it, so a layer's update is
the same wherever it runs.

    host tier (pinned when CUDA is present)        device tier (budget: capacity layers)
    +---------------------------+   prefetch      +------------------------+
    | every layer: params, bufs | --------------> | running + predicted    |
    |                           | <-------------- | layers (LRU, pinned)   |
    +---------------------------+   evict (write) +------------------------+

On CUDA the copies run on two side streams, one per direction (a GPU's copy engines move data
both ways at once), so they overlap with compute on the current (compute) stream and with
each other; events order them where they touch the same layer::

    compute ..F(s)..B(s)..U(s)..|wait load(l)|..F(s+1)..B(s+1)..
    load      ......load l (predicted for s+1) -> event load(l)
    save      wait compute | write back evicted m -> event save(m)

* A load copies the pinned host tensors with ``non_blocking=True`` and records an event; the
  compute stream waits for that event only when the layer is acquired (a miss: at once). A
  layer written back earlier is loaded only after its save event. The new device tensors are
  ``record_stream``-ed on the compute stream, so the allocator does not reuse their memory
  while compute may still read them.
* A write-back makes the save stream wait for the compute stream (the layer's last update is
  queued there) and for the layer's own load, copies into the layer's pinned host tensors in
  place and ``record_stream``-s the device tensors on the save stream. Host tensors are read on
  the CPU only after :meth:`TieredLayerCache._sync` (state_dict, layer_state, flush).

On a CPU-only machine both tiers are host memory: a "device copy" is a clone made at once, and
the bookkeeping (plan, budget, hits, prefetches, evictions, write-back) is exactly the one a
GPU run uses.

Invariants:
    * A layer's authoritative values are its device copy while resident, else its host copy.
    * Eviction writes the device copy back first, so no update is lost (bitwise: copies only).
    * The compute stream never reads a device copy before the event of its load.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping
from typing import Generic

import torch
from torch import nn

from nasforge.parallel.cache import Key, LayerCache, prefetch_plan

__all__ = ["TieredLayerCache", "sgd_momentum_step"]


def sgd_momentum_step(
    params: list[nn.Parameter],
    grads: list[torch.Tensor],
    bufs: list[torch.Tensor],
    lr: float,
    momentum: float,
) -> None:
    """Returns None; applies SGD with momentum, per layer.

    The parameter is replaced out of place (``p.data = ...``): a forward that saved the old
    tensor for its backward (only possible under ASP/BSP) keeps it, as PipeDream's weight
    stashing does, instead of tripping autograd's in-place check. Under CSP no such forward
    exists, and sequential training runs the same arithmetic, so results match bitwise.
    """
    with torch.no_grad():
        for p, g, buf in zip(params, grads, bufs):
            buf.mul_(momentum).add_(g)
            p.data = p.data - lr * buf


def _with_tensors(skeleton: nn.Module, tensors: list[torch.Tensor]) -> nn.Module:
    """Returns a copy of ``skeleton`` (a module on the meta device: copying it copies no data)
    whose parameters are ``tensors``, in ``parameters()`` order, shared, not copied.

    Each submodule is copied shallowly with fresh parameter and child tables: a load makes one
    of these per layer, and ``copy.deepcopy`` of even a ``Linear`` cost more CPU time than the
    copy of its 16 MB on an H100. A submodule used twice is copied once, as deepcopy would."""
    it = iter(tensors)
    mod = _shallow_copy(skeleton, it, {})
    assert next(it, None) is None, "more tensors than parameters"
    return mod


def _shallow_copy(
    m: nn.Module, tensors: Iterator[torch.Tensor], memo: dict[int, nn.Module]
) -> nn.Module:
    """Returns ``m`` copied with the next of ``tensors`` as its parameters (pre-order, as
    ``parameters()``); a plain function, not a closure, so no reference cycle keeps a copy's
    device tensors alive until the garbage collector runs."""
    if id(m) in memo:
        return memo[id(m)]
    new = copy.copy(m)
    memo[id(m)] = new
    new._parameters = {
        name: None if p is None else nn.Parameter(next(tensors), p.requires_grad)
        for name, p in m._parameters.items()
    }
    new._buffers = dict(m._buffers)
    new._modules = {
        name: None if c is None else _shallow_copy(c, tensors, memo)
        for name, c in m._modules.items()
    }
    return new


class TieredLayerCache(Generic[Key]):
    """Returns a two-tier store of layers keyed by any hashable (the pipeline: (block, cand)).

    ``capacity`` bounds device-resident layers; ``device`` is the fast tier (CPU means both
    tiers are host memory). On CUDA every copy runs on a side copy stream (module docstring).

    Raises:
        ConfigError (from LayerCache): a capacity below 1.
    """

    def __init__(
        self,
        layers: Mapping[Key, nn.Module],
        capacity: int,
        device: torch.device | str = "cpu",
    ) -> None:
        self.device = torch.device(device)
        self.policy: LayerCache[Key] = LayerCache(capacity)
        cuda = self.device.type == "cuda"
        self.host: dict[Key, nn.Module] = {}
        self.host_bufs: dict[Key, list[torch.Tensor]] = {}
        self._skeleton: dict[Key, nn.Module] = {}
        for key, mod in layers.items():
            mod = mod.to("cpu")
            self._skeleton[key] = copy.deepcopy(mod).to("meta")
            if cuda:
                for p in mod.parameters():
                    p.data = p.data.pin_memory()
            self.host[key] = mod
            bufs = [torch.zeros_like(p) for p in mod.parameters()]
            self.host_bufs[key] = [b.pin_memory() for b in bufs] if cuda else bufs
        self.dev: dict[Key, nn.Module] = {}
        self.dev_bufs: dict[Key, list[torch.Tensor]] = {}
        self._stream = torch.cuda.Stream(self.device) if cuda else None  # loads
        self._save = torch.cuda.Stream(self.device) if cuda else None  # write-backs
        self._ready: dict[Key, torch.cuda.Event] = {}  # key -> event of its load
        self._saved: dict[Key, torch.cuda.Event] = {}  # key -> event of its write-back

    # -- tier moves ---------------------------------------------------------------------------

    def _load(self, key: Key) -> None:
        host = [p.data for p in self.host[key].parameters()] + self.host_bufs[key]
        if self._stream is None:
            dev = [t.clone() for t in host]
        else:
            compute = torch.cuda.current_stream(self.device)
            saved = self._saved.pop(key, None)
            # Allocated from the compute stream's pool, where evicted layers' memory returns
            # (an update replaces parameters there): allocating on the copy stream left that
            # pool without freed blocks, so every load called cudaMalloc (0.6 ms of CPU a layer
            # on an H100). The copy stream first waits for the compute queued so far, which
            # may still read the reused memory.
            dev = [torch.empty(t.shape, dtype=t.dtype, device=self.device) for t in host]
            self._stream.wait_stream(compute)
            with torch.cuda.stream(self._stream):
                if saved is not None:  # its write-back into the host tensors comes first
                    self._stream.wait_event(saved)
                # From the pinned host tensors themselves (a clone would not be pinned), so
                # non_blocking really overlaps with compute.
                for d, t in zip(dev, host):
                    d.copy_(t, non_blocking=True)
                event = torch.cuda.Event()
                event.record(self._stream)
            for t in dev:  # written on the copy stream: not reused before the copy lands
                t.record_stream(self._stream)
            self._ready[key] = event
        n = len(dev) // 2  # parameters, then one momentum buffer per parameter
        self.dev[key] = _with_tensors(self._skeleton[key], dev[:n])
        self.dev_bufs[key] = dev[n:]

    def _evict(self, keys: Iterable[Key]) -> None:
        keys = list(keys)
        if keys and self._save is not None:  # the evicted layers' last updates come first
            self._save.wait_stream(torch.cuda.current_stream(self.device))
        for key in keys:
            mod, bufs = self.dev.pop(key), self.dev_bufs.pop(key)
            loaded = self._ready.pop(key, None)
            dev = [p.data for p in mod.parameters()] + bufs
            host = [p.data for p in self.host[key].parameters()] + self.host_bufs[key]
            with torch.no_grad():
                if self._save is None:
                    for h, d in zip(host, dev):
                        h.copy_(d)
                    continue
                with torch.cuda.stream(self._save):
                    if loaded is not None:  # prefetched, never used: its load comes first
                        self._save.wait_event(loaded)
                    for h, d in zip(host, dev):
                        h.copy_(d, non_blocking=True)  # into pinned memory: asynchronous
                        d.record_stream(self._save)
                    event = torch.cuda.Event()
                    event.record(self._save)
                self._saved[key] = event

    def _sync(self) -> None:
        """Returns None once every copy issued so far has landed (before host reads)."""
        if self._stream is not None and self._save is not None:
            self._stream.synchronize()
            self._save.synchronize()
            self._saved.clear()

    # -- public API ---------------------------------------------------------------------------

    def prefetch(self, keys: Iterable[Key]) -> list[Key]:
        """Returns the layers newly loaded for a prediction: ``keys`` (nearest task first) that
        fit next to the pinned layers; their copies start now (asynchronous on CUDA)."""
        loaded, evicted = self.policy.prefetch(keys)
        self._evict(evicted)
        for key in loaded:
            self._load(key)
        return loaded

    def prefetch_tasks(self, tasks: Iterable[Iterable[Key]]) -> list[Key]:
        """Returns the layers newly loaded for predicted tasks (each a list of layer keys,
        nearest first), as :func:`~nasforge.parallel.cache.prefetch_plan` cuts them."""
        plan = prefetch_plan(tasks, self.policy.capacity, self.policy.pinned)
        return self.prefetch(plan)

    def acquire(self, keys: Iterable[Key]) -> list[nn.Module]:
        """Returns the device modules of ``keys`` (loading misses now) and pins them; the
        compute stream waits for each one's copy to land."""
        out = []
        for key in keys:
            hit, evicted = self.policy.access(key)
            self._evict(evicted)
            if not hit:
                self._load(key)
            event = self._ready.pop(key, None)
            if event is not None:
                torch.cuda.current_stream(self.device).wait_event(event)
            out.append(self.dev[key])
        return out

    def release(self, keys: Iterable[Key]) -> None:
        """Returns None; unpins layers after their task; they stay until evicted."""
        self.policy.release(keys)

    def update(self, key: Key, grads: list[torch.Tensor], lr: float, momentum: float) -> None:
        """Returns None; applies an optimizer step with ``grads`` to the layer's current copy."""
        (mod,) = self.acquire([key])
        grads = [g.to(self.device) for g in grads]
        sgd_momentum_step(list(mod.parameters()), grads, self.dev_bufs[key], lr, momentum)
        self.release([key])

    def layer_state(self, key: Key) -> list[torch.Tensor]:
        """Returns the layer's authoritative parameters then momentum buffers (not copies;
        the device copy when resident). Layer mirroring sends them to the other stages."""
        self._sync()  # a write-back into the host copy may be in flight
        event = self._ready.pop(key, None)
        if event is not None:  # a prefetch still copying in: the reader waits for it
            torch.cuda.current_stream(self.device).wait_event(event)
        if key in self.dev:
            return [p.data for p in self.dev[key].parameters()] + list(self.dev_bufs[key])
        return [p.data for p in self.host[key].parameters()] + list(self.host_bufs[key])

    def load_layer_state(self, key: Key, tensors: list[torch.Tensor]) -> None:
        """Returns None; replaces the layer's parameters and momentum buffers (in
        :meth:`layer_state`'s order) where they are authoritative, leaving the cache's
        residency and statistics alone. Parameters are replaced out of place, as an update does.
        """
        resident = key in self.dev
        self._ready.pop(key, None)  # a pending prefetch wrote the tensors replaced below
        self._sync()  # and a pending write-back the host tensors
        mod = self.dev[key] if resident else self.host[key]
        params = list(mod.parameters())
        assert len(tensors) == 2 * len(params), f"layer {key}: {len(tensors)} tensors"
        target = self.device if resident else torch.device("cpu")
        pin = not resident and self.device.type == "cuda"
        new = []
        for t in tensors:
            t = t.to(target).clone()
            new.append(t.pin_memory() if pin else t)
        with torch.no_grad():
            for p, t in zip(params, new):
                p.data = t
        if resident:
            self.dev_bufs[key] = new[len(params) :]
        else:
            self.host_bufs[key] = new[len(params) :]

    def flush(self) -> None:
        """Returns None; writes every resident layer back to the host tier (and waits)."""
        self._evict(list(self.dev))
        self._sync()
        self.policy.clear()

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Returns ``{"<key>.<param>": tensor}`` of every layer after a :meth:`flush`; a tuple
        key ``(b, c)`` is written ``b.c``."""
        self.flush()
        out = {}
        for key, mod in self.host.items():
            prefix = ".".join(map(str, key)) if isinstance(key, tuple) else str(key)
            for name, p in mod.named_parameters():
                out[f"{prefix}.{name}"] = p.detach().clone()
        return out

    def snapshot(self) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """Returns ``(weights, momentum)``: CPU copies of every layer's authoritative
        parameters and momentum buffers, keyed as :meth:`state_dict`; the cache keeps its
        residency (a checkpoint between two segments leaves the next one a warm cache)."""
        weights: dict[str, torch.Tensor] = {}
        momentum: dict[str, torch.Tensor] = {}
        for key, mod in self.host.items():
            prefix = ".".join(map(str, key)) if isinstance(key, tuple) else str(key)
            names = [name for name, _ in mod.named_parameters()]
            tensors = self.layer_state(key)
            for name, p, buf in zip(names, tensors, tensors[len(names) :]):
                weights[f"{prefix}.{name}"] = p.detach().to("cpu", copy=True)
                momentum[f"{prefix}.{name}"] = buf.detach().to("cpu", copy=True)
        return weights, momentum

    def load_state_dict(
        self, weights: Mapping[str, torch.Tensor], momentum: Mapping[str, torch.Tensor]
    ) -> None:
        """Returns None; every layer's parameters and momentum buffers set from ``weights`` and
        ``momentum`` (keyed as :meth:`state_dict`; keys of layers this cache does not hold are
        ignored), values copied (a resumed segment starts from a checkpoint's state).

        Raises:
            KeyError: a parameter of a held layer is missing from either mapping.
        """
        for key, mod in self.host.items():
            prefix = ".".join(map(str, key)) if isinstance(key, tuple) else str(key)
            names = [f"{prefix}.{name}" for name, _ in mod.named_parameters()]
            self.load_layer_state(key, [weights[n] for n in names] + [momentum[n] for n in names])

    @property
    def stats(self) -> dict[str, float]:
        """Returns hits, misses, evictions, prefetches (and how many were used or wasted), the
        hit rate and the prefetched fraction of all loads."""
        p = self.policy
        return {
            "hits": p.hits,
            "misses": p.misses,
            "evictions": p.evictions,
            "prefetches": p.prefetches,
            "prefetch_used": p.prefetch_used,
            "prefetch_wasted": p.prefetch_wasted,
            "hit_rate": p.hit_rate,
            "prefetched_fraction": p.prefetched_fraction,
        }
