"""Reading logs from a run folder someone else can write (issue 50, item 8): `nasforge logs`
shows only regular files of the run's own logs/ folder, bounded, and refuses in one line a
link (to a secret, to /dev/zero), a FIFO, a linked logs/ folder, and a link swapped in
under --follow; writers never write through a planted link either."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from nasforge.errors import StoreError
from nasforge.run.trial_logs import SHOWN_LIMIT, finish_log, read_log, run_log, trial_log

ROOT = Path(__file__).resolve().parents[2]
SECRET = "NASFORGE_TOKEN=the-secret-of-the-reader"
#: the most memory a `nasforge logs` process may take (it reads at most SHOWN_LIMIT bytes)
MEMORY = 1 << 30


def _hostile(tmp_path: Path) -> Path:
    """Returns a run folder whose logs/ holds what a neighbour who can write it may leave:
    trial 1 a link to a secret file of the reader's, trial 2 a link to /dev/zero, trial 3 a
    FIFO no one writes, and a run log of 1 MB."""
    (tmp_path / "secret.env").write_text(SECRET + "\n")
    run = tmp_path / "run"
    logs = run / "logs"
    logs.mkdir(parents=True)
    os.symlink(tmp_path / "secret.env", logs / "trial_1.log")
    os.symlink("/dev/zero", logs / "trial_2.log")
    os.mkfifo(logs / "trial_3.log")
    run_log(run).write_text("".join(f"line {i:07d} of the run\n" for i in range(45_000)))
    return run


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_DATA, (MEMORY, MEMORY))


def _logs(*args: str) -> subprocess.CompletedProcess:
    """Returns the finished `nasforge logs ARGS` process, its memory bounded (a reader that
    read /dev/zero whole would fail, not take the machine's memory) and its time too."""
    return subprocess.run(
        [sys.executable, "-m", "nasforge.cli", "logs", *args],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=30,  # a FIFO opened for reading would block here forever
        preexec_fn=_limit_memory,
    )


def test_nasforge_logs_refuses_a_link_a_device_and_a_fifo_in_one_line(tmp_path: Path) -> None:
    """A link to a secret file, a link to /dev/zero and a FIFO as a trial's log: each
    `nasforge logs DIR N` exits 2 at once with one line naming what it is, and prints
    nothing of the secret."""
    run = _hostile(tmp_path)
    for trial, what in ((1, "is a symbolic link"), (2, "is a symbolic link"), (3, "is a FIFO")):
        start = time.monotonic()
        proc = _logs(str(run), str(trial))
        assert proc.returncode == 2, (trial, proc.returncode, proc.stderr[-2000:])
        assert time.monotonic() - start < 20
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and what in lines[0] and "not a log nasforge wrote" in lines[0]
        assert SECRET not in proc.stdout + proc.stderr and proc.stdout == ""


def test_a_linked_logs_folder_and_a_link_swapped_in_under_follow_are_refused(
    tmp_path: Path,
) -> None:
    """logs/ itself a link to a folder outside the run: refused, though the file in it is
    regular; `--follow` on a log that is a link: refused, nothing of its target shown."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "trial_1.log").write_text(SECRET + "\n")
    run = tmp_path / "run"
    run.mkdir()
    os.symlink(outside, run / "logs")
    proc = _logs(str(run), "1")
    assert proc.returncode == 2 and "logs is a symbolic link" in proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    other = tmp_path / "other"
    (other / "logs").mkdir(parents=True)
    os.symlink(outside / "trial_1.log", trial_log(other, 1))
    proc = _logs(str(other), "1", "--follow")
    assert proc.returncode == 2 and "is a symbolic link" in proc.stderr
    assert SECRET not in proc.stdout + proc.stderr


def test_the_run_s_own_log_is_bounded_and_says_what_it_dropped(tmp_path: Path) -> None:
    """The run's log of 1 MB is shown from its last bytes (at most SHOWN_LIMIT and a note
    line), its last line included and the note saying how much was dropped."""
    run = _hostile(tmp_path)
    size = run_log(run).stat().st_size
    proc = _logs(str(run))
    assert proc.returncode == 0, proc.stderr[-2000:]
    note, _, rest = proc.stdout.partition("\n")
    assert (
        note
        == f"[... {size - SHOWN_LIMIT} bytes dropped: only its last {SHOWN_LIMIT} bytes are shown]"
    )
    assert len(rest.encode()) <= SHOWN_LIMIT and rest.endswith("line 0044999 of the run\n")
    assert "line 0000000 of the run" not in rest


def test_read_log_reads_only_regular_files_and_writers_never_write_through_a_link(
    tmp_path: Path,
) -> None:
    """read_log refuses a link and a FIFO without blocking (StoreError), returns '' for a
    missing log; finish_log over a planted link replaces the link and leaves its target
    unchanged."""
    run = _hostile(tmp_path)
    with pytest.raises(StoreError, match="is a symbolic link"):
        read_log(trial_log(run, 1))
    with pytest.raises(StoreError, match="is a FIFO"):
        read_log(trial_log(run, 3))
    assert read_log(trial_log(run, 9)) == ""
    result = SimpleNamespace(status="done", duration=1.0, placement=None, error=None)
    finish_log(trial_log(run, 1), 1, result)
    assert (tmp_path / "secret.env").read_text() == SECRET + "\n"
    assert not trial_log(run, 1).is_symlink()
    assert read_log(trial_log(run, 1)).startswith("--- trial 1: done after 1.00 s")
