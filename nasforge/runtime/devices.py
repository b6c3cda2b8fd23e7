"""Devices as a resource of a run: which GPUs exist, which a run may use, which a trial got.

One check for every kind of run that takes a ``device`` (:func:`check_device`), one check for
the GPUs of a multi-trial experiment (:func:`check_gpus`), one pure assignment of GPUs to
concurrent trial slots (:func:`gpu_slots`), and one way for an evaluator to learn where its
trial runs: :func:`trial_device` (``nasforge.trial_device()``).

How a trial gets its GPUs (the executors set the placement; the evaluator only reads it):

    inprocess   the trial runs in the engine's process with the first ``ceil(gpus_per_trial)``
                of ``devices``; torch numbers them as the engine does
    pool        each child process gets a slot of :func:`gpu_slots`; ``CUDA_VISIBLE_DEVICES``
                is set in the child before the trial runs, so torch in the child sees only
                the trial's GPUs, numbered from 0. The engine's process must not initialise
                CUDA before the children fork (a forked child cannot use CUDA then); the pool
                refuses to start if it did
    ray         the task asks Ray for ``num_gpus=gpus_per_trial``; Ray picks the GPUs, sets
                ``CUDA_VISIBLE_DEVICES`` and reports them (``ray.get_gpu_ids()``)

Ids are GPU indices as torch numbers them in the engine's process (after the engine's own
``CUDA_VISIBLE_DEVICES``), or Ray's GPU ids on a Ray node. Torch is imported only when GPUs
are counted or a device is built, never at import.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import socket
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from nasforge.errors import ConfigError

if TYPE_CHECKING:  # torch is imported only when asked about CUDA
    import torch

__all__ = [
    "Placement",
    "visible_gpus",
    "check_device",
    "check_gpus",
    "check_gpu_amount",
    "gpu_slots",
    "cuda_visible_devices",
    "local_placement",
    "set_placement",
    "placed",
    "trial_placement",
    "trial_device",
    "trial_devices",
    "resolve_device",
    "placement_text",
]

log = logging.getLogger("nasforge.devices")

D = TypeVar("D")

_DEVICE = re.compile(r"^(?P<type>cpu|cuda|mps|meta)(?::(?P<index>\d+))?$")


@dataclass(frozen=True)
class Placement:
    """Returns nothing; where one trial runs: its node, its GPU ids and its share of them.

    ``devices`` are the ids recorded with the trial (the engine's numbering, or Ray's);
    ``local`` are the same GPUs as torch numbers them in the trial's own process (``None``:
    the same as ``devices``); ``gpus`` is the trial's GPU amount (0.5: half of one GPU);
    ``node_id`` is the Ray node id (``""`` off Ray): several Ray nodes can share one address,
    as the nodes of a cluster on one machine do.
    """

    node: str
    devices: tuple[int, ...] = ()
    gpus: float = 0.0
    local: tuple[int, ...] | None = None
    node_id: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Returns what the run record keeps: ``{"node", "devices"}`` (and ``"gpus"`` when the
        trial had GPUs, ``"node_id"`` when it ran on a Ray node)."""
        out: dict[str, Any] = {"node": self.node, "devices": list(self.devices)}
        if self.devices:
            out["gpus"] = self.gpus
        if self.node_id:
            out["node_id"] = self.node_id
        return out


def visible_gpus() -> list[int]:
    """Returns the ids ``0..n-1`` of the GPUs torch sees in this process (``[]`` without torch
    or CUDA). Counts with NVML where it can, so it does not initialise CUDA (a fork stays
    safe) and it follows ``CUDA_VISIBLE_DEVICES``."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return []
    return list(range(torch.cuda.device_count()))


def check_device(device: D, what: str = "device") -> D:
    """Returns ``device`` unchanged when it exists on this machine: None, ``"cpu"``, or a
    ``"cuda"`` / ``"cuda:N"`` / ``torch.device`` whose GPU torch sees.

    Raises:
        ConfigError: a malformed device, a GPU on a machine that has none, or GPU N where
            there are fewer (one line: the value, what exists, the fix).
    """
    if device is None:
        return device
    text = str(device)
    m = _DEVICE.match(text)
    if m is None:
        raise ConfigError(
            f"{what} {text!r} is not a device; use 'cpu', 'cuda' or 'cuda:N' (N a GPU index)"
        )
    if m["type"] != "cuda":
        return device
    n = len(visible_gpus())
    if n == 0:
        raise ConfigError(
            f"{what} {text!r} asks for a GPU, but this machine has none (torch sees 0 CUDA "
            "devices); use 'cpu', or run on a machine with a GPU"
        )
    if m["index"] is not None and int(m["index"]) >= n:
        raise ConfigError(
            f"{what} {text!r} asks for GPU {m['index']}, but this machine has {n} "
            f"(cuda:0..cuda:{n - 1}); pick one of those"
        )
    return device


#: how far a share may sit from 1/n and still be 1/n (0.333333 for 1/3): relative to n
_SHARE_TOLERANCE = 1e-4


def _share_text(text: str) -> float | None:
    """Returns the value of a share written ``"1/n"`` or as a number, else None."""
    top, slash, bottom = text.replace(" ", "").partition("/")
    try:
        if not slash:
            return float(top)
        a, b = int(top), int(bottom)
    except ValueError:
        return None
    return a / b if b > 0 else None


def check_gpu_amount(gpus_per_trial: object) -> float:
    """Returns ``gpus_per_trial`` as a float when it is 0, a share 1/n, or a whole number. A
    share within rounding of 1/n (``0.333333``) or written ``"1/n"`` (YAML reads ``1/3`` as
    text) is exactly 1/n.

    Raises:
        ConfigError: anything else (negative, 0.3, 1.5, not a number); a refused share
            suggests only shares that are accepted.
    """
    value = gpus_per_trial
    if isinstance(value, str):
        value = _share_text(value)
    if (
        not isinstance(value, (int, float))
        or isinstance(value, bool)
        or not math.isfinite(value)
        or value < 0
    ):
        raise ConfigError(
            f"gpus_per_trial must be a number >= 0 (0: CPU trials; 0.5 or '1/2': two trials "
            f"share a GPU; 2: two GPUs per trial), got {gpus_per_trial!r}"
        )
    g = float(value)
    if 0 < g < 1:
        n = 1 / g
        k = max(1, round(n))
        if abs(n - k) <= _SHARE_TOLERANCE * k:
            return 1 / k
        lo, hi = max(2, math.floor(n)), math.ceil(n)
        options = sorted({lo, hi})
        hint = " or ".join(f"{1 / m:.6g} ('1/{m}')" for m in options)
        raise ConfigError(
            f"gpus_per_trial {gpus_per_trial!r} shares a GPU unevenly; a share must be 1/n "
            f"(0.5, 0.25, ...) so that n trials fill a GPU, e.g. {hint}"
        )
    if g >= 1 and g != int(g):
        raise ConfigError(
            f"gpus_per_trial {gpus_per_trial!r}: a trial with more than one GPU takes whole "
            f"GPUs; use {math.floor(g)} or {math.ceil(g)}"
        )
    return g


def check_gpus(
    gpus_per_trial: object,
    devices: Sequence[int] | None = None,
    visible: Sequence[int] | None = None,
) -> tuple[float, tuple[int, ...]]:
    """Returns ``(gpus_per_trial, devices)`` checked: the amount per trial (0, 1/n, or a whole
    number) and the GPUs trials may use (``devices=None``: every visible GPU; ``()`` when
    ``gpus_per_trial`` is 0). ``visible`` defaults to :func:`visible_gpus`.

    Raises:
        ConfigError: a bad amount; ``devices`` without ``gpus_per_trial``; a GPU on a machine
            without one; a device id that does not exist or repeats; more GPUs per trial than
            ``devices`` holds.
    """
    g = check_gpu_amount(gpus_per_trial)
    if g == 0:
        if devices:
            raise ConfigError(
                f"devices {list(devices)} are given but gpus_per_trial is 0, so no trial would "
                "use them; set gpus_per_trial (e.g. 1, or 0.5 to share a GPU)"
            )
        return 0.0, ()
    have = list(visible_gpus() if visible is None else visible)
    if not have:
        raise ConfigError(
            f"gpus_per_trial {gpus_per_trial!r} asks for a GPU, but this machine has none "
            "(torch sees 0 CUDA devices); set gpus_per_trial: 0, or run on a GPU machine"
        )
    if devices is None:
        chosen = tuple(have)
    else:
        ok = all(isinstance(d, int) and not isinstance(d, bool) for d in devices)
        missing = [d for d in devices if d not in have] if ok else list(devices)
        if not ok or missing or len(set(devices)) != len(devices) or not devices:
            raise ConfigError(
                f"devices {list(devices)!r}: expected distinct GPU ids among the {len(have)} "
                f"this machine has ({have}); leave devices out to use them all"
            )
        chosen = tuple(devices)
    need = math.ceil(g)
    if need > len(chosen):
        raise ConfigError(
            f"gpus_per_trial {gpus_per_trial!r} needs {need} GPUs per trial, but only "
            f"{len(chosen)} are available ({list(chosen)}); lower gpus_per_trial"
        )
    return g, chosen


def gpu_slots(devices: Sequence[int], gpus_per_trial: float) -> list[tuple[int, ...]]:
    """Returns the GPU ids of each concurrent trial slot: ``1/n`` of a GPU gives each GPU n
    slots (interleaved, so that the first trials spread over the GPUs); ``k`` GPUs gives
    ``len(devices) // k`` slots of k consecutive GPUs; 0 gives none. Pure.

    Invariants: every slot holds ``ceil(gpus_per_trial)`` distinct ids of ``devices``; a GPU
    is in at most ``round(1 / gpus_per_trial)`` slots for a share, in at most one for whole
    GPUs, so concurrent trials never hold more than all of a GPU.
    """
    if gpus_per_trial <= 0:
        return []
    if gpus_per_trial < 1:
        n = round(1 / gpus_per_trial)
        return [(d,) for _ in range(n) for d in devices]
    k = int(gpus_per_trial)
    return [tuple(devices[i : i + k]) for i in range(0, len(devices) - k + 1, k)]


def cuda_visible_devices(ids: Sequence[int]) -> str:
    """Returns the ``CUDA_VISIBLE_DEVICES`` value that shows a child process exactly the GPUs
    ``ids`` (as this process numbers them: mapped through this process's own
    ``CUDA_VISIBLE_DEVICES`` when it has one)."""
    own = os.environ.get("CUDA_VISIBLE_DEVICES")
    if own is None or not own.strip():
        return ",".join(str(i) for i in ids)
    tokens = [t.strip() for t in own.split(",")]
    return ",".join(tokens[i] for i in ids)


def local_placement(gpus_per_trial: float, devices: Sequence[int]) -> Placement:
    """Returns the placement of a trial run in this process: this host and the first
    ``ceil(gpus_per_trial)`` of ``devices`` (none for CPU trials)."""
    ids = tuple(devices[: math.ceil(gpus_per_trial)]) if gpus_per_trial > 0 else ()
    return Placement(socket.gethostname(), ids, gpus_per_trial if ids else 0.0)


# -- the trial's placement (one per process: a worker runs one trial at a time) ---------------
_current: Placement | None = None
_warned = False


def set_placement(placement: Placement | None) -> None:
    """Sets the placement of the trial this process runs now (the executors call it)."""
    global _current
    _current = placement


@contextlib.contextmanager
def placed(placement: Placement | None) -> Iterator[None]:
    """Returns a context in which this process runs a trial with ``placement``."""
    before = _current
    set_placement(placement)
    try:
        yield
    finally:
        set_placement(before)


def trial_placement() -> Placement | None:
    """Returns the placement of the trial running in this process, or None outside a trial."""
    return _current


def trial_devices() -> list[torch.device]:
    """Returns the torch devices of the trial running in this process: its GPUs (``cuda:i``
    as torch numbers them here), or ``[cpu]`` for a CPU trial or outside a trial.

    A trial given GPUs that torch cannot see here (logical GPUs of a Ray node without CUDA, a
    test's fake device list) gets ``[cpu]``, with a warning, and its record still says which
    GPU ids it was given."""
    global _warned
    import torch

    p = _current
    if p is None or not p.devices:
        return [torch.device("cpu")]
    local = p.local if p.local is not None else p.devices
    n = torch.cuda.device_count()
    if any(i >= n for i in local):
        if not _warned:
            _warned = True
            log.warning(
                "this trial was given GPUs %s but torch sees %d CUDA devices here; running it "
                "on cpu",
                list(p.devices),
                n,
            )
        return [torch.device("cpu")]
    return [torch.device("cuda", i) for i in local]


def trial_device() -> torch.device:
    """Returns the torch device an evaluator should put its trial's model and data on (the
    first of :func:`trial_devices`): ``cuda:i`` when the trial holds a GPU, else ``cpu``.
    The one way an evaluator learns its device, in every executor: ``nasforge.trial_device()``.
    """
    return trial_devices()[0]


def resolve_device(device: torch.device | str | int | None) -> torch.device:
    """Returns the torch device to use for a ``device`` setting: None means the trial's
    (:func:`trial_device`), anything else is taken as given."""
    import torch

    return trial_device() if device is None else torch.device(device)


#: Characters of a Ray node id that :func:`placement_text` shows (as ``ray list nodes`` ids
#: start; 8 hex digits tell apart the nodes of any cluster of a sane size).
NODE_ID_CHARS = 8


def placement_text(placement: dict[str, Any] | None) -> str:
    """Returns a recorded placement in a few characters: ``host gpu 0,1``, ``host gpu 0
    (x0.5)`` for a share, ``host cpu``; on a Ray node the first characters of its node id
    follow the host (``127.0.0.1 node 3f2a9c1b cpu``), so nodes sharing an address differ;
    ``""`` for none."""
    if not placement:
        return ""
    node = str(placement.get("node", ""))
    node_id = placement.get("node_id")
    if isinstance(node_id, str) and node_id:
        node = f"{node} node {node_id[:NODE_ID_CHARS]}".strip()
    ids = placement.get("devices") or []
    if not ids:
        return f"{node} cpu".strip()
    text = f"{node} gpu {','.join(str(i) for i in ids)}".strip()
    g = placement.get("gpus")
    if isinstance(g, (int, float)) and 0 < g < 1:
        text += f" (x{g:g})"
    return text
