"""Waiting on a run that another process writes: the tests that SIGKILL a run mid-way and
resume it share this poll instead of each restating it."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from nasforge.run.store import Store

__all__ = ["wait_for_run"]


def wait_for_run(
    directory: Path, ready: Callable[[Store], bool], timeout: float = 120.0, poll: float = 0.02
) -> bool:
    """Returns True once ``ready(store)`` holds for the run in ``directory`` (opened read-only,
    polled every ``poll`` seconds), False when ``timeout`` seconds pass first; a run not yet
    created or caught mid-write counts as not ready."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with Store.open(directory) as store:
                if ready(store):
                    return True
        except Exception:  # noqa: BLE001 - not created yet, or caught mid-write
            pass
        time.sleep(poll)
    return False
