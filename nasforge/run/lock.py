"""One writer per run directory: an OS file lock (``filelock``) held for the writer's life.

The lock lives on ``<dir>/.writer.lock``; the holder's description (process id, host, start
time, command) is written beside it in ``<dir>/.writer.json`` once the lock is taken, so that a
refused writer can name the holder. The operating system drops the lock when the holder's
process ends in any way (kill -9 included), so a dead writer never leaves a run locked; its
stale ``.writer.json`` is simply overwritten by the next writer.

Readers take no lock.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

from nasforge.errors import LockError

__all__ = ["WriterLock", "LOCK_NAME", "HOLDER_NAME"]

LOCK_NAME = ".writer.lock"
HOLDER_NAME = ".writer.json"


class WriterLock:
    """Returns the held writer lock of ``directory`` (taken at construction, without waiting).

    Invariants: at most one live WriterLock per directory across all processes of a host (and
    of hosts sharing a file system whose locks work, such as local disks and NFSv4).

    Raises:
        LockError: another process holds the lock; the message names it.
    """

    def __init__(self, directory: str | Path, holder: str = "") -> None:
        # filelock is imported where a lock is taken: a reader of a finished run (status, plot,
        # export) never needs it, and its import costs more than such a command's own reads
        from filelock import FileLock, Timeout

        self.directory = Path(directory)
        self._lock = FileLock(str(self.directory / LOCK_NAME), thread_local=False)
        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            raise LockError(
                f"{self.directory} is being written by {self.describe_holder()}; one run "
                "directory has one writer: wait for it to finish (`nasforge status "
                f"{self.directory}` shows its progress), or stop that process"
            ) from None
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "command": holder or " ".join(sys.argv)[:300],
        }
        (self.directory / HOLDER_NAME).write_text(json.dumps(info))

    def describe_holder(self) -> str:
        """Returns a one-line description of the process recorded as the writer."""
        try:
            info = json.loads((self.directory / HOLDER_NAME).read_text())
            return (
                f"process {info['pid']} on {info['host']} (started {info['started']}: "
                f"{info['command']})"
            )
        except (OSError, ValueError, KeyError, TypeError):
            return "another process (its description is missing)"

    def release(self) -> None:
        """Releases the lock (idempotent)."""
        if self._lock.is_locked:
            self._lock.release()

    @staticmethod
    def held(directory: str | Path) -> bool:
        """Returns whether some process now holds the writer lock of ``directory``."""
        path = Path(directory) / LOCK_NAME
        if not path.exists():
            return False
        from filelock import FileLock, Timeout

        probe = FileLock(str(path), thread_local=False)
        try:
            probe.acquire(timeout=0)
        except Timeout:
            return True
        probe.release()
        return False
