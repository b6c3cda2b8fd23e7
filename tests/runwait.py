"""Waiting for what another process does, instead of sleeping and hoping it happened:
:func:`wait_until` polls a condition up to a deadline (a guard against a hang, never a speed
target); the tests that SIGKILL a run mid-way and resume it share :func:`wait_for_run`, and
:func:`kill_writer_midway` leaves a run killed with trials in flight."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from nasforge.run.store import Store

__all__ = ["HOLD_FORWARD", "wait_until", "wait_for_run", "kill_writer_midway"]


#: code for a model's ``forward`` (indented for a method body): with NF_HOLD_AT=N in the
#: environment, the N-th forward pass of the process creates the file NF_MARK and then waits,
#: so that a test kills the run at a known point inside a step instead of after a sleep
HOLD_FORWARD = (
    "        import os, time\n"
    "        if os.environ.get('NF_HOLD_AT'):\n"
    "            type(self).calls = getattr(type(self), 'calls', 0) + 1\n"
    "            if type(self).calls == int(os.environ['NF_HOLD_AT']):\n"
    "                open(os.environ['NF_MARK'], 'w').close()\n"
    "                time.sleep(600)\n"
)


def wait_until(ready: Callable[[], bool], timeout: float = 60.0, poll: float = 0.02) -> bool:
    """Returns True once ``ready()`` holds (asked every ``poll`` seconds), False when
    ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll)
    return True


def wait_for_run(
    directory: Path, ready: Callable[[Store], bool], timeout: float = 120.0, poll: float = 0.02
) -> bool:
    """Returns True once ``ready(store)`` holds for the run in ``directory`` (opened read-only,
    polled every ``poll`` seconds), False when ``timeout`` seconds pass first; a run not yet
    created or caught mid-write counts as not ready."""

    def ready_now() -> bool:
        try:
            with Store.open(directory) as store:
                return bool(ready(store))
        except Exception:  # noqa: BLE001 - not created yet, or caught mid-write
            return False

    return wait_until(ready_now, timeout, poll)


_MIDWAY = """
import sys, time
from nasforge.run.store import Store, TrialOutcome
objective = {"metric": "acc", "mode": "max", "constraints": {}, "second": None}
s = Store.create(sys.argv[1], {"kind": "multitrial", "objective": objective})
s.set_plan("trials", 4)
s.finish_trial(s.add_trial("a" * 16, {"w": 1}), TrialOutcome("done", {"acc": 0.5}))
s.add_trial("b" * 16, {"w": 2})
s.add_trial("c" * 16, {"w": 3})
s.set_meta("midway", "yes")
time.sleep(120)
"""


def kill_writer_midway(directory: Path, check_alive: Callable[[], None] | None = None) -> None:
    """Returns None after a writer process recorded a 4-trial run in ``directory`` with one
    trial done and two in flight (status ``running``) and was killed with SIGKILL there;
    ``check_alive()`` runs while the writer still holds the run."""
    proc = subprocess.Popen([sys.executable, "-c", _MIDWAY, str(directory)])
    try:
        assert wait_for_run(directory, lambda s: s.get_meta("midway") == "yes", timeout=60)
        if check_alive is not None:
            check_alive()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
