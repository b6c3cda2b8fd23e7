"""Tests of the ``nasforge`` entry point: what every command shares at its edge."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nasforge.run.store import Store, TrialOutcome

ROOT = Path(__file__).resolve().parents[1]
OBJECTIVE = {"metric": "acc", "mode": "max", "constraints": {}, "second": None}


def _cli(*args: str, **kw) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "nasforge.cli", *args], env=env, **kw)


def test_a_closed_stdout_ends_quietly(tmp_path: Path) -> None:
    """`nasforge status DIR | head -1`: the reader closes the pipe after one line while
    status still writes (more than a pipe holds); nasforge ends without a traceback, with
    the status of a process a closed pipe stopped (141, as `ls` or `git` under pipefail)."""
    with Store.create(tmp_path / "run", {"kind": "x", "objective": OBJECTIVE}) as s:
        for i in range(3000):
            s.record_trial(
                f"{i:016x}",
                {"op": "conv" * 8, "i": i},
                TrialOutcome("done", {"acc": i / 3000}, evaluation="trained"),
            )
        s.finish()
    proc = _cli("status", str(tmp_path / "run"), "--limit", "3000",
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    first = proc.stdout.readline()
    proc.stdout.close()  # as `head -1` exits
    err = proc.stderr.read().decode()
    assert proc.wait(60) == 141
    assert first.startswith(str(tmp_path / "run").encode())
    assert err == "", err


def test_version_is_the_package_version_and_pyproject_reads_it(capsys) -> None:
    """`nasforge --version` prints nasforge.__version__, and pyproject takes the version from
    nasforge/_version.py (one source), not from a number of its own."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: nasforge depends on tomli there
        import tomli as tomllib

    import nasforge
    from nasforge.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"nasforge {nasforge.__version__}"
    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    attr = project["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "nasforge._version.__version__"


FILLS = """
import torch.nn as nn
import nasforge as nf


class Net(nf.ModelSpace):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, nf.choice(list(range(8, 72)), label="w"))


def evaluate(model, report):
    return float(model.fc.out_features)


space = Net()
strategy = "random"
config = {"n_trials": 400, "executor": "inprocess", "progress": "off"}
"""


@pytest.fixture
def small_disk(tmp_path: Path):
    """Returns a folder on a 512 KiB tmpfs of its own (skipped where mounting is not allowed:
    it needs root)."""
    where = tmp_path / "disk"
    where.mkdir()
    try:
        out = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(where)],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot mount a small disk here: {exc}")
    if out.returncode != 0:
        pytest.skip(f"cannot mount a small disk here: {out.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)


def test_a_full_disk_is_one_line_naming_resume_and_leaves_no_tmp(tmp_path, small_disk):
    """`nasforge run` on a disk that fills up: one line (no traceback) that says the disk is
    full and names `nasforge resume`, exit 2, no half-written `.tmp` file; the record stays
    readable."""
    f = tmp_path / "exp.py"
    f.write_text(FILLS)
    d = small_disk / "run"
    out = subprocess.run(
        [sys.executable, "-m", "nasforge.cli", "run", str(f), "--dir", str(d)],
        env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr[-3000:]
    assert "Traceback" not in out.stderr
    errors = [line for line in out.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "disk" in errors[0] and f"nasforge resume {d}" in errors[0]
    assert not list(d.rglob("*.tmp"))
    with Store.open(d) as s:
        assert s.trials()
