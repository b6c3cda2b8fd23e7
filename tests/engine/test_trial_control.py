"""Warm pool workers keep the pool's isolation; per-trial logs; steering a running search
(``nasforge stop``, ``stop --trial``, ``set``) on the pool and on a loopback Ray cluster."""

from __future__ import annotations

import json
import logging
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from torch import nn

import nasforge as nf
from nasforge.cli import main
from nasforge.engine import Experiment
from nasforge.run.store import Store
from nasforge.run.trial_logs import LOG_LIMIT, trial_log
from tests.runwait import wait_until

ROOT = Path(__file__).resolve().parents[2]


class TinySpace(nf.ModelSpace):
    """Returns a one-layer model; ``case`` picks what the trial does (see ``_case``)."""

    def __init__(self) -> None:
        super().__init__()
        self.case = nf.choice(("ok", "segfault", "memory", "hang", "after", "loud"), label="case")
        self.fc = nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


def _vm_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize")


def _case(model: nn.Module, report) -> dict[str, float]:
    case = model.case
    print(f"case {case} says hello")
    warm = float("torch._dynamo" in sys.modules)  # imported by the engine before the fork
    if case == "segfault":
        os.kill(os.getpid(), 11)
    if case == "memory":  # a limit of this process only: 256 MB above what it maps now
        limit = _vm_bytes() + 256 * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
        bytearray(2 * 2**30)
    if case == "hang":
        time.sleep(120)
    if case == "after":  # the trial after the memory one is not bound by its limit
        bytearray(512 * 2**20)
    if case == "loud":  # more output than a log keeps
        for _ in range(2 * LOG_LIMIT // 100):
            sys.stdout.write("y" * 99 + "\n")
    torch.optim.Adam(model.parameters())  # a real optimizer, built in a warm worker
    return {"default": 1.0, "warm": warm}


def test_warm_pool_workers_fail_a_segfault_a_memory_limit_and_a_timeout_alone(tmp_path):
    """Each failing trial fails alone (its own process), the others succeed in warm workers
    (torch's optimizer machinery already imported), and every trial's output, traceback and
    worker are in its bounded log; status points to the failed trials' logs."""
    exp = Experiment(
        TinySpace(),
        _case,
        "grid",
        directory=tmp_path / "run",
        executor="pool",
        concurrency=2,
        trial_timeout=5,
        progress="off",
    )
    exp.run()
    by_case = {t.arch["case"]: t for t in exp.trials()}
    assert {c: t.status for c, t in by_case.items()} == {
        "ok": "done",
        "segfault": "failed",
        "memory": "failed",
        "hang": "failed",
        "after": "done",
        "loud": "done",
    }
    assert "SIGSEGV" in by_case["segfault"].error
    assert "MemoryError" in by_case["memory"].error
    assert "timed out" in by_case["hang"].error
    assert by_case["ok"].metrics["warm"] == 1.0 and by_case["after"].metrics["warm"] == 1.0
    logs = {c: trial_log(exp.directory, t.id).read_text() for c, t in by_case.items()}
    assert "case segfault says hello" in logs["segfault"]
    assert "Segmentation fault" in logs["segfault"]  # faulthandler's traceback
    assert "MemoryError" in logs["memory"] and "Traceback" in logs["memory"]
    assert "timed out after 5" in logs["hang"]
    assert logs["ok"].startswith("--- trial ") and " pid " in logs["ok"].splitlines()[0]
    assert logs["ok"].rstrip().splitlines()[-1].startswith(f"--- trial {by_case['ok'].id}: done")
    assert len(logs["loud"].encode()) < LOG_LIMIT + 1000 and "bytes dropped" in logs["loud"]


def _raise_unless_ok(model: nn.Module, report) -> float:
    print(f"case {model.case} says hello")
    if model.case != "ok":
        raise ValueError(f"case {model.case} is broken on purpose")
    return 1.0


def test_status_and_logs_point_to_a_failed_trial_s_output(tmp_path, capsys):
    exp = Experiment(
        TinySpace(), _raise_unless_ok, "grid", directory=tmp_path / "run", n_trials=2,
        executor="inprocess", progress="off",
    )  # fmt: skip
    exp.run()
    (failed,) = [t for t in exp.trials() if t.status == "failed"]
    capsys.readouterr()
    assert main(["status", str(exp.directory)]) == 0
    assert f"nasforge logs {exp.directory} {failed.id}" in capsys.readouterr().out
    assert main(["logs", str(exp.directory), str(failed.id)]) == 0
    out = capsys.readouterr().out
    assert "case segfault says hello" in out and "ValueError: case segfault is broken" in out
    assert main(["logs", str(exp.directory)]) == 0  # the run's own log
    assert f"trial {failed.id} failed" in capsys.readouterr().out


RUN_FILE = """
import time
from nasforge.space.search_space import Decision, SearchSpace

space = SearchSpace([Decision("d", "value", tuple(range(40)))])
strategy = "grid"
config = {{"n_trials": 40, "executor": {executor}, "concurrency": 2, "directory": "{directory}",
          "progress": "log"}}


def evaluate(arch, report):
    for epoch in range(400):
        time.sleep(0.05)
        report(float(arch["d"] + epoch))
    return float(arch["d"])
"""


def _wait(predicate, what: str, limit: float = 90.0) -> None:
    assert wait_until(predicate, limit, poll=0.2), f"timed out waiting for {what}"


def _statuses(directory: Path) -> dict[int, str]:
    try:
        with Store.open(directory) as store:
            return {t.id: t.status for t in store.trials(light=True)}
    except Exception:  # noqa: BLE001 - not created yet
        return {}


def _steer(tmp_path: Path, executor: str) -> None:
    """Starts a search in a process of its own, then cancels one trial, changes its
    settings and stops it from this process, as a user would from another shell."""
    directory = tmp_path / "run"
    run_file = tmp_path / "search.py"
    run_file.write_text(RUN_FILE.format(executor=executor, directory=directory))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "nasforge.cli", "run", str(run_file)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        _wait(lambda: list(_statuses(directory).values()).count("running") == 2, "2 trials")
        assert main(["stop", str(directory), "--trial", "1"]) == 0
        _wait(lambda: _statuses(directory).get(1) == "cancelled", "trial 1 cancelled")
        assert _statuses(directory).get(2) == "running"  # the search goes on
        if executor == '"pool"':  # more than the machine's cores: refused, nothing asked
            from nasforge.runtime.threads import usable_cores

            assert main(["set", str(directory), f"concurrency={usable_cores() + 38}"]) == 2
        assert main(["set", str(directory), "n_trials=30", "concurrency=1"]) == 0
        _wait(lambda: _notes(directory, "set"), "the settings recorded")
        assert main(["stop", str(directory), "--cancel"]) == 0
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out[-3000:]
    with Store.open(directory) as store:
        assert store.state() == "stopped"
        section = store.config()["multitrial"]
        assert (section["n_trials"], section["concurrency"]) == (30, 1)
        statuses = {t.id: t.status for t in store.trials()}
    assert statuses[1] == "cancelled" and "running" not in statuses.values()
    assert "cancelled" in trial_log(directory, 1).read_text()
    status = subprocess.run(
        [sys.executable, "-m", "nasforge.cli", "status", str(directory)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "stopped" in status and "n_trials=30" in status


def _notes(directory: Path, event: str) -> bool:
    with Store.open(directory) as store:
        return any(n.get("event") == event for n in store.notes("control"))


@pytest.mark.slow
def test_stop_a_trial_set_and_stop_a_running_search_on_the_pool(tmp_path):
    _steer(tmp_path, '"pool"')


class _Lines(logging.Handler):
    """Returns nothing; keeps the messages of the records it handles at ERROR or above."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _ask_concurrency(arch, report) -> float:
    """Asks the search running this trial, as `nasforge set` from another shell would, for
    one trial at once more than ``arch["most"]`` and then for that many; writes the exit
    codes and the error lines into the run folder, where the test reads them."""
    directory, most = os.environ["NF_TEST_RUN"], arch["most"]
    said = _Lines()
    logging.getLogger().addHandler(said)
    try:
        codes = [main(["set", directory, f"concurrency={n}"]) for n in (most + 1, most)]
    finally:
        logging.getLogger().removeHandler(said)
    Path(directory, "asked.json").write_text(json.dumps({"codes": codes, "said": said.lines}))
    return 1.0


@pytest.mark.parametrize("executor", ["inprocess", "pool"])
def test_set_concurrency_above_what_the_run_can_run_here_is_one_line(
    tmp_path, monkeypatch, executor
):
    """`nasforge set DIR concurrency=N` on a running search refuses N above what its
    executor runs at once here (this machine's usable cores on the pool, 1 in-process) in
    one line naming N, the bound and why, exit 2, leaving nothing; the bound itself is
    taken and recorded."""
    from nasforge.runtime.threads import usable_cores
    from nasforge.space.search_space import Decision, SearchSpace

    most = usable_cores() if executor == "pool" else 1
    directory = tmp_path / "run"
    monkeypatch.setenv("NF_TEST_RUN", str(directory))
    exp = Experiment(
        SearchSpace([Decision("most", "value", (most,))]), _ask_concurrency, "grid",
        directory=directory, n_trials=1, executor=executor, concurrency=1, progress="off",
    )  # fmt: skip
    exp.run()
    asked = json.loads((directory / "asked.json").read_text())
    assert asked["codes"] == [2, 0], asked
    (line,) = asked["said"]
    assert "\n" not in line and f"concurrency={most + 1} is more than" in line
    assert f"concurrency={most} or fewer" in line
    why = f"{most} usable cores" if executor == "pool" else "one trial at a time"
    assert why in line, line
    with Store.open(directory) as store:
        notes = [n for n in store.notes("control") if n.get("event") == "set"]
        assert [n["concurrency"] for n in notes] == [most]  # the refused one never reached it


def test_stop_on_a_stopped_directory_is_a_clear_error(tmp_path, capsys):
    exp = Experiment(
        TinySpace(), _raise_unless_ok, "grid", directory=tmp_path / "run", n_trials=1,
        executor="inprocess", progress="off",
    )  # fmt: skip
    exp.run()
    assert main(["stop", str(exp.directory)]) == 2
    assert main(["set", str(exp.directory), "epochs=3"]) == 2


@pytest.mark.slow
def test_stop_a_trial_set_and_stop_a_running_search_on_ray(tmp_path):
    pytest.importorskip("ray", reason="the Ray executor needs the extra nasforge[ray]")
    from nasforge.engine.ray_cluster import LocalRayCluster

    cluster = LocalRayCluster(1, cpus=2, object_store_mb=100)
    try:
        cluster.start()
        executor = json.dumps({"name": "ray", "address": cluster.address})
        _steer(tmp_path, executor)
    finally:
        cluster.shutdown()
