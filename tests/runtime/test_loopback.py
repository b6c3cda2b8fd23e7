"""The /proc scans of runtime.loopback: processes marked by a folder, and where they listen."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nasforge.runtime.loopback import listening_addresses, pids_marked

pytestmark = pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc")


def test_pids_marked_finds_a_child_by_its_folder_and_listening_addresses_its_socket(
    tmp_path: Path,
) -> None:
    """A child started with RAY_TMPDIR=folder is found (and only it), with the loopback
    address it listens on; once it has ended, it is no longer found."""
    folder = str(tmp_path / "mark")
    code = (
        "import socket, sys, time\n"
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
        "print('up', flush=True); time.sleep(60)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], env={**os.environ, "RAY_TMPDIR": folder},
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "up"
        assert pids_marked(folder) == [child.pid]
        assert pids_marked(folder + "-other") == []
        assert listening_addresses([child.pid]) == {"127.0.0.1"}
        assert listening_addresses([]) == set()
    finally:
        child.kill()
        child.wait()
    deadline = time.monotonic() + 5
    while pids_marked(folder) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pids_marked(folder) == []
    with socket.socket() as s:  # this process is never its own mark
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert "127.0.0.1" in listening_addresses([os.getpid()])
