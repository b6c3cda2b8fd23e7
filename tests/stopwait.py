"""Stopping a run that another process writes, at a known boundary: a run file gets a callback
that holds the run at its first progress row until a request is left in ``DIR/control/``, so
``nasforge stop`` reaches it at exactly that boundary whatever the machine's load."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from nasforge.cli import main
from nasforge.run.store import Store
from tests.runwait import wait_for_run

__all__ = ["HOLD", "stop_at_first_row"]

ROOT = Path(__file__).resolve().parents[1]

#: Python run-file code: ``config["callbacks"] = [HOLD_FIRST_ROW]`` holds the run (only when
#: NF_HOLD=1, so that a resume runs free) at its first progress row until a request arrives.
HOLD = """
import glob as _glob
import os as _os
import time as _time

from nasforge.run.tracking import BaseCallback as _BaseCallback


class _HoldFirstRow(_BaseCallback):
    def __init__(self):
        self.held = False

    def on_run_start(self, info):
        self.directory = info["directory"]

    def on_progress(self, step, row):
        if self.held or _os.environ.get("NF_HOLD") != "1":
            return
        self.held = True
        end = _time.monotonic() + 120
        pattern = _os.path.join(self.directory, "control", "*.json")
        while not _glob.glob(pattern) and _time.monotonic() < end:
            _time.sleep(0.02)


HOLD_FIRST_ROW = _HoldFirstRow()
"""


def stop_at_first_row(run_file: Path, directory: Path, refused: list[list[str]] = ()) -> str:
    """Returns the output of ``nasforge run run_file`` after stopping it with ``nasforge stop``
    while it is held at its first progress row; each argument list of ``refused`` (``set ...``,
    ``stop --trial 1``) is first asked of the held run and must be refused with exit 2."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NF_HOLD": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "nasforge.cli", "run", str(run_file), "--dir", str(directory)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert wait_for_run(directory, lambda s: s.n_progress() >= 1, timeout=180), "no row"
        for argv in refused:
            assert main([argv[0], str(directory), *argv[1:]]) == 2, argv
            assert not list((directory / "control").glob("*.json")), "a refused request was left"
        assert main(["stop", str(directory)]) == 0
        out, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out[-3000:]
    with Store.open(directory) as store:
        assert store.state() == "stopped", out[-3000:]
    return out
