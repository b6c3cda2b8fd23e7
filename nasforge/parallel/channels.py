"""The messages between neighbouring pipeline stages and the threads that receive them.

A message is one float32 tensor of a fixed size per channel, so a stage can post one blocking
``recv`` per neighbour without a header round trip that could deadlock two stages sending to
each other::

    forward  (K -> K+1):  [seq, 0,    activation..., zero padding]
    backward (K+1 -> K):  [seq, loss, y0, p0, ..., y_{w-1}, p_{w-1}, input gradient..., padding]

The backward header carries the subnet's loss (for a sampler that learns from losses) and
Algorithm 3's ``next_bwd``: ``w`` (= window) slots of (pending backward, precedence) pairs,
-1 where unused (NASPipe §3.3). Padding appears only under layer mirroring, where the cut
between two stages moves with the subnet: the channel is sized for the widest cut.

Invariants:
    * :func:`frame` and :class:`Receiver` agree on the layout: a framed message of a channel
      is received whole, and its payload slice starts at offset 0 of its own storage.
"""

from __future__ import annotations

import threading

import torch
import torch.distributed as dist

__all__ = ["frame", "Receiver"]


def frame(
    seq: int,
    loss: float,
    payload: torch.Tensor,
    size: int,
    pairs: list[tuple[int, int]],
    slots: int,
) -> torch.Tensor:
    """Returns the message ``[seq, loss, pairs padded to slots, payload padded to size]``.

    ``slots`` is the number of header floats for pairs (twice the pairs' capacity).
    """
    assert 2 * len(pairs) <= slots, f"{len(pairs)} pairs do not fit {slots} header slots"
    flat_pairs = [float(v) for pair in pairs for v in pair]
    head = [float(seq), loss] + flat_pairs + [-1.0] * (slots - len(flat_pairs))
    flat = payload.flatten()
    assert flat.numel() <= size, f"payload of {flat.numel()} exceeds the channel's {size}"
    pad = [flat.new_zeros(size - flat.numel())] if flat.numel() < size else []
    return torch.cat([torch.tensor(head, device=payload.device), flat, *pad])


class Receiver(threading.Thread):
    """Receives ``n`` messages from one neighbour with blocking ``recv`` into the inbox.

    Gloo's ``irecv`` work cannot be polled for completion, so each neighbour gets a thread;
    the stage's main thread only reads the inbox, never blocks on a neighbour.
    """

    def __init__(
        self, src: int, numel: int, n: int, kind: str, device, inbox, on_loss=None, slots=0
    ) -> None:
        super().__init__(daemon=True)
        self.src, self.numel, self.n, self.kind = src, numel, n, kind
        self.device, self.inbox, self.on_loss, self.slots = device, inbox, on_loss, slots

    def run(self) -> None:
        head = 2 + self.slots  # [seq, loss, (bwd_seq, precedence) * slots / 2]
        try:
            for _ in range(self.n):
                buf = torch.empty(head + self.numel, device=self.device)
                dist.recv(buf, self.src)
                seq = int(buf[0].item())
                if self.on_loss is not None:
                    self.on_loss(seq, buf[1].item())
                ids = [int(v) for v in buf[2:head].tolist()]
                pairs = [(y, p) for y, p in zip(ids[0::2], ids[1::2]) if y >= 0]
                # clone: buf[head:] starts 8+ bytes into its storage, and a misaligned operand
                # can send BLAS down another kernel whose rounding differs from sequential
                self.inbox.put((self.kind, seq, buf[head:].clone(), pairs))
        except BaseException as exc:  # the stage's main loop re-raises it
            self.inbox.put(("error", -1, exc, None))
