"""How many torch threads a training process uses: chosen deliberately, never left to torch.

torch's default (one thread per core) oversubscribes a machine that runs anything else: on a
busy 2-core machine one NASB epoch took 267 s with the default and 6 s with one thread. So
every code path that trains calls :func:`set_threads`:

    processes that run side by side   1 thread each (pool trials, pipeline stages)
    one training process              half the usable cores, at least 1 and at most 8
    the user's choice                 ``threads=`` in a run file or API, ``--threads`` on the
                                      command line, or the ``NASFORGE_THREADS`` variable
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

from nasforge.errors import ConfigError

__all__ = ["usable_cores", "default_threads", "set_threads", "threads_for"]

log = logging.getLogger("nasforge.run")


def usable_cores() -> int:
    """Returns the number of CPU cores this process may run on (its affinity on Linux)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def default_threads() -> int:
    """Returns the thread count of a lone training process: ``NASFORGE_THREADS`` if set, else
    half the cores this process may use (1 to 8)."""
    env = os.environ.get("NASFORGE_THREADS")
    if env:
        return int(env)
    return max(1, min(8, usable_cores() // 2))


def set_threads(threads: int | None = None) -> int:
    """Returns the number of intra-op threads torch now uses: ``threads``, or
    :func:`default_threads` when None.

    Raises:
        ConfigError: ``threads`` is not a positive int.
    """
    import torch

    n = default_threads() if threads is None else threads
    if not isinstance(n, int) or n < 1:
        raise ConfigError(f"threads must be a positive int, got {threads!r}")
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
        log.debug("torch uses %d threads", n)
    return n


@contextmanager
def threads_for(threads: int | None = None) -> Iterator[int]:
    """Returns (yields) the thread count :func:`set_threads` chose for the block, and gives the
    caller's count back when the block ends: for library calls that train, such as
    :func:`nasforge.oneshot.search`, which must not change the caller's process for good.

    Raises:
        ConfigError: ``threads`` is not a positive int (nothing is changed then).
    """
    import torch

    callers = torch.get_num_threads()
    n = set_threads(threads)
    try:
        yield n
    finally:
        if torch.get_num_threads() != callers:
            torch.set_num_threads(callers)
