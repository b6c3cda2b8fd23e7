"""Test helpers: the processes a Ray instance started and the addresses they listen on."""

from __future__ import annotations

import os
import socket
from pathlib import Path

__all__ = ["listening", "pids_marked"]


def pids_marked(folder: str) -> list[int]:
    """Returns the ids of live processes (this one excepted) whose environment sets
    ``RAY_TMPDIR`` to ``folder`` or whose command line names it: what a Ray started there
    runs."""
    mark = folder.encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            env = (entry / "environ").read_bytes()
            cmd = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and (b"RAY_TMPDIR=" + mark + b"\0" in env or mark in cmd):
            found.append(int(entry.name))
    return found


def listening(pids: list[int]) -> set[str]:
    """Returns the addresses on which the processes ``pids`` accept TCP connections."""
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
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A" or fields[9] not in inodes:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(fields[1].split(":")[0])
            raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            found.add(socket.inet_ntop(family, raw).removeprefix("::ffff:"))
    return found
