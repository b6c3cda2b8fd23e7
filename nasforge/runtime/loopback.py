"""Keeping a run's processes on this machine: the loopback interface, pinning a process's
collective-communication sockets to it, and seeing what a group of processes started from one
folder listens on. Shared by every family that starts worker processes (the pipeline's stages,
consecutive model parallelism's partitions, a local Ray cluster); standard library only (Linux
``/proc`` and ``/sys``).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

__all__ = ["loopback_interface", "pin_to_loopback", "pids_marked", "listening_addresses"]


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


def pids_marked(folder: str) -> list[int]:
    """Returns the ids of live processes (this one and zombies excepted) whose environment
    sets ``RAY_TMPDIR`` to ``folder`` or whose command line names it: what a Ray (or any tool
    given its own temporary folder) started there runs. Empty where there is no ``/proc``."""
    mark = folder.encode()
    found = []
    try:
        entries = list(Path("/proc").iterdir())
    except OSError:
        return []
    for entry in entries:
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            env = (entry / "environ").read_bytes()
            cmd = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:  # gone meanwhile, or another user's
            continue
        if state != "Z" and (b"RAY_TMPDIR=" + mark + b"\0" in env or mark in cmd):
            found.append(int(entry.name))
    return found


def listening_addresses(pids: list[int]) -> set[str]:
    """Returns the IP addresses on which the processes ``pids`` accept TCP connections (IPv4
    and IPv6; an IPv4-mapped address as IPv4), read from ``/proc``: what a test or a cluster's
    owner checks is loopback only."""
    inodes = set()
    for pid in pids:
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    found = set()
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] != "0A" or fields[9] not in inodes:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(fields[1].split(":")[0])  # host order, 4 bytes at a time
            raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            found.add(socket.inet_ntop(family, raw).removeprefix("::ffff:"))
    return found
