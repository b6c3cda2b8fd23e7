"""Tests of the ``nasforge`` entry point: what every command shares at its edge."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nasforge.run.store import Store

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
            s.record_trial(f"{i:016x}", {"op": "conv" * 8, "i": i}, {"acc": i / 3000}, "trained")
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
