"""Keeping a run's processes on this machine: the loopback interface, and pinning a process's
collective-communication sockets to it. Shared by every family that starts worker processes
(the pipeline's stages, consecutive model parallelism's partitions); standard library only.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["loopback_interface", "pin_to_loopback"]


def loopback_interface() -> str:
    """Returns the name of the loopback network interface (Linux sysfs; "lo" by default)."""
    for flags in sorted(Path("/sys/class/net").glob("*/flags")):
        try:
            if int(flags.read_text(), 16) & 0x8:  # IFF_LOOPBACK
                return flags.parent.name
        except (OSError, ValueError):
            continue
    return "lo"


def pin_to_loopback() -> None:
    """Returns None; makes this process's gloo (and NCCL bootstrap) sockets use loopback.

    Gloo's default device is the address this host's name resolves to, which is a LAN address
    on most machines; its pair sockets would listen there. ``GLOO_SOCKET_IFNAME`` is read when
    the process group is created, so it must be set before ``init_process_group``.
    """
    lo = loopback_interface()
    os.environ["GLOO_SOCKET_IFNAME"] = lo
    os.environ["NCCL_SOCKET_IFNAME"] = lo
