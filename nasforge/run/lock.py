"""One writer per run directory: an OS file lock (``filelock``) held for the writer's life.

The lock lives on ``<dir>/.writer.lock``; the holder's description (process id, host, start
time, command) is written beside it in ``<dir>/.writer.json`` once the lock is taken, so that a
refused writer can name the holder. The operating system drops the lock when the holder's
process ends in any way (kill -9 included), so a dead writer never leaves a run locked; its
stale ``.writer.json`` is simply overwritten by the next writer.

Readers take no lock, and need no write access: :meth:`WriterLock.held` probes the lock with a
shared ``flock`` on a read-only descriptor (a run folder shared read-only with another account
reads as well as one's own), and when even that is not possible (the lock file is not
readable) it asks whether the process ``.writer.json`` names is alive. Whoever holds the lock
may still be another program than nasforge (the lock is a plain ``flock``):
:meth:`WriterLock.held_by_nasforge` tells a nasforge writer, whose ``.writer.json`` names a
live process, from anything else.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import stat
import sys
import time
from pathlib import Path
from typing import Any

from nasforge.errors import LockError

__all__ = ["WriterLock", "LOCK_NAME", "HOLDER_NAME"]

LOCK_NAME = ".writer.lock"
HOLDER_NAME = ".writer.json"
#: the most bytes of ``.writer.json`` read (a holder's description is a few hundred)
_HOLDER_LIMIT = 4096
#: flags that open a file of the run for reading without following a link out of it or
#: waiting on a FIFO
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


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
        info = WriterLock.holder(self.directory)
        if info is None:
            return "another process (its description is missing)"
        return (
            f"process {info['pid']} on {info['host']} (started {info.get('started', '?')}: "
            f"{str(info.get('command', '?'))[:300]})"
        )

    def release(self) -> None:
        """Releases the lock (idempotent)."""
        if self._lock.is_locked:
            self._lock.release()

    @staticmethod
    def holder(directory: str | Path) -> dict[str, Any] | None:
        """Returns what ``.writer.json`` of ``directory`` says of the writer (``pid`` an int,
        ``host`` text, and ``started``, ``command``), or None when it is missing, unreadable,
        not a regular file or not such an object; read without following a link and bounded."""
        try:
            fd = os.open(Path(directory) / HOLDER_NAME, _READ_FLAGS)
        except OSError:
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            info = json.loads(os.read(fd, _HOLDER_LIMIT + 1)[:_HOLDER_LIMIT])
        except (OSError, ValueError):
            return None
        finally:
            os.close(fd)
        if not isinstance(info, dict):
            return None
        pid = info.get("pid")
        if type(pid) is not int or pid < 1 or not isinstance(info.get("host"), str):
            return None
        return info

    @staticmethod
    def held_by_nasforge(directory: str | Path) -> bool:
        """Returns whether the writer lock of ``directory``, held, is held by a nasforge writer
        as far as this host can tell: ``.writer.json`` names a process that is alive here, or
        one on another host (which cannot be checked from here). A lock held by another
        program leaves no such description, or a stale one naming an ended process."""
        info = WriterLock.holder(directory)
        if info is None:
            return False
        if info["host"] != socket.gethostname():
            return True
        return _alive(info["pid"])

    @staticmethod
    def held(directory: str | Path) -> bool:
        """Returns whether some process now holds the writer lock of ``directory``.

        Needs no write access: the lock file is opened read-only (never through a link, never
        a FIFO) and probed with a shared, non-blocking ``flock``, released at once. A lock
        file this process may not read is judged by its description instead
        (:meth:`held_by_nasforge`); a missing one, or one that is not a regular file, is not
        held (no nasforge writer made it)."""
        try:
            fd = os.open(Path(directory) / LOCK_NAME, _READ_FLAGS)
        except FileNotFoundError:
            return False
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EPERM):
                return WriterLock.held_by_nasforge(directory)
            return False  # a link (ELOOP) or another oddity: no writer of ours made it
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return False
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True  # a writer holds it exclusively
            except OSError:  # a file system without flock: the description decides
                return WriterLock.held_by_nasforge(directory)
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        finally:
            os.close(fd)


def _alive(pid: int) -> bool:
    """Returns whether process ``pid`` exists on this host (signal 0 sends nothing)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    except OSError:
        return False
    return True
