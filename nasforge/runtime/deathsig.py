"""No orphans: a child process asks the kernel to end it when its parent dies.

A parent killed with SIGKILL runs no cleanup, so a trial, a rank or a data producer it forked
would train on with nobody to read its result. :func:`die_with_parent` sets Linux's
``PR_SET_PDEATHSIG`` to SIGKILL in the child; elsewhere it does nothing (the parent's own
cleanup ends its children there).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys

__all__ = ["die_with_parent"]


def die_with_parent() -> None:
    """Returns None after asking Linux to SIGKILL this process when the process that started
    it dies; exits at once (code 1) when that process died before the request took hold."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        return
    parent = multiprocessing.parent_process()
    if parent is not None and os.getppid() != parent.pid:  # it died before the prctl
        os._exit(1)
