"""Data-parallel one-shot runs from the command line: ``nasforge run FILE --nproc 2`` and
``torchrun``, on gloo over loopback. One record written by rank 0; a stop, a kill -9 of a rank
and a second torchrun "node" end as one process would; a failing rank or a rendezvous that
cannot form is one line. No process is left behind (each test checks)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from nasforge.cli import main
from nasforge.run.store import Store
from nasforge.runtime.loopback import listening_addresses
from tests.runwait import wait_for_run
from tests.stopwait import HOLD

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
TORCHRUN = Path(sys.executable).with_name("torchrun")

RUN_FILE = (
    "import os\n"
    "from tests.oneshot._dp import MlpSpace\n"
    "from tests.oneshot._dp import data as _data\n" + HOLD + "space = MlpSpace()\n"
    "strategy = {'name': 'spos', 'population': 4, 'cycles': 6, 'sample_size': 2,\n"
    "            'selection': 'loss'}\n"
    "config = {'epochs': 3, 'batch_size': 32, 'seed': 3, 'threads': 1, 'checkpoint_every': 3,\n"
    "          'progress': 'log', 'callbacks': [HOLD_FIRST_ROW]}\n"
    "def load():\n"
    "    if os.environ.get('NF_FAIL_RANK', '-') == os.environ.get('RANK'):\n"
    "        raise RuntimeError('rank ' + os.environ['RANK'] + ' has no data')\n"
    "    return _data()\n"
    "data = load\n"
)


@pytest.fixture
def run_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Returns the run file; ranks started from here find the tests package."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.delenv("NF_HOLD", raising=False)
    f = tmp_path / "search.py"
    f.write_text(RUN_FILE)
    return f


def _pick(directory: Path) -> tuple[dict, dict[str, torch.Tensor]]:
    """Returns the run's pick and its supernet's weights."""
    with Store.open(directory) as store:
        assert store.state() == "finished"
        (pick,) = [t for t in store.trials() if t.id in store.picks()]
        weights = torch.load(store.artifact("supernet"), weights_only=True)
    return pick.arch, weights


def _equal(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _rank_pids(mark: str) -> dict[int, int]:
    """Returns rank -> pid of the live processes whose environment holds ``mark``."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if mark.encode() in env:
            rank = next((int(e[5:]) for e in env if e.startswith(b"RANK=")), None)
            if rank is not None:
                found[rank] = int(entry.name)
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_nproc_2_writes_one_record_and_picks_what_one_process_picks(run_file, tmp_path) -> None:
    """`--nproc 2`: one record, written by rank 0; the pick of one process, the supernet's
    weights within the float tolerance of the sums' order."""
    two, one = tmp_path / "two", tmp_path / "one"
    assert main(["run", str(run_file), "--nproc", "2", "--dir", str(two)]) == 0
    assert main(["run", str(run_file), "--dir", str(one)]) == 0
    (arch2, w2), (arch1, w1) = _pick(two), _pick(one)
    assert arch2 == arch1
    assert max(float((w2[k] - w1[k]).abs().max()) for k in w1) < 1e-4
    assert sorted(p.name for p in two.iterdir()) == sorted(p.name for p in one.iterdir())


def test_a_stop_reaches_every_rank_and_resume_at_another_n_finishes(run_file, tmp_path) -> None:
    """A `--nproc 2` run held at its first epoch listens on loopback only; `nasforge stop`
    stops both ranks at that epoch (recorded stopped); `resume --nproc 1` finishes it with
    the pick of an uninterrupted run."""
    directory = tmp_path / "run"
    env = {**os.environ, "NF_HOLD": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "nasforge", "run", str(run_file), "--nproc", "2", "--dir",
         str(directory)], env=env)  # fmt: skip
    try:
        assert wait_for_run(directory, lambda s: s.n_progress() >= 1, timeout=180)
        pids = [proc.pid, *_rank_pids("MASTER_ADDR=127.0.0.1").values()]
        assert listening_addresses(pids) <= {"127.0.0.1"}
        assert main(["stop", str(directory)]) == 0
        assert proc.wait(180) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with Store.open(directory) as store:
        assert store.state() == "stopped" and store.n_progress() == 1 and not store.trials()
    assert main(["resume", str(directory), "--nproc", "1"]) == 0
    assert main(["run", str(run_file), "--nproc", "2", "--dir", str(tmp_path / "whole")]) == 0
    assert _pick(directory)[0] == _pick(tmp_path / "whole")[0]


def test_kill_9_of_rank_1_then_torchrun_restarts_to_the_uninterrupted_run(
    run_file, tmp_path
) -> None:
    """Under `torchrun --max-restarts 1`, rank 1 killed with SIGKILL mid-run: the job comes
    back from the last checkpoint and ends with the supernet and pick of an uninterrupted run,
    bitwise."""
    directory, run_id = tmp_path / "run", f"nf-test-{os.getpid()}"
    env = {**os.environ, "NF_HOLD": "1"}
    proc = subprocess.Popen(
        [str(TORCHRUN), "--nnodes", "1", "--nproc-per-node", "2", "--max-restarts", "1",
         "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{_free_port()}",
         "--rdzv-id", run_id, "-m", "nasforge", "run", str(run_file), "--dir", str(directory)],
        env=env)  # fmt: skip
    try:
        assert wait_for_run(directory, lambda s: s.n_progress() >= 1, timeout=180)
        ranks = _rank_pids(f"TORCHELASTIC_RUN_ID={run_id}")
        os.kill(ranks[1], signal.SIGKILL)
        (directory / "control").mkdir(exist_ok=True)  # lets the held rank 0 go on (HOLD)
        (directory / "control" / "go.json").write_text("{}")
        assert proc.wait(300) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with Store.open(directory) as store:
        notes = store.notes("control")
    assert any("ignored" == n["event"] for n in notes)  # the hold's file, read by the restart
    assert main(["run", str(run_file), "--nproc", "2", "--dir", str(tmp_path / "whole")]) == 0
    (arch, weights), (arch0, weights0) = _pick(directory), _pick(tmp_path / "whole")
    assert arch == arch0 and _equal(weights, weights0)


def test_two_torchrun_nodes_train_what_one_node_of_two_processes_does(run_file, tmp_path) -> None:
    """Two torchrun "nodes" (1 process each, c10d rendezvous on 127.0.0.1) end with the
    supernet and pick of `--nproc 2` on one node, bitwise."""
    port, directory = _free_port(), tmp_path / "nodes"
    nodes = [
        subprocess.Popen(
            [
                str(TORCHRUN),
                "--nnodes",
                "2",
                "--nproc-per-node",
                "1",
                "--rdzv-backend",
                "c10d",
                "--rdzv-endpoint",
                f"127.0.0.1:{port}",
                "--rdzv-id",
                "two-nodes",
                "-m",
                "nasforge",
                "run",
                str(run_file),
                "--dir",
                str(directory),
            ]
        )  # fmt: skip
        for _ in range(2)
    ]
    try:
        assert [p.wait(300) for p in nodes] == [0, 0]
    finally:
        for p in nodes:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert main(["run", str(run_file), "--nproc", "2", "--dir", str(tmp_path / "one")]) == 0
    (arch, weights), (arch0, weights0) = _pick(directory), _pick(tmp_path / "one")
    assert arch == arch0 and _equal(weights, weights0)


def test_a_failing_rank_ends_the_job_in_one_line(run_file, tmp_path, caplog, monkeypatch) -> None:
    """A rank whose data fails ends the whole `--nproc 2` job promptly: one line naming the
    rank and its error, a non-zero exit, no process left behind, no record."""
    monkeypatch.setenv("NF_FAIL_RANK", "1")
    start = time.monotonic()
    assert main(["run", str(run_file), "--nproc", "2", "--dir", str(tmp_path / "run")]) != 0
    assert time.monotonic() - start < 120
    said = [r.getMessage() for r in caplog.records if r.name == "nasforge.runtime"]
    assert len(said) == 1 and "rank 1 of 2 failed" in said[0] and "rank 1 has no data" in said[0]
    assert not _rank_pids("NF_FAIL_RANK=1")
    assert not (tmp_path / "run" / "run.db").exists()


def test_a_rendezvous_that_cannot_form_is_one_line_and_writes_nothing(run_file, tmp_path) -> None:
    """Rank 0 of a job of 2 whose rendezvous address answers nothing: exit 2 with one line
    naming the address, and no run directory."""
    env = {**os.environ, "RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()),
           "TORCHELASTIC_USE_AGENT_STORE": "True", "TORCHELASTIC_RESTART_COUNT": "0",
           "NASFORGE_RENDEZVOUS_TIMEOUT": "3"}  # fmt: skip
    run = subprocess.run(
        [sys.executable, "-m", "nasforge", "run", str(run_file), "--dir", str(tmp_path / "run")],
        env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    errors = [line for line in run.stderr.splitlines() if " ERROR " in line]
    assert run.returncode == 2 and len(errors) == 1, run.stderr[-2000:]
    assert "could not join the job's rendezvous at 127.0.0.1" in errors[0]
    assert not (tmp_path / "run").exists()


SLEEPER = "import time\ntime.sleep(600)\n"


def _ranks_of(launcher: int) -> list[int]:
    """Returns the pids whose parent is ``launcher``."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == launcher:
                out.append(int(entry.name))
    return out


def _gone(pids: list[int], within_s: float) -> bool:
    """Returns whether every pid in ``pids`` has ended (or is a zombie) within ``within_s``."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        alive = []
        for pid in pids:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z":
                alive.append(pid)
        if not alive:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_launcher_ended_by_a_signal_leaves_no_rank_behind(tmp_path, sig) -> None:
    """`--nproc` ranks end with their launcher, whether it is sent SIGTERM or SIGKILL."""
    run_file = tmp_path / "sleeps.py"
    run_file.write_text(SLEEPER)
    code = (
        "from nasforge.runtime.distributed import launch_local; "
        f"launch_local(2, ['run', {str(run_file)!r}, '--dir', {str(tmp_path / 'run')!r}])"
    )
    launcher = subprocess.Popen([sys.executable, "-c", code])
    ranks: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while len(ranks := _ranks_of(launcher.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(ranks) == 2, "the launcher did not start its two ranks"
        launcher.send_signal(sig)
        launcher.wait(60)
        assert _gone(ranks, 30), f"ranks {ranks} outlived their launcher ({sig.name})"
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
        for pid in ranks:  # reparented once the launcher is gone: kill them by pid
            if not _gone([pid], 0.2):
                os.kill(pid, signal.SIGKILL)
