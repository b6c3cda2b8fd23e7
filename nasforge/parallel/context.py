"""Context management (NASPipe §3.3, §4.2): the whole supernet in host memory, a budgeted
device cache of layers, prefetch of predicted layers, write-back on eviction, hit statistics.

Which layers are resident is decided by the pure :class:`~nasforge.parallel.cache.LayerCache`;
this module moves the tensors. Each layer carries its optimizer state (momentum buffers), which
travels with it, so a layer's update is the same wherever it runs.

    host tier (pinned when CUDA is present)        device tier (budget: capacity layers)
    +---------------------------+   prefetch      +------------------------+
    | every layer: params, bufs | --------------> | running + predicted    |
    |                           | <-------------- | layers (LRU, pinned)   |
    +---------------------------+   evict (write) +------------------------+

On a CPU-only machine both tiers are host memory: a "device copy" is a clone, and the
bookkeeping (budget, hits, evictions, write-back) is exactly the one a GPU run uses.

Invariants:
    * A layer's authoritative values are its device copy while resident, else its host copy.
    * Eviction writes the device copy back first, so no update is lost (bitwise: copies only).
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, Iterable, Mapping

import torch
from torch import nn

from nasforge.parallel.cache import LayerCache

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


class TieredLayerCache:
    """Returns a two-tier store of layers keyed by any hashable (the pipeline: (block, cand)).

    ``capacity`` bounds device-resident layers; ``device`` is the fast tier (CPU means both
    tiers are host memory). Prefetches use a side CUDA stream when the device is CUDA.

    Raises:
        ConfigError (from LayerCache): a capacity below 1.
    """

    def __init__(
        self,
        layers: Mapping[Hashable, nn.Module],
        capacity: int,
        device: torch.device | str = "cpu",
    ) -> None:
        self.device = torch.device(device)
        self.policy = LayerCache(capacity)
        cuda = self.device.type == "cuda"
        self.host: dict[Hashable, nn.Module] = {}
        self.host_bufs: dict[Hashable, list[torch.Tensor]] = {}
        for key, mod in layers.items():
            mod = mod.to("cpu")
            if cuda:
                for p in mod.parameters():
                    p.data = p.data.pin_memory()
            self.host[key] = mod
            bufs = [torch.zeros_like(p) for p in mod.parameters()]
            self.host_bufs[key] = [b.pin_memory() for b in bufs] if cuda else bufs
        self.dev: dict[Hashable, nn.Module] = {}
        self.dev_bufs: dict[Hashable, list[torch.Tensor]] = {}
        self._stream = torch.cuda.Stream(self.device) if cuda else None
        self._ready: dict[Hashable, object] = {}  # key -> CUDA event of its copy

    # -- tier moves ---------------------------------------------------------------------------

    def _load(self, key: Hashable, asynchronous: bool) -> None:
        host = self.host[key]
        if self.device.type == "cpu":
            self.dev[key] = copy.deepcopy(host)
            self.dev_bufs[key] = [b.clone() for b in self.host_bufs[key]]
            return
        stream = self._stream if asynchronous else torch.cuda.current_stream(self.device)
        mod = copy.deepcopy(host)  # the module's structure; its tensors are replaced below
        with torch.cuda.stream(stream):
            # Copies from the pinned host tensors themselves (a clone would not be pinned),
            # so non_blocking really overlaps with compute on the default stream.
            for dp, hp in zip(mod.parameters(), host.parameters()):
                dp.data = hp.data.to(self.device, non_blocking=True)
            bufs = [b.to(self.device, non_blocking=True) for b in self.host_bufs[key]]
            event = torch.cuda.Event()
            event.record(stream)
        self.dev[key], self.dev_bufs[key], self._ready[key] = mod, bufs, event

    def _write_back(self, key: Hashable) -> None:
        mod, bufs = self.dev.pop(key), self.dev_bufs.pop(key)
        self._ready.pop(key, None)
        pin = self.device.type == "cuda"

        def home(t: torch.Tensor) -> torch.Tensor:
            t = t.to("cpu").clone()
            return t.pin_memory() if pin else t

        with torch.no_grad():
            for hp, dp in zip(self.host[key].parameters(), mod.parameters()):
                hp.data = home(dp.data)
            self.host_bufs[key] = [home(b) for b in bufs]

    def _evict(self, keys: Iterable[Hashable]) -> None:
        for key in keys:
            self._write_back(key)

    # -- public API ---------------------------------------------------------------------------

    def prefetch(self, keys: Iterable[Hashable]) -> None:
        """Returns None; starts copying predicted layers to the device (asynchronous on CUDA)."""
        loaded, evicted = self.policy.prefetch(keys)
        self._evict(evicted)
        for key in loaded:
            self._load(key, asynchronous=True)

    def acquire(self, keys: Iterable[Hashable]) -> list[nn.Module]:
        """Returns the device modules of ``keys`` (loading misses now) and pins them."""
        out = []
        for key in keys:
            hit, evicted = self.policy.access(key)
            self._evict(evicted)
            if not hit:
                self._load(key, asynchronous=False)
            event = self._ready.pop(key, None)
            if event is not None:
                torch.cuda.current_stream(self.device).wait_event(event)  # type: ignore[arg-type]
            out.append(self.dev[key])
        return out

    def release(self, keys: Iterable[Hashable]) -> None:
        """Returns None; unpins layers after their task; they stay until evicted."""
        self.policy.release(keys)

    def update(self, key: Hashable, grads: list[torch.Tensor], lr: float, momentum: float) -> None:
        """Returns None; applies an optimizer step with ``grads`` to the layer's current copy."""
        (mod,) = self.acquire([key])
        grads = [g.to(self.device) for g in grads]
        sgd_momentum_step(list(mod.parameters()), grads, self.dev_bufs[key], lr, momentum)
        self.release([key])

    def layer_state(self, key: Hashable) -> list[torch.Tensor]:
        """Returns the layer's authoritative parameters then momentum buffers (not copies;
        the device copy when resident). Layer mirroring sends them to the other stages."""
        if key in self.dev:
            return [p.data for p in self.dev[key].parameters()] + list(self.dev_bufs[key])
        return [p.data for p in self.host[key].parameters()] + list(self.host_bufs[key])

    def load_layer_state(self, key: Hashable, tensors: list[torch.Tensor]) -> None:
        """Returns None; replaces the layer's parameters and momentum buffers (in
        :meth:`layer_state`'s order) where they are authoritative, leaving the cache's
        residency and statistics alone. Parameters are replaced out of place, as an update does.
        """
        resident = key in self.dev
        self._ready.pop(key, None)  # a pending prefetch wrote the tensors replaced below
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
        """Returns None; writes every resident layer back to the host tier."""
        self._evict(list(self.dev))
        self.policy.resident.clear()
        self.policy.pinned.clear()

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

    @property
    def stats(self) -> dict[str, float]:
        """Returns hits, misses, evictions, prefetches and the hit rate."""
        p = self.policy
        return {
            "hits": p.hits,
            "misses": p.misses,
            "evictions": p.evictions,
            "prefetches": p.prefetches,
            "hit_rate": p.hit_rate,
        }
