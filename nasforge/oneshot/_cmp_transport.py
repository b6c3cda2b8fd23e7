"""How the workers of a model-parallel search talk: point-to-point messages of tensor lists and
deterministic all-reduces, between threads of one process (:class:`ThreadTransport`) or between
``torch.distributed`` processes (:class:`DistTransport`).

Invariants: messages between two workers with one tag arrive in the order they were sent; an
all-reduce adds the ranks' tensors in the same order on every rank of a thread group.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence
from typing import Any

import torch

from nasforge.errors import WorkerError

__all__ = ["ThreadTransport", "DistTransport"]

_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


class ThreadTransport:
    """Returns nothing; point-to-point queues and a deterministic all-reduce between threads."""

    def __init__(self, world: int, abort: threading.Event) -> None:
        self.abort = abort
        self.boxes: dict[tuple[int, int, int], queue.Queue] = {}
        self.lock = threading.Lock()
        self.groups: dict[Any, tuple[threading.Barrier, dict[int, list]]] = {}
        self.world = world

    def box(self, src: int, dst: int, tag: int) -> queue.Queue:
        """Returns the queue from ``src`` to ``dst`` for ``tag``."""
        with self.lock:
            return self.boxes.setdefault((src, dst, tag), queue.Queue())

    def send(self, rank: int, dst: int, tag: int, ts: Sequence[torch.Tensor | None]) -> None:
        """Hands ``ts`` to ``dst`` (on CUDA with an event the receiver's stream waits for)."""
        event = None
        if any(t is not None and t.is_cuda for t in ts):
            event = torch.cuda.Event()
            event.record()
        self.box(rank, dst, tag).put((list(ts), event))

    def recv(self, rank: int, src: int, tag: int) -> list[torch.Tensor | None]:
        """Returns the next tensors ``src`` sent for ``tag``.

        Raises:
            WorkerError: another worker failed meanwhile.
        """
        q = self.box(src, rank, tag)
        while True:
            try:
                ts, event = q.get(timeout=0.05)
                break
            except queue.Empty:
                if self.abort.is_set():
                    raise WorkerError("another worker failed; this one stops") from None
        if event is not None:  # another stream produced them: wait, and keep their memory
            stream = torch.cuda.current_stream()
            stream.wait_event(event)
            for t in ts:
                if t is not None:
                    t.record_stream(stream)
        return ts

    def allreduce(self, key: Any, ranks: Sequence[int], rank: int, ts: list) -> list:
        """Returns the sum of ``ts`` over ``ranks``, added in rank order (same on every rank)."""
        with self.lock:
            if key not in self.groups:
                self.groups[key] = (threading.Barrier(len(ranks)), {})
            barrier, slots = self.groups[key]
        if any(t.is_cuda for t in ts):
            torch.cuda.current_stream().synchronize()  # others read these from their streams
        slots[rank] = ts
        self._wait(barrier)
        out = [sum(slots[r][i] for r in sorted(ranks)) for i in range(len(ts))]
        self._wait(barrier)
        return out

    def _wait(self, barrier: threading.Barrier) -> None:
        while True:
            try:
                barrier.wait(timeout=0.1)
                return
            except threading.BrokenBarrierError:
                barrier.reset()
                if self.abort.is_set():
                    raise WorkerError("another worker failed; this one stops") from None

    def flush(self) -> None:
        """Returns None (thread sends complete at once)."""


class DistTransport:
    """Returns nothing; ``torch.distributed`` point-to-point messages (the header's length, a
    header of dtypes and shapes, then the tensors, all sent without blocking) and
    process-group all-reduces."""

    def __init__(self, groups: dict[Any, Any], device: torch.device) -> None:
        self.pending: list[Any] = []
        self.groups = groups
        self.device = device  # NCCL sends from the GPU, gloo from the host

    def send(self, rank: int, dst: int, tag: int, ts: Sequence[torch.Tensor | None]) -> None:
        """Sends ``ts`` (``None`` entries included) to ``dst``."""
        import torch.distributed as dist

        head = [len(ts)]
        for t in ts:
            head += [0] if t is None else [1, _DTYPES.index(t.dtype), t.dim(), *t.shape]
        header = torch.tensor(head, dtype=torch.int64, device=self.device)
        size = torch.tensor([len(head)], dtype=torch.int64, device=self.device)
        self.pending.append((dist.isend(size, dst, tag=tag), size))
        self.pending.append((dist.isend(header, dst, tag=tag), header))
        for t in ts:
            if t is not None:
                t = t.detach().contiguous()
                self.pending.append((dist.isend(t, dst, tag=tag), t))

    def recv(self, rank: int, src: int, tag: int) -> list[torch.Tensor | None]:
        """Returns the tensors ``src`` sent for ``tag``."""
        import torch.distributed as dist

        size = torch.empty(1, dtype=torch.int64, device=self.device)
        dist.recv(size, src, tag=tag)
        header = torch.empty(int(size.item()), dtype=torch.int64, device=self.device)
        dist.recv(header, src, tag=tag)
        h = header.tolist()
        out: list[torch.Tensor | None] = []
        i = 1
        for _ in range(h[0]):
            if h[i] == 0:
                out.append(None)
                i += 1
                continue
            dtype, ndim = _DTYPES[h[i + 1]], h[i + 2]
            t = torch.empty(h[i + 3 : i + 3 + ndim], dtype=dtype, device=self.device)
            dist.recv(t, src, tag=tag)
            out.append(t)
            i += 3 + ndim
        return out

    def allreduce(self, key: Any, ranks: Sequence[int], rank: int, ts: list) -> list:
        """Returns the sum of ``ts`` over the process group of ``ranks``."""
        import torch.distributed as dist

        flat = torch.cat([t.reshape(-1) for t in ts])
        dist.all_reduce(flat, group=self.groups[key])
        out, i = [], 0
        for t in ts:
            out.append(flat[i : i + t.numel()].view_as(t))
            i += t.numel()
        return out

    def flush(self) -> None:
        """Waits for every pending send."""
        for p in self.pending:
            (p[0] if isinstance(p, tuple) else p).wait()
        self.pending = []
