"""A two-stage search killed with SIGKILL in either stage and resumed with `nasforge resume`
ends with the shortlist and the pick of an uninterrupted run."""

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from nasforge.cli import main
from nasforge.run.shortlist import read_shortlist
from nasforge.run.store import DB_NAME, Store
from tests.runwait import wait_until

ROOT = Path(__file__).resolve().parents[2]
RUN = "from tests.twostage._two_stage_run import make; import sys; make(sys.argv[1]).run()"


def _search(directory: Path, slow: str | None = None) -> subprocess.Popen:
    """Returns the process that runs the test's two-stage search into ``directory``
    (``slow``: seconds each forward pass sleeps)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    if slow is not None:
        env["NF_TEST_SLOW"] = slow
    return subprocess.Popen([sys.executable, "-c", RUN, str(directory)], env=env)


def _read(directory: Path, what: Callable[[Store], bool]) -> bool:
    """Returns ``what`` of the run's record, False while there is none to read."""
    if not (directory / DB_NAME).exists():
        return False
    try:
        with Store.open(directory) as store:
            return what(store)
    except Exception:  # noqa: BLE001 - a record being created: try again
        return False


def _in_stage1(store: Store) -> bool:
    return store.n_progress() >= 1 and read_shortlist(store) is None


def _in_stage2(store: Store) -> bool:
    return 1 <= store.counts().get("done", 0) + store.counts().get("pruned", 0) < 4


def _outcome(directory: Path) -> tuple[list[str], dict]:
    with Store.open(directory) as store:
        shortlist = read_shortlist(store)
        assert shortlist is not None and store.state() == "finished"
        pick = store.trial(store.picks()[0])
        return [c["arch_id"] for c in shortlist["candidates"]], pick.arch


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], dict]:
    """Returns the shortlist and pick of the search run without a kill."""
    d = tmp_path_factory.mktemp("whole") / "run"
    assert _search(d).wait(600) == 0
    return _outcome(d)


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["stage1", "stage2"])
def test_a_two_stage_run_killed_in_either_stage_resumes_to_the_uninterrupted_pick(
    tmp_path: Path, stage: str, uninterrupted: tuple[list[str], dict]
) -> None:
    """Killed after stage 1's first epoch (no shortlist yet) or after stage 2's first trial,
    `nasforge resume` ends with the uninterrupted run's shortlist and pick."""
    d = tmp_path / "run"
    proc = _search(d, slow="0.02")
    where = _in_stage1 if stage == "stage1" else _in_stage2
    try:
        assert wait_until(lambda: _read(d, where), timeout=300)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    with Store.open(d) as store:
        assert store.state() == "interrupted"
        assert where(store)  # killed where the test meant
    assert main(["resume", str(d)]) == 0
    assert _outcome(d) == uninterrupted
