"""A two-stage search killed with SIGKILL in either stage (stage 2's confirmation too) and
resumed with `nasforge resume` ends with the shortlist, trials and pick of an uninterrupted
run."""

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


def _search(directory: Path, stopper: str, slow: str | None = None) -> subprocess.Popen:
    """Returns the process that runs the test's two-stage search into ``directory`` with
    stage 2's ``stopper`` (``slow``: seconds each forward pass sleeps)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", NF_TEST_STOPPER=stopper)
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


def _in_confirmation(store: Store) -> bool:  # the shortlist's 4 trained, its best 2 not yet
    return len(store.trials()) > 4 and store.counts().get("done", 0) < 6


#: where each test kills the run, and stage 2's stopper there
WHERE = {"stage1": (_in_stage1, "asha"), "stage2": (_in_stage2, "asha"),
         "confirmation": (_in_confirmation, "none")}  # fmt: skip


def _outcome(directory: Path) -> tuple[list[str], dict, list[str]]:
    """Returns the shortlist's arch ids, the pick and every trial's arch id, in order."""
    with Store.open(directory) as store:
        shortlist = read_shortlist(store)
        assert shortlist is not None and store.state() == "finished"
        pick = store.trial(store.picks()[0])
        trials = [t.arch_id for t in store.trials()]
        return [c["arch_id"] for c in shortlist["candidates"]], pick.arch, trials


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], tuple]:
    """Returns, per stage 2's stopper, the outcome of the search run without a kill (made
    once)."""
    made: dict[str, tuple] = {}

    def outcome(stopper: str) -> tuple:
        if stopper not in made:
            d = tmp_path_factory.mktemp(f"whole-{stopper}") / "run"
            assert _search(d, stopper).wait(600) == 0
            made[stopper] = _outcome(d)
        return made[stopper]

    return outcome


@pytest.mark.slow
@pytest.mark.parametrize("stage", list(WHERE))
def test_a_two_stage_run_killed_in_either_stage_resumes_to_the_uninterrupted_pick(
    tmp_path: Path, stage: str, uninterrupted: Callable[[str], tuple]
) -> None:
    """Killed after stage 1's first epoch (no shortlist yet), after stage 2's first trial, or
    in the confirmation of stage 2's best 2 (no stopper), `nasforge resume` ends with the
    uninterrupted run's shortlist, trials and pick."""
    where, stopper = WHERE[stage]
    d = tmp_path / "run"
    proc = _search(d, stopper, slow="0.02")
    try:
        assert wait_until(lambda: _read(d, where), timeout=300)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    with Store.open(d) as store:
        assert store.state() == "interrupted"
        assert where(store)  # killed where the test meant
    assert main(["resume", str(d)]) == 0
    whole = uninterrupted(stopper)
    assert _outcome(d) == whole
    if stage == "confirmation":  # the shortlist's 4, then its best 2 again
        assert len(whole[2]) == 6 and set(whole[2][4:]) < set(whole[2][:4])
