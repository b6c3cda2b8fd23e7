"""Model-based strategies (GP, CMA-ES, auto) through the engine: a kill -9 mid-run and a
resume give the trials of an uninterrupted run (the same next proposals), and a run file
names each sampler."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from nasforge.run.files import load_run_file
from nasforge.run.store import FINISHED, Store

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
_spec = importlib.util.spec_from_file_location("kill_sampler", HERE / "kill_sampler.py")
ks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ks)


def _finished(directory: Path) -> int:
    try:
        with Store.open(directory) as s:
            return sum(t.status in FINISHED for t in s.trials())
    except Exception:  # noqa: BLE001 - no record yet, or its tables being made
        return 0


def _kill_after(directory: Path, name: str, n_done: int) -> list:
    """Returns the trials the script recorded before it was killed with SIGKILL once
    ``n_done`` trials had finished."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), NF_TEST_SLEEP="0.15", OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, str(HERE / "kill_sampler.py"), str(directory), name],
                            env=env, cwd=ROOT)  # fmt: skip
    try:
        end = time.monotonic() + 120
        while _finished(directory) < n_done and time.monotonic() < end:
            time.sleep(0.05)
        assert _finished(directory) >= n_done, "the run made no progress"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    with Store.open(directory) as s:
        return s.trials()


def _summary(trials: list) -> list:
    return [(t.id, t.arch, t.status, t.metrics) for t in trials]


@pytest.mark.slow  # a subprocess that imports Optuna's samplers, 16 trials, a resume
@pytest.mark.parametrize("name", ["gp", "cmaes", "auto"])
def test_kill_9_then_resume_proposes_what_an_uninterrupted_run_does(tmp_path: Path, name: str):
    """A SIGKILL after 7 trials, then a resume, records the trials of an uninterrupted run:
    the replayed model proposes the same next architectures."""
    reference = ks.make(tmp_path / "ref", name).run().trials()
    before = _kill_after(tmp_path / "killed", name, n_done=7)
    done = [t for t in before if t.status in FINISHED]
    assert 7 <= len(done) < 16
    after = ks.make(tmp_path / "killed", name).resume().trials()
    assert _summary(after) == _summary(reference)
    assert all(_summary([after[t.id - 1]]) == _summary([t]) for t in done)  # nothing lost


#: a GP's asks (gp, and auto on this space) make its runs slow-set ones
_SLOW = pytest.mark.slow


@pytest.mark.parametrize(
    "name", ["tpe", "cmaes", pytest.param("gp", marks=_SLOW), pytest.param("auto", marks=_SLOW)]
)
def test_a_run_file_names_each_sampler(tmp_path: Path, name: str) -> None:
    """A run file's strategy may be any of the samplers by name; the record names it, and
    the search stays inside the space."""
    path = tmp_path / "hp.py"
    path.write_text(
        textwrap.dedent(
            f"""
            space = {{
                "x": {{"uniform": [-2.0, 2.0]}},
                "lr": {{"uniform": [1e-4, 1e-1], "log": True}},
                "k": {{"integer": [0, 10]}},
            }}
            strategy = {{"name": {name!r}, "seed": 1}}
            config = {{"n_trials": 12, "executor": "inprocess", "progress": "off", "mode": "min"}}


            def evaluate(arch, report):
                return (arch["x"] - 0.5) ** 2 + arch["lr"] + arch["k"] / 10
            """
        )
    )
    runner = load_run_file(path, directory=str(tmp_path / "r")).run()
    assert len(runner.trials()) == 12
    with Store.open(tmp_path / "r") as s:
        assert s.config()["multitrial"]["strategy"]["name"] == name
    space = runner.search_space
    assert all(space.validate(t.arch) == t.arch for t in runner.trials())
