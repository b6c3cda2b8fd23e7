"""The writer lock seen by readers (issue 50, item 13): a user who may read a run folder but
not write it (a run shared read-only with another account) reads its status and the
dashboard's overview, and sees whether a writer holds it, without write access."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from nasforge.cli import main
from nasforge.run.lock import HOLDER_NAME, LOCK_NAME, WriterLock
from tests.dashboard.records import make_record

ROOT = Path(__file__).resolve().parents[2]
#: the account the reader becomes (nobody)
NOBODY = 65534

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="becoming another user needs root (the test drops to nobody)"
)


@pytest.fixture
def shared() -> Iterator[Path]:
    """Returns a folder every user may enter (pytest's own temporary folders are private to
    root), removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="nasforge-shared-") as folder:
        os.chmod(folder, 0o755)
        yield Path(folder)


def _as_nobody(fn: Callable[[], Any]) -> str:
    """Returns what ``fn()`` returned and printed, called in a forked child that became the
    user nobody (the traceback when it raised)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        os.close(read)
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            out = io.StringIO()
            logging.getLogger("nasforge").addHandler(logging.StreamHandler(out))
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                value = fn()
            text = f"returned {value!r}\n{out.getvalue()}"
        except BaseException:  # noqa: BLE001 - reported to the parent
            text = "raised\n" + traceback.format_exc()
        os.write(write, text.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        text = f.read()
    os.waitpid(pid, 0)
    return text


def _read_only_run(folder: Path) -> Path:
    """Returns a run folder left running-but-interrupted (its state says running, no writer)
    that others may read and not write, with no SQLite side files (a clean close removes
    them; a reader that cannot write the folder cannot make them)."""
    make_record(folder, n=4, finish=False).close()  # type: ignore[union-attr]
    for side in ("run.db-wal", "run.db-shm"):
        (folder / side).unlink(missing_ok=True)
    for path in [folder, *folder.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    os.chmod(folder.parent, 0o755)
    return folder


def test_a_reader_who_cannot_write_the_folder_reads_its_status(shared: Path) -> None:
    """As a user who cannot write the run folder: `nasforge status` exits 0 and says the run
    was interrupted (no writer) and the lock probe says free, writing nothing; while a
    writer holds the lock, the probe says held and status says running."""
    run = _read_only_run(shared / "runs" / "shared")
    make_record(shared / "warm", n=2)
    main(["status", str(shared / "warm")])  # loads what status imports, while root
    said = _as_nobody(lambda: main(["status", str(run)]))
    assert said.startswith("returned 0\n"), said[-3000:]
    assert f"{run}: multitrial run, interrupted: 4 of 4 trials done" in said
    assert _as_nobody(lambda: WriterLock.held(run)).startswith("returned False")
    assert not (run / "run.db-wal").exists()  # the reader wrote nothing
    lock = WriterLock(run)  # a writer (this process) holds it exclusively
    try:
        assert _as_nobody(lambda: WriterLock.held(run)).startswith("returned True")
        said = _as_nobody(lambda: main(["status", str(run)]))
        assert said.startswith("returned 0\n") and "multitrial run, running" in said, said
    finally:
        lock.release()


def _overview(client: Any) -> str:
    """Returns the status and body of the dashboard's overview page callback."""
    body = {
        "output": "page.children",
        "outputs": {"id": "page", "property": "children"},
        "inputs": [
            {"id": "url", "property": "pathname", "value": "/"},
            {"id": "url", "property": "search", "value": ""},
        ],
        "changedPropIds": ["url.pathname"],
    }
    answer = client.post("/_dash-update-component", json=body)
    return f"{answer.status_code} {answer.get_data(as_text=True)}"


def test_a_reader_who_cannot_write_the_folder_sees_the_dashboard_overview(
    shared: Path,
) -> None:
    """As a user who cannot write the run folder, the dashboard's overview answers 200 with
    the run's row (interrupted), not a 500 or a problem row."""
    pytest.importorskip("dash", reason="the overview needs the dashboard extra")
    from nasforge.dashboard.app import create_app

    make_record(shared / "runs" / "warm", n=2)
    client = create_app([shared / "runs"]).server.test_client()
    assert _overview(client).startswith("200 ")  # loads what a request imports, while root
    _read_only_run(shared / "runs" / "shared")
    page = _as_nobody(lambda: _overview(client))
    assert page.startswith("returned '200 "), page[-3000:]
    assert "shared" in page and "interrupted" in page and "not a readable" not in page


def test_a_lock_file_the_reader_may_not_read_is_judged_by_its_holder(shared: Path) -> None:
    """A lock file readable only by its owner: the probe falls back to .writer.json, held
    while it names a live process, not held when it names an ended one."""
    run = _read_only_run(shared / "run")
    os.chmod(run / LOCK_NAME, 0o600)
    assert _as_nobody(lambda: WriterLock.held(run)).startswith("returned True")  # this pid
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True).stdout.strip()  # fmt: skip
    info = (run / HOLDER_NAME).read_text().replace(f'"pid": {os.getpid()}', f'"pid": {ended}')
    (run / HOLDER_NAME).write_text(info)
    assert _as_nobody(lambda: WriterLock.held(run)).startswith("returned False")
