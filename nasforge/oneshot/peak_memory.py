"""Peak activation memory of a training step: the most bytes of tensors held for backward at once.

``nasforge.oneshot.memory.saved_bytes`` adds up everything saved by one forward pass, which is
the peak for ordinary autograd. A reconstructing backward saves more tensors *during* backward
(each recomputed ``G_k``) and frees them again, so its peak is found by tracking which saved
tensors are alive: a saved-tensor pack hook wraps each tensor in a handle that counts its storage
in, and the handle's release (when autograd frees the saved variable) counts it out. Storages
are deduplicated (a storage saved twice counts once) and parameters are excluded (the project's
definition of activation memory).

Invariants: the result is the maximum, over the step, of the bytes of distinct non-parameter
storages that autograd holds for backward; it includes tensors saved by recomputation inside a
custom backward (hooks are active for the whole step, forward and backward).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

__all__ = ["peak_saved_bytes"]


class _Tracker:
    """Counts live saved storages (reference counted by storage pointer)."""

    def __init__(self, exclude: set[int]) -> None:
        self.exclude = exclude
        self.refs: dict[int, list[int]] = {}  # ptr -> [handles alive, bytes]
        self.live = 0
        self.peak = 0

    def add(self, ptr: int, nbytes: int) -> None:
        entry = self.refs.get(ptr)
        if entry is None:
            self.refs[ptr] = [1, nbytes]
            self.live += nbytes
            self.peak = max(self.peak, self.live)
        else:
            entry[0] += 1

    def drop(self, ptr: int) -> None:
        entry = self.refs[ptr]
        entry[0] -= 1
        if entry[0] == 0:
            self.live -= entry[1]
            del self.refs[ptr]


class _Handle:
    """Returns the saved tensor on unpack; releases its count when autograd frees it."""

    __slots__ = ("tensor", "ptr", "tracker")

    def __init__(self, tensor: torch.Tensor, ptr: int, tracker: _Tracker) -> None:
        self.tensor, self.ptr, self.tracker = tensor, ptr, tracker

    def __del__(self) -> None:
        self.tracker.drop(self.ptr)


def peak_saved_bytes(step: Callable[[], Any], params: Iterable[torch.Tensor] = ()) -> int:
    """Returns the peak bytes of saved-for-backward tensors alive at any moment of ``step()``
    (which should run forward and backward), excluding the storages of ``params``."""
    tracker = _Tracker({p.untyped_storage().data_ptr() for p in params})

    def pack(t: torch.Tensor) -> Any:
        s = t.untyped_storage()
        ptr = s.data_ptr()
        if ptr in tracker.exclude or s.nbytes() == 0:
            return t
        tracker.add(ptr, s.nbytes())
        return _Handle(t, ptr, tracker)

    def unpack(h: Any) -> torch.Tensor:
        return h.tensor if isinstance(h, _Handle) else h

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        step()
    return tracker.peak
