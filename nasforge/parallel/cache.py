"""The device-cache policy of NASPipe's context manager (§3.3, §4.2), as pure bookkeeping.

Pure: no torch, no clock. It decides *which* layers sit in the fast tier; the torch context
manager (:mod:`nasforge.parallel.context`) moves tensors accordingly and the simulator
(:mod:`nasforge.parallel.simulator`) charges swap time for it.

A layer is any hashable key (the pipeline uses ``(block, candidate)``). The cache holds at most
``capacity`` layers. Layers of the running task are *pinned* (never evicted); the rest are kept
in least-recently-used order and evicted oldest first when room is needed::

    capacity 4, pinned {a, b}           fetch c, d, e:
    LRU  [x, y] + pinned [a, b]  ->  evict x (for c), y (for d); e is refused (all pinned or new)

What to prefetch is :func:`prefetch_plan`: the predicted tasks' layers, nearest task first,
cut at the room the running task's pinned layers leave. The accounting tells whether the plan
paid: ``prefetches`` layers arrived ahead of use and ``misses`` on demand (their ratio is
``prefetched_fraction``); ``prefetch_used`` prefetched layers were then accessed and
``prefetch_wasted`` were evicted first.

Invariants:
    * ``len(resident) <= capacity`` after every call.
    * A pinned layer is never evicted.
    * ``hits + misses`` equals the number of :meth:`LayerCache.access` calls.
    * ``prefetch_used + prefetch_wasted <= prefetches``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Hashable, Iterable
from typing import Generic, TypeVar

from nasforge.errors import ConfigError

__all__ = ["LayerCache", "prefetch_plan"]

#: A layer key: anything hashable; the pipeline uses ``(block, candidate)``.
Key = TypeVar("Key", bound=Hashable)


def prefetch_plan(
    tasks: Iterable[Iterable[Key]], capacity: int, pinned: Collection[Key] = ()
) -> list[Key]:
    """Returns the layers to prefetch: the predicted tasks' layers in predicted order (nearest
    task first), each once, none of the ``pinned`` (running) ones, cut where the pinned layers
    and the plan together would exceed ``capacity``.

    A later task's layers never displace an earlier task's: the cut drops the far end.

    Invariants: pure; ``len(set(pinned) | set(plan)) <= capacity``; the plan is a prefix of
    the deduplicated, unpinned predicted layers.
    """
    seen = set(pinned)
    room = capacity - len(seen)
    out: list[Key] = []
    for layers in tasks:
        for layer in layers:
            if layer in seen:
                continue
            if len(out) >= room:
                return out
            seen.add(layer)
            out.append(layer)
    return out


class LayerCache(Generic[Key]):
    """Returns an LRU layer cache with a layer-count budget, pinning and hit statistics."""

    def __init__(self, capacity: int) -> None:
        if not isinstance(capacity, int) or capacity < 1:
            raise ConfigError(
                f"cache capacity must be a positive number of layers, got {capacity!r}; "
                "give at least the layers of one stage of one subnet"
            )
        self.capacity = capacity
        self.resident: OrderedDict[Key, None] = OrderedDict()
        self.pinned: set[Key] = set()
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self.prefetches = 0
        self.prefetch_used = 0  # prefetched layers accessed after they arrived
        self.prefetch_wasted = 0  # prefetched layers evicted before any access
        self._fresh: set[Key] = set()  # prefetched, not accessed yet

    @property
    def hit_rate(self) -> float:
        """Returns hits / accesses (0.0 before the first access)."""
        total = self.hits + self.misses
        return self.hits / total if total else 0.0

    @property
    def prefetched_fraction(self) -> float:
        """Returns the share of loaded layers that arrived by prefetch: prefetches / (prefetches
        + misses) (0.0 before the first load)."""
        total = self.prefetches + self.misses
        return self.prefetches / total if total else 0.0

    def __contains__(self, layer: object) -> bool:
        return layer in self.resident

    def _make_room(self, keep: set[Key]) -> Key | None:
        """Returns the evicted layer (least recently used, not pinned, not in keep) or None."""
        for victim in self.resident:
            if victim not in self.pinned and victim not in keep:
                del self.resident[victim]
                self.evictions += 1
                if victim in self._fresh:
                    self._fresh.discard(victim)
                    self.prefetch_wasted += 1
                return victim
        return None

    def _insert(self, layer: Key, keep: set[Key]) -> tuple[bool, list[Key]]:
        """Returns (inserted, evicted layers) after trying to make ``layer`` resident."""
        evicted: list[Key] = []
        while len(self.resident) >= self.capacity:
            victim = self._make_room(keep)
            if victim is None:
                return False, evicted
            evicted.append(victim)
        self.resident[layer] = None
        return True, evicted

    def prefetch(self, layers: Iterable[Key]) -> tuple[list[Key], list[Key]]:
        """Returns ``(loaded, evicted)``: layers newly made resident for a predicted task.

        Already-resident layers are refreshed to most recent. Layers that do not fit (everything
        else is pinned or part of this same prefetch) are skipped, never forced in.
        """
        wanted = list(dict.fromkeys(layers))
        keep = set(wanted)
        loaded: list[Key] = []
        evicted: list[Key] = []
        for layer in wanted:
            if layer in self.resident:
                self.resident.move_to_end(layer)
                continue
            ok, out = self._insert(layer, keep)
            evicted.extend(out)
            if not ok:
                break
            loaded.append(layer)
            self._fresh.add(layer)
            self.prefetches += 1
        return loaded, evicted

    def access(self, layer: Key) -> tuple[bool, list[Key]]:
        """Returns ``(hit, evicted)`` for a layer the running task needs now, and pins it.

        A miss loads the layer synchronously (evicting if needed); the caller pays its swap.

        Raises:
            ConfigError: every resident layer is pinned, so the task cannot fit the budget.
        """
        if layer in self.resident:
            self.hits += 1
            if layer in self._fresh:
                self._fresh.discard(layer)
                self.prefetch_used += 1
            self.resident.move_to_end(layer)
            self.pinned.add(layer)
            return True, []
        self.misses += 1
        ok, evicted = self._insert(layer, set())
        if not ok:
            raise ConfigError(
                f"device cache of {self.capacity} layers is full of pinned layers; a task needs "
                f"more: raise the cache budget to at least one stage of one subnet"
            )
        self.pinned.add(layer)
        return False, evicted

    def release(self, layers: Iterable[Key]) -> None:
        """Returns None; unpins layers after their task (they stay resident until evicted)."""
        for layer in layers:
            self.pinned.discard(layer)

    def clear(self) -> None:
        """Returns None; empties the cache (every layer written back), keeping the counts."""
        self.resident.clear()
        self.pinned.clear()
        self._fresh.clear()
